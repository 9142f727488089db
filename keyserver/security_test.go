package keyserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
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

	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[0].Private.PublicKey, preMaster(t))
	if pt, err := rs.DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrWrongRole) {
		t.Errorf("sign key decrypted: %q, err = %v", pt, err)
	}
	if _, err := re.SignContext(ctx, nil, testMsg, testOpts); !errors.Is(err, ErrWrongRole) {
		t.Errorf("enc key signed: err = %v", err)
	}
	peer, _ := sm2.GenerateKey(rand.Reader)
	ps, _ := peer.ECDH()
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	if _, err := rs.SM2KeyAgree(ctx, eph, ps.PublicKey(), eph.PublicKey(), false, 48, nil, nil); !errors.Is(err, ErrWrongRole) {
		t.Errorf("sign key agreed a key: err = %v", err)
	}
	// The roles it has still work.
	if _, err := rs.SignContext(ctx, nil, testMsg, testOpts); err != nil {
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
	if _, err := remote(t, edge, keys[0]).SignContext(ctx, nil, testMsg, testOpts); err != nil {
		t.Errorf("allowed key: %v", err)
	}
	pm := preMaster(t)
	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, pm)
	if _, err := remote(t, edge, keys[1]).DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("key outside the allow-list: err = %v", err)
	}
	stranger := newClient(t, strangerTLS, ks.addr)
	if _, err := remote(t, stranger, keys[0]).SignContext(ctx, nil, testMsg, testOpts); !errors.Is(err, ErrForbidden) {
		t.Errorf("unknown identity: err = %v", err)
	}
	if n := obs.get(func(r *recObserver) int { return r.refused[RefusedIdentity] }); n == 0 {
		t.Error("refused identity not reported")
	}
	if !strings.Contains(buf.String(), `subject \"CN=stranger,O=test\"`) {
		t.Errorf("refused identity not logged:\n%s", buf.String())
	}
	if pt, err := remote(t, newClient(t, pinnedTLS, ks.addr), keys[1]).DecryptContext(ctx, nil, ct, nil); err != nil || string(pt) != string(pm) {
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
		if _, err := rs.SignContext(ctx, nil, testMsg, testOpts); err != nil {
			t.Fatalf("operation %d within the burst: %v", i, err)
		}
	}
	if _, err := rs.SignContext(ctx, nil, testMsg, testOpts); !errors.Is(err, ErrRateLimited) {
		t.Errorf("beyond the burst: err = %v", err)
	}
	if _, err := remote(t, newClient(t, otherTLS, ks.addr), keys[0]).SignContext(ctx, nil, testMsg, testOpts); err != nil {
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
			_, err := remote(t, kc, keys[0]).SignContext(ctx, nil, testMsg, testOpts)
			errc <- err
		}()
		<-started
	}
	// The refusal comes at once: an operation let through instead waits
	// in runHook until its context ends, up to testwait.Bound(10s), not
	// the Client's own Timeout (10 s even in the mutation check).
	third, cancel := context.WithTimeout(ctx, testwait.Bound(10*time.Second))
	defer cancel()
	if _, err := remote(t, kc1, keys[0]).SignContext(third, nil, testMsg, testOpts); !errors.Is(err, ErrBusy) {
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
		s.MaxHandshakes, s.MaxHandshakesPerAddr = bound, bound
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
			c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
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
	// A handshake cut by its deadline closes the connection before the
	// refusal is counted: the count may lag the client's read a moment.
	eventually(t, fmt.Sprintf("at least %d refusals reported", silent), func() bool {
		return obs.get(func(r *recObserver) int { return r.refused[RefusedHandshake] + r.refused[RefusedLimit] }) >= silent
	})
	if _, err := remote(t, newClient(t, cliTLS, ks.addr), keys[0]).SignContext(context.Background(), nil, testMsg, testOpts); err != nil {
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
	c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
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

// TestLocalGrantNotForTLSClients: the Local (Unix-socket) grant is never a
// TLS client's, whatever its name: neither when a TLS client's grant has
// the same name, nor after a reload leaves only a Local grant of that
// name while the TLS connection is still open.
func TestLocalGrantNotForTLSClients(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	ctx := context.Background()
	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, preMaster(t))

	ks := startServer(t, pki, &Policy{Keys: keys,
		Clients: []Grant{{Name: "edge", Subject: "CN=edge,O=test", Keys: []string{"sign"}}},
		Local:   &Grant{Name: "edge", Keys: []string{"sign", "enc"}},
	}, nil)
	kc := newClient(t, cliTLS, ks.addr)
	if _, err := remote(t, kc, keys[0]).SignContext(ctx, nil, testMsg, testOpts); err != nil {
		t.Fatalf("granted key: %v", err)
	}
	if pt, err := remote(t, kc, keys[1]).DecryptContext(ctx, nil, ct, nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("TLS client named like the Local grant decrypted: %q, %v", pt, err)
	}

	// A reload that turns the file into a Unix-socket key server: conf
	// then gives the Local grant (all keys) the name of the old client.
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Local: &Grant{Name: "edge", Keys: []string{"sign", "enc"}, Limits: DefaultLimits}}); err != nil {
		t.Fatal(err)
	}
	if pt, err := remote(t, kc, keys[1]).DecryptContext(ctx, nil, ct, nil); err == nil {
		t.Errorf("open TLS connection decrypted under the Local grant after the reload: %q", pt)
	}
}

// TestSubjectMatchesEveryAttribute: a grant's subject matches the
// certificate's whole subject, not pkix.Name.String, which keeps the last
// CN only and reorders attributes: a certificate for "O=test, CN=edge-2,
// CN=edge" is not the client "CN=edge,O=test".
func TestSubjectMatchesEveryAttribute(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cp, err := compilePolicy(&Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, map[stateKey]*clientState{})
	if err != nil {
		t.Fatal(err)
	}
	cert := func(rdns pkix.RDNSequence) *x509.Certificate {
		raw, err := asn1.Marshal(rdns)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), RawSubject: raw, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, pki.ca, &k.PublicKey, pki.caKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	o := pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "test"}
	cn := func(v string) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: v}
	}
	if c := cp.identify(cert(pkix.RDNSequence{{o}, {cn("edge")}})); c == nil || c.Name != "edge" {
		t.Fatalf("the client's own certificate: %v", c)
	}
	for _, rdns := range []pkix.RDNSequence{
		{{o}, {cn("edge-2")}, {cn("edge")}},
		{{o}, {cn("edge"), cn("edge-2")}},
		{{cn("edge")}, {o}},
	} {
		c := cert(rdns)
		if got := cp.identify(c); got != nil {
			t.Errorf("subject %s (pkix.Name %q) identified as %q", SubjectString(c), c.Subject.String(), got.Name)
		}
	}
}

// TestUnreadAnswersHoldTheirSlots: a client that sends requests and never
// reads the answers has at most MaxInFlight operations run and waiting to
// be written; the rest are refused, and the server stops reading from it
// instead of keeping one answer per request in memory.
func TestUnreadAnswersHoldTheirSlots(t *testing.T) {
	keys := testKeys(t)
	obs := newRecObserver()
	s := &Server{Observer: obs}
	if err := s.SetPolicy(&Policy{Keys: keys, Local: &Grant{Name: "local", Keys: []string{"sign", "enc"}, Limits: Limits{MaxInFlight: 2}}}); err != nil {
		t.Fatal(err)
	}
	ln := &pipeListener{ch: make(chan net.Conn), closed: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	c, sc := net.Pipe() // synchronous: an answer nobody reads is not written
	ln.ch <- sc
	t.Cleanup(func() {
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-served
	})
	if _, err := c.Write(appendHello(nil, Version)); err != nil {
		t.Fatal(err)
	}
	if v, _, err := readHello(c); err != nil || v != Version {
		t.Fatalf("hello: %d %v", v, err)
	}
	id, _ := KeyID(keys[1].Private.Public())
	ct, err := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, preMaster(t))
	if err != nil {
		t.Fatal(err)
	}
	request := func(i uint32) error {
		b := binary.BigEndian.AppendUint32(nil, uint32(headerLen-4+32+len(ct)))
		b = binary.BigEndian.AppendUint32(b, i)
		b = append(append(append(b, byte(OpDecrypt)), id[:]...), ct...)
		_, err := c.Write(b)
		return err
	}
	// Two operations run, and their answers are not read.
	for i := uint32(1); i <= 2; i++ {
		if err := request(i); err != nil {
			t.Fatal(err)
		}
	}
	done := func() int { return obs.get(func(r *recObserver) int { return r.ops["local/enc/decrypt/ok"] }) }
	busy := func() int { return obs.get(func(r *recObserver) int { return r.ops["local/enc/decrypt/busy"] }) }
	eventually(t, "two operations done", func() bool { return done() >= 2 })
	time.Sleep(50 * time.Millisecond) // the rest of their goroutines' work
	// A third, once both are done: their slots are still held by their
	// unwritten answers, so it is refused busy, not run.
	if err := request(3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the third operation run or refused", func() bool { return done()+busy() >= 3 })
	if d, b := done(), busy(); d != 2 || b != 1 {
		t.Errorf("%d operations ran and %d were refused busy for a client with MaxInFlight 2 that reads no answer; want 2 and 1", d, b)
	}
	// The refusal is not read either: the server reads no more requests.
	sent := make(chan int, 1)
	go func() {
		n := 3
		for i := uint32(4); i <= 300; i++ {
			if request(i) != nil {
				break
			}
			n++
		}
		sent <- n
	}()
	time.Sleep(200 * time.Millisecond) // what else the server would do
	if n := done(); n > 2 {
		t.Errorf("%d operations ran for a client with MaxInFlight 2 that reads no answer", n)
	}
	select {
	case n := <-sent:
		t.Errorf("the server read all %d requests of a client that reads no answer", n)
	default:
	}
}

// pipeListener hands out the server ends of net.Pipe connections.
type pipeListener struct {
	ch     chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// TestClientConnectionBound: a client with its Limits.MaxConns connections
// open gets busy on the next one, which is closed, while another client
// still connects; once one of its connections closes, it may open one
// again.
func TestClientConnectionBound(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	obs := newRecObserver()
	edge := grantAll("edge", keys)
	edge.MaxConns = 2
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{edge, grantAll("other", keys)}}, func(s *Server) { s.Observer = obs })
	edgeTLS, _ := pki.client(t, "edge")
	otherTLS, _ := pki.client(t, "other")
	greeted := func(cfg *tls.Config) (net.Conn, *frameReader) { return greetedConn(t, ks.addr, cfg) }
	open := served
	first, firstR := greeted(edgeTLS)
	second, secondR := greeted(edgeTLS)
	if !open(first, firstR) || !open(second, secondR) {
		t.Fatal("the client's first two connections are not served")
	}
	third, thirdR := greeted(edgeTLS)
	third.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if id, code, detail, err := thirdR.next(); err != nil || id != 0 || code != byte(CodeBusy) {
		t.Fatalf("third connection: frame %d code %d %q, %v; want busy", id, code, detail, err)
	}
	if _, err := third.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("third connection still open after busy: %v", err)
	}
	eventually(t, "one client_limit refusal reported", func() bool { return obs.get(func(r *recObserver) int { return r.refused[RefusedClient] }) == 1 })
	if c, r := greeted(otherTLS); !open(c, r) {
		t.Error("another client was refused")
	}
	first.Close()
	eventually(t, "a connection of the client again after one closed", func() bool {
		c, r := greeted(edgeTLS)
		defer c.Close()
		return open(c, r)
	})
}

// TestInFlightMetricBalancedAcrossReidentification: an operation admitted
// for client "edge" reports InFlight("edge", +1) when it starts; when a
// reload re-identifies its connection as another grant while it runs (the
// quarantine of TestReloadReidentifiesOpenConnections), its -1 and its
// result are reported under "edge" too. Before, the operation's goroutine
// read the read loop's variable, rewritten meanwhile: the gauge of "edge"
// stayed at 1 for ever and the other went negative.
func TestInFlightMetricBalancedAcrossReidentification(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, cert := pki.client(t, "edge")
	obs := newRecObserver()
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var once atomic.Bool
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.Observer = obs
		s.runHook = func(op Op, _ []byte) {
			if op == OpSign && once.CompareAndSwap(false, true) {
				entered <- struct{}{}
				<-release
			}
		}
	})
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns = 1
	kc.HealthInterval = time.Hour
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := remote(t, kc, keys[0]).SignContext(ctx, nil, testMsg, testOpts)
		done <- err
	}()
	<-entered
	quarantine(t, ks, keys, cert, 0)
	// A request on the same connection: its read loop re-identifies it.
	if err := kc.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, "operation finished", func() bool {
		return obs.get(func(r *recObserver) int { return len(r.ops) }) > 0
	})
	time.Sleep(50 * time.Millisecond)
	in := obs.get(func(r *recObserver) int { return r.inFlight["edge"] })
	inQ := obs.get(func(r *recObserver) int { return r.inFlight["edge-quarantined"] })
	if in != 0 || inQ != 0 {
		t.Errorf("in-flight after the only operation finished: edge %d, edge-quarantined %d; want 0 and 0", in, inQ)
	}
	if n := obs.get(func(r *recObserver) int { return r.ops["edge/sign/sign/ok"] }); n != 1 {
		obs.mu.Lock()
		t.Errorf("the operation admitted for edge was reported for another client: %v", obs.ops)
		obs.mu.Unlock()
	}
}

// preMaster returns a TLCP pre-master secret: client_version 1.1 (0x0101)
// and 46 random bytes.
func preMaster(t testing.TB) []byte {
	pm := make([]byte, 48)
	if _, err := rand.Read(pm[2:]); err != nil {
		t.Fatal(err)
	}
	pm[0], pm[1] = 1, 1
	return pm
}

// TestDecryptOnlyPreMasterSecrets: the decrypt role decrypts TLCP
// pre-master secrets, the only ciphertexts gmproxy sends, and nothing
// else: an edge allowed the encryption key cannot use the key server to
// read other data encrypted to that key (a digital envelope, a message of
// another system using the same certificate). The refusal is the one of a
// ciphertext that does not decrypt, so that it does not tell that the
// ciphertext was valid.
func TestDecryptOnlyPreMasterSecrets(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	re := remote(t, newClient(t, cliTLS, ks.addr), keys[1])
	ctx := context.Background()
	pub := &keys[1].Private.PublicKey

	pm := preMaster(t)
	ct, _ := sm2.EncryptASN1(rand.Reader, pub, pm)
	if got, err := re.DecryptContext(ctx, nil, ct, nil); err != nil || string(got) != string(pm) {
		t.Fatalf("a TLCP pre-master secret: %x, %v", got, err)
	}
	_, badErr := re.DecryptContext(ctx, nil, ct[:len(ct)-1], nil)
	var bad *Error
	if !errors.As(badErr, &bad) || bad.Code != CodeFailed {
		t.Fatalf("a corrupt ciphertext: %v, want failed", badErr)
	}
	other := preMaster(t)
	other[0], other[1] = 3, 3 // TLS 1.2's version
	for _, c := range []struct {
		name string
		pt   []byte
	}{
		{"a short secret", []byte("database password")},
		{"47 bytes", pm[:47]},
		{"49 bytes", append(preMaster(t), 0)},
		{"48 bytes of another version", other},
		{"a large document", append(preMaster(t), make([]byte, 4<<10)...)},
	} {
		ct, err := sm2.EncryptASN1(rand.Reader, pub, c.pt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := re.DecryptContext(ctx, nil, ct, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeFailed || len(got) != 0 {
			t.Errorf("%s: decrypted to %d bytes, err %v; want failed and no plaintext", c.name, len(got), err)
			continue
		}
		if e.Detail != bad.Detail {
			t.Errorf("%s: refused with %q, a corrupt ciphertext with %q: the answer tells the ciphertext was valid", c.name, e.Detail, bad.Detail)
		}
	}
}

// TestKeyAgreementOnlyTLCPServer: the key_agreement role runs the SM2 key
// agreement of a TLCP ECDHE server (the tlcp package's: initiator, the
// default IDs, a 48-byte pre-master secret) and nothing else: an edge
// allowed the encryption key cannot have the key server run SM2 key
// exchange as the site with another protocol's IDs, key length or role
// (GB/T 32918.3 between other systems using the same key). The
// refusals are counted like the others.
func TestKeyAgreementOnlyTLCPServer(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer = obs })
	re := remote(t, newClient(t, cliTLS, ks.addr), keys[1])
	ctx := context.Background()

	peer, _ := sm2.GenerateKey(rand.Reader)
	ps, _ := peer.ECDH()
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	pe, _ := ecdh.P256().GenerateKey(rand.Reader)
	got, err := re.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), false, 48, nil, nil)
	want, _ := smkey.LocalKeyAgreement{Key: keys[1].Private}.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), false, 48, nil, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("TLCP ECDHE server agreement: %x, %v", got, err)
	}
	for _, c := range []struct {
		name         string
		responder    bool
		keyLen       int
		uid, peerUID []byte
	}{
		{"responder", true, 48, nil, nil},
		{"16 bytes", false, 16, nil, nil},
		{"1024 bytes", false, 1024, nil, nil},
		{"an own ID", false, 48, []byte("other-system"), nil},
		{"a peer ID", false, 48, nil, []byte("peer-id")},
	} {
		out, err := re.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), c.responder, c.keyLen, c.uid, c.peerUID)
		if !errors.Is(err, ErrNotHandshake) || len(out) != 0 {
			t.Errorf("%s: agreed %d bytes, err %v; want not_handshake", c.name, len(out), err)
		}
	}
	if n := obs.get(func(r *recObserver) int { return r.ops["edge/enc/key_agreement/not_handshake"] }); n != 5 {
		t.Errorf("%d refusals counted, want 5", n)
	}
}
