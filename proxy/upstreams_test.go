package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestMaxConnsPerTargetOverAllRequests: the cap on connections per target
// holds over requests of every kind: those the HTTP/1.1 client carries
// (no body) and those net/http's Transport does (a large body); with two
// pools each kept its own connections, and the target saw twice the cap.
func TestMaxConnsPerTargetOverAllRequests(t *testing.T) {
	var mu sync.Mutex
	open, peak := 0, 0
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	b := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		started <- struct{}{}
		<-release
		io.WriteString(w, "ok\n")
	}))
	b.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open++
			peak = max(peak, open)
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	cfg := proxyTo(addrOf(b))
	cfg.Upstreams[0].Transport.MaxIdleConns = 32
	cfg.Upstreams[0].Transport.MaxConnsPerTarget = 2
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	run := func(method string, body []byte) {
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(method, f.url+"/", bytes.NewReader(body))
				if body == nil {
					req.Body = nil
				}
				req.Host = "example.test"
				res, err := c.Do(req)
				if err != nil {
					t.Errorf("%s: %v", method, err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}()
		}
		for range 2 {
			select {
			case <-started:
			case <-time.After(testwait.Bound(10 * time.Second)):
				t.Fatal("backend not reached")
			}
		}
		release <- struct{}{}
		release <- struct{}{}
		wg.Wait()
	}
	run("GET", nil)
	run("POST", bytes.Repeat([]byte("b"), 2*maxH1Body))
	run("GET", nil)
	mu.Lock()
	defer mu.Unlock()
	if peak > 2 {
		t.Errorf("the target saw %d connections open at once with a cap of 2", peak)
	}
}

// TestLoneTargetTriedDuringCoolDown: a single target that failed (it
// restarted) and was taken out by passive checks is tried again while no
// other is available, instead of every request getting 503 for the whole
// cool-down; once it is back, requests succeed.
func TestLoneTargetTriedDuringCoolDown(t *testing.T) {
	r := newRestartable(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: r.addr}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, Cooldown: time.Hour}}}},
		Sites: oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	r.stop()
	if code, _, _ := get(t, c, f.url+"/"); code != http.StatusBadGateway {
		t.Fatalf("target stopped: %d, want 502", code)
	}
	if f.p.Upstream("u").Targets()[0].Healthy() {
		t.Fatal("the failed target is not taken out (test premise)")
	}
	r.start()
	if code, body, _ := get(t, c, f.url+"/"); code != 200 || body != "ok" {
		t.Errorf("the lone target, back, during its cool-down: %d %q, want 200", code, body)
	}
}

// TestUpstreamCloseConcurrent: Shutdown and Close may close the same
// upstreams at once (a signal during a drain, a test's cleanup); closing
// its health channel twice would panic the daemon.
func TestUpstreamCloseConcurrent(t *testing.T) {
	uc := upstream("app", "127.0.0.1:1")
	for range 1000 {
		u, err := newUpstream(&uc, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				<-start
				u.close()
			})
		}
		close(start)
		wg.Wait()
	}
}
