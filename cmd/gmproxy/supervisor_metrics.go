package main

import (
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/gmproxy/gmproxy/metrics"
)

// mergeRule says how the values of one series from several workers
// combine into the supervisor's /metrics.
type mergeRule int

const (
	mergeSum mergeRule = iota // counters, histograms, and gauges that count
	mergeMax                  // timestamps and info gauges (equal or latest)
	mergeMin                  // "1 when ok" gauges: ok only when ok on every worker
)

// gaugeRule: a gauge is summed unless its name says it is a point in time,
// an info metric, a setting every worker has alike (GOGC, and the
// process's limits: each worker may open process_max_fds descriptors, the
// workers together not N times as many; unlimited is -1; GOMEMLIMIT, each
// worker's share of the supervisor's (workerEnv gives every worker the
// same), or math.MaxInt64 when unlimited, which summed is a number no
// limit can be), or a per-worker yes/no. A certificate's expiry is the earliest of the workers': one
// started again after a crash reads the certificate renewed on disk while
// the others serve the old one until a reload, and the latest would hide
// from an expiry alert the certificate most workers still serve. A
// stapled OCSP response's nextUpdate is the earliest too: each worker
// fetches its own. Its certificate status (0 good, 1 revoked, 2 unknown)
// is the largest: a worker told "revoked" shows, not hidden by one that
// has not asked since.
func gaugeRule(name string) mergeRule {
	switch {
	case strings.HasSuffix(name, "_not_after_timestamp_seconds"), name == "gmproxy_ocsp_next_update_timestamp_seconds":
		return mergeMin
	case name == "gmproxy_ocsp_cert_status":
		return mergeMax
	case strings.HasSuffix(name, "_timestamp_seconds"), strings.HasSuffix(name, "_time_seconds"), strings.HasSuffix(name, "_info"),
		name == "go_gc_gogc_percent", name == "go_gc_gomemlimit_bytes", name == "process_max_fds", name == "process_virtual_memory_max_bytes":
		return mergeMax
	case strings.HasSuffix(name, "_healthy"), strings.HasSuffix(name, "_successful"):
		return mergeMin
	}
	return mergeSum
}

// namespaceCounters are counters a worker's process collector reads from
// the network namespace (/proc/PID/net/netstat), not from its own process:
// every worker reports the same totals, and one started again reports the
// whole total at once. Summed, they would count the traffic once per
// worker and again at every restart; the merge keeps the largest reading.
var namespaceCounters = map[string]bool{
	"process_network_receive_bytes_total":  true,
	"process_network_transmit_bytes_total": true,
}

// ruleFor is how the series of family name, of type t, combine.
func ruleFor(name string, t dto.MetricType) mergeRule {
	switch {
	case t == dto.MetricType_GAUGE:
		return gaugeRule(name)
	case t == dto.MetricType_COUNTER && namespaceCounters[name]:
		return mergeMax
	}
	return mergeSum
}

// parseMetrics reads one worker's text exposition.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// labelKey identifies a series within its family.
func labelKey(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		b.WriteString(l.GetName())
		b.WriteByte(0)
		b.WriteString(l.GetValue())
		b.WriteByte(0)
	}
	return b.String()
}

// mergeFamilies combines the workers' families: series with the same
// labels are summed (counters, untyped values, histogram buckets, counts
// and sums, summary counts and sums; summary quantiles do not add up and
// are dropped) or combined by ruleFor.
func mergeFamilies(all []map[string]*dto.MetricFamily) []*dto.MetricFamily {
	merged := map[string]*dto.MetricFamily{}
	series := map[string]map[string]*dto.Metric{}
	for _, fams := range all {
		for name, f := range fams {
			mf, ok := merged[name]
			if !ok {
				mf = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
				merged[name] = mf
				series[name] = map[string]*dto.Metric{}
			}
			if mf.GetType() != f.GetType() {
				continue // workers of different builds; keep the first type
			}
			for _, m := range f.GetMetric() {
				k := labelKey(m)
				if cur, ok := series[name][k]; ok {
					addMetric(cur, m, mf.GetType(), ruleFor(name, mf.GetType()))
					continue
				}
				c := proto.Clone(m).(*dto.Metric)
				if s := c.GetSummary(); s != nil {
					s.Quantile = nil
				}
				c.TimestampMs = nil
				series[name][k] = c
				mf.Metric = append(mf.Metric, c)
			}
		}
	}
	out := slices.Collect(maps.Values(merged))
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

func combine(a, b float64, r mergeRule) float64 {
	switch r {
	case mergeMax:
		return max(a, b)
	case mergeMin:
		return min(a, b)
	}
	return a + b
}

// addMetric adds m into cur (same family, same labels).
func addMetric(cur, m *dto.Metric, t dto.MetricType, rule mergeRule) {
	switch t {
	case dto.MetricType_COUNTER:
		cur.Counter.Value = proto.Float64(combine(cur.GetCounter().GetValue(), m.GetCounter().GetValue(), rule))
	case dto.MetricType_GAUGE:
		cur.Gauge.Value = proto.Float64(combine(cur.GetGauge().GetValue(), m.GetGauge().GetValue(), rule))
	case dto.MetricType_UNTYPED:
		cur.Untyped.Value = proto.Float64(cur.GetUntyped().GetValue() + m.GetUntyped().GetValue())
	case dto.MetricType_SUMMARY:
		s, o := cur.GetSummary(), m.GetSummary()
		s.SampleCount = proto.Uint64(s.GetSampleCount() + o.GetSampleCount())
		s.SampleSum = proto.Float64(s.GetSampleSum() + o.GetSampleSum())
	case dto.MetricType_HISTOGRAM:
		h, o := cur.GetHistogram(), m.GetHistogram()
		h.SampleCount = proto.Uint64(h.GetSampleCount() + o.GetSampleCount())
		h.SampleSum = proto.Float64(h.GetSampleSum() + o.GetSampleSum())
		// Buckets with the same upper bounds add up; a worker with other
		// bounds (another build) keeps only count and sum: the buckets
		// of the others would count their observations alone, below
		// the count, and their +Inf would not be it.
		same := len(h.Bucket) == len(o.Bucket)
		for i := 0; same && i < len(h.Bucket); i++ {
			same = h.Bucket[i].GetUpperBound() == o.Bucket[i].GetUpperBound()
		}
		if !same {
			h.Bucket = nil
			return
		}
		for i, b := range h.Bucket {
			b.CumulativeCount = proto.Uint64(b.GetCumulativeCount() + o.Bucket[i].GetCumulativeCount())
		}
	}
}

// writeFamilies writes families in the text exposition format.
func writeFamilies(w io.Writer, fams []*dto.MetricFamily) error {
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(w, f); err != nil {
			return err
		}
	}
	return nil
}

// cumulative keeps the supervisor's sums of counters, histograms and
// summaries from going down when a worker dies (a restarted worker counts
// from zero) or misses a scrape: Prometheus would take the drop for a
// reset and count the surviving workers' totals again in rate() and
// increase(). It remembers each worker's last exposition of those types;
// a worker that is gone leaves it in retired, which is added to every
// later sum (what a worker counted between its last scrape and its death
// is not known).
type cumulative struct {
	mu      sync.Mutex
	last    map[*workerProc]map[string]*dto.MetricFamily
	retired map[string]*dto.MetricFamily
}

// update takes the expositions of the live workers procs (nil where a
// scrape failed) and returns what to merge: each live worker's current
// exposition, or its last one when the scrape failed, and the retired sums.
func (c *cumulative) update(procs []*workerProc, scraped []map[string]*dto.MetricFamily) []map[string]*dto.MetricFamily {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[*workerProc]map[string]*dto.MetricFamily{}
	}
	live := map[*workerProc]bool{}
	out := make([]map[string]*dto.MetricFamily, 0, len(procs)+1)
	for i, p := range procs {
		live[p] = true
		if scraped[i] == nil {
			out = append(out, c.last[p])
			continue
		}
		c.last[p] = cumulativeOnly(scraped[i])
		out = append(out, scraped[i])
	}
	for p, fams := range c.last {
		if !live[p] {
			c.retired = mergeIndex(mergeFamilies([]map[string]*dto.MetricFamily{c.retired, fams}))
			delete(c.last, p)
		}
	}
	return append(out, c.retired)
}

// cutFamily is the counter of connections cut whose series of a listener
// a reload removed the workers keep until the next reload (metrics.Retain).
const cutFamily = "gmproxy_connections_cut_total"

// retain drops from the sums kept of workers (gone ones, and the last
// exposition of live ones) the series of listeners, sites, routes,
// upstreams, targets and key servers that configuration n no longer has,
// as each worker's metrics.Retain does with its own: the cut connections
// of a listener of the configuration before, before, are kept until the
// next reload (a dead worker's dropped while the live ones' stay would
// make the sum go down, a counter reset to rate()). The maps are
// replaced, not changed: an update's result may still be being merged.
func (c *cumulative) retain(before []string, n metrics.ConfigNames) {
	keep := n.Keep()
	kept := make(map[string]bool)
	for _, l := range append(slices.Clone(before), n.Listeners...) {
		kept[l] = true
	}
	keepCut := func(label, value string) bool {
		if label == "listener" {
			return value == metrics.Other || value == metrics.None || kept[value]
		}
		return keep(label, value)
	}
	retained := func(fams map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
		out := keptFamilies(fams, keep, n.KeepRoute, n.KeepStream)
		delete(out, cutFamily)
		if f := fams[cutFamily]; f != nil {
			maps.Copy(out, keptFamilies(map[string]*dto.MetricFamily{cutFamily: f}, keepCut, n.KeepRoute, n.KeepStream))
		}
		return out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired != nil {
		c.retired = retained(c.retired)
	}
	for p, fams := range c.last {
		c.last[p] = retained(fams)
	}
}

// keptFamilies returns the series of fams whose every label keep keeps,
// whose site and route, if both, keepRoute keeps, and whose site and
// upstream, if both (the stream series), keepStream keeps, in new
// families (fams is not changed).
func keptFamilies(fams map[string]*dto.MetricFamily, keep func(label, value string) bool, keepRoute, keepStream func(site, v string) bool) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(fams))
	for name, f := range fams {
		var ms []*dto.Metric
	series:
		for _, m := range f.GetMetric() {
			site, route, upstream := "", "", ""
			for _, lp := range m.GetLabel() {
				if !keep(lp.GetName(), lp.GetValue()) {
					continue series
				}
				switch lp.GetName() {
				case "site":
					site = lp.GetValue()
				case "route":
					route = lp.GetValue()
				case "upstream":
					upstream = lp.GetValue()
				}
			}
			if route != "" && !keepRoute(site, route) {
				continue
			}
			if site != "" && upstream != "" && !keepStream(site, upstream) {
				continue
			}
			ms = append(ms, m)
		}
		if len(ms) > 0 {
			out[name] = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit, Metric: ms}
		}
	}
	return out
}

// cumulativeOnly returns the families of fams whose values only grow.
func cumulativeOnly(fams map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := map[string]*dto.MetricFamily{}
	for name, f := range fams {
		switch f.GetType() {
		case dto.MetricType_COUNTER, dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY:
			out[name] = f
		}
	}
	return out
}

// mergeIndex indexes merged families by name.
func mergeIndex(fams []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// retainSeries drops from what counted keeps the series configuration n,
// which replaced before, no longer has (cumulative.retain), after the
// scrape in progress if any: that scrape read the workers before they
// reloaded, and what it keeps would bring the removed series back.
func (s *supervisor) retainSeries(before, n metrics.ConfigNames) {
	s.scrapes.Lock()
	defer s.scrapes.Unlock()
	s.counted.retain(before.Listeners, n)
}
