package keyserver

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestHandshakeBound: connections that never get identified hold at
// most MaxHandshakesPerAddr handshakes from one address and MaxHandshakes
// in all; a connection over either bound is closed at once, and
// identified clients, which no longer count, are served beyond it.
func TestHandshakeBound(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.HandshakeTimeout, s.MaxConns, s.Observer = time.Minute, 20, obs
		s.MaxHandshakes, s.MaxHandshakesPerAddr = 4, 2
	})
	conns := func() int { return obs.get(func(r *recObserver) int { return r.conns }) }
	limited := func() int { return obs.get(func(r *recObserver) int { return r.refused[RefusedHandshakeLimit] }) }
	// silentFrom opens a TCP connection from ip that never says anything.
	silentFrom := func(ip string) net.Conn { return testpeer.DialFrom(t, ip, ks.addr) }
	// closedAtOnce reports whether the server closed c, long before its
	// minute of HandshakeTimeout.
	closedAtOnce := func(c net.Conn) bool { return testpeer.ClosedWithin(c, 5*time.Second) }

	// Six identified connections, more than MaxHandshakes: a connection
	// stops counting as a handshake once its client is identified.
	clients := servedConns(t, ks.addr, edgeTLS, 6)

	silentFrom("127.0.0.2")
	silentFrom("127.0.0.2")
	eventually(t, "two silent connections from 127.0.0.2 tracked", func() bool { return conns() == 8 })
	// Fatal: the refusal's count would wait its whole bound too.
	if c := silentFrom("127.0.0.2"); !closedAtOnce(c) {
		t.Fatal("a third handshake from one address was not closed at once")
	}
	eventually(t, "the third refused for the handshake limit", func() bool { return limited() == 1 })

	other := silentFrom("127.0.0.3")
	silentFrom("127.0.0.3")
	eventually(t, "two more from 127.0.0.3 tracked", func() bool { return conns() == 10 })
	if c := silentFrom("127.0.0.4"); !closedAtOnce(c) {
		t.Fatal("a fifth handshake in all was not closed at once")
	}
	eventually(t, "the fifth refused for the handshake limit", func() bool { return limited() == 2 })

	for i, g := range clients {
		if !served(g.c, g.fr) {
			t.Errorf("identified connection %d not served while the handshakes are full", i+1)
		}
	}
	// A handshake that ends (here, its peer leaves) gives its place back.
	other.Close()
	eventually(t, "the closed one untracked", func() bool { return conns() == 9 })
	silentFrom("127.0.0.4")
	eventually(t, "a handshake from 127.0.0.4 tracked in the freed place", func() bool { return conns() == 10 })
	if n := limited(); n != 2 {
		t.Errorf("handshake_limit refusals = %d, want 2", n)
	}
}

// greeted is a greeted connection and the reader of its frames.
type greeted struct {
	c  net.Conn
	fr *frameReader
}

// servedConns opens n greeted connections, one after the other, each
// served.
func servedConns(t *testing.T, addr string, cfg *tls.Config, n int) []greeted {
	t.Helper()
	var gs []greeted
	for i := range n {
		c, fr := greetedConn(t, addr, cfg)
		if !served(c, fr) {
			t.Fatalf("connection %d not served", i+1)
		}
		gs = append(gs, greeted{c, fr})
	}
	return gs
}

// TestEveryRequestCharged: requests the key server refuses (a key the
// client may not use, a key it does not hold, an operation that does not
// exist) take from the client's rate like operations do, so that a
// client probes no faster than it may sign; the refusals name neither
// the key nor the client.
func TestEveryRequestCharged(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	edge := Grant{Name: "edge", Subject: "CN=edge,O=test", Keys: []string{"sign"}, Limits: Limits{Rate: 0.001, Burst: 3}}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{edge}}, nil)
	c, fr := greetedConn(t, ks.addr, edgeTLS)
	w := newFrameWriter(c, 5*time.Second)
	signID, _ := KeyID(keys[0].Private.Public())
	encID, _ := KeyID(keys[1].Private.Public())
	var id uint32
	ask := func(op Op, keyID [32]byte, payload []byte) (Code, string) {
		t.Helper()
		id++
		if err := w.write(id, byte(op), keyID[:], payload); err != nil {
			t.Fatal(err)
		}
		got, code, body, err := fr.next()
		if err != nil || got != id {
			t.Fatalf("answer %d: id %d, %v", id, got, err)
		}
		return Code(code), string(body)
	}
	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, preMaster(t))
	code, detail := ask(OpDecrypt, encID, ct)
	if code != CodeForbidden {
		t.Fatalf("key outside the allow-list: %v %q", code, detail)
	}
	for _, name := range []string{"enc", "edge", keys[1].Name} {
		if strings.Contains(detail, name) {
			t.Errorf("refusal %q names %q", detail, name)
		}
	}
	if code, detail := ask(OpSign, [32]byte{1}, make([]byte, 32)); code != CodeUnknownKey {
		t.Fatalf("unknown key: %v %q", code, detail)
	}
	if code, detail := ask(Op(9), signID, make([]byte, 32)); code != CodeUnknownOp {
		t.Fatalf("unknown operation: %v %q", code, detail)
	}
	// The burst of three went on refusals: the allowed key is now limited.
	if code, detail := ask(OpSign, signID, make([]byte, 32)); code != CodeRateLimited {
		t.Errorf("allowed sign after three refused requests: %v %q, want rate_limited", code, detail)
	}
}

// TestPingNotCharged: health checks do not take from the rate.
func TestPingNotCharged(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	edge := grantAll("edge", keys)
	edge.Limits = Limits{Rate: 0.001, Burst: 1}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{edge}}, nil)
	c, fr := greetedConn(t, ks.addr, edgeTLS)
	for range 5 {
		if !served(c, fr) {
			t.Fatal("ping refused")
		}
	}
	if _, err := remote(t, newClient(t, edgeTLS, ks.addr), keys[0]).Sign(rand.Reader, testMsg, testOpts); err != nil {
		t.Errorf("the one operation of the burst after pings: %v", err)
	}
}

// TestPingsPaced: pings, not charged to the rate, are paced per
// connection: a client that floods them has pingBurst answered at once,
// then one each 1/pingRate, its connection's reader waiting, rather than
// each answered as fast as it sends. The clock is the test's and moves
// only when the server waits, so the count does not depend on speed.
func TestPingsPaced(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	var mu sync.Mutex
	clock := time.Now()
	var waits []time.Duration
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return clock
		}
		s.sleep = func(d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			clock = clock.Add(d)
		}
	})
	c, fr := greetedConn(t, ks.addr, edgeTLS)
	const n = 3 * pingBurst
	for i := range n {
		if !served(c, fr) {
			t.Fatalf("ping %d not answered", i+1)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != n-pingBurst {
		t.Fatalf("%d of %d pings sent at once waited, want %d (all beyond the burst of %d)", len(waits), n, n-pingBurst, pingBurst)
	}
	for i, d := range waits {
		if want := time.Second / pingRate; d < want*99/100 || d > want*101/100 {
			t.Errorf("ping %d waited %v, want %v", pingBurst+i+1, d, want)
		}
	}
}

// TestLoweredMaxConnsShedsNewest: a reload that lowers a client's
// MaxConns below its open connections closes the newest ones, each once
// its operations in progress are answered; the oldest stay served.
func TestLoweredMaxConnsShedsNewest(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	edge := grantAll("edge", keys)
	edge.MaxConns = 4
	buf := &testpeer.SyncBuffer{}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{edge}}, func(s *Server) {
		s.Logger = bufLogger(buf)
		s.runHook = func(op Op, _ []byte) {
			if op == OpSign {
				entered <- struct{}{}
				<-release
			}
		}
	})
	open := servedConns(t, ks.addr, edgeTLS, 4)
	// The newest has a signature in progress when the reload comes.
	signID, _ := KeyID(keys[0].Private.Public())
	if err := newFrameWriter(open[3].c, 5*time.Second).write(7, byte(OpSign), signID[:], testMsg); err != nil {
		t.Fatal(err)
	}
	<-entered
	edge.MaxConns = 2
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{edge}}); err != nil {
		t.Fatal(err)
	}
	// closed reports whether the server closed g (EOF or reset).
	closed := func(g greeted) bool {
		g.c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		_, _, _, err := g.fr.next()
		return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	if !closed(open[2]) {
		t.Error("the second newest connection is still open after MaxConns went from 4 to 2")
	}
	close(release)
	open[3].c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if id, code, _, err := open[3].fr.next(); err != nil || id != 7 || Code(code) != CodeOK {
		t.Errorf("the signature in progress on the shed connection: frame %d code %d, %v; want its answer", id, code, err)
	}
	if !closed(open[3]) {
		t.Error("the newest connection is still open after its answer")
	}
	for i, g := range open[:2] {
		if !served(g.c, g.fr) {
			t.Errorf("old connection %d not served after the reload", i+1)
		}
	}
	eventually(t, "both sheds logged", func() bool {
		return strings.Count(buf.String(), "max_connections was lowered") == 2
	})
	// Two are open, the new bound: one more is refused busy.
	c, fr := greetedConn(t, ks.addr, edgeTLS)
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if id, code, _, err := fr.next(); err != nil || id != 0 || Code(code) != CodeBusy {
		t.Errorf("a third connection after the reload: frame %d code %d, %v; want busy", id, code, err)
	}
}

// TestRemovedClientConnectionsClosed: a reload that removes a client
// closes its idle connections at once (not at their next request or
// after the idle timeout: they hold places of MaxConns); another
// client's stay served.
func TestRemovedClientConnectionsClosed(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	otherTLS, _ := pki.client(t, "other")
	buf := &testpeer.SyncBuffer{}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys), grantAll("other", keys)}}, func(s *Server) {
		s.Logger = bufLogger(buf)
	})
	edge := servedConns(t, ks.addr, edgeTLS, 2)
	other := servedConns(t, ks.addr, otherTLS, 1)
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{grantAll("other", keys)}}); err != nil {
		t.Fatal(err)
	}
	for i, g := range edge {
		if !testpeer.ClosedWithin(g.c, 10*time.Second) {
			// Fatal: the next waits (the other connection's, the log's)
			// would each take their whole bound for the same cause.
			t.Fatalf("connection %d of the removed client still open", i+1)
		}
	}
	if !served(other[0].c, other[0].fr) {
		t.Error("the remaining client's connection not served after the reload")
	}
	eventually(t, "both closes logged", func() bool {
		return strings.Count(buf.String(), "removed from the allow-list") == 2
	})
	// Reloads that rename clients do not pile up their states.
	ks.s.smu.Lock()
	n := len(ks.s.states)
	ks.s.smu.Unlock()
	if n != 1 {
		t.Errorf("%d client states kept for a policy of one client", n)
	}
}

// TestClientRemovedWhileGreetedClosed: a reload that removes a client
// between a connection's greeting (identified under the old policy) and
// its counting among the client's connections closes it at once too, as
// it does the client's connections counted before (the hook runs the
// reload in that gap).
func TestClientRemovedWhileGreetedClosed(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	buf := &testpeer.SyncBuffer{}
	var once sync.Once
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.Logger, s.IdleTimeout = bufLogger(buf), time.Minute
		s.greetedHook = func() {
			once.Do(func() {
				if err := s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{grantAll("other", keys)}}); err != nil {
					t.Error(err)
				}
			})
		}
	})
	c, _ := greetedConn(t, ks.addr, edgeTLS)
	if !testpeer.ClosedWithin(c, 10*time.Second) {
		t.Fatal("the removed client's connection, greeted before the reload, still open")
	}
	eventually(t, "the close logged", func() bool { return strings.Contains(buf.String(), "removed from the allow-list") })
}

// TestSameKeyTwiceRefused: a policy that serves one key under two names
// is refused: requests name a key by its ID, so one entry would silently
// replace the other, roles included.
func TestSameKeyTwiceRefused(t *testing.T) {
	keys := testKeys(t)
	twice := append(keys, Key{Name: "enc-again", Private: keys[1].Private, Roles: RoleSign})
	s := &Server{}
	if err := s.SetPolicy(&Policy{Keys: twice, Clients: []Grant{grantAll("edge", twice)}}); err == nil || !strings.Contains(err.Error(), `"enc" and "enc-again" are the same key`) {
		t.Errorf("SetPolicy = %v, want the duplicate named", err)
	}
}

// TestRefusedPolicyChangesNoLimits: a policy SetPolicy refuses leaves
// every client's limits as they were, including those of the clients it
// compiled before the error.
func TestRefusedPolicyChangesNoLimits(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	edge := grantAll("edge", keys)
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{edge}}, nil)
	strict := edge
	strict.Limits = Limits{Rate: 0.001, Burst: 1}
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{strict, {Name: "typo", Subject: "CN=typo", Keys: []string{"no-such-key"}}}}); err == nil {
		t.Fatal("a policy naming an unknown key was accepted")
	}
	rk := remote(t, newClient(t, edgeTLS, ks.addr), keys[0])
	for i := range 5 {
		if _, err := rk.Sign(rand.Reader, testMsg, testOpts); err != nil {
			t.Fatalf("operation %d under the limits the refused policy did not change: %v", i+1, err)
		}
	}
}

// TestRefusalLogBounded: a flood of refused connections writes about one
// log line per reason a second; the metrics count every refusal.
func TestRefusalLogBounded(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	buf := &testpeer.SyncBuffer{}
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys}, func(s *Server) {
		s.HandshakeTimeout, s.MaxConns, s.Logger, s.Observer = time.Minute, 1, bufLogger(buf), obs
	})
	hold, err := net.Dial("tcp", ks.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	eventually(t, "one connection tracked", func() bool { return obs.get(func(r *recObserver) int { return r.conns }) == 1 })
	const flood = 50
	for range flood {
		c, err := net.Dial("tcp", ks.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		c.Read(make([]byte, 1))
		c.Close()
	}
	eventually(t, "every refusal counted", func() bool {
		return obs.get(func(r *recObserver) int { return r.refused[RefusedLimit] }) == flood
	})
	if n := strings.Count(buf.String(), "key server connection refused"); n < 1 || n > 10 {
		t.Errorf("%d log lines for %d refused connections", n, flood)
	}
}

func TestRefusalLogHoldsBack(t *testing.T) {
	var l refusalLog
	t0 := time.Unix(1000, 0)
	if n, ok := l.allow(RefusedLimit, t0); !ok || n != 0 {
		t.Fatalf("first line: %d %v", n, ok)
	}
	for i := range 10 {
		if _, ok := l.allow(RefusedLimit, t0.Add(time.Duration(i+1)*50*time.Millisecond)); ok {
			t.Fatalf("line %d within the second written", i+2)
		}
	}
	if _, ok := l.allow(RefusedHandshakeLimit, t0.Add(100*time.Millisecond)); !ok {
		t.Error("another reason held back by the first")
	}
	if n, ok := l.allow(RefusedLimit, t0.Add(1100*time.Millisecond)); !ok || n != 10 {
		t.Errorf("line after the second: %d held back, %v; want 10, true", n, ok)
	}
}

// TestServerLimitsChangeWhileServing: SetServerLimits (a reload) applies
// new bounds to the connections admitted after it and new timeouts to the
// connections accepted after it; a connection accepted before keeps its
// timeout. Nothing here depends on how fast the server runs: the
// connection accepted before is shown alive by serving it (a TLS
// handshake and a ping) after the one accepted after the change, under
// the shorter timeout, has been closed.
func TestServerLimitsChangeWhileServing(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.HandshakeTimeout, s.MaxConns, s.Observer = time.Minute, 20, obs
		s.MaxHandshakes, s.MaxHandshakesPerAddr = 8, 1
	})
	conns := func() int { return obs.get(func(r *recObserver) int { return r.conns }) }
	silentFrom := func(ip string) net.Conn { return testpeer.DialFrom(t, ip, ks.addr) }

	before := silentFrom("127.0.0.2")
	// Counted once accepted, with the timeouts it is served under.
	eventually(t, "a silent connection tracked", func() bool { return conns() == 1 })
	if c := silentFrom("127.0.0.2"); !testpeer.ClosedWithin(c, 5*time.Second) {
		t.Fatal("a second handshake from one address was not closed at once (MaxHandshakesPerAddr 1)")
	}
	ks.s.SetServerLimits(ServerLimits{HandshakeTimeout: 300 * time.Millisecond, MaxConns: 20, MaxHandshakes: 8, MaxHandshakesPerAddr: 3})
	after := silentFrom("127.0.0.2")
	eventually(t, "a second silent connection from 127.0.0.2 tracked under the raised bound", func() bool { return conns() == 2 })
	if !testpeer.ClosedWithin(after, 5*time.Second) {
		t.Fatal("a silent connection accepted after the timeout was shortened to 300ms is still open after 5s")
	}
	// Had the change shortened its timeout too, its deadline would have
	// passed before the later connection's: it could not be served now.
	c, fr, err := greetOn(before, cliTLS)
	if err != nil || !served(c, fr) {
		t.Errorf("the silent connection accepted before the change lost its minute of handshake timeout: %v", err)
	}
}

// TestServerLimitsTakenAtAccept: a connection takes its timeouts when it
// is accepted, not when its goroutine first runs: the limits changed
// between the two (as a loaded machine may schedule it) leave it the
// handshake and idle timeouts it was accepted under, and apply to the
// next connection.
func TestServerLimitsTakenAtAccept(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	var once sync.Once
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.HandshakeTimeout, s.IdleTimeout = time.Minute, time.Minute
		s.startHook = func() {
			// Timeouts that have passed as soon as they are set.
			once.Do(func() {
				s.SetServerLimits(ServerLimits{HandshakeTimeout: time.Nanosecond, IdleTimeout: time.Nanosecond})
			})
		}
	})
	dial := func() (net.Conn, *frameReader, error) {
		raw, err := net.Dial("tcp", ks.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		return greetOn(raw, cliTLS)
	}
	c, fr, err := dial()
	if err != nil || !served(c, fr) {
		t.Errorf("a connection accepted before the change was served under the new timeouts: %v", err)
	}
	if _, _, err := dial(); err == nil {
		t.Error("a connection accepted after the change to a 1ns handshake timeout greeted")
	}
}

// TestTighterRateKeepsUsedTokens: a reload that tightens a client's rate
// does not hand the client, throttled on an open connection, a fresh
// burst: what it used under the old limits stays used.
func TestTighterRateKeepsUsedTokens(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	edgeTLS, _ := pki.client(t, "edge")
	edge := grantAll("edge", keys)
	edge.Limits = Limits{Rate: 0.002, Burst: 2}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{edge}}, nil)
	rk := remote(t, newClient(t, edgeTLS, ks.addr), keys[0])
	for i := range 2 {
		if _, err := rk.Sign(rand.Reader, testMsg, testOpts); err != nil {
			t.Fatalf("operation %d within the burst: %v", i+1, err)
		}
	}
	if _, err := rk.Sign(rand.Reader, testMsg, testOpts); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("beyond the burst: %v, want rate_limited", err)
	}
	tighter := edge
	tighter.Limits = Limits{Rate: 0.001, Burst: 1}
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{tighter}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rk.Sign(rand.Reader, testMsg, testOpts); !errors.Is(err, ErrRateLimited) {
		t.Errorf("after a reload to a tighter rate: %v, want rate_limited", err)
	}
	// A client that had no rate starts with its whole burst.
	free := edge
	free.Limits = Limits{}
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{free}}); err != nil {
		t.Fatal(err)
	}
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{tighter}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rk.Sign(rand.Reader, testMsg, testOpts); err != nil {
		t.Errorf("the burst of a rate set on an unlimited client: %v", err)
	}
}
