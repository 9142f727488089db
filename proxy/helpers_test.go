package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// testLogger discards unless -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// front is a proxy listening on loopback; every accepted connection goes
// through Proxy.ServeConn (optionally wrapped with a handshake state).
type front struct {
	p    *Proxy
	ln   net.Listener
	addr string
	url  string
}

type frontOpts struct {
	state  *frontdoor.ConnState // attach to each conn
	wrap   func(net.Listener) net.Listener
	obs    Observer
	logger *slog.Logger
}

func newFront(t testing.TB, cfg Config, o frontOpts) *front {
	t.Helper()
	obs := o.obs
	if obs == nil {
		obs = NopObserver{}
	}
	logger := o.logger
	if logger == nil {
		logger = testLogger(t)
	}
	p, err := New(cfg, obs, logger)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if o.wrap != nil {
		ln = o.wrap(ln)
	}
	f := &front{p: p, ln: ln, addr: addr, url: "http://" + addr}
	go acceptLoop(ln, func(c net.Conn) {
		if o.state != nil {
			c = frontdoor.NewConn(c, *o.state) // what the daemon hands over
		}
		go p.ServeConn(c)
	})
	t.Cleanup(func() {
		ln.Close()
		p.Close()
	})
	return f
}

// acceptLoop hands every connection accepted on ln to serve until ln is
// closed.
func acceptLoop(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		serve(c)
	}
}

// connBackend listens on loopback until the test ends and serves each
// connection with serve on its own goroutine, closing it after; it
// returns the address.
func connBackend(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, serve)
}

// serveConns serves each connection accepted on ln with serve on its own
// goroutine, closing it after, until the test ends; it returns ln's
// address.
func serveConns(t testing.TB, ln net.Listener, serve func(net.Conn)) string {
	t.Cleanup(func() { ln.Close() })
	go acceptLoop(ln, func(c net.Conn) {
		go func() {
			defer c.Close()
			serve(c)
		}()
	})
	return ln.Addr().String()
}

// serveProxy serves the connections accepted on ln with p (a listener
// that does the client handshake itself, or plain TCP); ln and p are closed
// when the test ends.
func serveProxy(tb testing.TB, p *Proxy, ln net.Listener) {
	tb.Cleanup(func() {
		ln.Close()
		p.Close()
	})
	go acceptLoop(ln, func(c net.Conn) { go p.ServeConn(c) })
}

// frontFor starts a front for cfg and returns it with a client; with h2
// the front serves HTTP/2 (as after ALPN "h2") and the client speaks h2c.
func frontFor(t testing.TB, cfg Config, h2 bool) (*front, *http.Client) {
	if h2 {
		return newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}}), h2cClient(t)
	}
	return newFront(t, cfg, frontOpts{}), testClient(t)
}

// dialWS opens a WebSocket to /ws through f; it is closed when the test
// ends.
func dialWS(t testing.TB, f *front) *websocket.Conn {
	t.Helper()
	ws, err := websocket.Dial("ws://"+f.addr+"/ws", "", "http://"+f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// wsEcho sends msg on ws and fails unless the same message comes back.
func wsEcho(t testing.TB, ws *websocket.Conn, msg string) {
	t.Helper()
	if err := websocket.Message.Send(ws, msg); err != nil {
		t.Fatalf("send: %v", err)
	}
	var got string
	if err := websocket.Message.Receive(ws, &got); err != nil || got != msg {
		t.Fatalf("echo %.40q: got %.40q, %v", msg, got, err)
	}
}

// wsEchoBackend is a WebSocket echo server.
func wsEchoBackend(t testing.TB) *httptest.Server {
	s := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) { io.Copy(ws, ws) }))
	t.Cleanup(s.Close)
	return s
}

// client returns an HTTP/1.1 client with its own pool.
func testClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
}

func get(t testing.TB, c *http.Client, url string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// nameBackend answers with its name in the body and X-Backend.
func nameBackend(t testing.TB, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Backend", name)
		io.WriteString(w, name)
	}))
	t.Cleanup(s.Close)
	return s
}

func addrOf(s *httptest.Server) string { return s.Listener.Addr().String() }

// restartable is a backend that can be stopped and restarted on the same
// address.
type restartable struct {
	t       testing.TB
	addr    string
	handler http.Handler
	mu      sync.Mutex
	srv     *http.Server
}

func newRestartable(t testing.TB, h http.Handler) *restartable {
	r := &restartable{t: t, handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) serve(ln net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv = &http.Server{Handler: r.handler}
	go r.srv.Serve(ln)
}

func (r *restartable) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		r.srv.Close()
		r.srv = nil
	}
}

func (r *restartable) start() {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger briefly
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("restart %s: %v", r.addr, err)
	}
	r.serve(ln)
}

// eventObserver records proxy events.
type eventObserver struct {
	NopObserver
	mu      sync.Mutex
	health  []string
	healthC chan string
	retries int
	done    []RequestEvent
	streams [][2]int64
	streamC chan [2]int64
}

func newEventObserver() *eventObserver {
	return &eventObserver{healthC: make(chan string, 64), streamC: make(chan [2]int64, 16)}
}

// downs returns the health events that marked a target down.
func (o *eventObserver) downs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var d []string
	for _, h := range o.health {
		if strings.HasSuffix(h, " down") {
			d = append(d, h)
		}
	}
	return d
}

func (o *eventObserver) UpstreamHealth(up, target string, healthy bool) {
	s := up + " " + target + " down"
	if healthy {
		s = up + " " + target + " up"
	}
	o.mu.Lock()
	o.health = append(o.health, s)
	o.mu.Unlock()
	select {
	case o.healthC <- s:
	default:
	}
}

func (o *eventObserver) UpstreamRetry(string) {
	o.mu.Lock()
	o.retries++
	o.mu.Unlock()
}

func (o *eventObserver) retryCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retries
}

func (o *eventObserver) RequestDone(ev RequestEvent) {
	o.mu.Lock()
	o.done = append(o.done, ev)
	o.mu.Unlock()
}

func (o *eventObserver) StreamBytes(site, up string, in, out int64) {
	o.mu.Lock()
	o.streams = append(o.streams, [2]int64{in, out})
	o.mu.Unlock()
	select {
	case o.streamC <- [2]int64{in, out}:
	default:
	}
}

// waitStreamTotal waits (bounded) until the StreamBytes reports so far add
// up to want, however the reporting ticker split them.
func (o *eventObserver) waitStreamTotal(t testing.TB, want [2]int64) {
	t.Helper()
	var sum [2]int64
	for i := 0; i < 4000; i++ {
		o.mu.Lock()
		sum = [2]int64{}
		for _, s := range o.streams {
			sum[0] += s[0]
			sum[1] += s[1]
		}
		o.mu.Unlock()
		if sum == want {
			return
		}
		if sum[0] > want[0] || sum[1] > want[1] {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("StreamBytes reports add up to %v, want %v", sum, want)
}

// waitHealth waits (bounded) for a specific health event.
func (o *eventObserver) waitHealth(t testing.TB, want string) {
	t.Helper()
	deadline := time.After(testwait.Bound(20 * time.Second))
	for {
		select {
		case s := <-o.healthC:
			if s == want {
				return
			}
		case <-deadline:
			o.mu.Lock()
			defer o.mu.Unlock()
			t.Fatalf("no health event %q; saw %v", want, o.health)
		}
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer = testpeer.SyncBuffer

func oneSite(routes ...RouteConfig) []SiteConfig {
	return []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Routes: routes}}
}

// proxyTo is one site whose only route goes to the upstream "u" at addr.
func proxyTo(addr string) Config {
	return Config{Upstreams: []UpstreamConfig{upstream("u", addr)}, Sites: oneSite(RouteConfig{Upstream: "u"})}
}

// smProxyTo is one site whose only route re-encrypts with proto ("tlcp" or
// "tls13sm") to the upstream name at addr.
func smProxyTo(name, proto, addr string, tls *UpstreamTLSConfig) Config {
	return Config{
		Upstreams: []UpstreamConfig{{Name: name, Protocol: proto, Targets: []TargetConfig{{Address: addr}}, TLS: tls}},
		Sites:     oneSite(RouteConfig{Upstream: name}),
	}
}

// tlcpClientTLS verifies the backend with the test PKI's CA (as
// "localhost") and authenticates with the TLCP client sign/enc pair.
func tlcpClientTLS(p func(string) string) *UpstreamTLSConfig {
	return &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost",
		SignCert: p("client_sign.crt"), SignKey: p("client_sign.key"), EncCert: p("client_enc.crt"), EncKey: p("client_enc.key")}
}

func upstream(name string, addrs ...string) UpstreamConfig {
	u := UpstreamConfig{Name: name}
	for _, a := range addrs {
		u.Targets = append(u.Targets, TargetConfig{Address: a})
	}
	return u
}

func getenv(k string) string { return os.Getenv(k) }

// runChild reruns one test in a child process with extra environment (for
// settings read at package initialisation, such as GODEBUG=http2xconnect=1).
func runChild(t *testing.T, name string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+name)) {
		t.Fatalf("child %s (%v): %v\n%s", name, env, err, out)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

// dialRaw connects to addr over TCP for a test that writes its own bytes:
// the connection has a 20 s deadline and is closed when the test ends.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	return c
}

// rawExchange writes raw (an HTTP/1.1 request as bytes) on a new
// connection to addr and returns the response with its body read, and the
// connection (closed when the test ends) for what follows.
func rawExchange(t testing.TB, addr, raw string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(res.Body)
	res.Body.Close()
	return res, c, br
}
