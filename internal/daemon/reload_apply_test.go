package daemon

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/rawsock"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// dialProto dials addr, sends header first (a PROXY header; "" for none)
// and completes a handshake: "tls" (crypto/tls), "tlcp" or "tls13sm", with
// ALPN alpn.
func dialProto(t *testing.T, addr, proto, alpn, header string) (net.Conn, error) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Now().Add(testwait.Bound(60 * time.Second)))
	if header != "" {
		io.WriteString(raw, header)
	}
	p := testPKI(t)
	var c interface {
		net.Conn
		Handshake() error
	}
	switch proto {
	case "tls":
		pool := x509.NewCertPool()
		ca, _ := x509.ParseCertificate(p.ECDSACA.Cert.Raw)
		pool.AddCert(ca)
		c = tls.Client(raw, &tls.Config{ServerName: "localhost", RootCAs: pool, NextProtos: []string{alpn}})
	case "tlcp":
		roots := smx509.NewCertPool()
		roots.AddCert(p.CA.Cert)
		c = tlcp.Client(raw, &tlcp.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{alpn}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}})
	case "tls13sm":
		roots := smx509.NewCertPool()
		roots.AddCert(p.CA.Cert)
		c = tls13sm.Client(raw, &tls13sm.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{alpn}})
	default:
		t.Fatalf("unknown protocol %q", proto)
	}
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

// h1Conn is one kept-alive HTTP/1.1 connection to the daemon.
type h1Conn struct {
	c  net.Conn
	br *bufio.Reader
}

func newH1Conn(t *testing.T, addr, proto, header string) *h1Conn {
	t.Helper()
	c, err := dialProto(t, addr, proto, "http/1.1", header)
	if err != nil {
		t.Fatalf("%s connection: %v", proto, err)
	}
	t.Cleanup(func() { c.Close() })
	return &h1Conn{c: c, br: bufio.NewReader(c)}
}

// do sends GET path with a header of pad bytes and returns the status and
// body.
func (h *h1Conn) do(t *testing.T, path string, pad int) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
	if pad > 0 {
		req.Header.Set("X-Pad", strings.Repeat("p", pad))
	}
	werr := make(chan error, 1)
	go func() { werr <- req.Write(h.c) }() // read at once: a refused request is answered early
	resp, err := http.ReadResponse(h.br, req)
	if err != nil {
		t.Fatalf("GET %s: %v (write: %v)", path, err, testpeer.Recv(t, werr, "request write"))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", path, err)
	}
	testpeer.Recv(t, werr, "request write")
	return resp.StatusCode, string(body)
}

// h2Conn is one HTTP/2 connection to the daemon.
type h2Conn struct{ cc *http2.ClientConn }

func newH2Conn(t *testing.T, addr string) *h2Conn {
	t.Helper()
	c, err := dialProto(t, addr, "tls", "h2", "")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{}).NewClientConn(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &h2Conn{cc}
}

func (h *h2Conn) get(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
	resp, err := h.cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("h2 GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("h2 GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func (d *testDaemon) reloadWith(t *testing.T, cfg *conf.Config) {
	t.Helper()
	d.setConfig(cfg)
	if err := d.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

// TestReloadAppliesHTTPLimits: a reload changes a listener's http limits
// (header size, read-header timeout, h2 max concurrent streams) for new
// connections; connections opened before it keep working under the limits
// they started with.
func TestReloadAppliesHTTPLimits(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	d := startDaemon(t, testConfig(t, addr))
	const big = 16 << 10

	old := newH1Conn(t, d.addr, "tls", "")
	if st, body := old.do(t, "/a", big); st != 200 || !strings.HasPrefix(body, "path=/a") {
		t.Fatalf("before reload, a 16 KiB header: %d %q", st, body)
	}
	oldH2 := newH2Conn(t, d.addr)
	oldH2.get(t, "/h2a")
	oldStreams := oldH2.cc.State().MaxConcurrentStreams
	if oldStreams == 7 {
		t.Fatal("test needs a default other than 7")
	}

	cfg := testConfig(t, addr)
	cfg.Listeners[0].HTTP = conf.HTTPServer{MaxHeaderBytes: 1024, ReadHeaderTimeout: 300 * time.Millisecond, MaxConcurrentStreams: 7}
	d.reloadWith(t, cfg)

	// Header size: refused on a new connection, still fine on the old one.
	if st, _ := newH1Conn(t, d.addr, "tls", "").do(t, "/b", big); st != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("new connection, 16 KiB header after reload: status %d, want 431", st)
	}
	if st, body := old.do(t, "/c", big); st != 200 || !strings.HasPrefix(body, "path=/c") {
		t.Errorf("old connection after reload: %d %q", st, body)
	}

	// Read-header timeout: a new connection that sends nothing is closed
	// by the server (the client's own deadline is 60 s).
	silent := newH1Conn(t, d.addr, "tlcp", "")
	_, err := silent.c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("silent new connection: read %v, want the server to close it", err)
	}
	// The old connection has now been idle longer than the new timeout.
	if st, _ := old.do(t, "/d", 0); st != 200 {
		t.Errorf("old connection after the new read-header timeout: %d", st)
	}

	// h2: the new connection advertises the new stream limit.
	nh2 := newH2Conn(t, d.addr)
	nh2.get(t, "/h2b")
	if got := nh2.cc.State().MaxConcurrentStreams; got != 7 {
		t.Errorf("new h2 connection advertises %d concurrent streams, want 7", got)
	}
	// h2: a 16 KiB header field is refused on the new connection.
	req, _ := http.NewRequest("GET", "https://localhost/h2big", nil)
	req.Header.Set("X-Big", strings.Repeat("b", big))
	if resp, err := nh2.cc.RoundTrip(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("new h2 connection, 16 KiB header after reload: status %d, want 431 or a refused request", resp.StatusCode)
		}
	}
	if body := oldH2.get(t, "/h2c"); !strings.HasPrefix(body, "path=/h2c") {
		t.Errorf("old h2 connection: %q", body)
	}
	if got := oldH2.cc.State().MaxConcurrentStreams; got != oldStreams {
		t.Errorf("old h2 connection's limit changed to %d", got)
	}

	// A reload with the same limits keeps the same servers.
	d.Daemon.mu.Lock()
	l := d.listeners[cfg.Listeners[0].Address]
	d.Daemon.mu.Unlock()
	set := l.http.Load()
	d.reloadWith(t, cfg)
	if l.http.Load() != set {
		t.Error("a reload with unchanged limits replaced the HTTP servers")
	}
	// The old servers are released once their last connection closes.
	if n := len(l.httpSets()); n != 2 {
		t.Errorf("%d HTTP server sets while old connections are open, want 2", n)
	}
	old.c.Close()
	oldH2.cc.Close()
	for i := 0; len(l.httpSets()) != 1; i++ {
		if i > 2000 {
			t.Fatalf("%d HTTP server sets after the old connections closed, want 1", len(l.httpSets()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if l.httpSets()[0] != set {
		t.Error("the current HTTP servers were released")
	}
}

// TestReloadAppliesProxyProtocol: enabling PROXY protocol by reload applies
// to connections accepted afterwards; an established connection keeps
// working (with its own address); disabling it again refuses a header.
func TestReloadAppliesProxyProtocol(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	d := startDaemon(t, testConfig(t, addr))
	const hdr = "PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n"

	old := newH1Conn(t, d.addr, "tls", "")
	if _, body := old.do(t, "/xff", 0); !strings.HasPrefix(body, "xff=127.0.0.1") {
		t.Fatalf("before reload: %q", body)
	}
	if _, err := dialProto(t, d.addr, "tls", "http/1.1", hdr); err == nil {
		t.Fatal("a PROXY header was accepted with proxy_protocol off")
	}

	cfg := testConfig(t, addr)
	cfg.Listeners[0].ProxyProtocol = conf.ProxyProtocol{Enabled: true, Trusted: []string{"127.0.0.1/32"}}
	d.reloadWith(t, cfg)
	pp := newH1Conn(t, d.addr, "tlcp", hdr)
	if _, body := pp.do(t, "/xff", 0); body != "xff=203.0.113.7\n" {
		t.Errorf("new connection with a PROXY header after reload: %q", body)
	}
	if _, body := old.do(t, "/xff", 0); !strings.HasPrefix(body, "xff=127.0.0.1") {
		t.Errorf("old connection after reload: %q", body)
	}

	d.reloadWith(t, testConfig(t, addr))
	if _, err := dialProto(t, d.addr, "tls", "http/1.1", hdr); err == nil {
		t.Error("a PROXY header was accepted after proxy_protocol was turned off")
	}
	if _, body := pp.do(t, "/xff", 0); body != "xff=203.0.113.7\n" {
		t.Errorf("connection accepted with a PROXY header, after turning it off: %q", body)
	}

	bad := testConfig(t, addr)
	bad.Listeners[0].ProxyProtocol = conf.ProxyProtocol{Enabled: true, Trusted: []string{"not-an-ip"}}
	d.setConfig(bad)
	if err := d.Reload(); err == nil {
		t.Error("a reload with an invalid trusted source succeeded")
	}
	if _, body := newH1Conn(t, d.addr, "tls", "").do(t, "/xff", 0); !strings.HasPrefix(body, "xff=127.0.0.1") {
		t.Errorf("after a refused reload: %q", body)
	}
}

// TestReloadAppliesOffloadPool: changing offload.workers by reload gives new
// handshakes a new engine; the old engine stops once the handshakes that
// could still use it are over; established connections keep working.
func TestReloadAppliesOffloadPool(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	mk := func(workers int) *conf.Config {
		cfg := testConfig(t, addr)
		cfg.Offload = conf.Offload{Workers: workers, Queue: 64}
		cfg.Listeners[0].HandshakeTimeout = time.Second
		return cfg
	}
	d := startDaemon(t, mk(1))
	first := d.env.CurrentOffload()
	if first == nil || first.Workers() != 1 || first.QueueCap() != 64 {
		t.Fatalf("first engine: %+v", first)
	}
	old := newH1Conn(t, d.addr, "tlcp", "")
	if st, _ := old.do(t, "/a", 0); st != 200 {
		t.Fatalf("before reload: %d", st)
	}

	d.reloadWith(t, mk(1))
	if d.env.CurrentOffload() != first {
		t.Fatal("a reload with the same offload settings replaced the engine")
	}
	d.reloadWith(t, mk(3))
	second := d.env.CurrentOffload()
	if second == first || second.Workers() != 3 {
		t.Fatalf("after reload: engine %p (was %p), %d workers", second, first, second.Workers())
	}
	key := testPKI(t).ServerSign.Key.(*sm2.PrivateKey)
	probe := func(o *keyoffload.Engine) error {
		digest := make([]byte, 32)
		_, err := o.Wrap(key, frontdoor.FamilyTLCP).Sign(rand.Reader, digest, nil)
		return err
	}
	// The old engine drains and stops (after the old handshake deadline).
	for i := 0; ; i++ {
		if err := probe(first); errors.Is(err, keyoffload.ErrClosed) {
			break
		}
		if i > 2000 {
			t.Fatal("the old engine is still running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := probe(second); err != nil {
		t.Fatalf("new engine: %v", err)
	}
	// New handshakes of every SM protocol use the new engine.
	for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
		if st, _ := newH1Conn(t, d.addr, proto, "").do(t, "/new", 0); st != 200 {
			t.Errorf("%s: new connection after the old engine stopped: %d", proto, st)
		}
	}
	if st, _ := old.do(t, "/b", 0); st != 200 {
		t.Errorf("old connection: %d", st)
	}
}

// ticketObs counts session events by family and kind.
type ticketObs struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *ticketObs) add(k string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[k]++
}

func (o *ticketObs) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[k]
}

func (o *ticketObs) SessionLookup(f string, hit bool)     { o.add(f + " lookup") }
func (o *ticketObs) SessionCacheSize(string, int, uint64) {}
func (o *ticketObs) TicketIssued(f string)                { o.add(f + " issued") }
func (o *ticketObs) TicketAccepted(f string)              { o.add(f + " accepted") }
func (o *ticketObs) TicketRejected(f string)              { o.add(f + " rejected") }
func (o *ticketObs) wait(t *testing.T, k string, min int) {
	t.Helper()
	for i := 0; o.get(k) < min; i++ {
		if i > 2000 {
			t.Fatalf("%q: %d events, want at least %d", k, o.get(k), min)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTLS13SMTicketEvents: the TLS 1.3-SM ticket events (tls13sm
// Config.OnTicket) reach the daemon's SessionObserver as family tls13sm:
// issued after a full handshake, accepted on resumption, rejected when the
// ticket was sealed with another key.
func TestTLS13SMTicketEvents(t *testing.T) {
	b := newBackend(t)
	var obs [2]*ticketObs
	var addrs [2]string
	for i := range obs {
		key := make([]byte, 32)
		rand.Read(key)
		keys, err := ticket.ParseKeyFile(key, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.Tickets = true
		cfg.Sessions.TicketKeyFile = "ticket.key" // the keys below were read from it
		cfg.TicketKeys = keys
		obs[i] = &ticketObs{}
		addrs[i] = startDaemon(t, cfg, func(e *Env) { e.Sessions = obs[i] }).addr
	}
	conn := tls13smResumer(t)
	if fetchOver(t, addrs[0], conn) {
		t.Fatal("first connection resumed")
	}
	obs[0].wait(t, "tls13sm issued", 1)
	if !fetchOver(t, addrs[0], conn) {
		t.Fatal("second connection did not resume")
	}
	obs[0].wait(t, "tls13sm accepted", 1)
	// The other daemon has another ticket key: the ticket is rejected and
	// a full handshake follows.
	if fetchOver(t, addrs[1], conn) {
		t.Fatal("a ticket sealed with another key was accepted")
	}
	obs[1].wait(t, "tls13sm rejected", 1)
	if n := obs[0].get("tls13sm rejected"); n != 0 {
		t.Errorf("the first daemon rejected %d tickets", n)
	}
	if n := obs[1].get("tls13sm accepted"); n != 0 {
		t.Errorf("the second daemon accepted %d tickets", n)
	}
	for _, o := range obs {
		if n := o.get("tlcp issued") + o.get("tls issued"); n != 0 {
			t.Errorf("tickets reported under another family: %v", o.n)
		}
	}
}

// TestReloadListenFailureKeepsRunning: a reload whose new listener cannot
// be opened (address in use) changes nothing: the running configuration
// keeps serving, with its own limits.
func TestReloadListenFailureKeepsRunning(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	d := startDaemon(t, testConfig(t, addr))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := testConfig(t, addr)
	cfg.Listeners[0].HTTP.MaxHeaderBytes = 1024
	l2 := cfg.Listeners[0]
	l2.Address = busy.Addr().String()
	cfg.Listeners = append(cfg.Listeners, l2)
	cfg.Sites[1].Routes[0].Respond.Body = "other site v2\n"
	d.setConfig(cfg)
	if err := d.Reload(); err == nil {
		t.Fatal("reload with a busy address succeeded")
	}
	if st, body := newH1Conn(t, d.addr, "tls", "").do(t, "/still", 16<<10); st != 200 || !strings.HasPrefix(body, "path=/still") {
		t.Errorf("after a failed reload: %d %q", st, body)
	}
	if body, _ := get(t, tlsClient(t, d.addr, "x.b.example.cn", false), "https://x.b.example.cn/"); body != "other site\n" {
		t.Errorf("the failed reload's configuration is partly in force: %q", body)
	}
}

// TestRefusedReloadKeepsTargetHealth: a target the running proxy marked
// down stays down over a refused reload (its apply failed: a busy address)
// and the good reload after it, which inherits health from the proxy that
// was serving, not from the refused generation's.
func TestRefusedReloadKeepsTargetHealth(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }))
	defer bad.Close()
	cfg := testConfig(t, bad.Listener.Addr().String())
	cfg.Upstreams[0].HealthChecks.Passive = conf.PassiveHealth{MaxFails: 1, FailWindow: time.Minute, CoolDown: 10 * time.Minute, UnhealthyStatus: []int{502}}
	d := startDaemon(t, cfg)
	running := d.Daemon.gen.Proxy
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	refused := *cfg
	refused.Listeners = append(append([]conf.Listener{}, cfg.Listeners...), cfg.Listeners[0])
	refused.Listeners[1].Address = busy.Addr().String()
	d.setConfig(&refused)
	if err := d.Reload(); err == nil {
		t.Fatal("reload onto a busy address succeeded")
	}
	d.env.mu.Lock()
	cur := d.env.proxy
	d.env.mu.Unlock()
	if cur != running || d.Daemon.gen.Proxy != running {
		t.Fatalf("after a refused reload the proxy builds inherit from is %p, the serving one %p", cur, running)
	}
	c := tlsClient(t, d.addr, "localhost", false)
	for range 2 {
		if res, err := c.Get("https://localhost/x"); err == nil {
			res.Body.Close()
		}
	}
	if running.Upstream("app").Targets()[0].Healthy() {
		t.Fatal("the 502s did not mark the target down")
	}
	d.setConfig(cfg)
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if d.Daemon.gen.Proxy.Upstream("app").Targets()[0].Healthy() {
		t.Error("a target down before the reloads is up after them (health inherited from the refused generation)")
	}
}

// TestReloadAppliesTicketRotation: a reload that changes
// sessions.ticket_rotation starts a new in-memory ticket key at once, and
// tickets sealed before the reload still resume.
func TestReloadAppliesTicketRotation(t *testing.T) {
	b := newBackend(t)
	mk := func(rot time.Duration) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.Tickets = true
		cfg.Sessions.TicketRotation = rot
		return cfg
	}
	d := startDaemon(t, mk(time.Hour))
	conn := tls13smResumer(t)
	keyName := func() [16]byte {
		src, err := d.env.TicketKeys(mk(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return src.TicketKeys()[0].Name
	}
	if fetchOver(t, d.addr, conn) {
		t.Fatal("first connection resumed")
	}
	before := keyName()
	d.reloadWith(t, mk(time.Hour))
	if keyName() != before {
		t.Fatal("a reload without a rotation change replaced the ticket key")
	}
	d.reloadWith(t, mk(2*time.Hour))
	src, _ := d.env.TicketKeys(mk(2 * time.Hour))
	if keys := src.TicketKeys(); keys[0].Name == before || len(keys) < 2 {
		t.Fatalf("after a rotation change: %d keys, newest unchanged: %v", len(keys), keys[0].Name == before)
	}
	if !fetchOver(t, d.addr, conn) {
		t.Error("a ticket sealed before the rotation change did not resume")
	}
	if !fetchOver(t, d.addr, conn) {
		t.Error("a ticket sealed after the rotation change did not resume")
	}
}

// TestReloadAppliesDeferAccept: the listening socket gets defer_accept
// when it opens, and a reload changes it on the same socket (off, then
// on again).
func TestReloadAppliesDeferAccept(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_DEFER_ACCEPT is Linux's")
	}
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	with := func(d time.Duration) *conf.Config {
		cfg := testConfig(t, addr)
		cfg.Listeners[0].DeferAccept = d
		return cfg
	}
	d := startDaemon(t, with(3*time.Second))
	socket := func() net.Listener {
		d.Daemon.mu.Lock()
		defer d.Daemon.mu.Unlock()
		return d.Daemon.listeners[d.cfg.Listeners[0].Address].ln.Listener
	}
	first := socket()
	check := func(when string, want time.Duration) {
		t.Helper()
		ln := socket()
		if ln != first {
			t.Fatalf("%s: the listening socket was replaced", when)
		}
		if got, err := rawsock.DeferAccept(ln); err != nil || got != want {
			t.Fatalf("%s: TCP_DEFER_ACCEPT = %v, %v; want %v", when, got, err, want)
		}
	}
	check("at start", 3*time.Second)
	d.reloadWith(t, with(0))
	check("after a reload turning it off", 0)
	d.reloadWith(t, with(time.Second))
	check("after a reload turning it on", time.Second)
	if _, body := newH1Conn(t, d.addr, "tlcp", "").do(t, "/", 0); body == "" {
		t.Error("no response with defer_accept on")
	}
}
