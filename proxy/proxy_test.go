package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/net/http2"
	"golang.org/x/net/websocket"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

func TestShutdownDrainsInFlight(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		entered := make(chan struct{}, 1)
		release := make(chan struct{})
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			io.WriteString(w, "finished")
		}))
		cfg := proxyTo(addrOf(b))
		f, c := frontFor(t, cfg, h2)
		type result struct {
			code int
			body string
		}
		done := make(chan result)
		go func() {
			res, err := c.Get(f.url + "/slow")
			if err != nil {
				done <- result{0, err.Error()}
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			done <- result{res.StatusCode, string(body)}
		}()
		testpeer.Recv(t, entered, "request at the backend")
		shut := make(chan error)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- f.p.Shutdown(ctx)
		}()
		// New connections are refused once shutdown started.
		for i := 0; i < 200; i++ {
			a, bb := net.Pipe()
			a.Close() // ServeHTTP1 blocks while the connection lasts
			err := f.p.ServeHTTP1(a)
			bb.Close()
			if err != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		r := testpeer.Recv(t, done, "in-flight request")
		if r.code != 200 || r.body != "finished" {
			t.Fatalf("h2=%v: in-flight request during shutdown: %d %q", h2, r.code, r.body)
		}
		if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
			t.Fatalf("h2=%v: Shutdown: %v", h2, err)
		}
		if err := f.p.ServeHTTP1(nopConn{}); err == nil {
			t.Fatalf("h2=%v: connection accepted after shutdown", h2)
		}
		b.Close()
	}
}

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

func TestCloseCutsTunnels(t *testing.T) {
	backend := wsEchoBackend(t)
	cfg := proxyTo(addrOf(backend))
	f := newFront(t, cfg, frontOpts{})
	ws := dialWS(t, f)
	wsEcho(t, ws, "ping")
	// Shutdown with an expired context leaves the tunnel up (reload must
	// not cut tunnels) ...
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.p.Shutdown(ctx)
	wsEcho(t, ws, "still there") // the tunnel is not cut by Shutdown
	// ... Close cuts it.
	f.p.Close()
	ws.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	var s string
	if err := websocket.Message.Receive(ws, &s); err == nil {
		t.Fatal("tunnel survived Close")
	}
}

func TestClientLimits(t *testing.T) {
	b := nameBackend(t, "b")
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", addrOf(b))},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
		Limits:    LimitsConfig{MaxHeaderBytes: 4 << 10, ReadHeaderTimeout: 300 * time.Millisecond},
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	if code, _, _ := get(t, c, f.url+"/", "X-Big", strings.Repeat("a", 16<<10)); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB header with a 4 KiB limit (net/http adds 4 KiB slack): %d, want 431", code)
	}
	if code, _, _ := get(t, c, f.url+"/", "X-Small", "a"); code != 200 {
		t.Errorf("small header: %d", code)
	}
	// A client that never finishes its headers is cut by ReadHeaderTimeout.
	conn, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n"))
	conn.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("slow headers: %v, want the proxy to close", err)
	}
}

// TestTLCPFrontWebSocket runs a real TLCP listener in front of the proxy
// (as the daemon does after the handshake) and echoes over a WebSocket.
func TestTLCPFrontWebSocket(t *testing.T) {
	p := func(n string) string { return pkiPath(t, n) }
	serverCert, err := tlcp.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), p("server_enc.crt"), p("server_enc.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	backend := wsEchoBackend(t)
	px, err := New(proxyTo(addrOf(backend)), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{Certificates: []tlcp.Certificate{serverCert}})
	if err != nil {
		px.Close()
		t.Fatal(err)
	}
	serveProxy(t, px, ln)
	pool := smx509.NewCertPool()
	caPEM, _ := readFile(p("ca.crt"))
	pool.AppendCertsFromPEM(caPEM)
	tc, err := tlcp.Dial("tcp", ln.Addr().String(), &tlcp.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	wcfg, _ := websocket.NewConfig("wss://localhost/ws", "https://localhost")
	ws, err := websocket.NewClient(wcfg, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for i := range 3 {
		wsEcho(t, ws, strings.Repeat("tlcp ", i*100+1))
	}
}

func TestH2MaxConcurrentStreamsAdvertised(t *testing.T) {
	cfg := Config{Sites: oneSite(RouteConfig{Respond: &RespondConfig{}}), Limits: LimitsConfig{MaxConcurrentStreams: 7}}
	px, err := New(cfg, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	srv, cli := net.Pipe()
	defer cli.Close()
	go px.ServeHTTP2(srv)
	cli.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	go func() {
		io.WriteString(cli, http2.ClientPreface)
		http2.NewFramer(cli, nil).WriteSettings()
	}()
	f, err := http2.NewFramer(nil, cli).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 7 {
		t.Fatalf("MAX_CONCURRENT_STREAMS %d (%v), want 7", v, ok)
	}
}

// TestShutdownWaitsForUpgradeInFlight: a WebSocket upgrade that the
// backend answers after Shutdown started becomes a tunnel that Shutdown
// waits for. The HTTP/1.1 server stops counting the connection when the
// handler hijacks it, so the tunnel must be counted before that; counted
// after, Shutdown finds nothing to wait for in between and closes the
// upstreams and the access log under a live tunnel. The front holds the
// 101's write (inside that window) until Shutdown returns or 100 ms pass.
func TestShutdownWaitsForUpgradeInFlight(t *testing.T) {
	for round := range 3 {
		entered := make(chan struct{}, 1)
		release := make(chan struct{})
		echo := websocket.Handler(func(ws *websocket.Conn) { io.Copy(ws, ws) })
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			echo.ServeHTTP(w, r)
		}))
		returned := make(chan struct{})
		hold := func(ln net.Listener) net.Listener { return holdListener{ln, returned} }
		f := newFront(t, proxyTo(addrOf(b)), frontOpts{wrap: hold})
		dialed := make(chan *websocket.Conn, 1)
		go func() {
			ws, err := websocket.Dial("ws://"+f.addr+"/ws", "", "http://"+f.addr)
			if err != nil {
				t.Errorf("round %d: dial during shutdown: %v", round, err)
			}
			dialed <- ws
		}()
		testpeer.Recv(t, entered, "upgrade at the backend")
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- f.p.Shutdown(ctx)
			close(returned)
		}()
		for i := 0; i < 200; i++ { // until Shutdown refuses new connections
			a, bb := net.Pipe()
			a.Close()
			err := f.p.ServeHTTP1(a)
			bb.Close()
			if err != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		ws := testpeer.Recv(t, dialed, "101 through the proxy")
		if ws == nil {
			t.FailNow()
		}
		wsEcho(t, ws, "during shutdown")
		select {
		case err := <-shut:
			t.Fatalf("round %d: Shutdown returned (%v) with a tunnel open", round, err)
		default:
		}
		ws.Close()
		if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		b.Close()
	}
}

// holdListener's connections hold a write of a 101 response until
// returned is closed or 100 ms pass.
type holdListener struct {
	net.Listener
	returned chan struct{}
}

func (l holdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return holdConn{c, l.returned}, nil
}

type holdConn struct {
	net.Conn
	returned chan struct{}
}

func (c holdConn) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("HTTP/1.1 101 ")) {
		select {
		case <-c.returned:
		case <-time.After(100 * time.Millisecond):
		}
	}
	return c.Conn.Write(b)
}

// tunnelEnd stands for a tracked tunnel end: Close cuts it, and its owner
// then calls trackDone, as pipe's callers do.
type tunnelEnd struct {
	p   *Proxy
	cut chan struct{}
}

func newTunnelEnd(p *Proxy) *tunnelEnd { return &tunnelEnd{p: p, cut: make(chan struct{})} }

func (e *tunnelEnd) Close() error {
	close(e.cut)
	go e.p.trackDone(e)
	return nil
}

// TestShutdownTracking: Shutdown waits for what is tracked and still takes
// tunnels of requests in flight; once it found nothing left nothing new is
// taken (its upstreams and log are closed); Close during a Shutdown cuts
// what is tracked and lets Shutdown return.
func TestShutdownTracking(t *testing.T) {
	p, err := New(proxyTo("127.0.0.1:1"), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown with nothing tracked: %v", err)
	}
	if p.trackAdd(newTunnelEnd(p)) {
		t.Fatal("a tunnel was taken after Shutdown reported it drained")
	}

	p, err = New(proxyTo("127.0.0.1:1"), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	first, second := newTunnelEnd(p), newTunnelEnd(p)
	if !p.trackAdd(first) {
		t.Fatal("trackAdd refused before any Shutdown")
	}
	shut := make(chan error, 1)
	go func() { shut <- p.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a tunnel tracked", err)
	case <-time.After(50 * time.Millisecond):
	}
	if !p.trackAdd(second) {
		t.Fatal("a Shutdown still waiting refused a new tunnel of a request in flight")
	}
	p.trackDone(newTunnelEnd(p)) // never tracked: changes nothing
	p.Close()
	testpeer.Recv(t, first.cut, "Close cutting the first tunnel")
	testpeer.Recv(t, second.cut, "Close cutting the second tunnel")
	if err := testpeer.Recv(t, shut, "end of Shutdown after Close"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if p.trackAdd(newTunnelEnd(p)) {
		t.Fatal("a tunnel was taken after Close")
	}
}

// TestUpgrade101WriteFails: when the 101 cannot be written to the client,
// no tunnel is made: the backend's upgraded connection is closed at once
// rather than left spliced to a client that never saw the switch (which,
// with no idle timeout on WebSocket tunnels, would hold both ends open).
func TestUpgrade101WriteFails(t *testing.T) {
	backEnd := make(chan error, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			backEnd <- err
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		conn.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		_, err = conn.Read(make([]byte, 1))
		backEnd <- err
	}))
	defer b.Close()
	fail := func(ln net.Listener) net.Listener { return fail101Listener{ln} }
	f := newFront(t, proxyTo(addrOf(b)), frontOpts{wrap: fail})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	err = testpeer.Recv(t, backEnd, "the backend's upgraded connection ending")
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the backend's upgraded connection stayed open after the 101 could not be written")
	}
	if err != io.EOF {
		t.Fatalf("backend read: %v, want EOF", err)
	}
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if n, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("client: %v after %d bytes, want the connection closed", err, n)
	}
}

// fail101Listener's connections fail every write of a 101 response.
type fail101Listener struct{ net.Listener }

func (l fail101Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return fail101Conn{c}, nil
}

type fail101Conn struct{ net.Conn }

func (c fail101Conn) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("HTTP/1.1 101 ")) {
		return 0, errors.New("test: write of the 101 fails")
	}
	return c.Conn.Write(b)
}
