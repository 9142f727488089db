package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
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
	tg := u.targets[0]
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
	t2 := u2.targets[0]
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
