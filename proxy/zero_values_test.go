package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestPassiveHealthOff: MaxFails < 0 (what the config's max_fails: 0 maps
// to) never ejects a target, however many failures it answers.
func TestPassiveHealthOff(t *testing.T) {
	var badHits atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		badHits.Add(1)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(bad.Close)
	good := nameBackend(t, "good")
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: addrOf(bad)}, {Address: addrOf(good)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1, Cooldown: time.Hour, UnhealthyStatus: []int{503}}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for range 6 {
		get(t, c, f.url+"/")
	}
	// Round robin over two targets: the failing one keeps its turns.
	if n := badHits.Load(); n != 3 {
		t.Fatalf("failing target answered %d of 6 requests, want 3 (passive health checks are off)", n)
	}
}

// TestKeepaliveOff: MaxIdleConns < 0 (what the config's keepalive.max_idle:
// 0 maps to) opens a new backend connection for every request.
func TestKeepaliveOff(t *testing.T) {
	for _, tc := range []struct {
		maxIdle, want int64
	}{{-1, 3}, {0, 1}} {
		var conns atomic.Int64
		e := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
		e.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		e.Start()
		t.Cleanup(e.Close)
		u := upstream("e", addrOf(e))
		u.Transport.MaxIdleConns = int(tc.maxIdle)
		f := newFront(t, Config{Upstreams: []UpstreamConfig{u}, Sites: oneSite(RouteConfig{Upstream: "e"})}, frontOpts{})
		c := testClient(t)
		for range 3 {
			if code, _, _ := get(t, c, f.url+"/"); code != 200 {
				t.Fatalf("status %d", code)
			}
		}
		if n := conns.Load(); n != tc.want {
			t.Errorf("MaxIdleConns %d: %d backend connections for 3 requests, want %d", tc.maxIdle, n, tc.want)
		}
	}
}

// TestActiveHealthNegativeDurations: a negative interval or timeout of
// the active checks is refused by New. The interval went to
// time.NewTicker in the checker's goroutine, whose panic ended the
// process; a negative timeout failed every probe at once and took every
// target out.
func TestActiveHealthNegativeDurations(t *testing.T) {
	for _, a := range []ActiveHealthConfig{
		{Path: "/healthz", Interval: -time.Second},
		{Path: "/healthz", Timeout: -time.Second},
	} {
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{{Address: "127.0.0.1:1"}},
				HealthCheck: HealthCheckConfig{Active: a}}},
			Sites: oneSite(RouteConfig{Upstream: "app"}),
		}
		p, err := New(cfg, NopObserver{}, testLogger(t))
		if err == nil {
			p.Close()
			t.Errorf("interval %v, timeout %v: accepted", a.Interval, a.Timeout)
		}
	}
}
