package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

func protoBackend(t *testing.T, newConns *atomic.Int64) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew && newConns != nil {
			newConns.Add(1)
		}
	}
	return s
}

func caFile(t *testing.T, s *httptest.Server) string {
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBackendProtocols(t *testing.T) {
	h1 := protoBackend(t, nil)
	h1.Start()
	t.Cleanup(h1.Close)

	h2c := protoBackend(t, nil)
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	t.Cleanup(h2c.Close)

	h2tls := protoBackend(t, nil)
	h2tls.EnableHTTP2 = true
	h2tls.StartTLS()
	t.Cleanup(h2tls.Close)

	var hookCalls atomic.Int64
	cfg := Config{
		Upstreams: []UpstreamConfig{
			{Name: "h1", Targets: []TargetConfig{{Address: addrOf(h1)}}},
			{Name: "h2c", Protocol: "h2c", Targets: []TargetConfig{{Address: addrOf(h2c)}}},
			{Name: "h2", Protocol: upstreamproto.H2, Targets: []TargetConfig{{Address: addrOf(h2tls)}},
				TLS: &UpstreamTLSConfig{CA: caFile(t, h2tls), ServerName: "example.com"}},
			{Name: "hook", Protocol: upstreamproto.H2, Targets: []TargetConfig{{Address: addrOf(h2tls)}},
				DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					hookCalls.Add(1)
					d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}
					return d.DialContext(ctx, network, addr)
				}},
		},
		Sites: oneSite(
			RouteConfig{PathPrefix: "/h1", Upstream: "h1"},
			RouteConfig{PathPrefix: "/h2c", Upstream: "h2c"},
			RouteConfig{PathPrefix: "/h2", Upstream: "h2"},
			RouteConfig{PathPrefix: "/hook", Upstream: "hook"},
		),
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for path, want := range map[string]string{"/h1": "HTTP/1.1", "/h2c": "HTTP/2.0", "/h2": "HTTP/2.0", "/hook": "HTTP/1.1"} {
		code, body, _ := get(t, c, f.url+path)
		if code != 200 || body != want {
			t.Errorf("%s: %d %q, want %s", path, code, body, want)
		}
	}
	// The hook returns a *tls.Conn without ALPN h2: HTTP/1.1 over the
	// caller's encryption, the shape TLCP backends use.
	if hookCalls.Load() != 1 {
		t.Errorf("DialTLSContext hook called %d times, want 1", hookCalls.Load())
	}
	// Bad CA: the handshake fails as a dial error, 502.
	cfg2 := Config{
		Upstreams: []UpstreamConfig{{Name: "h2", Protocol: upstreamproto.H2, Targets: []TargetConfig{{Address: addrOf(h2tls)}}, TLS: &UpstreamTLSConfig{ServerName: "example.com"}}},
		Sites:     oneSite(RouteConfig{Upstream: "h2"}),
	}
	f2 := newFront(t, cfg2, frontOpts{})
	if code, body, _ := get(t, c, f2.url+"/"); code != 502 {
		t.Errorf("unverifiable backend: %d %q", code, body)
	}
}

func TestKeepAlivePoolReuseAndIdleTimeout(t *testing.T) {
	for _, idle := range []time.Duration{0, 50 * time.Millisecond} {
		var newConns atomic.Int64
		b := protoBackend(t, &newConns)
		b.Start()
		t.Cleanup(b.Close)
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addrOf(b)}}, Transport: TransportConfig{IdleTimeout: idle}}},
			Sites:     oneSite(RouteConfig{Upstream: "u"}),
		}
		f := newFront(t, cfg, frontOpts{})
		c := testClient(t)
		if idle == 0 { // default idle timeout (90 s): one connection for all
			for range 20 {
				get(t, c, f.url+"/")
			}
			if n := newConns.Load(); n != 1 {
				// copyBody reads the backend's EOF before the last byte
				// reaches the client, so the pooled connection is free in time.
				t.Fatalf("20 sequential requests used %d backend connections, want 1", n)
			}
			continue
		}
		// After the idle timeout the pooled connection is closed; the next
		// request dials again.
		get(t, c, f.url+"/")
		for i := 0; i < 100 && newConns.Load() == 1; i++ {
			time.Sleep(100 * time.Millisecond)
			get(t, c, f.url+"/")
		}
		if newConns.Load() < 2 {
			t.Fatal("idle pooled connection never closed")
		}
	}
}

func TestMaxConnsPerTarget(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	t.Cleanup(b.Close)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addrOf(b)}}, Transport: TransportConfig{MaxConnsPerTarget: 1}}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	done := make(chan int)
	go func() {
		code, _, _ := get(t, c, f.url+"/")
		done <- code
	}()
	testpeer.Recv(t, entered, "request at the backend")
	if code, _, _ := get(t, c, f.url+"/"); code != 503 {
		t.Errorf("second concurrent request: %d, want 503 (target at max conns)", code)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Errorf("first request: %d", code)
	}
}

// TestTLSUpstreamUpgradeOverHTTP1: to a tls upstream whose target speaks
// HTTP/2 (ALPN), plain requests go over HTTP/2, and a WebSocket upgrade,
// which needs HTTP/1.1, gets a connection that offers only http/1.1 and
// switches: the proxy makes the Transport's TLS connections itself
// (alpnDialer), so the Transport cannot drop h2 from the offer for it.
func TestTLSUpstreamUpgradeOverHTTP1(t *testing.T) {
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			io.WriteString(w, r.Proto)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + websocketAccept(r.Header.Get("Sec-Websocket-Key")) + "\r\n\r\nbye")
		brw.Flush()
	}))
	backend.EnableHTTP2 = true
	backend.StartTLS()
	t.Cleanup(backend.Close)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "t", Protocol: upstreamproto.TLS, Targets: []TargetConfig{{Address: addrOf(backend)}},
			TLS: &UpstreamTLSConfig{CA: caFile(t, backend), ServerName: "example.com"}}},
		Sites: oneSite(RouteConfig{Upstream: "t"}),
	}
	f := newFront(t, cfg, frontOpts{})
	if code, body, _ := get(t, testClient(t), f.url+"/"); code != 200 || body != "HTTP/2.0" {
		t.Errorf("plain request: %d %q; want 200 over HTTP/2.0", code, body)
	}
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 101 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("WebSocket upgrade to a tls upstream that speaks h2: status %d (%q); want 101", res.StatusCode, b)
	}
	if got, _ := io.ReadAll(br); string(got) != "bye" {
		t.Errorf("tunnel data %q; want \"bye\"", got)
	}
}

// TestDialTLSHookKeepsHTTP2: a DialTLSContext hook's *tls.Conn that
// negotiated ALPN h2 is spoken HTTP/2 to: the write_timeout wrapper, which
// hides the connection's ConnectionState from net/http's Transport, is not
// put on a tls or h2 hook's connection (it was: every request 502).
func TestDialTLSHookKeepsHTTP2(t *testing.T) {
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	be.EnableHTTP2 = true
	be.StartTLS()
	t.Cleanup(be.Close)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "hook", Protocol: upstreamproto.H2, Targets: []TargetConfig{{Address: addrOf(be)}},
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}}
				return d.DialContext(ctx, network, addr)
			}}},
		Sites: oneSite(RouteConfig{Upstream: "hook"}),
	}
	f := newFront(t, cfg, frontOpts{})
	code, body, _ := get(t, testClient(t), f.url+"/")
	if code != 200 || body != "HTTP/2.0" {
		t.Fatalf("h2 upstream through a DialTLSContext hook whose *tls.Conn negotiated ALPN h2: got %d %q; want 200 \"HTTP/2.0\" (the sendTimedConn wrapper hides the connection's ConnectionState, so the Transport speaks HTTP/1.1 on an h2 connection)", code, body)
	}
}

// TestUpstreamTLSSessionsResumed: new connections to a tls target resume
// the session of an earlier one (nginx's proxy_ssl_session_reuse, on by
// default), so that a target that closes its connections costs a full
// handshake once, not on every request.
func TestUpstreamTLSSessionsResumed(t *testing.T) {
	var resumed, handshakes atomic.Int32
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // a new connection for each request
		io.WriteString(w, "ok")
	}))
	be.TLS = &tls.Config{VerifyConnection: func(cs tls.ConnectionState) error {
		handshakes.Add(1)
		if cs.DidResume {
			resumed.Add(1)
		}
		return nil
	}}
	be.StartTLS()
	t.Cleanup(be.Close)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "t", Protocol: upstreamproto.TLS, Targets: []TargetConfig{{Address: addrOf(be)}},
			TLS: &UpstreamTLSConfig{CA: caFile(t, be), ServerName: "example.com"}}},
		Sites: oneSite(RouteConfig{Upstream: "t"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for i := 0; i < 3; i++ {
		if code, body, _ := get(t, testClient(t), f.url+"/"); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if h, r := handshakes.Load(), resumed.Load(); h < 3 || r < 2 {
		t.Errorf("%d handshakes with the target, %d resumed; want 3 and at least the last 2", h, r)
	}
}

// TestTLSDialersSessionsPerTarget: an upstream of protocol tls with
// tls.server_name and two targets that share no session state (their own
// ticket keys), and a target name resolving to those two addresses,
// dialed in turn by the Transport's dialer (alpnDialer) and stream
// mode's (tlsDialer). Each address keeps its own sessions, so that every
// connection after the first to an address resumes; crypto/tls keys its
// cache by server name, which the targets share, and each dial offered
// the other target's session and fell back to a full handshake, every
// time.
func TestTLSDialersSessionsPerTarget(t *testing.T) {
	ca := httptest.NewTLSServer(http.NotFoundHandler())
	defer ca.Close()
	target := func(secret byte) string {
		cfg := &tls.Config{Certificates: ca.TLS.Certificates}
		cfg.SetSessionTicketKeys([][32]byte{{secret}})
		return testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tls.Server(c, cfg) })
	}
	resumed := func(c net.Conn) bool {
		if sc, ok := c.(*scanConn); ok {
			c = sc.Conn
		}
		return c.(*tls.Conn).ConnectionState().DidResume
	}
	for _, byName := range []bool{false, true} {
		for _, mode := range []string{"transport", "stream"} {
			t.Run(mode+map[bool]string{false: "", true: "/by-name"}[byName], func(t *testing.T) {
				a, b := target(1), target(2)
				uc := &UpstreamConfig{Name: "t", Protocol: upstreamproto.TLS, TLS: &UpstreamTLSConfig{
					RootCAs: ca.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}}
				tr, _, dial, err := newTransport(uc, nil)
				if err != nil {
					t.Fatal(err)
				}
				if mode == "transport" {
					dial = tr.DialTLSContext
				}
				if byName {
					direct := dial
					dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
						return direct(context.WithValue(ctx, dialTo{}, addr), network, "app.test:443")
					}
				}
				testpeer.DialInTurn(t, dial, a, b, resumed)
			})
		}
	}
}
