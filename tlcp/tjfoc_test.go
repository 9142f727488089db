package tlcp

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	tjtls "github.com/tjfoc/gmsm/gmtls"
	tjx509 "github.com/tjfoc/gmsm/x509"
)

// Interop with github.com/tjfoc/gmsm v1.4.1 gmtls, an implementation written
// elsewhere. It implements only ECC_SM4_CBC_SM3 (0xe013) of the four suites:
// its ECDHE key agreement is a panic("") stub, and it has no GCM suites.

func tjfocConfigs(t *testing.T, p *testPKI) (server, client *tjtls.Config, clientWithCert *tjtls.Config) {
	f := func(n string) string { return filepath.Join(p.dir, n) }
	sign, err := tjtls.LoadX509KeyPair(f("server_sign.crt"), f("server_sign.key"))
	if err != nil {
		t.Fatalf("tjfoc load: %v", err)
	}
	enc, err := tjtls.LoadX509KeyPair(f("server_enc.crt"), f("server_enc.key"))
	if err != nil {
		t.Fatalf("tjfoc load: %v", err)
	}
	ca, err := os.ReadFile(f("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := tjx509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("tjfoc CA pool")
	}
	server = &tjtls.Config{GMSupport: &tjtls.GMSupport{}, Certificates: []tjtls.Certificate{sign, enc}, ClientCAs: pool}
	client = &tjtls.Config{GMSupport: &tjtls.GMSupport{}, RootCAs: pool, ServerName: "localhost"}
	csign, err := tjtls.LoadX509KeyPair(f("client_sign.crt"), f("client_sign.key"))
	if err != nil {
		t.Fatal(err)
	}
	cenc, err := tjtls.LoadX509KeyPair(f("client_enc.crt"), f("client_enc.key"))
	if err != nil {
		t.Fatal(err)
	}
	clientWithCert = &tjtls.Config{GMSupport: &tjtls.GMSupport{}, RootCAs: pool, ServerName: "localhost", Certificates: []tjtls.Certificate{csign, cenc}}
	return
}

// echoN reads n bytes from srv and writes them back, in the background;
// the returned channel carries the outcome.
func echoN(srv io.ReadWriter, n int) <-chan error {
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, n)
		if _, err := io.ReadFull(srv, buf); err != nil {
			errc <- err
			return
		}
		_, err := srv.Write(buf)
		errc <- err
	}()
	return errc
}

// checkEcho writes msg on cli and checks that the peer, running echoN with
// errc, sends it back unchanged.
func checkEcho(t *testing.T, cli io.ReadWriter, msg []byte, errc <-chan error) {
	t.Helper()
	if _, err := cli.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(cli, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo mismatch")
	}
}

func TestTjfocInterop(t *testing.T) {
	p := loadPKI(t)
	tjServer, tjClient, tjClientCert := tjfocConfigs(t, p)
	msg := bytes.Repeat([]byte("tjfoc interop "), 3000)
	for _, mutual := range []bool{false, true} {
		t.Run(fmt.Sprintf("tjfoc-client/mutual=%v", mutual), func(t *testing.T) {
			scfg := p.serverConfig()
			ccfg := tjClient
			if mutual {
				scfg.ClientAuth = RequireAndVerifyClientCert
				ccfg = tjClientCert
			}
			c1, c2 := tcpPair(t)
			srv := Server(c2, scfg)
			cli := tjtls.Client(c1, ccfg)
			defer srv.Close()
			defer cli.Close()
			errc := echoN(srv, len(msg))
			if err := cli.Handshake(); err != nil {
				t.Fatalf("tjfoc client handshake: %v (server: %v)", err, srv.core.HandshakeErr())
			}
			checkEcho(t, cli, msg, errc)
			st := srv.ConnectionState()
			if st.CipherSuite != ECC_SM4_CBC_SM3 {
				t.Fatalf("suite %x", st.CipherSuite)
			}
			if mutual && len(st.PeerCertificates) == 0 {
				t.Fatal("no client certificate")
			}
		})
		t.Run(fmt.Sprintf("tjfoc-server/mutual=%v", mutual), func(t *testing.T) {
			scfg := tjServer.Clone()
			ccfg := p.clientConfig()
			if mutual {
				scfg.ClientAuth = tjtls.RequireAndVerifyClientCert
			} else {
				ccfg.Certificates = nil
			}
			c1, c2 := tcpPair(t)
			srv := tjtls.Server(c2, scfg)
			cli := Client(c1, ccfg)
			defer srv.Close()
			defer cli.Close()
			errc := echoN(srv, len(msg))
			if err := cli.Handshake(); err != nil {
				t.Fatalf("our client vs tjfoc server: %v", err)
			}
			checkEcho(t, cli, msg, errc)
			if st := cli.ConnectionState(); st.CipherSuite != ECC_SM4_CBC_SM3 || len(st.VerifiedChains) == 0 {
				t.Fatalf("state %+v", st)
			}
		})
	}
}

// TestTjfocTicketResumption: tjfoc's GM mode resumes with RFC 5077 tickets;
// both directions must resume.
func TestTjfocTicketResumption(t *testing.T) {
	p := loadPKI(t)
	tjServer, tjClient, _ := tjfocConfigs(t, p)
	t.Run("tjfoc-client", func(t *testing.T) {
		scfg := p.serverConfig()
		ccfg := tjClient.Clone()
		ccfg.ClientSessionCache = tjtls.NewLRUClientSessionCache(4)
		for i := 0; i < 2; i++ {
			c1, c2 := tcpPair(t)
			srv := Server(c2, scfg)
			cli := tjtls.Client(c1, ccfg)
			errc := make(chan error, 1)
			go func() { errc <- srv.Handshake() }()
			if err := cli.Handshake(); err != nil {
				t.Fatalf("#%d: %v", i, err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("#%d server: %v", i, err)
			}
			if got := srv.ConnectionState().DidResume; got != (i == 1) || cli.ConnectionState().DidResume != (i == 1) {
				t.Fatalf("#%d: resumed %v / tjfoc %v", i, got, cli.ConnectionState().DidResume)
			}
			cli.Close()
			srv.Close()
		}
	})
	// tjfoc's server issues tickets but never resumes, not even with its
	// own client (checked with tjfoc client ↔ tjfoc server): our client must
	// fall back to a full handshake cleanly.
	t.Run("tjfoc-server", func(t *testing.T) {
		ccfg := p.clientConfig()
		ccfg.Certificates = nil
		ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
		scfg := tjServer.Clone()
		for i := 0; i < 2; i++ {
			c1, c2 := tcpPair(t)
			srv := tjtls.Server(c2, scfg)
			cli := Client(c1, ccfg)
			errc := make(chan error, 1)
			go func() { errc <- srv.Handshake() }()
			if err := cli.Handshake(); err != nil {
				t.Fatalf("#%d: %v", i, err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("#%d tjfoc server: %v", i, err)
			}
			if st := cli.ConnectionState(); !st.HandshakeComplete || st.DidResume {
				t.Fatalf("#%d: state %+v", i, st)
			}
			cli.Close()
			srv.Close()
		}
	})
}
