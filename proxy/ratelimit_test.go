package proxy

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestRateLimiterAllowance: a client may send 1 + Burst requests at once
// (nginx's burst), then one per Interval; the wait it is told is until
// its next one; other clients have their own allowance; after a pause of
// (1 + Burst) × Interval the whole burst is back.
func TestRateLimiterAllowance(t *testing.T) {
	var now int64 = 1
	l := newRateLimiter(RateLimitConfig{Interval: time.Second, Burst: 2})
	l.now = func() int64 { return now }
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	want := func(c netip.Addr, ok bool, wait time.Duration) {
		t.Helper()
		if got, w := l.allow(c); got != ok || w != wait {
			t.Fatalf("at %v, %v: allow = %v, %v; want %v, %v", time.Duration(now-1), c, got, w, ok, wait)
		}
	}
	for range 3 {
		want(a, true, 0)
	}
	want(a, false, time.Second)
	want(b, true, 0) // its own allowance
	now += int64(400 * time.Millisecond)
	want(a, false, 600*time.Millisecond)
	now += int64(600 * time.Millisecond)
	want(a, true, 0)
	want(a, false, time.Second)
	now += int64(3 * time.Second)
	for range 3 {
		want(a, true, 0)
	}
	want(a, false, time.Second)

	// Burst 0: one request, then one per interval.
	l = newRateLimiter(RateLimitConfig{Interval: time.Minute})
	l.now = func() int64 { return now }
	want(a, true, 0)
	want(a, false, time.Minute)
}

// TestRouteRateLimit: a route's rate_limit answers 429 with Retry-After
// once a client address has used its allowance, before the request goes
// anywhere; another client (behind a trusted proxy, its X-Forwarded-For
// address) and another route are not affected.
func TestRouteRateLimit(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		TrustedProxies: []string{"127.0.0.1"},
		Upstreams:      []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "login", Path: "/login", RateLimit: &RateLimitConfig{Interval: time.Hour, Burst: 1}, Upstream: "u"},
			RouteConfig{Upstream: "u"}),
	}
	obs := newEventObserver()
	f := newFront(t, cfg, frontOpts{obs: obs})
	get := func(path, xff string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\nX-Forwarded-For: " + xff + "\r\n\r\n"
	}
	wantForwarded(t, f.addr, rec, get("/login", "198.51.100.7"), "GET /login ")
	wantForwarded(t, f.addr, rec, get("/login", "198.51.100.7"), "GET /login ")
	n := len(rec.all())
	res := rawRoundTrip(t, f.addr, get("/login", "198.51.100.7"), 3*time.Second)
	if st := statusOf(res); !strings.Contains(st, " 429 ") {
		t.Fatalf("third request within the hour: %q, want 429", st)
	}
	obs.mu.Lock()
	var limited []bool
	for _, ev := range obs.done {
		limited = append(limited, ev.RateLimited)
		if ev.RateLimited && (ev.Status != 429 || ev.Target != "") {
			t.Errorf("the rate-limited request's event: status %d, target %q; want 429 and none asked", ev.Status, ev.Target)
		}
	}
	obs.mu.Unlock()
	if !slices.Equal(limited, []bool{false, false, true}) {
		t.Errorf("RequestDone's RateLimited over the three requests: %v, want only the third", limited)
	}
	if !strings.Contains(res, "\r\nRetry-After: 3600\r\n") {
		t.Errorf("429 without Retry-After: 3600:\n%s", res)
	}
	if got := rec.all()[n:]; len(got) != 0 {
		t.Errorf("a limited request reached the target: %q", got)
	}
	wantForwarded(t, f.addr, rec, get("/login", "198.51.100.8"), "GET /login ") // another client
	wantForwarded(t, f.addr, rec, get("/other", "198.51.100.7"), "GET /other ") // another route
	// The same /64 is one client.
	wantForwarded(t, f.addr, rec, get("/login", "2001:db8::1"), "GET /login ")
	wantForwarded(t, f.addr, rec, get("/login", "2001:db8::2"), "GET /login ")
	wantNotForwarded(t, f.addr, rec, get("/login", "2001:db8::3"), "429")
}

// TestRouteRateLimitKeptOverReload: a reload keeps the counts of a route
// whose site, label and rate stay; a changed rate or another route starts
// afresh.
func TestRouteRateLimitKeptOverReload(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := func(name string, burst int, prev *Proxy) Config {
		return Config{
			TrustedProxies: []string{"127.0.0.1"},
			Upstreams:      []UpstreamConfig{upstream("u", rec.addr)},
			Sites:          oneSite(RouteConfig{Name: name, RateLimit: &RateLimitConfig{Interval: time.Hour, Burst: burst}, Upstream: "u"}),
			Previous:       prev,
		}
	}
	get := "GET /x HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n"
	f := newFront(t, cfg("r", 0, nil), frontOpts{})
	wantForwarded(t, f.addr, rec, get, "GET /x ")
	wantNotForwarded(t, f.addr, rec, get, "429")
	g := newFront(t, cfg("r", 0, f.p), frontOpts{})
	wantNotForwarded(t, g.addr, rec, get, "429") // kept
	h := newFront(t, cfg("r", 1, g.p), frontOpts{})
	wantForwarded(t, h.addr, rec, get, "GET /x ") // another rate: afresh
	i := newFront(t, cfg("s", 1, h.p), frontOpts{})
	wantForwarded(t, i.addr, rec, get, "GET /x ") // another route: afresh
}

// TestRouteRateLimitZone: the routes that name one zone share a client's
// allowance (one limiter, in whatever site), a route with the same rate
// but no zone keeps its own, and routes that give one zone different
// rates are refused.
func TestRouteRateLimitZone(t *testing.T) {
	rec := newRawRecorder(t)
	zone := &RateLimitConfig{Interval: time.Hour, Burst: 1, Zone: "login"}
	cfg := Config{
		TrustedProxies: []string{"127.0.0.1"},
		Upstreams:      []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Path: "/a", RateLimit: zone, Upstream: "u"},
			RouteConfig{Path: "/b", RateLimit: zone, Upstream: "u"},
			RouteConfig{Path: "/own", RateLimit: &RateLimitConfig{Interval: time.Hour, Burst: 1}, Upstream: "u"},
			RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	status := func(path string) string {
		return statusOf(rawRoundTrip(t, f.addr, "GET "+path+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n", 3*time.Second))
	}
	for i, tc := range []struct{ path, want string }{
		{"/a", " 200 "}, {"/b", " 200 "}, // 1 + burst of the zone
		{"/a", " 429 "}, {"/b", " 429 "},
		{"/own", " 200 "}, {"/own", " 200 "}, {"/own", " 429 "},
	} {
		if st := status(tc.path); !strings.Contains(st, tc.want) {
			t.Errorf("request %d, %s: %q, want%s", i+1, tc.path, st, tc.want)
		}
	}

	cfg.Sites = oneSite(
		RouteConfig{Path: "/a", RateLimit: zone, Upstream: "u"},
		RouteConfig{Path: "/b", RateLimit: &RateLimitConfig{Interval: time.Minute, Burst: 1, Zone: "login"}, Upstream: "u"})
	if p, err := New(cfg, NopObserver{}, testLogger(t)); err == nil {
		p.Close()
		t.Error("a zone given two rates accepted")
	}
}

// TestRouteRateLimitZoneKeptOverReload: a reload keeps a zone's counts
// while its rate and burst stay, whatever routes and sites name it; a
// renamed zone starts afresh.
func TestRouteRateLimitZoneKeptOverReload(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := func(zone string, prev *Proxy, sites ...SiteConfig) Config {
		for i := range sites {
			for j := range sites[i].Routes {
				sites[i].Routes[j].RateLimit = &RateLimitConfig{Interval: time.Hour, Zone: zone}
			}
		}
		return Config{
			TrustedProxies: []string{"127.0.0.1"},
			Upstreams:      []UpstreamConfig{upstream("u", rec.addr)},
			Sites:          sites,
			Previous:       prev,
		}
	}
	get := func(host, path string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n"
	}
	a := SiteConfig{Name: "a", ServerNames: []string{"a.test"}, Routes: []RouteConfig{{Path: "/a", Upstream: "u"}}}
	b := SiteConfig{Name: "b", ServerNames: []string{"b.test"}, Routes: []RouteConfig{{Path: "/b", Upstream: "u"}}}
	f := newFront(t, cfg("login", nil, a), frontOpts{})
	wantForwarded(t, f.addr, rec, get("a.test", "/a"), "GET /a ")
	wantNotForwarded(t, f.addr, rec, get("a.test", "/a"), "429")
	g := newFront(t, cfg("login", f.p, b), frontOpts{}) // another route in another site
	wantNotForwarded(t, g.addr, rec, get("b.test", "/b"), "429")
	h := newFront(t, cfg("signin", g.p, b), frontOpts{})
	wantForwarded(t, h.addr, rec, get("b.test", "/b"), "GET /b ") // another zone: afresh
}

// TestClientTablesShareTheBudget: the rate-limit and basic_auth failure
// tables of all routes share maxClientEntries: with few limited routes
// each remembers maxRateClients addresses, with many each an equal part
// (never below minTableClients), so that clients from many addresses
// cannot grow the process by a table's worth per route. A table kept over
// a reload is resized with the new configuration's.
func TestClientTablesShareTheBudget(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	cfg := func(limited int, prev *Proxy) Config {
		routes := []RouteConfig{{PathPrefix: "/auth/", Respond: &RespondConfig{Status: 200},
			BasicAuth: &BasicAuthConfig{Users: map[string][]byte{"ops": hash}}}}
		for i := range limited {
			routes = append(routes, RouteConfig{Path: "/r" + strconv.Itoa(i), Respond: &RespondConfig{Status: 200},
				RateLimit: &RateLimitConfig{Interval: time.Second}})
		}
		return Config{Sites: oneSite(routes...), Previous: prev}
	}
	build := func(limited int, prev *Proxy) *Proxy {
		p, err := New(cfg(limited, prev), NopObserver{}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	capacities := func(p *Proxy) (rates, failures []int) {
		for _, l := range p.rates {
			rates = append(rates, l.tat.Capacity())
		}
		for _, a := range p.auths {
			failures = append(failures, a.failures.tat.Capacity())
		}
		return rates, failures
	}
	for _, tc := range []struct{ limited, want int }{
		{1, maxRateClients},
		{39, maxClientEntries / 40},
		{4000, minTableClients},
	} {
		p := build(tc.limited, nil)
		rates, failures := capacities(p)
		if len(rates) != tc.limited || len(failures) != 1 {
			t.Fatalf("%d limited routes: %d rate tables, %d failure tables", tc.limited, len(rates), len(failures))
		}
		for _, c := range append(rates, failures...) {
			if c != tc.want {
				t.Fatalf("%d limited routes (+1 basic_auth): a table of %d clients, want %d", tc.limited, c, tc.want)
			}
		}
	}
	// A reload from 1 to 39 limited routes resizes the table it keeps.
	p := build(1, nil)
	kept := p.rates[slices.Collect(maps.Keys(p.rates))[0]]
	q := build(39, p)
	if !slices.Contains(slices.Collect(maps.Values(q.rates)), kept) || kept.tat.Capacity() != maxClientEntries/40 {
		t.Fatalf("the kept table holds %d clients after the reload, want %d", kept.tat.Capacity(), maxClientEntries/40)
	}
}

// A reload that is refused leaves the tables the serving proxy keeps as
// they were: one whose New fails (an access log it cannot open) or that
// is built in standby and never activated (a listener that would not
// bind) must not shrink them to its share of the budget, forgetting the
// counts of all but the last clients seen; Activate applies the share.
func TestRefusedReloadKeepsTableSizes(t *testing.T) {
	routes := func(limited int) []RouteConfig {
		var rs []RouteConfig
		for i := range limited {
			rs = append(rs, RouteConfig{Path: "/r" + strconv.Itoa(i), Respond: &RespondConfig{Status: 200},
				RateLimit: &RateLimitConfig{Interval: time.Second}})
		}
		return rs
	}
	p, err := New(Config{Sites: oneSite(routes(1)...)}, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	kept := p.rates[slices.Collect(maps.Keys(p.rates))[0]]
	const clients = 3 * minTableClients
	for i := range clients {
		if ok, _ := kept.allow(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})); !ok {
			t.Fatalf("client %d limited on its first request", i)
		}
	}
	check := func(when string) {
		t.Helper()
		if c, n := kept.tat.Capacity(), kept.tat.Len(); c != maxRateClients || n != clients {
			t.Fatalf("%s: the serving proxy's table holds %d clients of %d, want %d of %d", when, n, c, clients, maxRateClients)
		}
	}
	many := routes(maxClientEntries/minTableClients + 100)
	bad := Config{Sites: oneSite(many...), Previous: p, Standby: true,
		AccessLog: AccessLogConfig{Path: t.TempDir() + "/missing/access.log"}}
	if q, err := New(bad, NopObserver{}, testLogger(t)); err == nil {
		q.Close()
		t.Fatal("New opened an access log in a missing folder")
	}
	check("after a reload New refused")
	q, err := New(Config{Sites: oneSite(many...), Previous: p, Standby: true}, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	if !slices.Contains(slices.Collect(maps.Values(q.rates)), kept) {
		t.Fatal("the reload did not keep the route's table")
	}
	check("after a reload built in standby")
	q.Activate()
	if c, n := kept.tat.Capacity(), kept.tat.Len(); c != minTableClients || n != minTableClients {
		t.Fatalf("once the reload is in force the table holds %d clients of %d, want %d of %d", n, c, minTableClients, minTableClients)
	}
}
