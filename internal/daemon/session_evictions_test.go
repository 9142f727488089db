package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestSessionEvictionsCountedOnce: reloads that change
// sessions.cache_size and change it back make the TLCP session cache of
// the first size serve again; gmproxy_session_cache_evictions_total must
// count each eviction once, not again the evictions that cache counted
// before.
func TestSessionEvictionsCountedOnce(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	env := &Env{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Sessions: m}
	t.Cleanup(env.Close)
	n := 0
	build := func(size int, puts int) {
		t.Helper()
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.CacheSize = size
		gen, err := Build(cfg, env)
		if err != nil {
			t.Fatal(err)
		}
		defer gen.Close()
		life := conf.DefaultSessionLifetime
		if cfg.Sessions.Lifetime > 0 {
			life = cfg.Sessions.Lifetime
		}
		st := env.store(0, fmt.Sprintf("tlcp-sessions/%d/%s", size, life), nil).(tlcp.SessionStore)
		for range puts {
			n++
			st.Put("session-"+strconv.Itoa(n), []byte("state"), 0)
		}
	}
	build(1, 3) // 2 evictions
	build(2, 1) // none
	build(1, 1) // 1 more
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "gmproxy_session_cache_evictions_total" {
			for _, mt := range mf.GetMetric() {
				got = mt.GetCounter().GetValue() // protocol="tlcp", the only one
			}
		}
	}
	if got != 3 {
		t.Errorf("gmproxy_session_cache_evictions_total = %v, want 3", got)
	}
}

// TestSessionStoresDroppedWhenUnused: the TLCP session store of a
// sessions.cache_size (or lifetime) a reload changed is dropped once the
// new generation serves, not kept with its sessions for the life of the
// process; one the new generation uses again is kept (its sessions
// survive the reload), and a build that never serves (a refused reload)
// drops nothing.
func TestSessionStoresDroppedWhenUnused(t *testing.T) {
	b := newBackend(t)
	env := &Env{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(env.Close)
	key := func(size int) string {
		return fmt.Sprintf("tlcp-sessions/%d/%s", size, conf.DefaultSessionLifetime)
	}
	held := func(size int) any {
		env.mu.Lock()
		defer env.mu.Unlock()
		if se := env.stores[key(size)]; se != nil {
			return se.v
		}
		return nil
	}
	build := func(size int, serve bool) {
		t.Helper()
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.CacheSize = size
		cfg.Sessions.Lifetime = 0
		gen, err := Build(cfg, env)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(gen.Close)
		if serve {
			gen.Installed()
		}
	}
	build(100, true)
	first := held(100)
	if first == nil {
		t.Fatal("no store for cache_size 100")
	}
	build(100, true)
	if held(100) != first {
		t.Error("a reload with the same cache_size replaced the session store")
	}
	build(200, false) // refused
	if held(100) != first || held(200) == nil {
		t.Error("a build that never served dropped the serving store")
	}
	build(200, true)
	if held(100) != nil {
		t.Error("the store of cache_size 100 is still held after a reload to 200 served")
	}
	if held(200) == nil {
		t.Error("the serving generation's store was dropped")
	}
}
