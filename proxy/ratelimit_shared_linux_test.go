package proxy

import (
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/rateshare"
)

// TestRouteRateLimitShared: two proxies counting in one shared table (two
// workers, which the kernel hands one client's connections in turn) give
// a client one allowance per route between them, not one each.
func TestRouteRateLimitShared(t *testing.T) {
	f, err := rateshare.Create()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tab, err := rateshare.Map(f)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRawRecorder(t)
	front := func(w int) *front {
		v, err := tab.Worker(w)
		if err != nil {
			t.Fatal(err)
		}
		return newFront(t, Config{
			TrustedProxies: []string{"127.0.0.1"},
			Upstreams:      []UpstreamConfig{upstream("u", rec.addr)},
			Sites:          oneSite(RouteConfig{Name: "login", RateLimit: &RateLimitConfig{Interval: time.Hour, Burst: 2}, Upstream: "u"}),
			SharedRates:    v,
		}, frontOpts{})
	}
	a, b := front(0), front(1)
	get := func(client string) string {
		return "GET /login HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\nX-Forwarded-For: " + client + "\r\n\r\n"
	}
	wantForwarded(t, a.addr, rec, get("198.51.100.7"), "GET /login ")
	wantForwarded(t, b.addr, rec, get("198.51.100.7"), "GET /login ")
	wantForwarded(t, a.addr, rec, get("198.51.100.7"), "GET /login ")
	wantNotForwarded(t, b.addr, rec, get("198.51.100.7"), "429")
	wantNotForwarded(t, a.addr, rec, get("198.51.100.7"), "429")
	wantForwarded(t, b.addr, rec, get("198.51.100.8"), "GET /login ") // another client
}
