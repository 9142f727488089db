package tlcp

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

type pairResult struct {
	cs, ss         ConnectionState
	cerr, serr     error
	client, server *Conn
}

// runPair runs a handshake and an echo of payload in both directions.
func runPair(t *testing.T, scfg, ccfg *Config, payload []byte) pairResult {
	t.Helper()
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, ccfg), Server(c2, scfg)
	defer cli.Close()
	defer srv.Close()
	done := make(chan error, 1)
	go func() {
		if err := srv.Handshake(); err != nil {
			done <- err
			return
		}
		buf := make([]byte, len(payload))
		if _, err := io.ReadFull(srv, buf); err != nil {
			done <- fmt.Errorf("server read: %w", err)
			return
		}
		_, err := srv.Write(buf)
		done <- err
	}()
	var r pairResult
	r.client, r.server = cli, srv
	r.cerr = cli.Handshake()
	if r.cerr == nil {
		if _, err := cli.Write(payload); err != nil {
			r.cerr = err
		} else {
			got := make([]byte, len(payload))
			if _, err := io.ReadFull(cli, got); err != nil {
				r.cerr = err
			} else if !bytes.Equal(got, payload) {
				r.cerr = errors.New("echo mismatch")
			}
		}
	} else {
		c1.Close()
	}
	r.serr = <-done
	r.cs, r.ss = cli.ConnectionState(), srv.ConnectionState()
	return r
}

func TestHandshakeMatrix(t *testing.T) {
	p := loadPKI(t)
	payload := make([]byte, 100000)
	rand.Read(payload)
	keys := ticket.NewRotator(time.Hour, 0)
	for _, suite := range defaultCipherSuites {
		for _, mutual := range []bool{false, true} {
			for _, mode := range []string{"full", "sessionid", "ticket"} {
				name := fmt.Sprintf("%s/mutual=%v/%s", CipherSuiteName(suite), mutual, mode)
				t.Run(name, func(t *testing.T) {
					scfg := p.serverConfig()
					scfg.CipherSuites = []uint16{suite}
					scfg.SessionStore = NewLRUSessionStore(10, time.Hour)
					scfg.TicketKeys = keys
					if mutual {
						scfg.ClientAuth = RequireAndVerifyClientCert
					}
					ccfg := p.clientConfig()
					if !mutual && !cipherSuiteByID(suite).ecdhe {
						ccfg.Certificates = nil
					}
					ccfg.CipherSuites = []uint16{suite}
					ccfg.NextProtos = []string{"h2", "http/1.1"}
					scfg.NextProtos = []string{"http/1.1"}
					switch mode {
					case "sessionid":
						ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
						ccfg.SessionTicketsDisabled = true
					case "ticket":
						ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
					}
					r := runPair(t, scfg, ccfg, payload)
					if r.cerr != nil || r.serr != nil {
						t.Fatalf("client: %v; server: %v", r.cerr, r.serr)
					}
					if r.cs.CipherSuite != suite || r.ss.CipherSuite != suite || r.cs.Version != VersionTLCP {
						t.Fatalf("suite %x/%x", r.cs.CipherSuite, r.ss.CipherSuite)
					}
					if r.cs.NegotiatedProtocol != "http/1.1" || r.ss.NegotiatedProtocol != "http/1.1" {
						t.Fatalf("ALPN %q %q", r.cs.NegotiatedProtocol, r.ss.NegotiatedProtocol)
					}
					if r.ss.ServerName != "localhost" {
						t.Fatalf("SNI %q", r.ss.ServerName)
					}
					if len(r.cs.PeerCertificates) != 2 || len(r.cs.VerifiedChains) == 0 {
						t.Fatalf("client saw %d server certs, %d chains", len(r.cs.PeerCertificates), len(r.cs.VerifiedChains))
					}
					wantClientCert := mutual || cipherSuiteByID(suite).ecdhe
					if got := len(r.ss.PeerCertificates) > 0; got != wantClientCert {
						t.Fatalf("server got client certs: %v, want %v", got, wantClientCert)
					}
					if mode == "full" {
						return
					}
					r2 := runPair(t, scfg, ccfg, payload[:1000])
					if r2.cerr != nil || r2.serr != nil {
						t.Fatalf("resume: client: %v; server: %v", r2.cerr, r2.serr)
					}
					if !r2.cs.DidResume || !r2.ss.DidResume {
						t.Fatalf("not resumed: client %v server %v", r2.cs.DidResume, r2.ss.DidResume)
					}
					if got := len(r2.ss.PeerCertificates) > 0; got != wantClientCert {
						t.Fatalf("resumed server peer certs: %v", got)
					}
					if len(r2.cs.PeerCertificates) != 2 {
						t.Fatalf("resumed client peer certs: %d", len(r2.cs.PeerCertificates))
					}
					// A third connection resumes again (tickets are re-issued).
					r3 := runPair(t, scfg, ccfg, payload[:10])
					if r3.cerr != nil || r3.serr != nil || !r3.ss.DidResume {
						t.Fatalf("second resume: %v %v %v", r3.cerr, r3.serr, r3.ss.DidResume)
					}
				})
			}
		}
	}
}
