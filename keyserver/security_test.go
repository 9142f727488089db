package keyserver

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// Each test here is a misbehaving (or merely curious) client that must be
// refused; each fails when the server's check is deleted.

// TestRoleEnforced: the signing key never decrypts or agrees keys, the
// encryption key never signs.
func TestRoleEnforced(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer = obs })
	kc := newClient(t, cliTLS, ks.addr)
	rs, re := remote(t, kc, keys[0]), remote(t, kc, keys[1])
	ctx := context.Background()

	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[0].Private.PublicKey, []byte("recorded pre-master secret"))
	if pt, err := rs.DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrWrongRole) {
		t.Errorf("sign key decrypted: %q, err = %v", pt, err)
	}
	if _, err := re.SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); !errors.Is(err, ErrWrongRole) {
		t.Errorf("enc key signed: err = %v", err)
	}
	peer, _ := sm2.GenerateKey(rand.Reader)
	ps, _ := peer.ECDH()
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	if _, err := rs.SM2KeyAgree(ctx, eph, ps.PublicKey(), eph.PublicKey(), false, 48, nil, nil); !errors.Is(err, ErrWrongRole) {
		t.Errorf("sign key agreed a key: err = %v", err)
	}
	// The roles it has still work.
	if _, err := rs.SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); err != nil {
		t.Error(err)
	}
	if n := obs.get(func(r *recObserver) int { return r.ops["edge/sign/decrypt/wrong_role"] }); n != 1 {
		t.Errorf("wrong_role decrypts counted: %d", n)
	}
}

// TestAllowList: a client uses only the keys of its entry; a certificate
// from the right CA that matches no entry is refused at connection time;
// entries match by subject or by SPKI hash.
func TestAllowList(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	strangerTLS, _ := pki.client(t, "stranger")
	pinnedTLS, pinned := pki.client(t, "pinned")
	h := SPKIHash(pinned)
	buf := &testpeer.SyncBuffer{}
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{
		{Name: "edge", Subject: "CN=edge,O=test", Keys: []string{"sign"}},
		{Name: "pinned", SPKISHA256: h[:], Keys: []string{"enc"}},
	}}, func(s *Server) { s.Observer, s.Logger = obs, bufLogger(buf) })
	ctx := context.Background()
	edge := newClient(t, edgeTLS, ks.addr)
	if _, err := remote(t, edge, keys[0]).SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); err != nil {
		t.Errorf("allowed key: %v", err)
	}
	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, []byte("secret"))
	if _, err := remote(t, edge, keys[1]).DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("key outside the allow-list: err = %v", err)
	}
	stranger := newClient(t, strangerTLS, ks.addr)
	if _, err := remote(t, stranger, keys[0]).SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); !errors.Is(err, ErrForbidden) {
		t.Errorf("unknown identity: err = %v", err)
	}
	if n := obs.get(func(r *recObserver) int { return r.refused[RefusedIdentity] }); n == 0 {
		t.Error("refused identity not reported")
	}
	if !strings.Contains(buf.String(), `subject \"CN=stranger,O=test\"`) {
		t.Errorf("refused identity not logged:\n%s", buf.String())
	}
	if pt, err := remote(t, newClient(t, pinnedTLS, ks.addr), keys[1]).DecryptContext(ctx, nil, ct, nil); err != nil || string(pt) != "secret" {
		t.Errorf("SPKI-pinned client: %q %v", pt, err)
	}
}

// TestRateLimit: beyond its burst a client is refused; another client is
// not affected.
func TestRateLimit(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	slowTLS, _ := pki.client(t, "slow")
	otherTLS, _ := pki.client(t, "other")
	slowGrant := grantAll("slow", keys)
	slowGrant.Limits = Limits{Rate: 0.001, Burst: 3}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{slowGrant, grantAll("other", keys)}}, nil)
	ctx := context.Background()
	rs := remote(t, newClient(t, slowTLS, ks.addr), keys[0])
	for i := range 3 {
		if _, err := rs.SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); err != nil {
			t.Fatalf("operation %d within the burst: %v", i, err)
		}
	}
	if _, err := rs.SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); !errors.Is(err, ErrRateLimited) {
		t.Errorf("beyond the burst: err = %v", err)
	}
	if _, err := remote(t, newClient(t, otherTLS, ks.addr), keys[0]).SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); err != nil {
		t.Errorf("other client: %v", err)
	}
}

// TestInFlightBound: a client with MaxInFlight operations running gets
// the next one refused at once, over all its connections.
func TestInFlightBound(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	g := grantAll("edge", keys)
	g.MaxInFlight = 2
	started, release := make(chan struct{}, 4), make(chan struct{})
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{g}}, func(s *Server) {
		s.runHook = func(Op, []byte) { started <- struct{}{}; <-release }
	})
	ctx := context.Background()
	kc1, kc2 := newClient(t, cliTLS, ks.addr), newClient(t, cliTLS, ks.addr) // two connections
	errc := make(chan error, 2)
	for _, kc := range []*Client{kc1, kc2} {
		go func() {
			_, err := remote(t, kc, keys[0]).SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0))
			errc <- err
		}()
		<-started
	}
	if _, err := remote(t, kc1, keys[0]).SignContext(ctx, nil, make([]byte, 32), crypto.Hash(0)); !errors.Is(err, ErrBusy) {
		t.Errorf("third operation in flight: err = %v", err)
	}
	close(release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// TestConnectionBoundAndHandshakeDeadline: 1,000 silent TCP connections
// are all closed by the handshake deadline; beyond MaxConns a connection
// is closed at once; afterwards a real client is served.
func TestConnectionBoundAndHandshakeDeadline(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	const silent, bound = 1000, 1000
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.HandshakeTimeout, s.MaxConns, s.Observer = 300*time.Millisecond, bound, obs
	})
	conns := make([]net.Conn, 0, silent)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range silent {
		c, err := net.Dial("tcp", ks.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Over the bound (the server has not yet timed the silent ones out,
	// or has: either way this one must not hang).
	extra, err := net.Dial("tcp", ks.addr)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, extra)
	// Every silent connection is closed by the server: a read ends with
	// EOF or a reset, well before the test's own 20s deadline.
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Errorf("%d of %d silent connections still open", open, len(conns))
	}
	if n := obs.get(func(r *recObserver) int { return r.refused[RefusedHandshake] + r.refused[RefusedLimit] }); n < silent {
		t.Errorf("%d refusals reported, want at least %d", n, silent)
	}
	if _, err := remote(t, newClient(t, cliTLS, ks.addr), keys[0]).SignContext(context.Background(), nil, make([]byte, 32), crypto.Hash(0)); err != nil {
		t.Errorf("real client after the silent ones: %v", err)
	}
}

// TestConnectionBound: with MaxConns connections open, the next one is
// closed at once (before any handshake deadline).
func TestConnectionBound(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys}, func(s *Server) {
		s.HandshakeTimeout, s.MaxConns, s.Observer = time.Minute, 2, obs
	})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", ks.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	eventually(t, "two connections tracked", func() bool { return obs.get(func(r *recObserver) int { return r.conns }) == 2 })
	c, err := net.Dial("tcp", ks.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("third connection: read err = %v, want it closed", err)
	}
	// The server closes the connection before it reports the refusal.
	eventually(t, "one limit refusal reported", func() bool { return obs.get(func(r *recObserver) int { return r.refused[RefusedLimit] }) == 1 })
	// The held ones are still open (their handshake deadline is a minute).
	held[0].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := held[0].Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("held connection: %v", err)
	}
}
