package daemon

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/metrics"
)

// TestRetiredGenerationReportsNoHealth: a generation a reload retired
// stops probing while it drains what was in flight (its traffic follows
// the checks in force); its view of a target is no longer the one in
// force, and a target the reload removed must not come back in
// gmproxy_upstream_target_healthy.
func TestRetiredGenerationReportsNoHealth(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32
	status.Store(200)
	var probes atomic.Int32
	checked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(checked.Close)
	target := checked.Listener.Addr().String()

	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Upstreams = append(cfg.Upstreams, conf.Upstream{Name: "checked", Targets: []conf.Target{{Address: target, Weight: 1}},
		HealthChecks: conf.HealthChecks{Active: &conf.ActiveHealth{Path: "/", Interval: 10 * time.Millisecond, Timeout: time.Second, Rise: 1, Fall: 1}}})
	cfg.Sites[0].Routes = append([]conf.Route{{Name: "checked", PathPrefix: "/checked", Upstream: "checked"}}, cfg.Sites[0].Routes...)
	td := &testDaemon{cfg: cfg}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	td.env = &Env{Logger: log, ProxyObserver: m}
	d, err := New(func() (*Generation, error) {
		td.mu.Lock()
		defer td.mu.Unlock()
		return Build(td.cfg, td.env)
	}, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); td.env.Close() })
	addr := d.Addr(cfg.Listeners[0].Address)

	// A request that keeps the first generation serving after the reload.
	c := tlsClient(t, addr, "localhost", true)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get("https://localhost/slow")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	t.Cleanup(func() { close(b.release); <-done })

	// The reload removes the checked upstream; the next generation probes
	// another, which keeps time.
	var ticks atomic.Int32
	clock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ticks.Add(1) }))
	t.Cleanup(clock.Close)
	next := testConfig(t, b.Listener.Addr().String())
	next.Upstreams = append(next.Upstreams, conf.Upstream{Name: "clock", Targets: []conf.Target{{Address: clock.Listener.Addr().String(), Weight: 1}},
		HealthChecks: conf.HealthChecks{Active: &conf.ActiveHealth{Path: "/", Interval: 10 * time.Millisecond, Timeout: time.Second, Rise: 1, Fall: 1}}})
	td.mu.Lock()
	td.cfg = next
	td.mu.Unlock()
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	m.Retain(metrics.ConfigNames{Listeners: []string{next.Listeners[0].Address}, Sites: []string{"main", "other"},
		Routes: []string{"all", "fixed"}, Upstreams: map[string][]string{"app": {b.Listener.Addr().String()}}})

	// The target would fail its checks, but the retired generation no
	// longer probes it: at most the probe under way at the reload ends
	// while the next generation probes ten times.
	status.Store(500)
	stopped := probes.Load()
	for i, n := 0, ticks.Load()+10; ticks.Load() < n; i++ {
		if i == 4000 {
			t.Fatal("the next generation does not probe")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := probes.Load() - stopped; n > 1 {
		t.Errorf("the retired generation probed %d more times", n)
	}
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gmproxy_upstream_target_healthy" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetValue() == "checked" || l.GetValue() == target {
					t.Errorf("health of a target the reload removed: %v", mt)
				}
			}
		}
	}
}

// TestRefusedReloadReportsNoHealth: a reload whose generation is built
// and then refused (here a listener address already in use) never served:
// the targets of its upstreams must not appear in
// gmproxy_upstream_target_healthy (an alert would watch a target that is
// not configured).
func TestRefusedReloadReportsNoHealth(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := &testDaemon{cfg: cfg}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	td.env = &Env{Logger: log, ProxyObserver: m}
	d, err := New(func() (*Generation, error) {
		td.mu.Lock()
		defer td.mu.Unlock()
		return Build(td.cfg, td.env)
	}, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); td.env.Close() })

	next := testConfig(t, b.Listener.Addr().String())
	next.Upstreams = append(next.Upstreams, conf.Upstream{Name: "extra", Targets: []conf.Target{{Address: "127.0.0.1:1", Weight: 1}}})
	next.Sites[0].Routes = append([]conf.Route{{Name: "extra", PathPrefix: "/extra", Upstream: "extra"}}, next.Sites[0].Routes...)
	busy := next.Listeners[0]
	busy.Address = b.Listener.Addr().String() // taken by the backend
	next.Listeners = append(next.Listeners, busy)
	td.mu.Lock()
	td.cfg = next
	td.mu.Unlock()
	if err := d.Reload(); err == nil {
		t.Fatal("reload onto an address in use succeeded")
	}
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "gmproxy_upstream_target_healthy" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				switch l.GetValue() {
				case "extra":
					t.Errorf("health of a target of a refused reload: %v", mt)
				case "app":
					found = true
				}
			}
		}
	}
	if !found {
		t.Error("the running generation's target health is not reported")
	}
}

// TestDrainingGenerationHoldsNoLaterOne: a generation that drains across
// several reloads (a long request) follows the checks in force without
// keeping the generations retired after it: one that has drained is
// freed, however long the first one drains.
func TestDrainingGenerationHoldsNoLaterOne(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := startDaemon(t, cfg)
	c := tlsClient(t, td.Addr(cfg.Listeners[0].Address), "localhost", true)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get("https://localhost/slow")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	t.Cleanup(func() { close(b.release); <-done })

	if err := td.Reload(); err != nil { // the slow request's generation drains
		t.Fatal(err)
	}
	td.Daemon.mu.Lock()
	second := td.Daemon.gen
	td.Daemon.mu.Unlock()
	w := weak.Make(second.Proxy.Upstream(cfg.Upstreams[0].Name))
	second = nil
	for range 2 {
		if err := td.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	// The second generation served nothing: it is closed at once, and
	// nothing should keep it.
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for {
		runtime.GC()
		if w.Value() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a generation that drained is kept alive by one still draining")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
