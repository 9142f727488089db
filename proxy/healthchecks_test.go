package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestPassiveHealthEjectionAndRecovery kills a backend, checks that the
// proxy marks it down after a failed request (which is retried on the
// other target, so the client sees no error), keeps traffic away from it
// and takes it back after the cool-down once it is restarted.
func TestPassiveHealthEjectionAndRecovery(t *testing.T) {
	var hits1 atomic.Int64
	r1 := newRestartable(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits1.Add(1)
		io.WriteString(w, "one")
	}))
	two := nameBackend(t, "two")
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: r1.addr}, {Address: addrOf(two)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, FailWindow: time.Minute, Cooldown: 200 * time.Millisecond}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	c := testClient(t)
	for range 4 { // both targets in use
		if code, _, _ := get(t, c, f.url+"/"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if hits1.Load() != 2 {
		t.Fatalf("target one got %d of 4 requests", hits1.Load())
	}
	r1.stop()
	for i := range 6 {
		code, body, _ := get(t, c, f.url+"/")
		if code != 200 || body != "two" {
			t.Fatalf("request %d after kill: %d %q", i, code, body)
		}
	}
	obs.waitHealth(t, "app "+r1.addr+" down")
	r1.start()
	// Recovery: after the cool-down the target is eligible again.
	recovered := false
	for i := 0; i < 500 && !recovered; i++ {
		_, body, _ := get(t, c, f.url+"/")
		recovered = body == "one"
		if !recovered {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !recovered {
		t.Fatal("restarted target never received traffic again")
	}
	obs.waitHealth(t, "app "+r1.addr+" up")
}

func TestPassiveFailWindowCountsFailures(t *testing.T) {
	u := testUpstream(t, "round_robin", TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1"})
	u.passive = PassiveHealthConfig{MaxFails: 3, FailWindow: time.Hour, Cooldown: time.Hour}
	tg := u.Targets()[0]
	tg.fails = make([]int64, 3)
	u.fail(tg, "x")
	u.fail(tg, "x")
	if !tg.Healthy() {
		t.Fatal("down after 2 of 3 failures")
	}
	u.fail(tg, "x")
	if tg.Healthy() {
		t.Fatal("up after 3 failures within the window")
	}
	// Failures outside the window do not add up.
	u2 := testUpstream(t, "round_robin", TargetConfig{Address: "a:1"})
	u2.passive = PassiveHealthConfig{MaxFails: 2, FailWindow: time.Nanosecond, Cooldown: time.Hour}
	t2 := u2.Targets()[0]
	t2.fails = make([]int64, 2)
	u2.fail(t2, "x")
	time.Sleep(time.Millisecond)
	u2.fail(t2, "x")
	if !t2.Healthy() {
		t.Fatal("failures outside the window marked the target down")
	}
}

// TestActiveHealthChecks flips a backend's health endpoint and kills and
// restarts it; the active checker must follow with fall/rise counts, and
// requests must avoid the target while it is down.
func TestActiveHealthChecks(t *testing.T) {
	var status atomic.Int64
	status.Store(200)
	var hits atomic.Int64
	r1 := newRestartable(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(int(status.Load()))
			return
		}
		hits.Add(1)
		io.WriteString(w, "one")
	}))
	two := nameBackend(t, "two")
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: r1.addr}, {Address: addrOf(two)}},
			HealthCheck: HealthCheckConfig{
				Passive: PassiveHealthConfig{MaxFails: -1},
				Active:  ActiveHealthConfig{Path: "/healthz", ExpectStatus: 200, Interval: 10 * time.Millisecond, Timeout: time.Second, Rise: 2, Fall: 2},
			}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	c := testClient(t)

	status.Store(503)
	obs.waitHealth(t, "app "+r1.addr+" down")
	before := hits.Load()
	for range 10 {
		if _, body, _ := get(t, c, f.url+"/"); body != "two" {
			t.Fatalf("request went to the down target: %q", body)
		}
	}
	if hits.Load() != before {
		t.Fatal("down target received requests")
	}
	status.Store(200)
	obs.waitHealth(t, "app "+r1.addr+" up")

	r1.stop()
	obs.waitHealth(t, "app "+r1.addr+" down")
	r1.start()
	obs.waitHealth(t, "app "+r1.addr+" up")
	seen := false
	for range 4 {
		_, body, _ := get(t, c, f.url+"/")
		seen = seen || body == "one"
	}
	if !seen {
		t.Fatal("recovered target gets no traffic")
	}
}

func TestPassiveUnhealthyStatus(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(bad.Close)
	good := nameBackend(t, "good")
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(bad)}, {Address: addrOf(good)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, Cooldown: time.Hour, UnhealthyStatus: []int{503}}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	c := testClient(t)
	// The 503 itself is passed to the client (the request was answered) ...
	if code, _, _ := get(t, c, f.url+"/"); code != 503 {
		t.Fatalf("first request: %d, want the backend's 503", code)
	}
	obs.waitHealth(t, "app "+addrOf(bad)+" down")
	// ... and the target is out for the cool-down.
	for range 5 {
		if _, body, _ := get(t, c, f.url+"/"); body != "good" {
			t.Fatalf("request went to the ejected target: %q", body)
		}
	}
}

// TestReloadKeepsHealthState: a proxy built with Previous (a reload) keeps
// the health state of targets that stay, reports it as the initial state,
// and starts targets that are new, or whose upstream is new, healthy.
func TestReloadKeepsHealthState(t *testing.T) {
	passive := HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, FailWindow: time.Minute, Cooldown: time.Hour}}
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: "127.0.0.1:1"}, {Address: "127.0.0.1:2"}}, HealthCheck: passive}},
		Sites:     oneSite(RouteConfig{Upstream: "app"}),
	}
	old, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	u := old.upstreams["app"]
	u.fail(u.Targets()[0], "test")
	if u.Targets()[0].Healthy() {
		t.Fatal("target not down after a failure")
	}

	next := cfg
	next.Upstreams = []UpstreamConfig{
		{Name: "app", Targets: []TargetConfig{{Address: "127.0.0.1:1"}, {Address: "127.0.0.1:2"}, {Address: "127.0.0.1:3"}}, HealthCheck: passive},
		{Name: "other", Targets: []TargetConfig{{Address: "127.0.0.1:1"}}},
	}
	next.Previous = old
	obs := newEventObserver()
	p, err := New(next, obs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := map[string]bool{"127.0.0.1:1": false, "127.0.0.1:2": true, "127.0.0.1:3": true}
	for _, tg := range p.upstreams["app"].Targets() {
		if got := tg.Healthy(); got != want[tg.Addr] {
			t.Errorf("after reload %s healthy=%v, want %v", tg.Addr, got, want[tg.Addr])
		}
	}
	if !p.upstreams["other"].Targets()[0].Healthy() {
		t.Error("a new upstream inherited another upstream's target state")
	}
	obs.waitHealth(t, "app 127.0.0.1:1 down")
	// Without Previous, state starts fresh.
	fresh, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if !fresh.upstreams["app"].Targets()[0].Healthy() {
		t.Error("a proxy without Previous started a target down")
	}
}

func TestRouteLabel(t *testing.T) {
	for _, tc := range []struct {
		rc   RouteConfig
		want string
	}{
		{RouteConfig{Name: "api", PathPrefix: "/api/"}, "api"},
		{RouteConfig{PathPrefix: "/api/"}, "/api/"},
		{RouteConfig{Path: "/healthz", PathPrefix: "/x"}, "/healthz"},
		{RouteConfig{}, "/"},
	} {
		if got := RouteLabel(&tc.rc); got != tc.want {
			t.Errorf("RouteLabel(%+v) = %q, want %q", tc.rc, got, tc.want)
		}
	}
}

// connectObserver also records UpstreamConnect events.
type connectObserver struct {
	*eventObserver
	mu       sync.Mutex
	connects []string
}

func (o *connectObserver) UpstreamConnect(up string, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.connects = append(o.connects, fmt.Sprintf("%s ok=%v", up, err == nil && d > 0))
}

// TestUpstreamStatusAndConnectEvents: the request event carries the status
// the target answered (not the one gmproxy made up), and every new upstream
// connection is timed, failed ones included.
func TestUpstreamStatusAndConnectEvents(t *testing.T) {
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer busy.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := addrOf(dead)
	dead.Close()
	obs := &connectObserver{eventObserver: newEventObserver()}
	cfg := Config{
		Upstreams: []UpstreamConfig{
			{Name: "busy", Targets: []TargetConfig{{Address: addrOf(busy)}}},
			{Name: "dead", Targets: []TargetConfig{{Address: deadAddr}}},
		},
		Sites: oneSite(RouteConfig{PathPrefix: "/dead", Upstream: "dead"}, RouteConfig{Upstream: "busy"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	c := testClient(t)
	if code, _, _ := get(t, c, f.url+"/"); code != 503 {
		t.Fatalf("busy: status %d", code)
	}
	if code, _, _ := get(t, c, f.url+"/dead"); code != 502 {
		t.Fatalf("dead: status %d", code)
	}
	var evs []RequestEvent
	for i := 0; i < 200 && len(evs) < 2; i++ {
		obs.eventObserver.mu.Lock()
		evs = append([]RequestEvent(nil), obs.done...)
		obs.eventObserver.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	if len(evs) != 2 {
		t.Fatalf("%d request events", len(evs))
	}
	for _, ev := range evs {
		want := map[string]int{"busy": 503, "dead": 0}[ev.Upstream]
		if ev.UpstreamStatus != want {
			t.Errorf("%s: UpstreamStatus %d, want %d", ev.Upstream, ev.UpstreamStatus, want)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !slices.Contains(obs.connects, "busy ok=true") || !slices.Contains(obs.connects, "dead ok=false") {
		t.Errorf("connect events %v, want a timed successful connect to busy and a failed one to dead", obs.connects)
	}
}

// failingBackend answers 500 on /fail, 200 elsewhere (health checks
// included).
func failingBackend(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// TestActiveProbeEndsPassiveCooldown: a target taken out by passive checks
// comes back as soon as an active probe passes, not after the (here one
// hour) cool-down.
func TestActiveProbeEndsPassiveCooldown(t *testing.T) {
	b := failingBackend(t)
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(b)}},
			HealthCheck: HealthCheckConfig{
				Passive: PassiveHealthConfig{MaxFails: 1, Cooldown: time.Hour, UnhealthyStatus: []int{500}},
				Active:  ActiveHealthConfig{Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: time.Second},
			}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	if code, _, _ := get(t, testClient(t), f.url+"/fail"); code != 500 {
		t.Fatalf("status %d", code)
	}
	obs.waitHealth(t, "app "+addrOf(b)+" down")
	obs.waitHealth(t, "app "+addrOf(b)+" up")
	if code, _, _ := get(t, testClient(t), f.url+"/"); code != 200 {
		t.Errorf("after the probe passed: status %d", code)
	}
}

// TestPassiveCooldownEndReported: the end of a passive cool-down is
// reported when it comes (the upstream_target_healthy gauge follows)
// without waiting for a request to notice it.
func TestPassiveCooldownEndReported(t *testing.T) {
	b := failingBackend(t)
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(b)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, Cooldown: 100 * time.Millisecond, UnhealthyStatus: []int{500}}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	get(t, testClient(t), f.url+"/fail")
	obs.waitHealth(t, "app "+addrOf(b)+" down")
	obs.waitHealth(t, "app "+addrOf(b)+" up") // no request in between
}

// TestCoolDownEndReportedAfterReload: a target in its passive cool-down
// when a reload makes a new generation is reported up by the new one when
// the cool-down ends, without a request (the old generation's report
// stopped with it, and the health gauge stayed at 0: a false alert).
func TestCoolDownEndReportedAfterReload(t *testing.T) {
	b := nameBackend(t, "b")
	passive := HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, FailWindow: time.Minute, Cooldown: 200 * time.Millisecond}}
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(b)}}, HealthCheck: passive}},
		Sites:     oneSite(RouteConfig{Upstream: "app"}),
	}
	old, err := New(cfg, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	u := old.upstreams["app"]
	u.fail(u.Targets()[0], "test")
	next := cfg
	next.Previous = old
	obs := newEventObserver()
	p, err := New(next, obs, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old.Close() // the daemon retires the old generation
	want := "app " + addrOf(b) + " up"
	deadline := time.After(3 * time.Second)
	for {
		select {
		case s := <-obs.healthC:
			if s == want {
				return
			}
		case <-deadline:
			obs.mu.Lock()
			defer obs.mu.Unlock()
			t.Fatalf("a cool-down of 200ms ended long ago, no request since: events %v; the new generation never reported the target up", obs.health)
		}
	}
}

// TestActiveProbesRunAtOnce: the targets of an upstream are probed at
// the same time, so that targets that do not answer do not delay, one
// probe timeout each, the probes of the others. Each target's health
// handler waits until all three probes are in progress at once: probed
// one after the other, each probe times out alone and they never are.
func TestActiveProbesRunAtOnce(t *testing.T) {
	const n = 3
	var mu sync.Mutex
	inProgress := 0
	allAtOnce := make(chan struct{})
	var targets []TargetConfig
	for range n {
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			inProgress++
			if inProgress == n {
				close(allAtOnce)
			}
			mu.Unlock()
			defer func() { mu.Lock(); inProgress--; mu.Unlock() }()
			select {
			case <-allAtOnce:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(b.Close)
		targets = append(targets, TargetConfig{Address: addrOf(b)})
	}
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: targets,
			HealthCheck: HealthCheckConfig{
				Passive: PassiveHealthConfig{MaxFails: -1},
				Active:  ActiveHealthConfig{Path: "/healthz", Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond, Rise: 1, Fall: 1},
			}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	newFront(t, cfg, frontOpts{})
	select {
	case <-allAtOnce:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the targets' probes were never in progress at the same time (probed one after the other)")
	}
}

// TestActiveProbeNotQueuedBehindConnCap: with max_conns_per_target, a
// target whose connections all serve long requests (downloads, long
// polls) is busy, not down. The probes went through the requests' pool
// and waited there for a connection until they timed out: the target was
// marked down by its own traffic, and stayed out rise intervals after.
func TestActiveProbeNotQueuedBehindConnCap(t *testing.T) {
	release := make(chan struct{})
	slow := make(chan struct{}, 1)
	var probes atomic.Int64
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			probes.Add(1)
			return
		}
		slow <- struct{}{}
		<-release
		io.WriteString(w, "done")
	}))
	t.Cleanup(b.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(b)}},
			Transport: TransportConfig{MaxConnsPerTarget: 1},
			HealthCheck: HealthCheckConfig{
				Passive: PassiveHealthConfig{MaxFails: -1},
				Active:  ActiveHealthConfig{Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, Rise: 1, Fall: 2},
			}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	c := testClient(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("GET", f.url+"/slow", nil)
		req.Host = "example.test"
		if res, err := c.Do(req); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	select {
	case <-slow:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the slow request never reached the target")
	}
	// The probes that start now find the only connection busy.
	from := probes.Load()
	for i := 0; probes.Load() < from+4; i++ {
		if downs := obs.downs(); len(downs) > 0 {
			t.Fatalf("a busy target was marked down by its probes: %v", downs)
		}
		if i == 2000 {
			t.Fatalf("%d probes reached the target while its only connection was busy, want 4", probes.Load()-from)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if downs := obs.downs(); len(downs) > 0 {
		t.Fatalf("a busy target was marked down by its probes: %v", downs)
	}
	unblock()
	<-done
}

// TestCoolDownEndOneTimerPerTarget: every trip of a target's passive
// check scheduled the report of its cool-down's end with a timer of its
// own, kept for the whole cool-down. While every target is down, each
// request still goes to one (soonestBack) and fails, so the timers, some
// 160 bytes each, grew with the request rate times the cool-down. The
// report is scheduled by one timer per target, moved at each trip.
func TestCoolDownEndOneTimerPerTarget(t *testing.T) {
	u := testUpstream(t, "round_robin", TargetConfig{Address: "a:1"})
	u.passive = PassiveHealthConfig{MaxFails: 1, FailWindow: time.Hour, Cooldown: time.Hour}
	tg := u.Targets()[0]
	const n = 200000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		u.fail(tg, "refused")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Fatalf("%d failures of a down target keep %d bytes for the cool-down", n, grew)
	}
	if tg.Healthy() {
		t.Fatal("the target is not down (test premise)")
	}
}

// TestCoolDownEndReportedAfterRetrip: a target tripped again during its
// cool-down is reported up when the later cool-down ends.
func TestCoolDownEndReportedAfterRetrip(t *testing.T) {
	obs := newEventObserver()
	u, err := newUpstream(&UpstreamConfig{Name: "u", Targets: []TargetConfig{{Address: "a:1"}},
		HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, FailWindow: time.Hour, Cooldown: 100 * time.Millisecond}}}, obs, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.close)
	tg := u.Targets()[0]
	u.fail(tg, "refused")
	obs.waitHealth(t, "u a:1 down")
	time.Sleep(50 * time.Millisecond)
	u.fail(tg, "refused") // extends the cool-down
	obs.waitHealth(t, "u a:1 up")
	if tg.downUntil.Load() != 0 {
		t.Fatal("reported up while down")
	}
}

// TestUnaskedSwitchIsTargetFailure: a target that answers a request with
// a switch to a protocol the request did not ask for (RFC 9110 §15.2.2)
// breaks it (502), as a malformed response does, and the passive check
// counts it: the failure was not counted, and such a target kept its
// share of requests, every one of them failed.
func TestUnaskedSwitchIsTargetFailure(t *testing.T) {
	bad := connBackend(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: sneaky\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	good := nameBackend(t, "good")
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: bad}, {Address: addrOf(good)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, FailWindow: time.Minute, Cooldown: time.Hour}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{obs: obs})
	c := testClient(t)
	failed := 0
	for range 6 {
		if code, _, _ := get(t, c, f.url+"/", "Host", "example.test"); code != 200 {
			failed++
		}
	}
	if failed > 1 {
		t.Fatalf("%d of 6 requests failed: the target that switches unasked stays in rotation", failed)
	}
	if downs := obs.downs(); len(downs) != 1 || downs[0] != "app "+bad+" down" {
		t.Fatalf("health events %v, want the switching target down", downs)
	}
}

// TestRetiredProxyFollowsNextChecks: a proxy a reload retired stops its
// active checks (one generation per reload, draining WebSockets for hours,
// would each probe on); the traffic it still steers follows the checks of
// the proxy in force for the same target, and what it has in flight on a
// target counts in the newer proxy's in-flight figure (least_conn,
// max_conns_per_target).
func TestRetiredProxyFollowsNextChecks(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	var mu sync.Mutex
	probes := map[string]int{}
	checked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		probes[r.Host]++
		mu.Unlock()
		w.WriteHeader(int(status.Load()))
	}))
	defer checked.Close()
	count := func(host string) int {
		mu.Lock()
		defer mu.Unlock()
		return probes[host]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	active := func(host string) HealthCheckConfig {
		return HealthCheckConfig{Active: ActiveHealthConfig{Path: "/", Host: host, Interval: 5 * time.Millisecond, Timeout: time.Second, Rise: 1, Fall: 1}}
	}
	targets := []TargetConfig{{Address: addrOf(checked)}, {Address: "127.0.0.1:1"}}
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: targets, HealthCheck: active("old")}},
		Sites:     oneSite(RouteConfig{Upstream: "app"}),
	}
	oldObs := newEventObserver()
	old, err := New(cfg, oldObs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	waitFor("the old proxy's probes", func() bool { return count("old") >= 2 })

	next := cfg
	next.Upstreams = []UpstreamConfig{{Name: "app", Targets: targets, HealthCheck: active("new")}}
	next.Previous = old
	p, err := New(next, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	oldT, newT := old.upstreams["app"].Targets()[0], p.upstreams["app"].Targets()[0]

	// In flight on the old generation counts for the new one.
	oldT.inflight.Add(1)
	if got := newT.InFlight(); got != 1 {
		t.Errorf("the new proxy's target has %d in flight, want the old generation's 1", got)
	}
	oldT.inflight.Add(-1)

	old.Retire(p)
	// At most the probe in progress at Retire ends after it.
	stopped := count("old")
	base := count("new")
	waitFor("the new proxy's probes", func() bool { return count("new") >= base+10 })
	if n := count("old") - stopped; n > 1 {
		t.Errorf("the retired proxy probed %d more times", n)
	}

	// The new proxy's checks take the target down: the retired proxy's
	// traffic avoids it, though the retired proxy's own checks last saw
	// it up; and back up with them.
	status.Store(500)
	waitFor("the new proxy's checks to take the target down", func() bool { return !newT.Healthy() })
	if oldT.Healthy() {
		t.Error("the retired proxy still sends traffic to a target the checks in force say is down")
	}
	status.Store(200)
	waitFor("the new proxy's checks to bring the target back", func() bool { return newT.Healthy() })
	if !oldT.Healthy() {
		t.Error("the retired proxy does not follow the target back up")
	}
	// A failure the retired proxy's traffic meets still takes the target
	// out of its picks, but is not reported: the proxy in force reports.
	old.upstreams["app"].fail(oldT, "test")
	if oldT.Healthy() {
		t.Error("a passive failure in the retired proxy did not take the target out")
	}
	for _, d := range oldObs.downs() {
		if d == "app "+addrOf(checked)+" down" {
			t.Errorf("the retired proxy reported health: %v", d)
		}
	}
}

// TestRetireCutsNoProbeIntoDown: a probe in progress when a reload retires
// its proxy is cut, and that is no verdict on the target: a target the
// newer generation no longer has (so the retired proxy keeps the state it
// last saw) stays up for the traffic the retired proxy still steers.
func TestRetireCutsNoProbeIntoDown(t *testing.T) {
	var hold atomic.Bool
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	checked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer checked.Close()
	defer close(release)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(checked)}},
			HealthCheck: HealthCheckConfig{Active: ActiveHealthConfig{Path: "/", Interval: 5 * time.Millisecond, Timeout: time.Minute, Rise: 1, Fall: 1}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	old, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	hold.Store(true)
	select {
	case <-entered:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("no probe reached the backend")
	}
	oldT := old.upstreams["app"].Targets()[0]
	if !oldT.Healthy() {
		t.Fatal("the target is down before the reload")
	}
	old.Retire(nil) // the reload removed the upstream
	// The cut probe ends the active loop: wait for it.
	old.upstreams["app"].healthWG.Wait()
	if !oldT.Healthy() {
		t.Error("the probe the reload cut took the target down")
	}
}

// TestPassiveStateOnMonotonicClock: a passive cool-down and the failure
// window are durations, kept on the monotonic clock. On the wall clock a
// step back (NTP, a resumed VM) kept a target out of balancing for the
// length of the step on top of its cool-down, and counted failures older
// than the window; a step forward ended cool-downs at once. The instants
// recorded must be monoclock readings.
func TestPassiveStateOnMonotonicClock(t *testing.T) {
	u := testUpstream(t, "round_robin", TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1"})
	u.passive = PassiveHealthConfig{MaxFails: 2, FailWindow: time.Hour, Cooldown: time.Hour}
	tg := u.Targets()[0]
	tg.fails = make([]int64, 2)
	before := monoclock.Now()
	u.fail(tg, "x")
	after := monoclock.Now()
	tg.failMu.Lock()
	f := tg.fails[0]
	tg.failMu.Unlock()
	if f < before || f > after {
		t.Errorf("failure recorded at %d, not a monotonic reading within [%d, %d]", f, before, after)
	}
	u.fail(tg, "x")
	if tg.Healthy() {
		t.Fatal("up after 2 of 2 failures")
	}
	after = monoclock.Now()
	if d := tg.downUntil.Load(); d < before+int64(time.Hour) || d > after+int64(time.Hour) {
		t.Errorf("down until %d, not a monotonic reading an hour after [%d, %d]", d, before, after)
	}
	// An active probe that started after the target was taken out ends
	// the cool-down; one that started before does not.
	u.passedProbe(tg, time.Now().Add(-time.Minute))
	if tg.Healthy() {
		t.Error("a probe started before the failures ended the cool-down")
	}
	u.passedProbe(tg, time.Now())
	if !tg.Healthy() {
		t.Error("a probe started after the failures did not end the cool-down")
	}
}
