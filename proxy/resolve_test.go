package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
)

// twoLoopbacks listens on 127.0.0.1 and 127.0.0.2 with one port, the
// addresses of one name.
func twoLoopbacks(t *testing.T) (a, b net.Listener, port string) {
	t.Helper()
	for range 20 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = strconv.Itoa(a.Addr().(*net.TCPAddr).Port)
		b, err := net.Listen("tcp", "127.0.0.2:"+port)
		if err == nil {
			return a, b, port
		}
		a.Close()
	}
	t.Skip("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, nil, ""
}

// hostsSeen records, per backend, the Host and SNI of the requests it got.
type hostsSeen struct {
	mu    sync.Mutex
	count map[string]int
	hosts map[string]bool
}

func (h *hostsSeen) backend(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.count[name]++
		h.hosts[r.Host] = true
		if r.TLS != nil {
			h.hosts["sni "+r.TLS.ServerName] = true
		}
		w.Write([]byte(name))
	})
}

// TestNameTargetExpanded: a target given by name is one target per
// address it resolves to, every one of them serving requests, each with
// its own health, the Host (host_header {upstream}) and the server name
// staying the name.
func TestNameTargetExpanded(t *testing.T) {
	for _, proto := range []string{"http", "tls"} {
		t.Run(proto, func(t *testing.T) {
			la, lb, port := twoLoopbacks(t)
			seen := &hostsSeen{count: map[string]int{}, hosts: map[string]bool{}}
			sa := httptest.NewUnstartedServer(seen.backend("a"))
			sb := httptest.NewUnstartedServer(seen.backend("b"))
			sa.Listener.Close()
			sb.Listener.Close()
			sa.Listener, sb.Listener = la, lb
			uc := UpstreamConfig{Name: "u", Protocol: proto, Targets: []TargetConfig{{Address: "app.test:" + port, Weight: 3}}}
			if proto == "tls" {
				sa.StartTLS()
				sb.StartTLS()
				uc.TLS = &UpstreamTLSConfig{InsecureSkipVerify: true}
			} else {
				sa.Start()
				sb.Start()
			}
			t.Cleanup(sa.Close)
			t.Cleanup(sb.Close)
			var lookups []string
			uc.LookupNetIP = func(_ context.Context, host string) ([]netip.Addr, error) {
				lookups = append(lookups, host)
				return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:127.0.0.2"), netip.MustParseAddr("127.0.0.1")}, nil
			}
			cfg := Config{Upstreams: []UpstreamConfig{uc}, Sites: oneSite(RouteConfig{Upstream: "u", HostHeader: "{upstream}"})}
			f := newFront(t, cfg, frontOpts{})
			if len(lookups) != 1 || lookups[0] != "app.test" {
				t.Fatalf("lookups %q, want one of app.test", lookups)
			}
			ts := f.p.upstreams["u"].Targets()
			if len(ts) != 2 {
				t.Fatalf("%d targets, want 2 (one per unique address)", len(ts))
			}
			for i, want := range []string{"127.0.0.1:" + port, "127.0.0.2:" + port} {
				if ts[i].Addr != want || ts[i].Name != "app.test:"+port || ts[i].Weight != 3 {
					t.Errorf("target %d: %s (%s) weight %d, want %s (app.test:%s) weight 3", i, ts[i].Addr, ts[i].Name, ts[i].Weight, want, port)
				}
			}
			c := testClient(t)
			for range 10 {
				if code, _, _ := get(t, c, f.url+"/", "Host", "example.test"); code != 200 {
					t.Fatalf("status %d", code)
				}
			}
			seen.mu.Lock()
			if seen.count["a"] != 5 || seen.count["b"] != 5 {
				t.Errorf("requests per address %v, want 5 and 5", seen.count)
			}
			want := map[string]bool{"app.test:" + port: true}
			if proto == "tls" {
				want["sni app.test"] = true
			}
			if len(seen.hosts) != len(want) {
				t.Errorf("hosts and server names %v, want %v", seen.hosts, want)
			}
			for h := range want {
				if !seen.hosts[h] {
					t.Errorf("hosts and server names %v, want %v", seen.hosts, want)
				}
			}
			seen.mu.Unlock()
			// One address gone: only it is taken out.
			sb.Close()
			for range 6 {
				if code, body, _ := get(t, c, f.url+"/", "Host", "example.test"); code != 200 || body != "a" {
					t.Fatalf("status %d body %q, want 200 from a", code, body)
				}
			}
			if !ts[0].Healthy() || ts[1].Healthy() {
				t.Errorf("healthy: %v %v, want the first address only", ts[0].Healthy(), ts[1].Healthy())
			}
		})
	}
}

// TestNameTargetUnresolved: a name that does not resolve is dialled by
// name, as before; an IP address is never looked up.
func TestNameTargetUnresolved(t *testing.T) {
	var lookups int
	uc := upstream("u", "app.test:80", "127.0.0.1:81", "[::1]:82")
	uc.LookupNetIP = func(context.Context, string) ([]netip.Addr, error) {
		lookups++
		return nil, errors.New("no")
	}
	u, err := newUpstream(&uc, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	var got []string
	for _, tg := range u.Targets() {
		got = append(got, tg.Addr+"="+tg.Name)
	}
	if lookups != 1 || len(got) != 3 || got[0] != "app.test:80=app.test:80" || got[1] != "127.0.0.1:81=127.0.0.1:81" || got[2] != "[::1]:82=[::1]:82" {
		t.Errorf("%d lookups, targets %q", lookups, got)
	}
	if u.names != nil {
		t.Errorf("names %v, want none", u.names)
	}
}
