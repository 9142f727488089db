package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"

	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
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
	if u.set.Load().names != nil {
		t.Errorf("names %v, want none", u.set.Load().names)
	}
}

// fakeDNS answers lookups with the addresses set last, or fails.
type fakeDNS struct {
	mu    sync.Mutex
	addrs []netip.Addr
	fail  bool
}

func (d *fakeDNS) set(fail bool, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail, d.addrs = fail, nil
	for _, a := range addrs {
		d.addrs = append(d.addrs, netip.MustParseAddr(a))
	}
}

func (d *fakeDNS) lookup(context.Context, string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail {
		return nil, errors.New("server failure")
	}
	return d.addrs, nil
}

// resolveEvents records the resolution reports.
type resolveEvents struct {
	NopObserver
	mu       sync.Mutex
	failures int
	removed  []string
	health   map[string]bool
}

func (o *resolveEvents) UpstreamHealth(_, target string, healthy bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.health[target] = healthy
}

func (o *resolveEvents) UpstreamResolveFailed(string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
}

func (o *resolveEvents) UpstreamTargetRemoved(_, target string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.removed = append(o.removed, target)
	delete(o.health, target)
}

// waitFor polls cond (bounded in count, not asserting a time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// TestNameTargetRefreshed: the names are resolved again in the
// background; an address that appears becomes a target, one that goes is
// removed while its request in flight finishes, the targets that remain
// keep their state and pooled connections, and a failed lookup keeps the
// set in force and is reported.
func TestNameTargetRefreshed(t *testing.T) {
	la, lb, port := twoLoopbacks(t)
	var mu sync.Mutex
	conns := map[string]int{}
	release := make(chan struct{})
	serve := func(name string, ln net.Listener) {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-release
			}
			w.Write([]byte(name))
		}))
		s.Listener.Close()
		s.Listener = ln
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				mu.Lock()
				conns[name]++
				mu.Unlock()
			}
		}
		s.Start()
		t.Cleanup(s.Close)
	}
	serve("a", la)
	serve("b", lb)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the servers close, which wait for /slow
	dns := &fakeDNS{}
	dns.set(false, "127.0.0.1")
	obs := &resolveEvents{health: map[string]bool{}}
	uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "app.test:" + port}},
		LookupNetIP: dns.lookup, ResolveInterval: time.Millisecond}
	f := newFront(t, Config{Upstreams: []UpstreamConfig{uc}, Sites: oneSite(RouteConfig{Upstream: "u"})}, frontOpts{obs: obs})
	u := f.p.upstreams["u"]
	ta := u.Targets()[0]
	c := testClient(t)
	bodies := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			code, body, _ := get(t, c, f.url+"/", "Host", "example.test")
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			got[body]++
		}
		return got
	}
	if got := bodies(2); got["a"] != 2 {
		t.Fatalf("served by %v, want a", got)
	}

	dns.set(false, "127.0.0.1", "127.0.0.2")
	waitFor(t, "the second address a target", func() bool { return len(u.Targets()) == 2 })
	if u.Targets()[0] != ta {
		t.Error("the remaining address's target was replaced")
	}
	if got := bodies(4); got["a"] != 2 || got["b"] != 2 {
		t.Errorf("served by %v, want a and b twice each", got)
	}
	mu.Lock()
	if conns["a"] != 1 {
		t.Errorf("%d connections to a, want its pooled one only", conns["a"])
	}
	mu.Unlock()
	lb1 := "app.test:" + port + "/127.0.0.2:" + port
	obs.mu.Lock()
	if !obs.health[lb1] {
		t.Errorf("health reports %v, want %s up", obs.health, lb1)
	}
	obs.mu.Unlock()

	dns.set(true)
	waitFor(t, "a failed lookup reported", func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.failures >= 2 })
	if len(u.Targets()) != 2 {
		t.Errorf("%d targets after failed lookups, want the 2 in force", len(u.Targets()))
	}

	// a request in flight on the address that goes
	slow := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", f.url+"/slow", nil)
		req.Host = "example.test"
		for {
			res, err := c.Do(req)
			if err != nil {
				slow <- err.Error()
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if string(b) == "a" {
				slow <- "a"
				return
			}
		}
	}()
	waitFor(t, "the slow request on a", func() bool { return ta.InFlight() == 1 })
	dns.set(false, "127.0.0.2")
	waitFor(t, "the first address removed", func() bool { return len(u.Targets()) == 1 })
	free()
	if got := <-slow; got != "a" {
		t.Errorf("request in flight on the removed address: %s", got)
	}
	if u.Targets()[0].Addr != "127.0.0.2:"+port {
		t.Errorf("target %s, want 127.0.0.2:%s", u.Targets()[0].Addr, port)
	}
	if got := bodies(3); got["b"] != 3 {
		t.Errorf("served by %v, want b", got)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	la1 := "app.test:" + port + "/127.0.0.1:" + port
	if len(obs.removed) != 1 || obs.removed[0] != la1 {
		t.Errorf("removed %q, want %s", obs.removed, la1)
	}
	if _, ok := obs.health[la1]; ok {
		t.Errorf("health of the removed address reported again: %v", obs.health)
	}
}

// TestNameTargetStream: TCP stream mode to a name's addresses in turn,
// over TLS with the name as server name.
func TestNameTargetStream(t *testing.T) {
	la, lb, port := twoLoopbacks(t)
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS() // for its certificate
	cert.Close()
	names := make(chan string, 4)
	for name, ln := range map[string]net.Listener{"a": la, "b": lb} {
		tln := tls.NewListener(ln, cert.TLS)
		t.Cleanup(func() { tln.Close() })
		go acceptLoop(tln, func(c net.Conn) {
			defer c.Close()
			tc := c.(*tls.Conn)
			if tc.Handshake() != nil {
				return
			}
			names <- name + " " + tc.ConnectionState().ServerName
			io.WriteString(c, name)
		})
	}
	uc := UpstreamConfig{Name: "u", Protocol: "tls", TLS: &UpstreamTLSConfig{InsecureSkipVerify: true},
		Targets: []TargetConfig{{Address: "app.test:" + port}},
		LookupNetIP: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}, nil
		}}
	cfg := Config{Upstreams: []UpstreamConfig{uc},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u"}}}}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{SNI: "example.test"}})
	got := map[string]bool{}
	for range 2 {
		c := dialRaw(t, f.addr)
		b, _ := io.ReadAll(c)
		c.Close()
		if len(b) == 0 {
			t.Fatal("stream closed without reaching a target")
		}
		got[string(b)] = true
		got[<-names] = true // sent before the target wrote
	}
	for _, want := range []string{"a", "b", "a app.test", "b app.test"} {
		if !got[want] {
			t.Errorf("streams %v, want %q among them", got, want)
		}
	}
}

// TestNameTargetSinkholeAddresses: a DNS answer's addresses that name no
// host to connect to are not targets: 0.0.0.0 or :: (the answer of DNS
// filters and sinkholes for a blocked name, which a connect on Linux
// takes to this host, the proxy's own listeners), multicast and the
// IPv4 broadcast address. A name that answers only such addresses is as
// one that does not resolve: a refresh keeps its addresses in force.
func TestNameTargetSinkholeAddresses(t *testing.T) {
	dns := &fakeDNS{}
	dns.set(false, "0.0.0.0", "10.1.2.3", "::", "224.0.0.1", "255.255.255.255", "ff02::1", "::ffff:0.0.0.0")
	obs := &resolveEvents{health: map[string]bool{}}
	uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "app.test:80"}}, LookupNetIP: dns.lookup, ResolveInterval: -1}
	u, err := newUpstream(&uc, obs, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	addrs := func() (a []string) {
		for _, tg := range u.Targets() {
			a = append(a, tg.Addr)
		}
		return a
	}
	if got := addrs(); len(got) != 1 || got[0] != "10.1.2.3:80" {
		t.Fatalf("targets %v, want 10.1.2.3:80 only", got)
	}
	dns.set(false, "0.0.0.0", "::")
	u.refresh(context.Background())
	if got := addrs(); len(got) != 1 || got[0] != "10.1.2.3:80" {
		t.Fatalf("after an answer of 0.0.0.0 and :: only: targets %v, want 10.1.2.3:80 kept", got)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.failures != 1 {
		t.Errorf("%d resolve failures reported, want 1", obs.failures)
	}
}

// TestNameTargetReorderedKept: a resolver that answers the same
// addresses in another order (DNS round robin, CoreDNS's loadbalance)
// changes nothing: the set in force stays, and no change is logged.
func TestNameTargetReorderedKept(t *testing.T) {
	dns := &fakeDNS{}
	dns.set(false, "10.1.2.3", "10.1.2.4", "10.1.2.5")
	var logs syncBuffer
	uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "app.test:80"}}, LookupNetIP: dns.lookup, ResolveInterval: -1}
	u, err := newUpstream(&uc, NopObserver{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	before := u.set.Load()
	dns.set(false, "10.1.2.5", "10.1.2.3", "10.1.2.4")
	u.refresh(context.Background())
	if u.set.Load() != before {
		t.Errorf("the same addresses in another order replaced the set in force")
	}
	if s := logs.String(); strings.Contains(s, "other addresses") {
		t.Errorf("a change was logged:\n%s", s)
	}
	dns.set(false, "10.1.2.5", "10.1.2.3")
	u.refresh(context.Background())
	if n := len(u.Targets()); n != 2 {
		t.Errorf("%d targets after an address went, want 2", n)
	}
}

// TestRemovedTargetDialledByName: a request that picked an address just
// before a refresh removed it dials it after (waiting for a connection
// slot, say); the connection still goes to the address with the name for
// SNI and the certificate check, not to the bare address, whose
// certificate check fails.
func TestRemovedTargetDialledByName(t *testing.T) {
	dns := &fakeDNS{}
	dns.set(false, "10.1.2.3", "10.1.2.4")
	uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "app.test:443"}}, LookupNetIP: dns.lookup, ResolveInterval: -1}
	u, err := newUpstream(&uc, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	var dialled, to string
	dial := u.byName(func(ctx context.Context, _, addr string) (net.Conn, error) {
		dialled, to = addr, DialAddr(ctx, addr)
		return nil, errors.New("not dialled")
	})
	dns.set(false, "10.1.2.4")
	u.refresh(context.Background())
	if n := len(u.Targets()); n != 1 {
		t.Fatalf("%d targets, want 1", n)
	}
	dial(context.Background(), "tcp", "10.1.2.3:443")
	if dialled != "app.test:443" || to != "10.1.2.3:443" {
		t.Errorf("the removed address dialled as %q to %q, want app.test:443 to 10.1.2.3:443", dialled, to)
	}
	dns.set(false, "10.1.2.5")
	u.refresh(context.Background())
	dial(context.Background(), "tcp", "10.1.2.4:443")
	if dialled != "app.test:443" || to != "10.1.2.4:443" {
		t.Errorf("the address removed last dialled as %q to %q, want app.test:443 to 10.1.2.4:443", dialled, to)
	}
}

// TestNameLookupsAtOnce: the names of an upstream's targets, and those of
// every upstream, are looked up at once when the proxy is built (at
// start and at each reload): one after another, a resolver that does not
// answer held a start for lookupTimeout per name. Each lookup here waits
// for all four to have begun; one after another, the first would wait
// until its timeout and its name go unresolved.
func TestNameLookupsAtOnce(t *testing.T) {
	const names = 4
	var mu sync.Mutex
	began := 0
	all := make(chan struct{})
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		if began++; began == names {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cfg := Config{
		Upstreams: []UpstreamConfig{
			{Name: "u", Targets: []TargetConfig{{Address: "a.test:1"}, {Address: "b.test:2"}}, LookupNetIP: lookup},
			{Name: "v", Targets: []TargetConfig{{Address: "c.test:3"}, {Address: "d.test:4"}, {Address: "127.0.0.1:5"}}, LookupNetIP: lookup},
			{Name: "w", Targets: []TargetConfig{{Address: "127.0.0.1:6"}}},
		},
		Sites: oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for name, want := range map[string][]string{"u": {"127.0.0.1:1", "127.0.0.1:2"}, "v": {"127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"}, "w": {"127.0.0.1:6"}} {
		var got []string
		for _, tg := range f.p.upstreams[name].Targets() {
			got = append(got, tg.Addr)
		}
		if !slices.Equal(got, want) {
			t.Errorf("upstream %s: targets %q, want %q (every name resolved)", name, got, want)
		}
	}
}

// TestNameOfListedAddressOneTarget: a name that resolves to the address
// of a target listed by its IP address adds no second target for it,
// whichever of the two comes first: listed after the name, the address
// was two targets (twice its share of the requests, two health states),
// and the listed one was dialled by the name (its server name and
// certificate check), which it is not with the name after it.
func TestNameOfListedAddressOneTarget(t *testing.T) {
	for _, order := range [][]TargetConfig{
		{{Address: "10.1.2.3:443"}, {Address: "app.test:443"}},
		{{Address: "app.test:443"}, {Address: "10.1.2.3:443"}},
	} {
		dns := &fakeDNS{}
		dns.set(false, "10.1.2.3", "10.1.2.4")
		uc := UpstreamConfig{Name: "u", Targets: order, LookupNetIP: dns.lookup, ResolveInterval: -1}
		u, err := newUpstream(&uc, NopObserver{}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tg := range u.Targets() {
			got = append(got, tg.Addr)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"10.1.2.3:443", "10.1.2.4:443"}) {
			t.Errorf("targets %v with %s first, want 10.1.2.3:443 and 10.1.2.4:443 once each", got, order[0].Address)
		}
		var dialled string
		dial := u.byName(func(_ context.Context, _, addr string) (net.Conn, error) {
			dialled = addr
			return nil, errors.New("not dialled")
		})
		dial(context.Background(), "tcp", "10.1.2.3:443")
		if dialled != "10.1.2.3:443" {
			t.Errorf("with %s first, the listed address dialled as %q, want as it is", order[0].Address, dialled)
		}
		u.close()
	}
}

// TestNameTargetSinkholedAtStart: a name that answers, at start, only
// addresses that name no host to connect to (0.0.0.0, ::: a DNS filter's
// answer for a blocked name) is not dialled by name as one that does not
// resolve is: the system resolver gave the dialer the same 0.0.0.0, which
// a connect takes to this host, the proxy's own listeners (a request loop
// when the port is one of theirs). Its dials fail until the name
// resolves to usable addresses, through a lookup failure in between too.
func TestNameTargetSinkholedAtStart(t *testing.T) {
	dns := &fakeDNS{}
	dns.set(false, "0.0.0.0", "::")
	uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "app.test:80"}}, LookupNetIP: dns.lookup, ResolveInterval: -1}
	u, err := newUpstream(&uc, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	var dialled []string
	dial := u.byName(func(ctx context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, DialAddr(ctx, addr))
		return nil, errors.New("not dialled")
	})
	try := func(when string) {
		t.Helper()
		dialled = nil
		_, err := dial(context.Background(), "tcp", "app.test:80")
		var de *dialError
		if len(dialled) != 0 || !errors.As(err, &de) {
			t.Errorf("%s: dialled %q, error %v; want no dial and a dial error", when, dialled, err)
		}
	}
	try("at start")
	dns.set(true)
	u.refresh(context.Background())
	try("after a failed lookup")
	dns.set(false, "10.1.2.3")
	u.refresh(context.Background())
	dialled = nil
	dial(context.Background(), "tcp", "10.1.2.3:80")
	if len(dialled) != 1 || dialled[0] != "10.1.2.3:80" {
		t.Errorf("once resolved: dialled %q, want 10.1.2.3:80", dialled)
	}

	// Unresolved at start (dialled by name), then blocked.
	dns.set(true)
	u2, err := newUpstream(&uc, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer u2.close()
	dial = u2.byName(func(ctx context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, DialAddr(ctx, addr))
		return nil, errors.New("not dialled")
	})
	dns.set(false, "0.0.0.0")
	u2.refresh(context.Background())
	try("unresolved at start, then blocked")
}

// TestRemovedTargetIdleClosed: when a name stops resolving to an address,
// the pooled connections to it are closed then (the HTTP/1.1 client's and
// the Transport's), not at their idle timeout, and the request in flight
// on it finishes, its connection then closed rather than pooled. Over h2c
// the idle connection (no stream) is closed.
func TestRemovedTargetIdleClosed(t *testing.T) {
	// transport: a body of unknown length, which the HTTP/1.1 client
	// leaves to the Transport.
	for _, mode := range []string{"h1client", "transport", "h2c"} {
		t.Run(mode, func(t *testing.T) { testRemovedTargetIdleClosed(t, mode) })
	}
}

func testRemovedTargetIdleClosed(t *testing.T, mode string) {
	viaTransport := mode != "h1client"
	la, lb, port := twoLoopbacks(t)
	var mu sync.Mutex
	open := map[string]int{}
	opened := func(name string) int { mu.Lock(); defer mu.Unlock(); return open[name] }
	release := make(chan struct{})
	serve := func(name string, ln net.Listener) {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/slow" && name == "a" {
				<-release
			}
			w.Write([]byte(name))
		}))
		s.Listener.Close()
		s.Listener = ln
		if mode == "h2c" {
			s.Config.Protocols = new(http.Protocols)
			s.Config.Protocols.SetUnencryptedHTTP2(true)
		}
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case http.StateNew:
				open[name]++
			case http.StateClosed, http.StateHijacked:
				open[name]--
			}
		}
		s.Start()
		t.Cleanup(s.Close)
	}
	serve("a", la)
	serve("b", lb)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the servers close, which wait for /slow
	dns := &fakeDNS{}
	dns.set(false, "127.0.0.1", "127.0.0.2")
	uc := UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "app.test:" + port}},
		LookupNetIP: dns.lookup, ResolveInterval: time.Millisecond}
	if mode == "h2c" {
		uc.Protocol = upstreamproto.H2C
	}
	f := newFront(t, Config{Upstreams: []UpstreamConfig{uc}, Sites: oneSite(RouteConfig{Upstream: "u"})}, frontOpts{})
	u := f.p.upstreams["u"]
	var ta *Target
	for _, x := range u.Targets() {
		if strings.HasPrefix(x.Addr, "127.0.0.1:") {
			ta = x
		}
	}
	c := testClient(t)
	do := func(path string) (string, error) {
		var body io.Reader
		if viaTransport {
			body = io.NopCloser(strings.NewReader("x"))
		}
		req, _ := http.NewRequest("POST", f.url+path, body)
		req.Host = "example.test"
		if viaTransport {
			req.ContentLength = -1
		}
		res, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}

	if mode == "h2c" {
		for range 20 {
			if opened("a") >= 1 {
				break
			}
			if _, err := do("/"); err != nil {
				t.Fatal(err)
			}
		}
		if opened("a") != 1 {
			t.Fatalf("%d connections to a, want one", opened("a"))
		}
		dns.set(false, "127.0.0.2")
		waitFor(t, "the idle h2c connection to the removed address closed", func() bool { return opened("a") == 0 })
		return
	}
	// a request in flight on 127.0.0.1
	slow := make(chan string, 1)
	go func() {
		for range 20 {
			b, err := do("/slow")
			if err != nil {
				slow <- err.Error()
				return
			}
			if b == "a" {
				slow <- "a"
				return
			}
		}
		slow <- "never served by a"
	}()
	waitFor(t, "the slow request on a", func() bool { return ta.InFlight() == 1 })
	// and an idle connection beside it
	for range 20 {
		if opened("a") >= 2 {
			break
		}
		if _, err := do("/"); err != nil {
			t.Fatal(err)
		}
	}
	if opened("a") < 2 {
		t.Fatalf("%d connections to a, want one busy and one idle", opened("a"))
	}

	dns.set(false, "127.0.0.2")
	waitFor(t, "the first address removed", func() bool { return len(u.Targets()) == 1 })
	waitFor(t, "the idle connection to the removed address closed", func() bool { return opened("a") == 1 })
	// A request meanwhile: a Transport closes the connections that go
	// idle after CloseIdleConnections only until it looks for one.
	if b, err := do("/"); err != nil || b != "b" {
		t.Fatalf("after the removal: %q %v, want b", b, err)
	}
	free()
	if got := <-slow; got != "a" {
		t.Fatalf("request in flight on the removed address: %s", got)
	}
	waitFor(t, "the connection of the request in flight closed after it", func() bool { return opened("a") == 0 })
	if b, err := do("/"); err != nil || b != "b" {
		t.Errorf("after the removal: %q %v, want b", b, err)
	}
}
