package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const dashboardPath = "../deploy/grafana/gmproxy.json"

// knownMetrics returns every metric name the registry of a fresh Metrics can
// expose, with the _bucket/_sum/_count series of histograms, and whether the
// name is a histogram.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m, reg := newTest(t)
	names := map[string]bool{}
	descName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range m.collectors() {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		_, isHist := c.(*prometheus.HistogramVec)
		for d := range ch {
			sm := descName.FindStringSubmatch(d.String())
			if sm == nil {
				t.Fatalf("cannot read descriptor %s", d)
			}
			names[sm[1]] = false
			if isHist {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[sm[1]+s] = true
				}
			}
		}
	}
	// Go runtime and process collectors.
	for _, mf := range gather(t, reg) {
		if _, ok := names[mf.GetName()]; !ok {
			names[mf.GetName()] = false
		}
	}
	return names
}

// exprs walks the dashboard JSON and returns every PromQL string: targets'
// expr, annotation expr, and template variable queries.
func exprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, vv := range x {
			if s, ok := vv.(string); ok && (k == "expr" || k == "definition") {
				*out = append(*out, s)
			}
			if k == "query" {
				if s, ok := vv.(string); ok && strings.Contains(s, "(") {
					*out = append(*out, s)
				}
			}
			exprs(vv, out)
		}
	case []any:
		for _, vv := range x {
			exprs(vv, out)
		}
	}
}

var metricRef = regexp.MustCompile(`\b((?:gmproxy|go|process)_[a-zA-Z0-9_]+)\b`)

func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.FromSlash(dashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var qs []string
	exprs(dash, &qs)
	if len(qs) < 20 {
		t.Fatalf("only %d queries found", len(qs))
	}
	known := knownMetrics(t)
	used := map[string]bool{}
	for _, q := range qs {
		if strings.Count(q, "(") != strings.Count(q, ")") || strings.Count(q, "{") != strings.Count(q, "}") ||
			strings.Count(q, "[") != strings.Count(q, "]") {
			t.Errorf("unbalanced brackets: %s", q)
		}
		refs := metricRef.FindAllString(q, -1)
		if len(refs) == 0 && !strings.Contains(q, "label_values") {
			t.Errorf("query references no metric: %s", q)
		}
		for _, name := range refs {
			hist, ok := known[name]
			if !ok {
				t.Errorf("dashboard queries unknown metric %q in %s", name, q)
				continue
			}
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] = true
			if strings.Contains(q, "histogram_quantile") && strings.HasPrefix(name, "gmproxy_") && !hist {
				t.Errorf("histogram_quantile over non-histogram %q", name)
			}
		}
	}
	// Every metric a query reads is limited to the selected jobs, so that
	// one dashboard serves several deployments (the job variable's own query
	// lists them all).
	sel := regexp.MustCompile(`\b((?:gmproxy|go|process)_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	for _, q := range qs {
		if q == "label_values(gmproxy_build_info, job)" {
			continue
		}
		for _, m := range sel.FindAllStringSubmatch(q, -1) {
			if !strings.Contains(m[2], `job=~"$job"`) {
				t.Errorf("%s is not limited to $job in %s", m[1], q)
			}
		}
	}
	// Bytes per record is meaningful only where records are counted (not
	// ordinary TLS, whose record layer is crypto/tls).
	for _, q := range qs {
		if strings.Contains(q, "gmproxy_tls_records_total") && strings.Contains(q, "gmproxy_tls_bytes_total") &&
			!strings.Contains(q, `protocol!="tls"`) {
			t.Errorf("bytes per record query includes ordinary TLS: %s", q)
		}
	}
	// The resumption ratio counts ticket resumptions as well as session IDs.
	found := false
	for _, q := range qs {
		if strings.Contains(q, "gmproxy_session_cache_hits_total") && strings.Contains(q, "gmproxy_session_tickets_accepted_total") {
			found = true
		}
	}
	if !found {
		t.Error("no resumption ratio that counts tickets")
	}
	// The panels the issue asks for.
	for _, want := range []string{
		"gmproxy_handshakes_total", "gmproxy_handshake_duration_seconds", "gmproxy_tls_bytes_total",
		"gmproxy_key_operation_duration_seconds", "gmproxy_key_operation_queue_seconds",
		"gmproxy_upstream_target_healthy", "gmproxy_upstream_response_seconds",
		"gmproxy_http_request_duration_seconds", "gmproxy_cert_not_after_timestamp_seconds",
		"gmproxy_site_handshakes_total", "gmproxy_client_cert_failures_total", "gmproxy_connection_duration_seconds",
		"gmproxy_upstream_responses_total", "gmproxy_upstream_connect_seconds",
		"gmproxy_upstream_cert_not_after_timestamp_seconds", "gmproxy_key_server_cert_not_after_timestamp_seconds",
	} {
		if !used[want] {
			t.Errorf("dashboard does not use %s", want)
		}
	}
	// Every panel has a data source and a grid position.
	panels, _ := dash["panels"].([]any)
	for _, p := range panels {
		pm := p.(map[string]any)
		if pm["type"] == "row" {
			continue
		}
		if pm["datasource"] == nil || pm["gridPos"] == nil {
			t.Errorf("panel %v lacks datasource or gridPos", pm["title"])
		}
	}
}
