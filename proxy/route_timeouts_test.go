package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// TestRouteReadTimeout: a route's own read timeout replaces its
// upstream's for the wait between two reads of a response body: a target
// that pauses four times the upstream's timeout in the middle of a body is
// passed on whole on a route with a longer one or none, and cut on the
// site's other routes. Both for the HTTP/1.1 client's connections and
// http.Transport's.
func TestRouteReadTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"+strings.Repeat("a", 50))
			time.Sleep(4 * timeout)
			if _, err := io.WriteString(c, strings.Repeat("b", 50)); err != nil {
				return
			}
		}
	})
	for _, tc := range h1Clients {
		t.Run(tc.name, func(t *testing.T) {
			f := overridingRoutes(t, addr, func(uc *UpstreamConfig) {
				uc.Transport.ReadTimeout = timeout
				tc.setup(uc)
			}, func(rc *RouteConfig, d time.Duration) { rc.ReadTimeout = d }, 10*timeout)
			for _, path := range []string{"/longer", "/none"} {
				status, body, _ := get(t, testClient(t), f.url+path)
				if status != 200 || len(body) != 100 {
					t.Errorf("%s: status %d, %d bytes; want the whole body past the upstream's read timeout", path, status, len(body))
				}
			}
			expectCut(t, f) // "/": the upstream's timeout
		})
	}
}

// overridingRoutes is a front to the target addr through upstream u,
// which setup sets up, with a route /longer whose own timeout own sets to
// longer, a route /none whose own it sets to -1 (none), and a route for
// every other path with the upstream's.
func overridingRoutes(t *testing.T, addr string, setup func(*UpstreamConfig), own func(*RouteConfig, time.Duration), longer time.Duration) *front {
	cfg := proxyTo(addr)
	setup(&cfg.Upstreams[0])
	l, n := RouteConfig{Path: "/longer", Upstream: "u"}, RouteConfig{Path: "/none", Upstream: "u"}
	own(&l, longer)
	own(&n, -1)
	cfg.Sites = oneSite(l, n, RouteConfig{Upstream: "u"})
	return newFront(t, cfg, frontOpts{})
}

// TestRouteBodyTimeout: a route's own body timeout replaces the
// listener's for the wait between two reads of the client's request
// body: a client that pauses four times the listener's body_timeout gets
// its request through on a route with a longer one or none, and 408 on
// the site's other routes.
func TestRouteBodyTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Path: "/longer", Upstream: "u", BodyTimeout: 10 * timeout},
			RouteConfig{Path: "/none", Upstream: "u", BodyTimeout: -1},
			RouteConfig{Upstream: "u"}),
		Limits: LimitsConfig{BodyTimeout: timeout, RequestBuffer: -1},
	}
	f := newFront(t, cfg, frontOpts{})
	post := func(path string) string {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\nContent-Length: 10\r\n\r\nhello")
		time.Sleep(4 * timeout)
		io.WriteString(c, "world")
		res, _ := io.ReadAll(c)
		return statusOf(string(res))
	}
	for _, path := range []string{"/longer", "/none"} {
		if st := post(path); !strings.Contains(st, " 200 ") {
			t.Errorf("%s: %q; want the body through past the listener's body_timeout", path, st)
		}
	}
	if st := post("/other"); !strings.Contains(st, " 408 ") {
		t.Errorf("/other: %q; want 408 after the listener's body_timeout", st)
	}
}

// lateBackend answers "late" (over HTTP/1.1 or h2c) after the duration
// in the query's d, or nothing when the request ends first.
func lateBackend(t *testing.T) string {
	return h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "late")
	}))
}

// headClients are the upstream clients that wait for a response head:
// h1Clients' and HTTP/2's (h2c).
func headClients() []struct {
	name  string
	setup func(*UpstreamConfig)
} {
	return append(h1Clients[:len(h1Clients):len(h1Clients)], struct {
		name  string
		setup func(*UpstreamConfig)
	}{"h2c", func(uc *UpstreamConfig) { uc.Protocol = upstreamproto.H2C }})
}

// TestRouteResponseHeaderTimeout: a route's own response_header replaces
// its upstream's for the wait for a response head: a target that takes
// three times the upstream's wait to answer is passed on by a route with
// a longer one or none, and answered 504 on the site's other routes. For
// the HTTP/1.1 client's connections (a read deadline, on one pooled
// connection: the route's deadline must not outlive its exchange) and
// net/http's transports, HTTP/1.1 and h2c (headerWatch: the transports
// have none of their own, or it would cut the longer wait).
func TestRouteResponseHeaderTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	addr := lateBackend(t)
	for _, tc := range headClients() {
		t.Run(tc.name, func(t *testing.T) {
			f := overridingRoutes(t, addr, func(uc *UpstreamConfig) {
				uc.Transport.ResponseHeaderTimeout = timeout
				tc.setup(uc)
			}, func(rc *RouteConfig, d time.Duration) { rc.ResponseHeaderTimeout = d }, 10*timeout)
			c := testClient(t)
			// A target that never answers is given up on at the
			// wait, not when it ends the exchange.
			c.Timeout = testwait.Bound(5 * time.Second)
			for _, tr := range []struct {
				path string
				want int
			}{
				{"/longer?d=300ms", 200},
				// 1.2 s: past what is left of /longer's 1 s deadline,
				// which a small body, read whole with its head, would
				// leave on the pooled connection.
				{"/none?d=1200ms", 200},
				{"/other?d=1m", 504},
			} {
				if status, body, _ := get(t, c, f.url+tr.path); status != tr.want || tr.want == 200 && body != "late" {
					t.Errorf("%s: %d %q, want %d", tr.path, status, body, tr.want)
				}
			}
		})
	}
}

// TestResponseHeaderTimeoutPerWrite: through net/http's Transport
// (max_conns), the wait for a response head counts from each write of
// the request, as the Transport's own ResponseHeaderTimeout did: a
// pooled connection the target closes after taking the request without
// an answer, which the Transport sends again on a fresh one, does not
// eat into the second write's wait. Each wait here is under
// response_header, both together over it.
func TestResponseHeaderTimeoutPerWrite(t *testing.T) {
	const timeout, pause = time.Second, 600 * time.Millisecond
	var conns atomic.Int32
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if conns.Add(1) == 1 {
			// The first connection answers one request, then takes
			// the next and closes without a byte.
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			time.Sleep(pause)
			return
		}
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		time.Sleep(pause)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlate")
	})
	cfg := proxyTo(addr)
	cfg.Upstreams[0].Transport.MaxConnsPerTarget = 1
	cfg.Upstreams[0].Transport.ResponseHeaderTimeout = timeout
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	if status, body, _ := get(t, c, f.url+"/a"); status != 200 || body != "first" {
		t.Fatalf("/a: %d %q", status, body)
	}
	if status, body, _ := get(t, c, f.url+"/b"); status != 200 || body != "late" {
		t.Errorf("/b: %d %q, want 200 \"late\" (each write waits response_header)", status, body)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the Transport's retry on a fresh one)", n)
	}
}
