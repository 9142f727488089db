package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestReloadUnderTraffic: reloads while clients (TLCP and TLS, new and
// kept-alive connections) send a bounded number of requests: no request
// fails, and the new configuration takes effect.
func TestReloadUnderTraffic(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))

	const perWorker = 60
	clients := []*http.Client{
		smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false),
		smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, true),
		tlsClient(t, d.addr, "localhost", false),
		tlsClient(t, d.addr, "localhost", true),
	}
	// One client that opens a new connection per request.
	nc := smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_CBC_SM3, false)
	nc.Transport.(*http.Transport).DisableKeepAlives = true
	clients = append(clients, nc)

	var failed atomic.Int64
	var done atomic.Int64
	var wg sync.WaitGroup
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				resp, err := c.Get("https://localhost/traffic")
				if err != nil {
					failed.Add(1)
					t.Errorf("client %d: request %d failed: %v", ci, i, err)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(string(body), "path=/traffic") {
					failed.Add(1)
					t.Errorf("bad response %d %q %v", resp.StatusCode, body, err)
				}
				done.Add(1)
			}
		}()
	}
	// Reload while traffic flows, changing the other site's answer.
	for i := 0; i < 5; i++ {
		deadline := time.Now().Add(testpeer.WaitLimit)
		for done.Load() < int64((i+1)*len(clients)*perWorker/7) {
			if time.Now().After(deadline) {
				t.Fatalf("reload %d: only %d requests done within %v", i, done.Load(), testpeer.WaitLimit)
			}
			time.Sleep(time.Millisecond)
		}
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[1].Routes[0].Respond.Body = "other site v2\n"
		d.mu.Lock()
		d.cfg = cfg
		d.mu.Unlock()
		if err := d.Reload(); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed across reloads", n, len(clients)*perWorker)
	}
	if body, _ := get(t, tlsClient(t, d.addr, "x.b.example.cn", false), "https://x.b.example.cn/"); body != "other site v2\n" {
		t.Errorf("after reload the other site answers %q", body)
	}
}

// TestReloadInvalidKeepsRunning: a configuration that fails to build is
// refused and the running one keeps serving.
func TestReloadInvalidKeepsRunning(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	bad := testConfig(t, b.Listener.Addr().String())
	bad.Sites[0].Routes[0].Upstream = "missing"
	d.mu.Lock()
	d.cfg = bad
	d.mu.Unlock()
	if err := d.Reload(); err == nil {
		t.Fatal("reload of an invalid configuration succeeded")
	}
	body, _ := get(t, tlsClient(t, d.addr, "localhost", false), "https://localhost/still")
	if !strings.HasPrefix(body, "path=/still") {
		t.Fatalf("after a refused reload: %q", body)
	}
}

// TestGracefulShutdown: Shutdown stops accepting, lets an in-flight slow
// request finish, and reports a clean drain.
func TestGracefulShutdown(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	type result struct {
		body string
		err  error
	}
	clients := map[string]*http.Client{
		"tlcp-h1": smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false),
		"tls-h2":  tlsClient(t, d.addr, "localhost", true),
	}
	results := make(chan result, len(clients))
	for _, c := range clients {
		go func() {
			resp, err := c.Get("https://localhost/slow")
			if err != nil {
				results <- result{err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{string(body), err}
		}()
	}
	for range clients {
		testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	}
	shut := make(chan error, 1)
	go func() { shut <- d.Shutdown(context.Background()) }()
	// New connections are refused once the listener is closed.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
		if err != nil {
			break
		}
		c.Close()
		if i > 1000 {
			t.Fatal("listener still accepting during shutdown")
		}
		time.Sleep(time.Millisecond)
	}
	close(b.release)
	for range clients {
		r := testpeer.Recv(t, results, "in-flight request's answer")
		if r.err != nil || !strings.HasPrefix(r.body, "path=/slow") {
			t.Errorf("in-flight request: %q, %v", r.body, r.err)
		}
	}
	if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestHandshakeDeadlineAndPolicies: a silent connection is closed after the
// listener's handshake timeout; the 360-pattern hello gets the configured
// answer (handshake_failure alert, or a TLCP ServerHello).
func TestHandshakeDeadlineAndPolicies(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Listeners[0].HandshakeTimeout = 200 * time.Millisecond
	// Leave the main site without an ordinary TLS certificate so that a
	// TLS hello with only TLCP suites is the 360 case.
	cfg.Sites[0].Material.TLS = nil
	cfg.Sites[0].TLS = nil
	d := startDaemon(t, cfg)

	c, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("silent connection: %v, want EOF", err)
	}
	c.Close()

	hello360 := tlsRecordHello([]uint16{0xe053, 0xe013, 0x00ff}, "localhost")
	send := func() []byte {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		c.Write(hello360)
		buf := make([]byte, 16)
		n, _ := io.ReadAtLeast(c, buf, 6)
		return buf[:n]
	}
	got := send()
	if len(got) < 7 || got[0] != 21 || got[6] != 40 {
		t.Errorf("policy reject: got % x, want a handshake_failure alert", got)
	}

	cfg2 := testConfig(t, b.Listener.Addr().String())
	cfg2.Listeners[0].TLCPSuitesInTLSHello = "tlcp"
	cfg2.Sites[0].Material.TLS = nil
	cfg2.Sites[0].TLS = nil
	d.mu.Lock()
	d.cfg = cfg2
	d.mu.Unlock()
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	got = send()
	// A TLCP ServerHello: record 16 01 01, handshake type 2.
	if len(got) < 6 || got[0] != 22 || got[1] != 1 || got[2] != 1 || got[5] != 2 {
		t.Errorf("policy tlcp: got % x, want a TLCP ServerHello", got)
	}
}

// tlsRecordHello builds a TLS-record ClientHello (client_version 03 03)
// offering suites, like the 360 browser's first attempt.
func tlsRecordHello(suites []uint16, sni string) []byte {
	var body []byte
	body = append(body, 3, 3)
	body = append(body, make([]byte, 32)...)
	body = append(body, 0)
	body = append(body, byte(len(suites)*2>>8), byte(len(suites)*2))
	for _, s := range suites {
		body = append(body, byte(s>>8), byte(s))
	}
	body = append(body, 1, 0)
	var ext []byte
	name := []byte(sni)
	ext = append(ext, 0, 0, byte((len(name)+5)>>8), byte(len(name)+5), byte((len(name)+3)>>8), byte(len(name)+3), 0, byte(len(name)>>8), byte(len(name)))
	ext = append(ext, name...)
	body = append(body, byte(len(ext)>>8), byte(len(ext)))
	body = append(body, ext...)
	msg := append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{22, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// TestReloadListeners: a reload can add a listener and remove one; the
// removed one stops accepting.
func TestReloadListeners(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	d := startDaemon(t, cfg)
	first := d.addr
	second := d.addSecondListener(t, b.Listener.Addr().String())
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{first, second} {
		if body, _ := get(t, tlsClient(t, a, "localhost", false), "https://localhost/l"); !strings.HasPrefix(body, "path=/l") {
			t.Errorf("%s: %q", a, body)
		}
	}

	cfg3 := testConfig(t, b.Listener.Addr().String())
	cfg3.Listeners[0].Address = second
	d.mu.Lock()
	d.cfg = cfg3
	d.mu.Unlock()
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if body, _ := get(t, tlsClient(t, second, "localhost", false), "https://localhost/m"); !strings.HasPrefix(body, "path=/m") {
		t.Errorf("remaining listener: %q", body)
	}
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", first, 5*time.Second)
		if err != nil {
			break
		}
		c.Close()
		if i > 1000 {
			t.Fatal("removed listener still accepting")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestShutdownGraceExpires: a request still running when the grace period
// ends is cut, and Shutdown reports that not everything drained.
func TestShutdownGraceExpires(t *testing.T) {
	b := newBackend(t)
	defer close(b.release)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.ShutdownGrace = 200 * time.Millisecond
	d := startDaemon(t, cfg)
	errc := make(chan error, 1)
	go func() {
		_, err := tlsClient(t, d.addr, "localhost", true).Get("https://localhost/slow")
		errc <- err
	}()
	testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	if err := d.Shutdown(context.Background()); err == nil {
		t.Error("Shutdown reported a clean drain with a request still running")
	}
	if err := testpeer.Recv(t, errc, "cut request's error"); err == nil {
		t.Error("the cut request succeeded")
	}
}

// TestReloadKeepsLongRequests: a request running across a reload finishes
// on the old configuration even when it outlasts the grace period (reloads
// never cut requests; only shutdown applies the grace period).
func TestReloadKeepsLongRequests(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.ShutdownGrace = 50 * time.Millisecond
	d := startDaemon(t, cfg)
	type result struct {
		body string
		err  error
	}
	res := make(chan result, 2)
	for _, c := range []*http.Client{smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false), tlsClient(t, d.addr, "localhost", true)} {
		go func() {
			resp, err := c.Get("https://localhost/slow")
			if err != nil {
				res <- result{err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			res <- result{string(body), err}
		}()
	}
	testpeer.Recv(t, b.slowStarted, "first slow request at the backend")
	testpeer.Recv(t, b.slowStarted, "second slow request at the backend")
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // well past the grace period
	close(b.release)
	for i := 0; i < 2; i++ {
		if r := testpeer.Recv(t, res, "request across reload"); r.err != nil || !strings.HasPrefix(r.body, "path=/slow") {
			t.Errorf("request across reload: %q %v", r.body, r.err)
		}
	}
}

// TestShutdownServesHandshakeInFlight: a connection whose TLCP handshake is
// in progress when shutdown starts finishes it and is served: an HTTP/1.1
// request is answered (with Connection: close), a TCP stream site echoes.
// Its handler counts it (in an HTTP server, or in the generation's
// in-flight count) before the servers are stopped (frontdoor
// Conn.Settled). (An h2 connection in the same place is sent GOAWAY at once
// by x/net/http2, which tells its client that no stream was processed.)
func TestShutdownServesHandshakeInFlight(t *testing.T) {
	for _, stream := range []bool{false, true} {
		b := newBackend(t)
		cfg := testConfig(t, b.Listener.Addr().String())
		serverName := "localhost"
		if stream {
			cfg.Sites[1].Routes = nil
			cfg.Sites[1].Stream = &conf.Stream{Target: echoServer(t), IdleTimeout: time.Minute, ConnectTimeout: 5 * time.Second}
			serverName = "x.b.example.cn"
		}
		d := startDaemon(t, cfg)
		raw, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		held := &secondFlightHold{Conn: raw, holding: make(chan struct{}), release: make(chan struct{})}
		p := testPKI(t)
		roots := smx509.NewCertPool()
		roots.AddCert(p.CA.Cert)
		c := tlcp.Client(held, &tlcp.Config{RootCAs: roots, ServerName: serverName, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}})
		hs := make(chan error, 1)
		go func() { hs <- c.Handshake() }()
		testpeer.Recv(t, held.holding, "the client's second flight")
		shut := make(chan error, 1)
		go func() { shut <- d.Shutdown(context.Background()) }()
		for i := 0; ; i++ { // until the listener is closed
			c, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
			if err != nil {
				break
			}
			c.Close()
			if i > 1000 {
				t.Fatal("listener still accepting during shutdown")
			}
			time.Sleep(time.Millisecond)
		}
		close(held.release)
		if err := testpeer.Recv(t, hs, "end of the handshake"); err != nil {
			t.Fatalf("stream=%v: handshake in flight at shutdown: %v", stream, err)
		}
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		if stream {
			msg := "line after shutdown started\n"
			io.WriteString(c, msg)
			buf := make([]byte, len(msg))
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
				t.Fatalf("stream site on a connection handshaken during shutdown: %q %v", buf, err)
			}
			c.Close()
		} else {
			req, _ := http.NewRequest("GET", "https://localhost/inflight", nil)
			if err := req.Write(c); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(c), req)
			if err != nil {
				t.Fatalf("request on a connection handshaken during shutdown: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.HasPrefix(string(body), "path=/inflight") || !res.Close {
				t.Fatalf("answer: %d %q (close %v)", res.StatusCode, body, res.Close)
			}
		}
		if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
			t.Fatalf("stream=%v: shutdown: %v", stream, err)
		}
	}
}

// secondFlightHold holds the client's second write (its ClientKeyExchange
// flight) until release is closed.
type secondFlightHold struct {
	net.Conn
	writes  int
	holding chan struct{}
	release chan struct{}
}

func (h *secondFlightHold) Write(b []byte) (int, error) {
	h.writes++
	if h.writes == 2 {
		close(h.holding)
		<-h.release
	}
	return h.Conn.Write(b)
}

// TestPrepareCommitAbort: Prepare builds a reload and opens its new
// listeners without serving them; Abort closes them and keeps the running
// configuration; Commit serves what Prepare made, once.
func TestPrepareCommitAbort(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	second := d.addSecondListener(t, b.Listener.Addr().String())
	served := func() bool { _, ok := d.Addrs()[second]; return ok }

	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp", second); err == nil {
		ln.Close()
		t.Fatal("Prepare did not open the new listener")
	}
	if served() {
		t.Fatal("a prepared listener is served before Commit")
	}
	d.Abort()
	ln, err := net.Listen("tcp", second)
	if err != nil {
		t.Fatalf("Abort left the new listener open: %v", err)
	}
	ln.Close()
	if served() {
		t.Fatal("served after Abort")
	}

	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if body, _ := get(t, tlsClient(t, second, "localhost", false), "https://localhost/c"); !strings.HasPrefix(body, "path=/c") {
		t.Errorf("after Commit, %s: %q", second, body)
	}
	if err := d.Commit(); err == nil {
		t.Error("a second Commit without Prepare succeeded")
	}
}

// addSecondListener makes the configuration the next reload builds the
// test configuration (to backend) with a second listener on a free port,
// and returns that port's address.
func (d *testDaemon) addSecondListener(t *testing.T, backend string) string {
	t.Helper()
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	second := probe.Addr().String()
	probe.Close()
	cfg := testConfig(t, backend)
	l2 := cfg.Listeners[0]
	l2.Address = second
	cfg.Listeners = append(cfg.Listeners, l2)
	d.setConfig(cfg)
	return second
}

// TestPrepareTwice: a second Prepare replaces the pending one (as its doc
// says): the first still held the new listener's port, so the second
// could not listen on it while it was kept.
func TestPrepareTwice(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	second := d.addSecondListener(t, b.Listener.Addr().String())
	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(); err != nil {
		t.Fatalf("second Prepare: %v, want the pending one replaced", err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if body, _ := get(t, tlsClient(t, second, "localhost", false), "https://localhost/c"); !strings.HasPrefix(body, "path=/c") {
		t.Errorf("after Commit, %s: %q", second, body)
	}
}

// TestCommitAfterReload: a Reload between Prepare and Commit changes the
// listeners Prepare staged against (here it moves the only listener), so
// the prepared generation is dropped: Commit is refused and the Reload's
// configuration stays. Committing the stale staging used to find no
// socket for the listener it kept and dereference nil.
func TestCommitAfterReload(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	if err := d.Prepare(); err != nil { // keeps the running listener
		t.Fatal(err)
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := probe.Addr().String()
	probe.Close()
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Listeners[0].Address = other
	d.setConfig(cfg)
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				d.Daemon.mu.TryLock() // install panicked holding it: released,
				d.Daemon.mu.Unlock()  // so that the test's Close does not hang
				t.Fatalf("Commit after a Reload panicked: %v", r)
			}
		}()
		err = d.Commit()
	}()
	if err == nil {
		t.Fatal("Commit of a generation prepared before a Reload succeeded, want it refused")
	}
	if addrs := d.Addrs(); addrs[other] == "" || len(addrs) != 1 {
		t.Errorf("after the refused Commit the daemon listens on %v, want the Reload's %s only", addrs, other)
	}
}
