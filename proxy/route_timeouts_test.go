package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
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
			cfg := proxyTo(addr)
			cfg.Upstreams[0].Transport.ReadTimeout = timeout
			tc.setup(&cfg.Upstreams[0])
			cfg.Sites = oneSite(
				RouteConfig{Path: "/longer", Upstream: "u", ReadTimeout: 10 * timeout},
				RouteConfig{Path: "/none", Upstream: "u", ReadTimeout: -1},
				RouteConfig{Upstream: "u"})
			f := newFront(t, cfg, frontOpts{})
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
