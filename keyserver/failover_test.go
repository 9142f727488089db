package keyserver

import (
	"bufio"
	"context"
	"crypto"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/tlcp"
)

// hostileServer accepts on loopback, greets (unless silent) and hands
// every request frame to answer, which writes what it wants.
func hostileServer(t *testing.T, greet bool, answer func(w net.Conn, id uint32, typ byte, body []byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				br := bufio.NewReader(c)
				if _, _, err := readHello(br); err != nil {
					return
				}
				if !greet {
					return // holds the connection, never answers
				}
				c.Write(appendHello(nil, Version))
				fr := &frameReader{br: br}
				for {
					id, typ, body, err := fr.next()
					if err != nil {
						return
					}
					answer(c, id, typ, body)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func rawFrame(id uint32, typ byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, typ)
	return append(b, body...)
}

// TestStalledEndpointFailsOver: of two addresses, one greets and answers
// pings but never an operation (stuck, overloaded, hostile). An attempt
// there gets half the operation's time and then fails over to the healthy
// one, and the stalled address is marked down, so that the operations
// after it go to the healthy one (before, every other operation went to
// the stalled address and failed after the whole timeout).
func TestStalledEndpointFailsOver(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	good := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	var stalledOps atomic.Int32
	stalled := hostileServer(t, true, func(w net.Conn, id uint32, typ byte, _ []byte) {
		if typ == byte(OpPing) {
			w.Write(rawFrame(id, 0, nil))
			return
		}
		stalledOps.Add(1)
	})
	c := &Client{Timeout: 300 * time.Millisecond, HealthInterval: 100 * time.Millisecond,
		BackoffMin: time.Minute, BackoffMax: time.Minute, // down for the whole test once marked
		Endpoints: []Endpoint{
			{Address: stalled, Dial: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", stalled) }},
			tlsEndpoint(cliTLS, good.addr),
		}}
	t.Cleanup(c.Close)
	rk := remote(t, c, keys[0])
	failed := 0
	const n = 10
	for range n {
		if _, err := rk.SignContext(context.Background(), nil, make([]byte, 32), crypto.Hash(0)); err != nil {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d operations failed with a healthy second key server", failed, n)
	}
	if got := stalledOps.Load(); got > 1 {
		t.Errorf("the stalled address got %d of %d operations: it was not marked down after it left one unanswered", got, n)
	}
}

// TestRemoteDecryptUnavailableIsInternalError: a TLCP ECC handshake whose
// encryption key is on a key server that is down fails with
// internal_error (the README's promise), not as a bad Finished after a
// random pre-master; a key server's verdict that the ciphertext does not
// decrypt (CodeFailed) still goes on with the random pre-master, so that
// a bad ciphertext and a good one look alike until Finished.
func TestRemoteDecryptUnavailableIsInternalError(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := devKeys(p)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close() // a key server that is down: nothing listens
	refusing := hostileServer(t, true, func(w net.Conn, id uint32, typ byte, _ []byte) {
		w.Write(rawFrame(id, byte(CodeFailed), []byte("decryption error")))
	})
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	for _, tc := range []struct {
		name, addr string
		internal   bool
	}{
		{"key server down", dead, true},
		{"ciphertext refused (CodeFailed)", refusing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := &Client{Timeout: 500 * time.Millisecond, Endpoints: []Endpoint{{Address: tc.addr, Dial: func(ctx context.Context) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", tc.addr)
			}}}}
			t.Cleanup(kc.Close)
			off := keyoffload.New(keyoffload.Config{Workers: 2}, nil)
			defer off.Close()
			srv := &tlcp.Config{Certificates: []tlcp.Certificate{{
				SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: off.Wrap(keys[0].Private, frontdoor.FamilyTLCP),
				EncCertificate: p.ServerEnc.Cert.Raw, EncKey: off.Wrap(remote(t, kc, keys[1]), frontdoor.FamilyTLCP),
			}}}
			cli := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}
			cerr, serr := tlcpHandshake(srv, cli)
			if serr == nil {
				t.Fatal("handshake succeeded without a decryption")
			}
			var ae *tlcp.AlertError
			internal := errors.As(serr, &ae) && !ae.Remote && ae.Alert == tlcp.AlertInternalError
			if internal != tc.internal {
				t.Errorf("server error %v (client saw %v): internal_error %v, want %v", serr, cerr, internal, tc.internal)
			}
		})
	}
}
