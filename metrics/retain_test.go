package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy"
)

// series returns the exposition lines of family name that contain every
// fragment of want.
func series(t *testing.T, g prometheus.Gatherer, name string, want ...string) []string {
	t.Helper()
	var out []string
	for _, mf := range gather(t, g) {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			s := mt.String()
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(s, w)
			}
			if ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestRetainDeletesRemovedNamesAndKeepsOthers(t *testing.T) {
	m, reg := newTest(t)
	before := ConfigNames{
		Listeners: []string{"127.0.0.1:8443", "127.0.0.1:9443"},
		Sites:     []string{"www", "old"},
		Routes:    []string{"/", "/legacy"},
		Upstreams: map[string][]string{"app": {"127.0.0.1:1", "127.0.0.1:2"}, "gone": {"127.0.0.1:3"}},
	}
	m.Retain(before)
	for _, site := range []string{"www", "old"} {
		m.RequestStarted(site)
		m.RequestDone(proxy.RequestEvent{Site: site, Route: "/legacy", Method: "GET", Status: 200, Upstream: "gone", Target: "10.0.0.1:80", UpstreamStatus: 200})
		m.SetCertNotAfter(site, "sign", time.Now())
	}
	m.UpstreamHealth("app", "127.0.0.1:1", true)
	m.UpstreamHealth("app", "127.0.0.1:2", false)
	m.UpstreamHealth("gone", "127.0.0.1:3", true)
	m.ConnAccepted("127.0.0.1:9443")
	m.HandshakeStarted("127.0.0.1:9443")
	m.HandshakeDone(frontdoor.HandshakeEvent{State: frontdoor.ConnState{Listener: "127.0.0.1:9443", Family: "tlcp", Site: "old"}})
	m.ConnDone("127.0.0.1:9443", "tlcp", time.Second)

	m.Retain(ConfigNames{
		Listeners: []string{"127.0.0.1:8443"},
		Sites:     []string{"www"},
		Routes:    []string{"/"},
		Upstreams: map[string][]string{"app": {"127.0.0.1:1"}},
	})
	gone := map[string]string{
		"gmproxy_http_requests_total":              `value:"old"`,
		"gmproxy_cert_not_after_timestamp_seconds": `value:"old"`,
		"gmproxy_upstream_target_healthy":          `value:"127.0.0.1:2"`,
		"gmproxy_upstream_responses_total":         `value:"gone"`,
		"gmproxy_upstream_retries_total":           `value:"gone"`,
		"gmproxy_connections_accepted_total":       `value:"127.0.0.1:9443"`,
		"gmproxy_connection_duration_seconds":      `value:"127.0.0.1:9443"`,
		"gmproxy_handshakes_total":                 `value:"127.0.0.1:9443"`,
		"gmproxy_site_handshakes_total":            `value:"old"`,
		"gmproxy_connections_refused_total":        `value:"127.0.0.1:9443"`,
		"gmproxy_http_request_duration_seconds":    `value:"/legacy"`,
		"gmproxy_upstream_response_seconds":        `value:"gone"`,
	}
	for name, frag := range gone {
		if s := series(t, reg, name, frag); len(s) > 0 {
			t.Errorf("%s still has removed series %v", name, s)
		}
	}
	// What stays keeps its value.
	if got := testutil.ToFloat64(m.upstreamHealthy.WithLabelValues("app", "127.0.0.1:1")); got != 1 {
		t.Errorf("kept target health = %v, want 1", got)
	}
	if s := series(t, reg, "gmproxy_cert_not_after_timestamp_seconds", `value:"www"`); len(s) != 1 {
		t.Errorf("kept site's certificate series: %v", s)
	}
	// Removed names are forgotten by the label caps: re-admitting works.
	if got := m.sites.label("old"); got != "old" {
		t.Errorf("re-admitted site label = %q", got)
	}
	// A listener removed and added back reports into a live series, not
	// into a deleted child kept by a cache.
	m.Retain(before)
	m.ConnAccepted("127.0.0.1:9443")
	if s := series(t, reg, "gmproxy_connections_accepted_total", `value:"127.0.0.1:9443"`, "value:1"); len(s) != 1 {
		t.Errorf("accepted after the listener came back: %v, want one series at 1", s)
	}
	m.ConnDone("127.0.0.1:9443", "tlcp", time.Second)
	if n := histCount(t, reg, "gmproxy_connection_duration_seconds", map[string]string{"listener": "127.0.0.1:9443"}); n != 1 {
		t.Errorf("connection durations after the listener came back: %d, want 1", n)
	}
}

func TestRetainStartsKnownCountersAtZero(t *testing.T) {
	m, reg := newTest(t)
	m.Retain(ConfigNames{Listeners: []string{"edge"}, Upstreams: map[string][]string{"app": {"127.0.0.1:1"}}})
	want := []struct {
		name string
		frag []string
	}{
		{"gmproxy_connections_refused_total", []string{`value:"edge"`, `value:"max_handshakes"`}},
		{"gmproxy_connections_refused_total", []string{`value:"edge"`, `value:"max_connections"`}},
		{"gmproxy_session_tickets_rejected_total", []string{`value:"tls13sm"`, `value:"client_cert_invalid"`}},
		{"gmproxy_session_tickets_rejected_total", []string{`value:"tlcp"`, `value:"expired"`}},
		{"gmproxy_session_cache_hits_total", []string{`value:"tlcp"`}},
		{"gmproxy_session_cache_misses_total", []string{`value:"tls13sm"`}},
		{"gmproxy_upstream_retries_total", []string{`value:"app"`}},
		{"gmproxy_upstream_responses_total", []string{`value:"app"`, `value:"5xx"`}},
		{"gmproxy_client_cert_failures_total", []string{`value:"tlcp"`, `value:"unknown_ca"`}},
	}
	for _, w := range want {
		s := series(t, reg, w.name, w.frag...)
		if len(s) != 1 {
			t.Errorf("%s %v: %d series, want 1 at 0", w.name, w.frag, len(s))
			continue
		}
		if !strings.Contains(s[0], "value:0") {
			t.Errorf("%s %v: %s, want 0", w.name, w.frag, s[0])
		}
	}
}

func TestUpstreamEvents(t *testing.T) {
	m, reg := newTest(t)
	m.RequestStarted("www")
	m.RequestDone(proxy.RequestEvent{Site: "www", Method: "GET", Status: 502, Upstream: "app", Target: "10.0.0.1:80", UpstreamStatus: 503})
	m.RequestStarted("www")
	m.RequestDone(proxy.RequestEvent{Site: "www", Method: "GET", Status: 502, Upstream: "app", Target: "10.0.0.1:80"}) // no answer
	m.UpstreamConnect("app", 3*time.Millisecond, nil)
	m.ConnDone("edge", "tlcp", 2*time.Second)
	m.SetUpstreamCertNotAfter("app", "client_sign", time.Unix(2_000_000_000, 0))
	m.SetKeyServerCertNotAfter("ks", "client", time.Unix(2_000_000_001, 0))
	if got := testutil.ToFloat64(m.upstreamStatus.WithLabelValues("app", "5xx")); got != 1 {
		t.Errorf("upstream 5xx = %v, want 1 (a request no target answered is not an upstream response)", got)
	}
	if n := histCount(t, reg, "gmproxy_upstream_connect_seconds", map[string]string{"upstream": "app"}); n != 1 {
		t.Errorf("connect histogram count %d", n)
	}
	if n := histCount(t, reg, "gmproxy_connection_duration_seconds", map[string]string{"listener": "edge", "protocol": "tlcp"}); n != 1 {
		t.Errorf("connection duration count %d", n)
	}
	if got := testutil.ToFloat64(m.upstreamCerts.WithLabelValues("app", "client_sign")); got != 2_000_000_000 {
		t.Errorf("upstream cert expiry %v", got)
	}
	if got := testutil.ToFloat64(m.keyServerCerts.WithLabelValues("ks", "client")); got != 2_000_000_001 {
		t.Errorf("key server cert expiry %v", got)
	}
	m.ResetCertNotAfter()
	if s := series(t, reg, "gmproxy_upstream_cert_not_after_timestamp_seconds"); len(s) != 0 {
		t.Errorf("reset left %v", s)
	}
}

// A site, route and upstream that a reload removes and a later reload
// brings back report into live series again, not into the deleted
// children the request observers resolved before.
func TestRetainRequestObserversFollowNamesBack(t *testing.T) {
	m, reg := newTest(t)
	with := ConfigNames{Sites: []string{"www"}, Routes: []string{"/api"}, Upstreams: map[string][]string{"app": {"127.0.0.1:1"}}}
	req := func() {
		m.RequestStarted("www")
		m.RequestDone(proxy.RequestEvent{Site: "www", Route: "/api", Method: "GET", Status: 200,
			BytesIn: 1, BytesOut: 2, Upstream: "app", Target: "10.0.0.1:80", UpstreamStatus: 200})
	}
	m.Retain(with)
	req()
	m.Retain(ConfigNames{})
	m.Retain(with)
	req()
	for name, frag := range map[string][]string{
		"gmproxy_http_requests_total":      {`value:"www"`, `value:"/api"`, `value:"2xx"`, "value:1"},
		"gmproxy_http_bytes_total":         {`value:"www"`, `value:"tx"`, "value:2"},
		"gmproxy_http_requests_in_flight":  {`value:"www"`, "value:0"},
		"gmproxy_upstream_responses_total": {`value:"app"`, `value:"2xx"`, "value:1"},
	} {
		if s := series(t, reg, name, frag...); len(s) != 1 {
			t.Errorf("%s %v after the names came back: %v", name, frag, s)
		}
	}
	for name, l := range map[string]map[string]string{
		"gmproxy_http_request_duration_seconds": {"site": "www", "route": "/api"},
		"gmproxy_upstream_response_seconds":     {"upstream": "app"},
	} {
		if n := histCount(t, reg, name, l); n != 1 {
			t.Errorf("%s %v after the names came back: count %d, want 1", name, l, n)
		}
	}
}

// A request of a site that a reload removed, still in flight at the
// reload (the old generation drains it), does not bring the site's series
// back when it ends: no in-flight gauge at -1 for a site that is gone.
func TestRetainRequestInFlightAcrossRemoval(t *testing.T) {
	m, reg := newTest(t)
	m.Retain(ConfigNames{Sites: []string{"old"}, Routes: []string{"/"}})
	m.RequestStarted("old")
	m.RequestDone(proxy.RequestEvent{Site: "old", Route: "/", Method: "GET", Status: 200})
	m.RequestStarted("old")
	m.Retain(ConfigNames{})
	m.RequestDone(proxy.RequestEvent{Site: "old", Route: "/", Method: "GET", Status: 200})
	if s := series(t, reg, "gmproxy_http_requests_in_flight", `value:"old"`); len(s) != 0 {
		t.Errorf("in-flight series of a removed site: %v", s)
	}
}

// Connections and handshakes of a listener that a reload removed, still
// open at the reload (the old generation drains them), do not bring the
// listener's gauges back at -1 when they end.
func TestRetainListenerGaugesAcrossRemoval(t *testing.T) {
	m, reg := newTest(t)
	const gone = "127.0.0.1:9443"
	m.Retain(ConfigNames{Listeners: []string{gone}})
	m.ConnAccepted(gone)
	m.HandshakeStarted(gone)
	m.Retain(ConfigNames{Listeners: []string{"127.0.0.1:8443"}})
	m.HandshakeDone(frontdoor.HandshakeEvent{State: frontdoor.ConnState{Listener: gone, Family: "tlcp"}})
	m.ConnClosed(gone)
	for _, name := range []string{"gmproxy_connections_active", "gmproxy_handshakes_in_progress"} {
		if s := series(t, reg, name, `value:"`+gone+`"`); len(s) != 0 {
			t.Errorf("%s of a removed listener: %v", name, s)
		}
	}
}

// TestRateLimitedCounted: a request a route's rate_limit answered counts
// in rate_limited_total and in requests_total, and not as an upstream
// response time (no target was asked); the series leaves with its route.
func TestRateLimitedCounted(t *testing.T) {
	m, reg := newTest(t)
	m.RequestStarted("www")
	m.RequestDone(proxy.RequestEvent{Site: "www", Route: "/login", Method: "POST", Status: 429, Upstream: "app", RateLimited: true})
	if got := testutil.ToFloat64(m.rateLimited.WithLabelValues("www", "/login")); got != 1 {
		t.Errorf("rate_limited_total %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("www", "/login", "POST", "4xx")); got != 1 {
		t.Errorf("requests_total 4xx %v, want 1", got)
	}
	if n := histCount(t, reg, "gmproxy_upstream_response_seconds", map[string]string{"upstream": "app"}); n != 0 {
		t.Errorf("upstream response histogram count %d for a request no target was asked, want 0", n)
	}
	m.Retain(ConfigNames{Sites: []string{"www"}, Routes: []string{"/other"}})
	if n := testutil.CollectAndCount(m.rateLimited); n != 0 {
		t.Errorf("%d rate_limited_total series after its route was removed, want 0", n)
	}
}

// TestRetainDropsHealthOfTargetMovedOut: a target that a reload takes out
// of one upstream but that another upstream still has keeps its label;
// its health under the upstream that no longer has it must go all the
// same: nothing reports it any more, and a 0 left there would hold a
// "target down" alert for good.
func TestRetainDropsHealthOfTargetMovedOut(t *testing.T) {
	m, reg := newTest(t)
	m.Retain(ConfigNames{Upstreams: map[string][]string{"app": {"10.0.0.1:80", "10.0.0.2:80"}, "ws": {"10.0.0.1:80"}}})
	m.UpstreamHealth("app", "10.0.0.1:80", false)
	m.UpstreamHealth("app", "10.0.0.2:80", true)
	m.UpstreamHealth("ws", "10.0.0.1:80", true)
	m.Retain(ConfigNames{Upstreams: map[string][]string{"app": {"10.0.0.2:80"}, "ws": {"10.0.0.1:80"}}})
	const name = "gmproxy_upstream_target_healthy"
	if s := series(t, reg, name, `value:"app"`, `value:"10.0.0.1:80"`); len(s) != 0 {
		t.Errorf("health of a target its upstream no longer has: %v", s)
	}
	if s := series(t, reg, name, `value:"app"`, `value:"10.0.0.2:80"`); len(s) != 1 {
		t.Errorf("health of a target the upstream keeps: %v, want one series", s)
	}
	if s := series(t, reg, name, `value:"ws"`, `value:"10.0.0.1:80"`); len(s) != 1 {
		t.Errorf("health of the target under the upstream that keeps it: %v, want one series", s)
	}
}

// TestStreamSessionsActive: gmproxy_stream_sessions_active counts the
// stream sessions and tunnels open per site and upstream; one of a site a
// reload removed, still open at the reload, leaves with the site's series
// and does not bring it back at -1 when it ends, nor take one off the
// series of the same name that a later configuration brings back.
func TestStreamSessionsActive(t *testing.T) {
	m, reg := newTest(t)
	const name = "gmproxy_stream_sessions_active"
	m.Retain(ConfigNames{Sites: []string{"ws", "tcp"}, Upstreams: map[string][]string{"app": nil, "legacy": nil}})
	a, b := m.StreamOpened("ws", "app"), m.StreamOpened("ws", "app")
	c := m.StreamOpened("tcp", "legacy")
	if s := series(t, reg, name, `value:"ws"`, `value:"app"`, "value:2"); len(s) != 1 {
		t.Errorf("two WebSockets open: %v", series(t, reg, name))
	}
	a()
	if s := series(t, reg, name, `value:"ws"`, "value:1"); len(s) != 1 {
		t.Errorf("one WebSocket closed of two: %v", series(t, reg, name))
	}
	m.Retain(ConfigNames{Sites: []string{"ws"}, Upstreams: map[string][]string{"app": nil, "legacy": nil}})
	if s := series(t, reg, name, `value:"tcp"`); len(s) != 0 {
		t.Errorf("the open sessions of a removed site: %v", s)
	}
	m.Retain(ConfigNames{Sites: []string{"ws", "tcp"}, Upstreams: map[string][]string{"app": nil, "legacy": nil}})
	d := m.StreamOpened("tcp", "legacy")
	c() // opened before the removal
	if s := series(t, reg, name, `value:"tcp"`, "value:1"); len(s) != 1 {
		t.Errorf("a session of the site brought back, after one opened before its removal ended: %v", series(t, reg, name))
	}
	m.Retain(ConfigNames{Sites: []string{"ws", "tcp"}, Upstreams: map[string][]string{"legacy": nil}})
	if s := series(t, reg, name, `value:"app"`); len(s) != 0 {
		t.Errorf("the open tunnels to a removed upstream: %v", s)
	}
	b()
	d()
	if s := series(t, reg, name, `value:"app"`); len(s) != 0 {
		t.Errorf("a tunnel to a removed upstream brought its series back when it ended: %v", s)
	}
	for _, s := range series(t, reg, name) {
		if !strings.Contains(s, "value:0") {
			t.Errorf("every session ended: %s", s)
		}
	}
}

// TestResolvedTargetSeries: the health series of the addresses a target
// name resolved to (name/address) stay while a configuration names the
// name, go with the name, and one goes when its address does.
func TestResolvedTargetSeries(t *testing.T) {
	m, reg := newTest(t)
	n := ConfigNames{Upstreams: map[string][]string{"app": {"app.test:80"}}}
	m.Retain(n)
	m.UpstreamHealth("app", "app.test:80/10.0.0.1:80", true)
	m.UpstreamHealth("app", "app.test:80/10.0.0.2:80", true)
	m.UpstreamResolveFailed("app")
	m.Retain(n)
	if s := series(t, reg, "gmproxy_upstream_target_healthy", `value:"app.test:80/`); len(s) != 2 {
		t.Errorf("resolved addresses' series after a reload: %v, want 2", s)
	}
	if !n.Keep()("target", "app.test:80/10.0.0.1:80") || n.Keep()("target", "other.test:80/10.0.0.1:80") {
		t.Error("Keep does not follow the configured name of a resolved target")
	}
	if got := testutil.ToFloat64(m.resolveFailures.WithLabelValues("app")); got != 1 {
		t.Errorf("resolve failures %v, want 1", got)
	}
	m.UpstreamTargetRemoved("app", "app.test:80/10.0.0.2:80")
	if s := series(t, reg, "gmproxy_upstream_target_healthy", `value:"app.test:80/10.0.0.2:80"`); len(s) != 0 {
		t.Errorf("removed address's series: %v", s)
	}
	m.Retain(ConfigNames{Upstreams: map[string][]string{"app": {"127.0.0.1:1"}}})
	if s := series(t, reg, "gmproxy_upstream_target_healthy", `value:"app.test:80/`); len(s) != 0 {
		t.Errorf("series of a name no longer configured: %v", s)
	}
}

// TestRetainDropsRouteMovedOutOfSite: a route label that a site no longer
// has loses that site's request series even while another site keeps the
// label (route1, route2... name unnamed routes by their place in every
// site): a site whose last route a reload removed no longer shows it,
// and when the site has the route again its requests are counted anew.
func TestRetainDropsRouteMovedOutOfSite(t *testing.T) {
	m, reg := newTest(t)
	two := ConfigNames{Sites: []string{"a", "b"}, Routes: []string{"route1", "route2"},
		SiteRoutes: map[string][]string{"a": {"route1", "route2"}, "b": {"route1", "route2"}}}
	m.Retain(two)
	for _, site := range []string{"a", "b"} {
		m.RequestStarted(site)
		m.RequestDone(proxy.RequestEvent{Site: site, Route: "route2", Method: "GET", Status: 200, RateLimited: true})
	}
	m.Retain(ConfigNames{Sites: []string{"a", "b"}, Routes: []string{"route1", "route2"},
		SiteRoutes: map[string][]string{"a": {"route1"}, "b": {"route1", "route2"}}})
	for _, name := range []string{"gmproxy_http_requests_total", "gmproxy_http_request_duration_seconds", "gmproxy_http_rate_limited_total"} {
		if s := series(t, reg, name, `value:"a"`, `value:"route2"`); len(s) != 0 {
			t.Errorf("%s of route2, which site a no longer has: %v", name, s)
		}
		if s := series(t, reg, name, `value:"b"`, `value:"route2"`); len(s) != 1 {
			t.Errorf("%s of site b's route2: %v, want it kept", name, s)
		}
	}
	m.Retain(two)
	m.RequestStarted("a")
	m.RequestDone(proxy.RequestEvent{Site: "a", Route: "route2", Method: "GET", Status: 200})
	if got := testutil.ToFloat64(m.requests.WithLabelValues("a", "route2", "GET", "2xx")); got != 1 {
		t.Errorf("site a's route2 back: requests_total %v, want 1 (counted in a live series)", got)
	}
}

// TestRetainDropsStreamMovedToOtherUpstream: a reload that moves a stream
// site to another upstream, while other sites still use the old one,
// drops the site's stream series of the old upstream (the label stays
// while any site has the upstream), keeps the other site's, and a session
// open on the old upstream at the reload ends without bringing the series
// back.
func TestRetainDropsStreamMovedToOtherUpstream(t *testing.T) {
	m, reg := newTest(t)
	ups := map[string][]string{"db1": {"127.0.0.1:5432"}, "db2": {"127.0.0.2:5432"}}
	m.Retain(ConfigNames{Sites: []string{"a", "b"}, Upstreams: ups,
		SiteUpstreams: map[string][]string{"a": {"db1"}, "b": {"db1"}}})
	closeA := m.StreamOpened("a", "db1")
	m.StreamBytes("a", "db1", 5, 7)
	closeB := m.StreamOpened("b", "db1")
	m.StreamBytes("b", "db1", 1, 1)
	m.Retain(ConfigNames{Sites: []string{"a", "b"}, Upstreams: ups,
		SiteUpstreams: map[string][]string{"a": {"db2"}, "b": {"db1"}}})
	for _, name := range []string{"gmproxy_stream_bytes_total", "gmproxy_stream_sessions_active"} {
		if s := series(t, reg, name, `value:"a"`, `value:"db1"`); len(s) != 0 {
			t.Errorf("%s of site a on db1, which it no longer uses: %v", name, s)
		}
		if s := series(t, reg, name, `value:"b"`, `value:"db1"`); len(s) == 0 {
			t.Errorf("%s of site b on db1, which it still uses, dropped", name)
		}
	}
	closeA()
	closeB()
	m.StreamOpened("a", "db2")
	if s := series(t, reg, "gmproxy_stream_sessions_active", `value:"a"`, `value:"db1"`); len(s) != 0 {
		t.Errorf("a session open at the reload brought site a's db1 series back when it ended: %v", s)
	}
	if s := series(t, reg, "gmproxy_stream_sessions_active", `value:"a"`, `value:"db2"`, "value:1"); len(s) != 1 {
		t.Errorf("site a's session on db2: %v", series(t, reg, "gmproxy_stream_sessions_active"))
	}
}

// TestTargetRemovedKeepsOtherUpstreams: an address one upstream's name no
// longer resolves to, which another upstream naming the same host still
// has, stays admitted under the target label's cap: with the cap full and
// a new address taking any freed place, the other upstream's health still
// reports in its own series, not as "other" beside a stale one; the
// place is freed when no upstream reports the address.
func TestTargetRemovedKeepsOtherUpstreams(t *testing.T) {
	m, reg := newTest(t)
	m.Retain(ConfigNames{Upstreams: map[string][]string{"app": {"app.test:80"}, "ws": {"app.test:80"}, "fill": nil}})
	const addr = "app.test:80/127.0.0.2:80"
	m.UpstreamHealth("app", addr, true)
	m.UpstreamHealth("ws", addr, true)
	for i := 1; i < maxTargets; i++ {
		m.targets.label(fmt.Sprintf("127.0.1.%d:%d", i%256, 1024+i))
	}
	m.UpstreamTargetRemoved("app", addr)
	m.UpstreamHealth("fill", "127.0.0.3:80", true) // takes any place freed
	m.UpstreamHealth("ws", addr, false)
	const name = "gmproxy_upstream_target_healthy"
	if s := series(t, reg, name, `value:"app"`, `value:"`+addr+`"`); len(s) != 0 {
		t.Errorf("health of the address upstream app lost: %v", s)
	}
	if s := series(t, reg, name, `value:"ws"`, `value:"`+addr+`"`, "value:0"); len(s) != 1 {
		t.Errorf("health of the address upstream ws keeps: %v, want one series at 0", series(t, reg, name, `value:"ws"`))
	}
	if s := series(t, reg, name, `value:"ws"`, `value:"other"`); len(s) != 0 {
		t.Errorf("upstream ws's address reported as other: %v", s)
	}
	// Once no upstream reports the address, its place is free.
	m.UpstreamTargetRemoved("ws", addr)
	m.UpstreamHealth("fill", "127.0.0.4:80", true)
	if s := series(t, reg, name, `value:"127.0.0.4:80"`); len(s) != 1 {
		t.Errorf("a new address after the last upstream lost %s: %v, want its own series", addr, series(t, reg, name, `value:"fill"`))
	}
}

// TestRetainKeepsCutOfRemovedListener: the connections a listener a
// reload removed cuts at the end of its grace period, after the reload,
// count in its gmproxy_connections_cut_total series, kept (not deleted
// and brought back, which rate() takes for a new series) until the next
// reload deletes it; a cut counted after that brings back no series.
func TestRetainKeepsCutOfRemovedListener(t *testing.T) {
	m, reg := newTest(t)
	const gone, kept = "127.0.0.1:9443", "127.0.0.1:8443"
	cut := func() []string {
		return series(t, reg, "gmproxy_connections_cut_total", `value:"`+gone+`"`)
	}
	m.Retain(ConfigNames{Listeners: []string{gone, kept}})
	m.ConnsCut(gone, 1) // a shutdown's, say: not reset by the removal
	m.Retain(ConfigNames{Listeners: []string{kept}})
	if s := cut(); len(s) != 1 || !strings.Contains(s[0], "value:1") {
		t.Fatalf("cut series of the listener just removed: %v, want it kept at 1", s)
	}
	m.ConnsCut(gone, 2) // its grace period ended
	if s := cut(); len(s) != 1 || !strings.Contains(s[0], "value:3") {
		t.Errorf("cut series of the removed listener after its drain's cut: %v, want 3", s)
	}
	m.Retain(ConfigNames{Listeners: []string{kept}})
	if s := cut(); len(s) != 0 {
		t.Errorf("cut series of a listener removed a reload ago: %v, want none", s)
	}
	m.ConnsCut(gone, 1) // a drain longer than the time between reloads
	if s := cut(); len(s) != 0 {
		t.Errorf("cut series of a listener removed a reload ago came back: %v", s)
	}
	m.Retain(ConfigNames{Listeners: []string{kept, gone}}) // named again
	m.ConnsCut(gone, 4)
	if s := cut(); len(s) != 1 || !strings.Contains(s[0], "value:4") {
		t.Errorf("cut series of a listener named again: %v, want 4", s)
	}
}
