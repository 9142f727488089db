package keyserver

// Hostile clients, hostile key servers and stalled peers: each test is
// one way a peer misbehaves, and the check that stops it.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestOversizedRequestFailsAlone: one request too large for a frame (an
// SM2 "ciphertext" a TLCP client put in its ClientKeyExchange, up to 64
// KiB there) fails alone, before anything is sent: the operation in
// flight on the same shared connection is answered once, and the
// endpoint is not marked down.
func TestOversizedRequestFailsAlone(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	started, release := make(chan struct{}, 8), make(chan struct{})
	var runs atomic.Int32
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.runHook = func(op Op, p []byte) {
			if op == OpSign && p[len(p)-32] == 1 {
				runs.Add(1)
				started <- struct{}{}
				<-release
			}
		}
	})
	buf := &testpeer.SyncBuffer{}
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns, kc.Logger = 1, bufLogger(buf)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		d := make([]byte, 32)
		d[0] = 1
		_, err := remote(t, kc, keys[0]).SignContext(ctx, nil, cvMsg(d), testOpts)
		errc <- err
	}()
	testpeer.Recv(t, started, "operation held on the key server")
	// A hostile TLS client's oversized ciphertext, decrypted through the
	// same client.
	big := make([]byte, MaxFrame)
	big[0] = 0x30
	if _, err := remote(t, kc, keys[1]).DecryptContext(ctx, nil, big, nil); err == nil {
		t.Fatal("oversized ciphertext decrypted")
	}
	close(release)
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("operation in flight on the same connection failed: %v", err)
		}
	case <-time.After(testwait.Bound(15 * time.Second)):
		t.Fatal("operation in flight not answered")
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the operation in flight ran %d times on the key server: its connection was closed under it", n)
	}
	if strings.Contains(buf.String(), "endpoint down") {
		t.Errorf("one oversized request marked the key server down:\n%s", buf.String())
	}
}

// TestReloadReidentifiesOpenConnections: a reload that makes a
// certificate match another, narrower grant (first in the list) applies
// to the connections already open with it, not only to new ones: health
// pings keep a connection open indefinitely.
func TestReloadReidentifiesOpenConnections(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, cert := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns = 1
	ctx := context.Background()
	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, preMaster(t))
	if _, err := remote(t, kc, keys[1]).DecryptContext(ctx, nil, ct, nil); err != nil {
		t.Fatal(err)
	}
	quarantine(t, ks, keys, cert, 0)
	fresh := newClient(t, cliTLS, ks.addr)
	if _, err := remote(t, fresh, keys[1]).DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrForbidden) {
		t.Fatalf("new connection: err = %v, want forbidden", err)
	}
	if pt, err := remote(t, kc, keys[1]).DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("open connection of the same certificate still decrypts after the reload: %q, %v", pt, err)
	}
}

// TestReidentifiedConnectionsCountAgainstTheirGrant: the open connections
// a reload gives another grant count against that grant's
// max_connections: of two connections of a certificate quarantined to one,
// the second is refused (busy) at its next request. Before, they stayed
// counted against the old grant, and the quarantine's bound did not apply
// to them.
func TestReidentifiedConnectionsCountAgainstTheirGrant(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, cert := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	ctx := context.Background()
	kc1, kc2 := newClient(t, cliTLS, ks.addr), newClient(t, cliTLS, ks.addr) // two connections
	kc1.Conns, kc2.Conns = 1, 1
	sign := func(kc *Client) error {
		_, err := remote(t, kc, keys[0]).SignContext(ctx, nil, testMsg, testOpts)
		return err
	}
	for _, kc := range []*Client{kc1, kc2} {
		if err := sign(kc); err != nil {
			t.Fatal(err)
		}
	}
	quarantine(t, ks, keys, cert, 1)
	if err := sign(kc1); err != nil {
		t.Fatalf("the first connection under the quarantine: %v", err)
	}
	if err := sign(kc2); !errors.Is(err, ErrBusy) {
		t.Errorf("a second connection under a grant of max_connections 1: err = %v, want busy", err)
	}
	if err := sign(kc1); err != nil {
		t.Errorf("the first connection after the second was refused: %v", err)
	}
}

// TestExpiredCertificateEndsAccess: the client certificate is verified
// at the handshake, and a connection does not outlive it: a request after
// its NotAfter is refused.
func TestExpiredCertificateEndsAccess(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	notAfter := time.Now().Add(2 * time.Second)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(99), Subject: pkix.Name{CommonName: "edge", Organization: []string{"test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, pki.ca, &k.PublicKey, pki.caKey)
	if err != nil {
		t.Fatal(err)
	}
	cliTLS := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: k}}, RootCAs: pki.pool, ServerName: "keyserver", MinVersion: tls.VersionTLS13}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns = 1
	rk := remote(t, kc, keys[0])
	if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(notAfter) + 500*time.Millisecond)
	if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); err == nil {
		t.Error("a connection whose client certificate has expired still signs")
	}
}

// TestRemovedClientRefusalAudited: a request on a connection whose
// certificate a reload took out of the allow-list (here the grant's name
// stays, its subject changes) is refused (forbidden), the connection
// closed, and the refusal counted in the metrics and the audit like any
// other.
func TestRemovedClientRefusalAudited(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer = obs })
	kc := newClient(t, cliTLS, ks.addr)
	rk := remote(t, kc, keys[0])
	if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); err != nil {
		t.Fatal(err)
	}
	moved := grantAll("edge", keys)
	moved.Subject = "CN=edge-2,O=test"
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{moved}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); !errors.Is(err, ErrForbidden) {
		t.Fatalf("removed certificate: err = %v", err)
	}
	n := obs.get(func(r *recObserver) int {
		s := 0
		for k, v := range r.ops {
			if strings.HasSuffix(k, "/forbidden") {
				s += v
			}
		}
		return s
	})
	if n == 0 {
		t.Error("the refused request of a removed client is neither counted nor audited")
	}
}

// TestFrameWriterFreshDeadline: two answers written in one burst (the
// second writer already waiting, so the first does not flush) that
// overflow the 16 KiB buffer are written when buffered, under a deadline
// set then, not under the previous flush's, long past on an idle
// connection: a peer that reads everything gets them.
func TestFrameWriterFreshDeadline(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	go io.Copy(io.Discard, c2) // a peer that reads everything at once
	w := newFrameWriter(c1, 100*time.Millisecond)
	if err := w.write(1, 0, nil, nil); err != nil { // sets the deadline
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // an idle connection
	// Two answers arrive while a third write holds the writer.
	w.mu.Lock()
	errc := make(chan error, 2)
	for i := range 2 {
		go func() { errc <- w.write(uint32(2+i), 0, make([]byte, 10<<10), nil) }()
	}
	for i := 0; w.waiting.Load() < 2 && i < 500; i++ {
		time.Sleep(time.Millisecond)
	}
	w.mu.Unlock()
	for range 2 {
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("answer to a reading peer failed: %v", err)
			}
		case <-time.After(testwait.Bound(5 * time.Second)):
			t.Fatal("write hangs")
		}
	}
}

// fakeKeyServer is a hostile key server on loopback: it greets, then
// answers every request with code ok and body.
func fakeKeyServer(t *testing.T, body []byte) Endpoint {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for range 16 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
				br := bufio.NewReader(c)
				if _, _, err := readHello(br); err != nil {
					return
				}
				c.Write(appendHello(nil, Version))
				fr := &frameReader{br: br}
				w := newFrameWriter(c, time.Second)
				for range 100 {
					id, _, _, err := fr.next()
					if err != nil {
						return
					}
					w.write(id, byte(CodeOK), body, nil)
				}
			}()
		}
	}()
	addr := ln.Addr().String()
	return Endpoint{Address: addr, Dial: func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}}
}

// TestRemoteKeyAgreementLengthChecked: a key server answering a
// key_agreement of keyLen 48 with one byte is not believed: that byte
// would be the TLCP pre-master secret.
func TestRemoteKeyAgreementLengthChecked(t *testing.T) {
	kc := &Client{Endpoints: []Endpoint{fakeKeyServer(t, []byte{7})}, Timeout: 5 * time.Second}
	t.Cleanup(kc.Close)
	priv, _ := sm2.GenerateKey(rand.Reader)
	rk, err := NewRemoteKey(kc, &priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	out, err := rk.SM2KeyAgree(context.Background(), eph, eph.PublicKey(), eph.PublicKey(), false, 48, nil, nil)
	if err == nil && len(out) != 48 {
		t.Errorf("key agreement of 48 bytes returned %d bytes without error", len(out))
	}
}

// TestRemoteSignatureVerified: a key server answering a signature request
// with bytes that are no signature of the digest under the key is not
// believed: the error names the key server, rather than the handshake
// failing at the peer.
func TestRemoteSignatureVerified(t *testing.T) {
	kc := &Client{Endpoints: []Endpoint{fakeKeyServer(t, []byte("not a signature"))}, Timeout: 5 * time.Second}
	t.Cleanup(kc.Close)
	priv, _ := sm2.GenerateKey(rand.Reader)
	rk, err := NewRemoteKey(kc, &priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
	if err == nil && !sm2.VerifyASN1WithSM2(&priv.PublicKey, testOpts.UID(), testMsg, sig) {
		t.Errorf("a signature that does not verify was accepted: %q", sig)
	}
}

// TestStalledWriteBoundedByTimeout: on a key server connection that stops
// reading (a stalled or black-holed peer with full buffers), an operation
// returns within the Client's Timeout (3 s by default in gmproxy), not
// after the writer's own 10 s.
func TestStalledWriteBoundedByTimeout(t *testing.T) {
	stop := make(chan struct{})
	ep := Endpoint{Address: "stalled", Dial: func(ctx context.Context) (net.Conn, error) {
		c, s := net.Pipe()
		go func() {
			defer s.Close()
			br := bufio.NewReader(s)
			if _, _, err := readHello(br); err != nil {
				return
			}
			s.Write(appendHello(nil, Version))
			// Then reads nothing, until the test ends: the request write
			// blocks.
			<-stop
		}()
		return c, nil
	}}
	kc := &Client{Endpoints: []Endpoint{ep}, Timeout: 300 * time.Millisecond}
	t.Cleanup(kc.Close)
	// Before kc.Close (clean-ups run last first): the stalled peer goes,
	// so that a write still blocked (the test failed) ends now, not at
	// the writer's own 10 s bound, which kc.Close would wait for.
	t.Cleanup(func() { close(stop) })
	priv, _ := sm2.GenerateKey(rand.Reader)
	rk, err := NewRemoteKey(kc, &priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
		done <- err
	}()
	select {
	case err := <-done:
		// The Client's Timeout ended it (ErrTimeout carries it), not the
		// writer's own 10 s bound, which fails the connection instead.
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "after 300ms") {
			t.Errorf("operation with a 300ms timeout on a stalled connection: %v, want ErrTimeout after 300ms", err)
		}
	case <-time.After(testwait.Bound(10 * time.Second)): // the writer's own bound
		t.Fatal("operation never returned")
	}
}

// TestUnverifiedCertificateRefused: behind a tls.Config that asks for a
// client certificate without verifying it (RequireAnyClientCert, a
// misconfigured embedding), a self-signed certificate naming
// "CN=edge,O=test" does not get edge's keys: the identity comes from a
// verified chain only.
func TestUnverifiedCertificateRefused(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	pki.server.ClientAuth = tls.RequireAnyClientCert // a misconfigured embedding
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "edge", Organization: []string{"test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k) // self-signed
	own := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	cfg := &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return own, nil },
		RootCAs: pki.pool, ServerName: "keyserver", MinVersion: tls.VersionTLS13}
	rk := remote(t, newClient(t, cfg, ks.addr), keys[0])
	_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
	if err == nil {
		t.Fatal("a self-signed certificate was identified as the client edge and signed")
	}
	// Refused at the greeting (no verified identity), not by a later check.
	if !strings.Contains(err.Error(), "greeting") {
		t.Errorf("a self-signed certificate: %v, want the connection refused at the greeting", err)
	}
}

// TestFrameWriterDeadlineBeforeFirstFlush: on a new connection (greet
// clears the deadline) a burst of answers that overflows the buffer
// before the first flush is written under a deadline too: a peer that
// stops reading cannot block the writer, and the read loop behind its
// lock, for ever.
func TestFrameWriterDeadlineBeforeFirstFlush(t *testing.T) {
	c1, c2 := net.Pipe() // c2 never reads
	w := newFrameWriter(c1, 100*time.Millisecond)
	w.mu.Lock()
	errc := make(chan error, 2)
	for i := range 2 {
		go func() { errc <- w.write(uint32(1+i), 0, make([]byte, 10<<10), nil) }()
	}
	for i := 0; w.waiting.Load() < 2 && i < 500; i++ {
		time.Sleep(time.Millisecond)
	}
	w.mu.Unlock()
	defer func() { c1.Close(); c2.Close() }() // unblocks the writers
	for range 2 {
		select {
		case <-errc:
		case <-time.After(3 * time.Second):
			t.Fatal("a write to a peer that does not read is still blocked after 30x the write timeout")
		}
	}
}

// TestFrameWriterReturnsAfterItsFrameIsSent: of two writers in one burst,
// the first buffers its frame and leaves the flush to the second; it does
// not return (and the server does not release its in-flight slot) while
// that flush is blocked on a peer that does not read, and both return once
// the peer reads.
func TestFrameWriterReturnsAfterItsFrameIsSent(t *testing.T) {
	c1, c2 := net.Pipe() // c2 reads only when told
	defer c1.Close()
	defer c2.Close()
	w := newFrameWriter(c1, 5*time.Second)
	w.mu.Lock()
	errc := make(chan error, 2)
	for i := range 2 {
		go func() { errc <- w.write(uint32(1+i), 0, make([]byte, 100), nil) }()
	}
	for i := 0; w.waiting.Load() < 2 && i < 500; i++ {
		time.Sleep(time.Millisecond)
	}
	if w.waiting.Load() != 2 {
		t.Fatal("the two writers did not queue")
	}
	w.mu.Unlock()
	select {
	case err := <-errc:
		t.Fatalf("a write returned (%v) while the flush carrying its frame is blocked", err)
	case <-time.After(200 * time.Millisecond):
	}
	got := make([]byte, 2*(headerLen+100))
	if _, err := io.ReadFull(c2, got); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("write to a peer that read it: %v", err)
			}
		case <-time.After(testwait.Bound(5 * time.Second)):
			t.Fatal("a write still blocked after the peer read both frames")
		}
	}
}

// TestReloadedClientCAsCutOpenConnections: a reload whose ClientCAs no
// longer hold the CA of an open connection's certificate (a CA no longer
// trusted) refuses that connection's next request; one whose ClientCAs
// still hold it keeps the connection serving.
func TestReloadedClientCAsCutOpenConnections(t *testing.T) {
	keys := testKeys(t)
	pki, other := newTestPKI(t), newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	policy := func(cas *x509.CertPool) *Policy {
		return &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}, ClientCAs: cas}
	}
	ks := startServer(t, pki, policy(pki.pool), nil)
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns = 1
	rk := remote(t, kc, keys[0])
	sign := func() error {
		_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
		return err
	}
	if err := sign(); err != nil {
		t.Fatal(err)
	}
	both := other.pool.Clone()
	both.AddCert(pki.ca)
	if err := ks.s.SetPolicy(policy(both)); err != nil {
		t.Fatal(err)
	}
	if err := sign(); err != nil {
		t.Errorf("after a reload that keeps its CA: %v", err)
	}
	if err := ks.s.SetPolicy(policy(other.pool)); err != nil {
		t.Fatal(err)
	}
	if err := sign(); !errors.Is(err, ErrForbidden) {
		t.Errorf("after a reload that drops its CA, the open connection: %v, want forbidden", err)
	}
}

// TestBadFramingAnswered: a frame longer than MaxFrame, or with request
// ID 0, is answered with CodeMalformed on ID 0 (the whole connection,
// as the package documentation specifies) and the connection closed,
// so that a confused peer learns why instead of seeing a bare close; each
// such refusal is counted (reason malformed) and logged as a warning with
// the client's name: a client sending garbage is seen by the operator.
func TestBadFramingAnswered(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	var logs testpeer.SyncBuffer
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.Observer = obs
		s.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	refused := 0
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"length over MaxFrame", append(binary.BigEndian.AppendUint32(nil, MaxFrame+1), 0, 0, 0, 1, byte(OpSign))},
		{"length under a header", append(binary.BigEndian.AppendUint32(nil, 4), 0, 0, 0, 1, byte(OpPing))},
		{"request ID 0", []byte{0, 0, 0, 5, 0, 0, 0, 0, byte(OpPing)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fr := greetedConn(t, ks.addr, cliTLS)
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			id, code, body, err := fr.next()
			if err != nil || id != 0 || Code(code) != CodeMalformed {
				t.Fatalf("answer: id %d, code %d %q, %v; want id 0, malformed", id, code, body, err)
			}
			if _, _, _, err := fr.next(); err == nil {
				t.Error("connection still open after the refusal")
			}
			refused++
			eventually(t, "the refusal counted as malformed", func() bool {
				return obs.get(func(r *recObserver) int { return r.refused[RefusedMalformed] }) == refused
			})
		})
	}
	// One line per reason a second (refusalLog): the first is written.
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "reason=malformed") || !strings.Contains(l, "edge") {
		t.Errorf("framing refusal not logged as a warning naming the client: %q", l)
	}
}

// failingWrites is a listener whose connections' writes fail once fail is
// set: the connection's write side is gone (a client that stopped reading,
// seen after the write timeout) while its requests still arrive.
type failingWrites struct {
	net.Listener
	fail atomic.Bool
}

func (l *failingWrites) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &failingWriteConn{Conn: c, l: l}, nil
}

type failingWriteConn struct {
	net.Conn
	l *failingWrites
}

func (c *failingWriteConn) Write(b []byte) (int, error) {
	if c.l.fail.Load() {
		return 0, errors.New("test: write side gone")
	}
	return c.Conn.Write(b)
}

// TestUnwritableConnectionEnds: an answer the key server cannot write ends
// the connection, for pings and refusals as for operations; before, the
// read loop went on reading a client that does not read (pings keep it
// open for ever), with each answer failing.
func TestUnwritableConnectionEnds(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	for _, tc := range []struct {
		name    string
		typ     Op
		payload []byte
	}{
		{"ping", OpPing, nil},
		{"refusal", OpSign, []byte{0xff}}, // no such key: refused, not run
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{IdleTimeout: time.Hour}
			if err := s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}); err != nil {
				t.Fatal(err)
			}
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &failingWrites{Listener: tcp}
			go s.Serve(tls.NewListener(ln, pki.server))
			t.Cleanup(func() { s.Close() })
			c, fr := greetedConn(t, tcp.Addr().String(), cliTLS)
			if !served(c, fr) {
				t.Fatal("not served before the writes fail")
			}
			ln.fail.Store(true)
			if err := newFrameWriter(c, time.Second).write(2, byte(tc.typ), tc.payload, nil); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
			if _, _, _, err := fr.next(); !errors.Is(err, io.EOF) && !strings.Contains(fmt.Sprint(err), "reset") {
				t.Errorf("after an answer that could not be written: %v, want the connection closed", err)
			}
		})
	}
}

// TestUnknownOperationRefusalAudited: a request of an operation the
// protocol does not have, and a ping with a body, are refused, and the
// refusals are counted in the metrics and the audit line like the other
// refusals: a client probing the server with them is seen.
func TestUnknownOperationRefusalAudited(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	buf := &testpeer.SyncBuffer{}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer, s.Logger = obs, bufLogger(buf) })
	c, fr := greetedConn(t, ks.addr, cliTLS)
	id := keyIDOf(t, keys[0])
	var req []byte
	req = appendFrame(req, 1, 9, id[:])
	req = appendFrame(req, 2, byte(OpPing), []byte("x"))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	want := map[uint32]Code{1: CodeUnknownOp, 2: CodeMalformed}
	for range want {
		id, code, body, err := fr.next()
		if err != nil || want[id] != Code(code) {
			t.Fatalf("answer %d: code %d %q, %v; want %v", id, code, body, err, want[id])
		}
	}
	for _, k := range []string{"edge/unknown/unknown/unknown_op", "edge/unknown/ping/malformed"} {
		if n := obs.get(func(r *recObserver) int { return r.ops[k] }); n != 1 {
			t.Errorf("%s counted %d times, want 1", k, n)
		}
	}
	ks.s.Shutdown(context.Background())
	for _, w := range []string{"unknown.unknown_op=1", "ping.malformed=1"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("audit log has no %s:\n%s", w, buf.String())
		}
	}
}

// appendFrame appends the frame id, typ, body.
func appendFrame(b []byte, id uint32, typ byte, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(5+len(body)))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(append(b, typ), body...)
}

// keyIDOf returns the protocol ID of k.
func keyIDOf(t *testing.T, k Key) [32]byte {
	id, err := KeyID(k.Private.Public())
	if err != nil {
		t.Fatal(err)
	}
	return id
}
