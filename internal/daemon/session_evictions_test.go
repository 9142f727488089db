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
		st := env.store(fmt.Sprintf("tlcp-sessions/%d/%s", size, life), nil).(tlcp.SessionStore)
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
