package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestNameOfBothFamiliesOneListening: a name resolving to ::1 and
// 127.0.0.1 (localhost) whose backend listens on 127.0.0.1 only: every
// request is served, whatever its kind and with active checks or not
// (the address that refuses connections is tried, refused before
// anything was sent, marked down and the other used), and so is every
// TCP stream.
func TestNameOfBothFamiliesOneListening(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skip("no IPv6 loopback:", err)
	} else {
		l.Close()
	}
	for _, active := range []bool{false, true} {
		name := "passive"
		if active {
			name = "active"
		}
		t.Run(name, func(t *testing.T) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Write([]byte("v4"))
			}))
			t.Cleanup(s.Close)
			_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
			dns := &fakeDNS{}
			dns.set(false, "::1", "127.0.0.1")
			uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "localhost.test:" + port}},
				LookupNetIP: dns.lookup, ResolveInterval: time.Hour}
			if active {
				uc.HealthCheck.Active = ActiveHealthConfig{Path: "/", Interval: time.Millisecond}
			}
			f := newFront(t, Config{Upstreams: []UpstreamConfig{uc}, Sites: oneSite(RouteConfig{Upstream: "u"})}, frontOpts{})
			u := f.p.upstreams["u"]
			c := testClient(t)
			for i := range 8 {
				var body io.Reader
				method := "GET"
				switch i % 4 {
				case 1:
					method, body = "POST", strings.NewReader("x")
				case 2:
					method, body = "POST", io.NopCloser(strings.NewReader("x")) // unknown length: the Transport
				}
				req, _ := http.NewRequest(method, f.url+"/", body)
				req.Host = "example.test"
				res, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s %d: %v", method, i, err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || string(b) != "v4" {
					t.Fatalf("%s %d: %d %q, want 200 v4", method, i, res.StatusCode, b)
				}
			}
			for _, tg := range u.Targets() {
				if v6 := strings.HasPrefix(tg.Addr, "[::1]"); tg.Healthy() == v6 {
					t.Errorf("target %s healthy %v", tg.Addr, tg.Healthy())
				}
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go acceptLoop(ln, func(c net.Conn) {
			io.WriteString(c, "v4")
			c.Close()
		})
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		dns := &fakeDNS{}
		dns.set(false, "::1", "127.0.0.1")
		uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "localhost.test:" + port}},
			LookupNetIP: dns.lookup, ResolveInterval: time.Hour}
		cfg := Config{Upstreams: []UpstreamConfig{uc},
			Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u"}}}}
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{SNI: "example.test"}})
		for i := range 4 {
			c := dialRaw(t, f.addr)
			b, _ := io.ReadAll(c)
			c.Close()
			if string(b) != "v4" {
				t.Fatalf("stream %d: %q, want v4", i, b)
			}
		}
	})
}
