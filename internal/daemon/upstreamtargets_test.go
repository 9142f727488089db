package daemon

import (
	"testing"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/metrics"
)

// TestUpstreamTargetsNameStreamTargets: a stream site with a single
// target gets an upstream of its own, which reports its target's health
// as the upstreams of the configuration do. UpstreamTargets names it, so
// that Retain keeps its series instead of deleting them as those of an
// upstream the configuration removed.
func TestUpstreamTargetsNameStreamTargets(t *testing.T) {
	b := newBackend(t)
	target := b.Listener.Addr().String()
	cfg := testConfig(t, target)
	cfg.Sites[1].Routes = nil
	cfg.Sites[1].Stream = &conf.Stream{Target: target}
	_, m := startMetricsDaemon(t, cfg)

	healthy := func() float64 { return metricValue(t, m, "gmproxy_upstream_target_healthy", "target="+target) }
	// Both upstreams, app and the stream's, report the one target.
	waitMetric(t, m, "the targets' health", func(v float64) bool { return v == 2 }, "gmproxy_upstream_target_healthy", "target="+target)

	var sites []string
	for _, s := range cfg.Sites {
		sites = append(sites, s.Name)
	}
	m.Retain(metrics.ConfigNames{Listeners: []string{cfg.Listeners[0].Address}, Sites: sites, Upstreams: UpstreamTargets(cfg)})
	if v := healthy(); v != 2 {
		t.Errorf("after Retain of the same configuration: %v healthy series of %s, want 2 (app's and the stream's)", v, target)
	}
}
