package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/metrics"
)

// TestMergedCountersNeverDecrease: the supervisor's sums of counters and
// histograms stay monotonic when a worker restarts (its successor counts
// from zero) or misses a scrape; gauges are the live workers' only.
func TestMergedCountersNeverDecrease(t *testing.T) {
	expo := func(handshakes, seconds float64, inFlight int) map[string]*dto.MetricFamily {
		var b strings.Builder
		b.WriteString("# TYPE gmproxy_handshakes_total counter\n")
		b.WriteString("gmproxy_handshakes_total{protocol=\"tlcp\"} " + ftoa(handshakes) + "\n")
		b.WriteString("# TYPE gmproxy_request_duration_seconds histogram\n")
		b.WriteString("gmproxy_request_duration_seconds_bucket{le=\"1\"} " + ftoa(seconds) + "\n")
		b.WriteString("gmproxy_request_duration_seconds_bucket{le=\"+Inf\"} " + ftoa(seconds) + "\n")
		b.WriteString("gmproxy_request_duration_seconds_sum " + ftoa(seconds/2) + "\n")
		b.WriteString("gmproxy_request_duration_seconds_count " + ftoa(seconds) + "\n")
		b.WriteString("# TYPE gmproxy_connections gauge\n")
		b.WriteString("gmproxy_connections " + ftoa(float64(inFlight)) + "\n")
		f, err := parseMetrics(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var c cumulative
	w0, w1 := &workerProc{index: 0}, &workerProc{index: 1}
	check := func(step string, procs []*workerProc, scraped []map[string]*dto.MetricFamily, handshakes, count, conns float64) {
		t.Helper()
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies(c.update(procs, scraped))); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if h := sumSeries(t, got, "gmproxy_handshakes_total", ""); h != handshakes {
			t.Errorf("%s: handshakes %v, want %v", step, h, handshakes)
		}
		fams, _ := parseMetrics(strings.NewReader(got))
		if n := float64(fams["gmproxy_request_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount()); n != count {
			t.Errorf("%s: histogram count %v, want %v", step, n, count)
		}
		if g := sumSeries(t, got, "gmproxy_connections", ""); g != conns {
			t.Errorf("%s: connections %v, want %v", step, g, conns)
		}
	}
	check("both workers", []*workerProc{w0, w1}, []map[string]*dto.MetricFamily{expo(6, 4, 2), expo(3, 2, 1)}, 9, 6, 3)
	// Worker 1 misses a scrape: its last counts stay in the sums.
	check("a missed scrape", []*workerProc{w0, w1}, []map[string]*dto.MetricFamily{expo(7, 5, 2), nil}, 10, 7, 2)
	// Worker 0 dies; its successor starts from zero.
	w0b := &workerProc{index: 0}
	check("worker 0 restarted", []*workerProc{w0b, w1}, []map[string]*dto.MetricFamily{expo(1, 1, 1), expo(4, 3, 1)}, 12, 9, 2)
	check("later", []*workerProc{w0b, w1}, []map[string]*dto.MetricFamily{expo(2, 2, 0), expo(5, 4, 1)}, 14, 11, 1)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestOverlappingScrapesKeepCountersMonotonic: two scrapes of the merged
// /metrics at once (two Prometheus servers) must not leave the older
// reading of a worker as the one kept: when that worker dies, the sum
// would fall below what the other scrape already returned.
func TestOverlappingScrapesKeepCountersMonotonic(t *testing.T) {
	release := make(chan struct{})
	firstIn := make(chan struct{})
	var calls atomic.Int32
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		// The worker's counter reads 5 at the first call, 10 later;
		// the first answer arrives late.
		v := "10"
		if calls.Add(1) == 1 {
			close(firstIn)
			<-release
			v = "5"
		}
		body := "# TYPE gmproxy_handshakes_total counter\ngmproxy_handshakes_total " + v + "\n"
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})
	w := &workerProc{index: 0, exited: make(chan struct{})}
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), hc: &http.Client{Transport: rt}, procs: []*workerProc{w}}
	scrape := func() float64 {
		rec := httptest.NewRecorder()
		s.metrics(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		fams, err := parseMetrics(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fams["gmproxy_handshakes_total"].GetMetric()[0].GetCounter().GetValue()
	}
	var first float64
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		first = scrape()
	}()
	<-firstIn
	second := make(chan float64, 1)
	go func() { second <- scrape() }()
	// Let the second scrape finish first if it can (it cannot when
	// scrapes are taken one at a time); no outcome depends on how long.
	var seen float64
	select {
	case seen = <-second:
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-firstDone
	if seen == 0 {
		seen = <-second
	}
	seen = max(seen, first)
	close(w.exited) // the worker dies: its counts stay in the sum
	if after := scrape(); after < seen {
		t.Errorf("gmproxy_handshakes_total after the worker died: %v, below %v already returned", after, seen)
	}
}

// TestReloadDuringScrapeDropsRemovedSeries: a scrape in progress when a
// reload removes a site read the workers before the reload; what it keeps
// of them must still lose the site, or a worker dying later leaves the
// site in the merged /metrics for good.
func TestReloadDuringScrapeDropsRemovedSeries(t *testing.T) {
	release := make(chan struct{})
	firstIn := make(chan struct{})
	var calls atomic.Int32
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body := "# TYPE gmproxy_http_requests_total counter\n" +
			`gmproxy_http_requests_total{site="kept"} 1` + "\n"
		if calls.Add(1) == 1 {
			close(firstIn)
			<-release
			body += `gmproxy_http_requests_total{site="old"} 1` + "\n"
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})
	w := &workerProc{index: 0, exited: make(chan struct{})}
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), hc: &http.Client{Transport: rt}, procs: []*workerProc{w}}
	scrape := func() string {
		rec := httptest.NewRecorder()
		s.metrics(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		scrape()
	}()
	<-firstIn
	retained := make(chan struct{})
	go func() {
		defer close(retained)
		s.retainSeries(metrics.ConfigNames{Sites: []string{"kept", "old"}}, metrics.ConfigNames{Sites: []string{"kept"}})
	}()
	// Let the reload's retain run first if it can (it cannot while a
	// scrape is in progress); no outcome depends on how long.
	select {
	case <-retained:
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-scraped
	<-retained
	close(w.exited) // the worker dies: its counts stay in the sum
	if got := scrape(); strings.Contains(got, `site="old"`) {
		t.Errorf("a site the reload removed is still in the merged metrics:\n%s", got)
	}
}

// TestMergedNetworkCountersNotMultiplied: process_network_*_bytes_total,
// which every worker's process collector exports, read the network
// namespace's totals (/proc/PID/net/netstat), the same in every worker:
// summed, the supervisor reported n times the traffic, and a restarted
// worker, whose first reading is the whole total again, made the sum jump
// by all of it. They are the largest of the workers' readings.
func TestMergedNetworkCountersNotMultiplied(t *testing.T) {
	fams, err := metrics.MustNew(nil).Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := false
	for _, f := range fams {
		exported = exported || f.GetName() == "process_network_receive_bytes_total"
	}
	if !exported && runtime.GOOS == "linux" {
		t.Fatal("a worker's registry exports no process_network_receive_bytes_total: the test shows nothing")
	}
	expo := func(rx float64) map[string]*dto.MetricFamily {
		f, err := parseMetrics(strings.NewReader("# TYPE process_network_receive_bytes_total counter\nprocess_network_receive_bytes_total " + ftoa(rx) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var c cumulative
	w0, w1 := &workerProc{index: 0}, &workerProc{index: 1}
	check := func(step string, procs []*workerProc, scraped []map[string]*dto.MetricFamily, want float64) {
		t.Helper()
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies(c.update(procs, scraped))); err != nil {
			t.Fatal(err)
		}
		if got := sumSeries(t, out.String(), "process_network_receive_bytes_total", ""); got != want {
			t.Errorf("%s: process_network_receive_bytes_total %v, want %v (the namespace's)", step, got, want)
		}
	}
	check("two workers", []*workerProc{w0, w1}, []map[string]*dto.MetricFamily{expo(1000), expo(1000)}, 1000)
	w0b := &workerProc{index: 0}
	check("worker 0 restarted", []*workerProc{w0b, w1}, []map[string]*dto.MetricFamily{expo(1100), expo(1100)}, 1100)
	check("worker 1 missed a scrape", []*workerProc{w0b, w1}, []map[string]*dto.MetricFamily{expo(1200), nil}, 1200)
}

// TestMergedGOGCNotSummed: go_gc_gogc_percent is a setting, the same in
// every worker (GOGC), not an amount: two workers at GOGC=100 are 100,
// not 200.
func TestMergedGOGCNotSummed(t *testing.T) {
	one, err := parseMetrics(strings.NewReader("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeFamilies(&out, mergeFamilies([]map[string]*dto.MetricFamily{one, one})); err != nil {
		t.Fatal(err)
	}
	if got := sumSeries(t, out.String(), "go_gc_gogc_percent", ""); got != 100 {
		t.Errorf("go_gc_gogc_percent of two workers at 100: %v", got)
	}
}

// TestMergedLimitsNotSummed: process_max_fds and
// process_virtual_memory_max_bytes are each worker's limit, alike in
// every worker (a setting, as GOGC), not amounts: two workers limited to
// 1024 descriptors are not allowed 2048 between them, and two unlimited
// (-1) are not -2.
func TestMergedLimitsNotSummed(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64
	}{{"process_max_fds", 1024}, {"process_virtual_memory_max_bytes", -1}} {
		one, err := parseMetrics(strings.NewReader(fmt.Sprintf("# TYPE %s gauge\n%s %v\n", tc.name, tc.name, tc.v)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies([]map[string]*dto.MetricFamily{one, one})); err != nil {
			t.Fatal(err)
		}
		if got := sumSeries(t, out.String(), tc.name, ""); got != tc.v {
			t.Errorf("%s of two workers at %v: %v", tc.name, tc.v, got)
		}
	}
}

// TestMergedMemoryLimitNotSummed: go_gc_gomemlimit_bytes is each worker's
// GOMEMLIMIT, the same share in every worker (workerEnv), a setting as
// GOGC: two workers limited to 512 MiB each are shown at 512 MiB, and two
// unlimited (math.MaxInt64) not at twice a number that already means no
// limit.
func TestMergedMemoryLimitNotSummed(t *testing.T) {
	for _, v := range []float64{512 << 20, math.MaxInt64} {
		one, err := parseMetrics(strings.NewReader(fmt.Sprintf("# TYPE go_gc_gomemlimit_bytes gauge\ngo_gc_gomemlimit_bytes %v\n", v)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies([]map[string]*dto.MetricFamily{one, one})); err != nil {
			t.Fatal(err)
		}
		if got := sumSeries(t, out.String(), "go_gc_gomemlimit_bytes", ""); got != v {
			t.Errorf("go_gc_gomemlimit_bytes of two workers at %v: %v", v, got)
		}
	}
}

// TestSupervisorMetricsDocumented: the series the supervisor of workers
// adds to the workers' own are documented where operators look for the
// metrics (README, or the list in metrics/metrics.go it points to), so
// that one can alert on them (a worker that keeps dying).
func TestSupervisorMetricsDocumented(t *testing.T) {
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), hc: &http.Client{Transport: rt},
		procs: []*workerProc{{index: 0, exited: make(chan struct{})}}}
	rec := httptest.NewRecorder()
	s.metrics(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	fams, err := parseMetrics(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	var docs []byte
	for _, f := range []string{"../../README.md", "../../metrics/metrics.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b...)
	}
	if len(fams) == 0 {
		t.Fatal("the supervisor adds no series")
	}
	for name := range fams {
		if !regexp.MustCompile(`\b` + name + `\b`).Match(docs) {
			t.Errorf("%s is not documented in README.md or metrics/metrics.go", name)
		}
	}
}

// TestMergedCertExpiryEarliest: the workers may serve different
// certificates for a while (one started again after a crash reads the
// files renewed on disk, which the others serve only after a reload), and
// an expiry alert must see the certificate that expires first: the merged
// not_after is the earliest of the workers', whichever worker reported it;
// so is the nextUpdate of a stapled OCSP response, which each worker
// fetches on its own.
func TestMergedCertExpiryEarliest(t *testing.T) {
	expo := func(notAfter float64) map[string]*dto.MetricFamily {
		var b strings.Builder
		for _, f := range []struct{ name, labels string }{
			{"gmproxy_cert_not_after_timestamp_seconds", `{site="portal",role="sign"}`},
			{"gmproxy_upstream_cert_not_after_timestamp_seconds", `{upstream="core",role="ca"}`},
			{"gmproxy_key_server_cert_not_after_timestamp_seconds", `{key_server="hsm",role="client"}`},
			{"gmproxy_ocsp_next_update_timestamp_seconds", `{site="portal"}`},
		} {
			fmt.Fprintf(&b, "# TYPE %s gauge\n%s%s %v\n", f.name, f.name, f.labels, notAfter)
		}
		fams, err := parseMetrics(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	const renewed, old = 1.9e9, 1.8e9
	for _, order := range [][]float64{{renewed, old}, {old, renewed}} {
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies([]map[string]*dto.MetricFamily{expo(order[0]), expo(order[1])})); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"gmproxy_cert_not_after_timestamp_seconds", "gmproxy_upstream_cert_not_after_timestamp_seconds", "gmproxy_key_server_cert_not_after_timestamp_seconds", "gmproxy_ocsp_next_update_timestamp_seconds"} {
			if got := sumSeries(t, out.String(), name, ""); got != old {
				t.Errorf("%s of workers at %v: %v, want the earliest, %v", name, order, got, float64(old))
			}
		}
	}
}

// TestMergedHistogramOtherBoundsKeepsNoBuckets: workers whose histogram
// has other bucket bounds (another build, during an upgrade) are merged
// into count and sum alone, as the merge says: buckets kept from one of
// them would count its observations only, below the merged _count, and
// their +Inf bucket would disagree with _count (histogram_quantile
// reads the total from +Inf).
func TestMergedHistogramOtherBoundsKeepsNoBuckets(t *testing.T) {
	expo := func(bounds ...string) map[string]*dto.MetricFamily {
		var b strings.Builder
		b.WriteString("# TYPE gmproxy_http_request_duration_seconds histogram\n")
		for _, le := range bounds {
			b.WriteString("gmproxy_http_request_duration_seconds_bucket{le=\"" + le + "\"} 4\n")
		}
		b.WriteString("gmproxy_http_request_duration_seconds_bucket{le=\"+Inf\"} 4\n")
		b.WriteString("gmproxy_http_request_duration_seconds_sum 1\n")
		b.WriteString("gmproxy_http_request_duration_seconds_count 4\n")
		f, err := parseMetrics(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, workers := range [][]map[string]*dto.MetricFamily{
		{expo("0.5", "1"), expo("0.25", "1")}, // the same number of buckets
		{expo("0.5", "1"), expo("1")},         // another number
		{expo("1"), expo("0.5", "1")},
	} {
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies(workers)); err != nil {
			t.Fatal(err)
		}
		fams, err := parseMetrics(strings.NewReader(out.String()))
		if err != nil {
			t.Fatal(err)
		}
		h := fams["gmproxy_http_request_duration_seconds"].GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 8 {
			t.Fatalf("merged count %d, want 8:\n%s", h.GetSampleCount(), out.String())
		}
		for _, b := range h.GetBucket() {
			if b.GetCumulativeCount() != h.GetSampleCount() {
				t.Errorf("merged bucket le=%v counts %d of the %d observations: buckets of one worker kept beside the others' count\n%s",
					b.GetUpperBound(), b.GetCumulativeCount(), h.GetSampleCount(), out.String())
			}
		}
	}
}

// TestRetainDropsDeadWorkersRouteMovedOutOfSite: what the supervisor
// keeps of a dead worker's counts loses a site's route that a reload took
// from the site while another site keeps the label (route2 of every site
// with two unnamed routes), as the live workers' own series do.
func TestRetainDropsDeadWorkersRouteMovedOutOfSite(t *testing.T) {
	got := retainedOfDeadWorker(t, "# TYPE gmproxy_http_requests_total counter\n"+
		`gmproxy_http_requests_total{site="a",route="route2"} 1`+"\n"+
		`gmproxy_http_requests_total{site="b",route="route2"} 1`+"\n",
		metrics.ConfigNames{Sites: []string{"a", "b"}, Routes: []string{"route1", "route2"},
			SiteRoutes: map[string][]string{"a": {"route1"}, "b": {"route1", "route2"}}})
	if strings.Contains(got, `site="a"`) || !strings.Contains(got, `site="b"`) {
		t.Errorf("merged after site a lost route2 (site b kept it):\n%s", got)
	}
}

// TestConfigNamesSiteRoutes: the names given to Retain say which route
// labels each site has, so that a label another site keeps still leaves
// a site that lost it.
func TestConfigNamesSiteRoutes(t *testing.T) {
	cfg := &conf.Config{Sites: []conf.Site{
		{Name: "a", Routes: []conf.Route{{Name: "route1"}}},
		{Name: "b", Routes: []conf.Route{{Name: "route1"}, {PathPrefix: "/api/"}}},
	}}
	n := configNames(cfg)
	if n.KeepRoute("a", "/api/") || !n.KeepRoute("b", "/api/") || !n.KeepRoute("a", "route1") {
		t.Errorf("configNames: SiteRoutes %v; want a: [route1], b: [route1 /api/]", n.SiteRoutes)
	}
}

// TestRetainDropsDeadWorkersStreamMovedUpstream: what the supervisor
// keeps of a dead worker's counts loses a site's stream series of an
// upstream the site no longer uses while another site still does, as
// the live workers' own series do.
func TestRetainDropsDeadWorkersStreamMovedUpstream(t *testing.T) {
	got := retainedOfDeadWorker(t, "# TYPE gmproxy_stream_bytes_total counter\n"+
		`gmproxy_stream_bytes_total{site="a",upstream="db1",direction="rx"} 1`+"\n"+
		`gmproxy_stream_bytes_total{site="b",upstream="db1",direction="rx"} 1`+"\n",
		metrics.ConfigNames{Sites: []string{"a", "b"}, Upstreams: map[string][]string{"db1": nil, "db2": nil},
			SiteUpstreams: map[string][]string{"a": {"db2"}, "b": {"db1"}}})
	if strings.Contains(got, `site="a"`) || !strings.Contains(got, `site="b"`) {
		t.Errorf("merged after site a moved from db1 to db2 (site b kept db1):\n%s", got)
	}
}

// TestConfigNamesSiteUpstreams: the names given to Retain say which
// upstreams each site streams to: its stream's (a single target's own
// upstream too) and its routes', and a site naming none has an entry.
func TestConfigNamesSiteUpstreams(t *testing.T) {
	cfg := &conf.Config{Sites: []conf.Site{
		{Name: "a", Stream: &conf.Stream{Upstream: "db2"}},
		{Name: "b", Stream: &conf.Stream{Target: "127.0.0.1:5432"}},
		{Name: "c", Routes: []conf.Route{{Upstream: "ws"}, {Upstream: "ws"}}},
		{Name: "d"},
	}}
	n := configNames(cfg)
	for _, tc := range []struct {
		site, upstream string
		keep           bool
	}{
		{"a", "db2", true}, {"a", "db1", false}, {"b", "stream:b", true}, {"b", "db2", false},
		{"c", "ws", true}, {"c", "db2", false}, {"d", "db1", false},
	} {
		if got := n.KeepStream(tc.site, tc.upstream); got != tc.keep {
			t.Errorf("KeepStream(%q, %q) = %v, want %v (SiteUpstreams %v)", tc.site, tc.upstream, got, tc.keep, n.SiteUpstreams)
		}
	}
}

// retainedOfDeadWorker is what the supervisor exports of one worker's
// series (text, in the exposition format) after the worker died and a
// reload gave Retain names.
func retainedOfDeadWorker(t *testing.T, text string, names metrics.ConfigNames) string {
	t.Helper()
	fams, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var c cumulative
	c.update([]*workerProc{{index: 0}}, []map[string]*dto.MetricFamily{fams})
	c.update(nil, nil) // the worker died: its counts are retired
	c.retain(nil, names)
	var out bytes.Buffer
	writeFamilies(&out, mergeFamilies(c.update(nil, nil)))
	return out.String()
}

// TestRetainKeepsDeadWorkersCutOfRemovedListener: what the supervisor
// keeps of a dead worker's gmproxy_connections_cut_total of a listener a
// reload removed stays until the next reload, as each live worker keeps
// its own (metrics.Retain): dropped at once, the sum went down while the
// live workers' series stayed, which rate() takes for a counter reset.
func TestRetainKeepsDeadWorkersCutOfRemovedListener(t *testing.T) {
	fams, err := parseMetrics(strings.NewReader("# TYPE gmproxy_connections_cut_total counter\n" +
		`gmproxy_connections_cut_total{listener="127.0.0.1:9443"} 2` + "\n" +
		`gmproxy_connections_cut_total{listener="127.0.0.1:8443"} 1` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var c cumulative
	c.update([]*workerProc{{index: 0}}, []map[string]*dto.MetricFamily{fams})
	c.update(nil, nil) // the worker died: its counts are retired
	merged := func() string {
		var out bytes.Buffer
		writeFamilies(&out, mergeFamilies(c.update(nil, nil)))
		return out.String()
	}
	both, one := []string{"127.0.0.1:9443", "127.0.0.1:8443"}, []string{"127.0.0.1:8443"}
	c.retain(both, metrics.ConfigNames{Listeners: one}) // 9443 removed
	if got := merged(); !strings.Contains(got, `gmproxy_connections_cut_total{listener="127.0.0.1:9443"} 2`) {
		t.Errorf("merged after the reload that removed 127.0.0.1:9443:\n%s", got)
	}
	c.retain(one, metrics.ConfigNames{Listeners: one}) // the next reload
	if got := merged(); strings.Contains(got, `9443`) || !strings.Contains(got, `listener="127.0.0.1:8443"} 1`) {
		t.Errorf("merged after the next reload:\n%s", got)
	}
}

// TestMergedOCSPStatusWorst: the certificate status of a site's OCSP
// response (0 good, 1 revoked, 2 unknown) merges to the largest of the
// workers': summed, two workers told "revoked" showed 2, "unknown", and
// an alert on revoked missed it.
func TestMergedOCSPStatusWorst(t *testing.T) {
	expo := func(status int) map[string]*dto.MetricFamily {
		fams, err := parseMetrics(strings.NewReader(fmt.Sprintf("# TYPE gmproxy_ocsp_cert_status gauge\ngmproxy_ocsp_cert_status{site=\"portal\"} %d\n", status)))
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	for _, c := range []struct{ a, b, want int }{{1, 1, 1}, {0, 1, 1}, {1, 0, 1}, {0, 0, 0}} {
		var out bytes.Buffer
		if err := writeFamilies(&out, mergeFamilies([]map[string]*dto.MetricFamily{expo(c.a), expo(c.b)})); err != nil {
			t.Fatal(err)
		}
		if got := sumSeries(t, out.String(), "gmproxy_ocsp_cert_status", ""); got != float64(c.want) {
			t.Errorf("workers at %d and %d: merged %v, want %d", c.a, c.b, got, c.want)
		}
	}
}
