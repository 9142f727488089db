package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/proxy"
)

func newTest(t testing.TB) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// histCount returns the sample count of the histogram series of family name
// whose labels include want.
func histCount(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) uint64 {
	t.Helper()
	var n uint64
	for _, mf := range gather(t, g) {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if labelsMatch(mt, want) {
				n += mt.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func labelsMatch(mt *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, lp := range mt.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func gather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func TestHandshakeEvents(t *testing.T) {
	m, reg := newTest(t)
	full := frontdoor.ConnState{Listener: "edge", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP,
		Cipher: "ECC-SM2-SM4-GCM-SM3", SNI: "secret.example", Site: "portal", HandshakeDuration: 3 * time.Millisecond}
	resumed := full
	resumed.Resumed = true
	resumed.HandshakeDuration = 200 * time.Microsecond
	tls13 := frontdoor.ConnState{Listener: "edge", Family: frontdoor.FamilyTLS13SM, Protocol: frontdoor.ProtoTLS13SM,
		Cipher: "TLS_SM4_GCM_SM3", ClientAuth: true, HandshakeDuration: 2 * time.Millisecond}
	// TLS 1.2 and 1.3 differ only by the version label.
	tls12 := frontdoor.ConnState{Listener: "edge", Family: frontdoor.FamilyTLS, Protocol: "TLSv1.2",
		Cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", HandshakeDuration: time.Millisecond}
	tls13std := frontdoor.ConnState{Listener: "edge", Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3",
		Cipher: "TLS_AES_128_GCM_SHA256", HandshakeDuration: time.Millisecond}
	badCert := frontdoor.ConnState{Listener: "edge", Family: frontdoor.FamilyTLS13SM, Site: "portal"}

	for i := 0; i < 3; i++ {
		m.ConnAccepted("edge")
		m.HandshakeStarted("edge")
	}
	m.HandshakeDone(frontdoor.HandshakeEvent{State: full})
	m.HandshakeDone(frontdoor.HandshakeEvent{State: resumed})
	m.HandshakeStarted("edge")
	m.HandshakeDone(frontdoor.HandshakeEvent{State: tls13})
	m.HandshakeDone(frontdoor.HandshakeEvent{State: frontdoor.ConnState{Listener: "edge"},
		Err: errors.New("boom"), Reason: frontdoor.ReasonTimeout})
	m.HandshakeStarted("edge")
	m.HandshakeDone(frontdoor.HandshakeEvent{State: tls12})
	m.HandshakeStarted("edge")
	m.HandshakeDone(frontdoor.HandshakeEvent{State: tls13std})
	m.HandshakeStarted("edge")
	m.HandshakeDone(frontdoor.HandshakeEvent{State: badCert, Err: errors.New("unknown ca"),
		Reason: frontdoor.ReasonBadCertificate, ClientCert: frontdoor.ClientCertUnknownCA})
	m.ConnClosed("edge")
	m.ConnRefused("edge", "max_connections")

	tests := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.handshakes.WithLabelValues("edge", "tlcp", "NTLSv1.1", "ECC-SM2-SM4-GCM-SM3", "false", "success"), 1},
		{m.handshakes.WithLabelValues("edge", "tlcp", "NTLSv1.1", "ECC-SM2-SM4-GCM-SM3", "true", "success"), 1},
		{m.handshakes.WithLabelValues("edge", "tls13sm", "TLSv1.3-SM", "TLS_SM4_GCM_SM3", "false", "success"), 1},
		{m.handshakes.WithLabelValues("edge", "none", "none", "none", "false", "timeout"), 1},
		{m.handshakes.WithLabelValues("edge", "tls", "TLSv1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "false", "success"), 1},
		{m.handshakes.WithLabelValues("edge", "tls", "TLSv1.3", "TLS_AES_128_GCM_SHA256", "false", "success"), 1},
		{m.siteHandshakes.WithLabelValues("portal", "tlcp", "success"), 2},
		{m.siteHandshakes.WithLabelValues("portal", "tls13sm", "failure"), 1},
		{m.clientCertFailures.WithLabelValues("tls13sm", "unknown_ca"), 1},
		{m.handshakesInProgress.WithLabelValues("edge"), 0},
		{m.connAccepted.WithLabelValues("edge"), 3},
		{m.connActive.WithLabelValues("edge"), 2},
		{m.connClosed.WithLabelValues("edge"), 1},
		{m.connRefused.WithLabelValues("edge", "max_connections"), 1},
	}
	for i, tt := range tests {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
	name := "gmproxy_handshake_duration_seconds"
	if n := histCount(t, reg, name, map[string]string{"protocol": "tlcp"}); n != 2 {
		t.Errorf("tlcp handshake histogram count = %d, want 2", n)
	}
	if n := histCount(t, reg, name, map[string]string{"protocol": "tlcp", "resumed": "true"}); n != 1 {
		t.Errorf("resumed tlcp histogram count = %d, want 1", n)
	}
	if n := histCount(t, reg, name, map[string]string{"client_auth": "true", "protocol": "tls13sm"}); n != 1 {
		t.Errorf("tls13sm client-auth histogram count = %d, want 1", n)
	}
	// Failed handshakes are counted, not timed.
	if n := histCount(t, reg, name, nil); n != 5 {
		t.Errorf("histogram total count = %d, want 5", n)
	}
	// The SNI value must appear nowhere in the exposition.
	for _, mf := range gather(t, reg) {
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetValue() == "secret.example" {
					t.Errorf("SNI leaked into %s", mf.GetName())
				}
			}
		}
	}
}

func TestHandshakeBuckets(t *testing.T) {
	if len(HandshakeBuckets) < 16 || HandshakeBuckets[0] != 100e-6 {
		t.Fatalf("buckets %v", HandshakeBuckets)
	}
	last := HandshakeBuckets[len(HandshakeBuckets)-1]
	if last < 5 || last > 20 {
		t.Errorf("last bucket %v s, want about 10 s", last)
	}
	for i := 1; i < len(HandshakeBuckets); i++ {
		if r := HandshakeBuckets[i] / HandshakeBuckets[i-1]; r < 1.999 || r > 2.001 {
			t.Errorf("bucket %d ratio %v", i, r)
		}
	}
}

func TestBytesAndKeyOps(t *testing.T) {
	m, reg := newTest(t)
	m.Bytes("tlcp", "ECC-SM2-SM4-CBC-SM3", 1000, 16384, 1, 1)
	m.Bytes("tlcp", "ECC-SM2-SM4-CBC-SM3", 24, 16384, 1, 1)
	m.Bytes("tls", "TLS_AES_128_GCM_SHA256", 0, 10, 0, 1)
	m.KeyOp("sign", "tls13sm", 5*time.Microsecond, 30*time.Microsecond, nil)
	m.KeyOp("decrypt", "tlcp", time.Millisecond, 65*time.Microsecond, errors.New("bad"))
	m.KeyOpAt("key_agreement", "tlcp", keyoffload.Remote, 0, 3*time.Millisecond, errors.New("key server down"))
	m.KeyOpAt("sign", "tlcp", "moon", 0, time.Millisecond, nil)

	tests := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.tlsBytes.WithLabelValues("tlcp", "ECC-SM2-SM4-CBC-SM3", "rx"), 1024},
		{m.tlsBytes.WithLabelValues("tlcp", "ECC-SM2-SM4-CBC-SM3", "tx"), 32768},
		{m.tlsRecords.WithLabelValues("tlcp", "ECC-SM2-SM4-CBC-SM3", "tx"), 2},
		{m.tlsBytes.WithLabelValues("tls", "TLS_AES_128_GCM_SHA256", "tx"), 10},
		{m.keyOps.WithLabelValues("sign", "tls13sm", "ok", "local"), 1},
		{m.keyOps.WithLabelValues("decrypt", "tlcp", "error", "local"), 1},
		{m.keyOps.WithLabelValues("key_agreement", "tlcp", "error", "remote"), 1},
		{m.keyOps.WithLabelValues("sign", "tlcp", "ok", "other"), 1},
	}
	for i, tt := range tests {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
	// Both directions exist per protocol and cipher (rx of tls at 0); an
	// all-zero report creates nothing.
	m.Bytes("tls13sm", "TLS_SM4_CCM_SM3", 0, 0, 0, 0)
	if n := testutil.CollectAndCount(m.tlsBytes); n != 4 {
		t.Errorf("tls_bytes series = %d, want 4", n)
	}
	if got := testutil.ToFloat64(m.tlsBytes.WithLabelValues("tls", "TLS_AES_128_GCM_SHA256", "rx")); got != 0 {
		t.Errorf("tls rx = %v", got)
	}
	if got := testutil.ToFloat64(m.keyQueueLen); got != 0 {
		t.Errorf("queue length without an engine = %v", got)
	}
	m.ObserveKeyQueue(func() int { return 7 })
	if got := testutil.ToFloat64(m.keyQueueLen); got != 7 {
		t.Errorf("queue length = %v, want 7", got)
	}
	m.ObserveKeyQueue(nil)
	if got := testutil.ToFloat64(m.keyQueueLen); got != 0 {
		t.Errorf("queue length after reset = %v", got)
	}
	if n := histCount(t, reg, "gmproxy_key_operation_queue_seconds", map[string]string{"op": "decrypt"}); n != 1 {
		t.Errorf("queue histogram count %d", n)
	}
	if n := histCount(t, reg, "gmproxy_key_operation_duration_seconds", map[string]string{"op": "sign", "protocol": "tls13sm"}); n != 1 {
		t.Errorf("exec histogram count %d", n)
	}
}

func TestSessions(t *testing.T) {
	m, reg := newTest(t)
	m.SessionLookup("tls", true) // a family that never reports a cache size
	m.SessionLookup("tlcp", true)
	m.SessionLookup("tlcp", true)
	m.SessionLookup("tlcp", false)
	m.SessionCacheSize("tlcp", 10, 3)
	m.SessionCacheSize("tlcp", 12, 5)
	m.SessionCacheSize("tlcp", 1, 4) // a late report
	m.TicketIssued("tls13sm")
	m.TicketIssued("tls13sm")
	m.TicketAccepted("tls13sm")
	m.TicketRejected("tls13sm")
	m.TicketRejectedReason("tlcp", "expired")
	m.TicketRejectedReason("tlcp", "expired")
	m.TicketRejectedReason("tls13sm", "undecryptable")
	m.TicketRejectedReason("tls13sm", "client-controlled junk")
	tests := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.sessionHits.WithLabelValues("tlcp"), 2},
		{m.sessionMisses.WithLabelValues("tlcp"), 1},
		{m.sessionSize.WithLabelValues("tlcp"), 1},
		{m.sessionEvictions.WithLabelValues("tlcp"), 5},
		{m.ticketsIssued.WithLabelValues("tls13sm"), 2},
		{m.ticketsAccepted.WithLabelValues("tls13sm"), 1},
		{m.ticketsRejected.WithLabelValues("tls13sm", "none"), 1},
		{m.ticketsRejected.WithLabelValues("tlcp", "expired"), 2},
		{m.ticketsRejected.WithLabelValues("tls13sm", "undecryptable"), 1},
		{m.ticketsRejected.WithLabelValues("tls13sm", "other"), 1},
	}
	for i, tt := range tests {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
	for _, name := range []string{"gmproxy_session_cache_size", "gmproxy_session_cache_evictions_total"} {
		if s := series(t, reg, name, `value:"tls"`); len(s) > 0 {
			t.Errorf("%s has a series for a family that reported no cache size: %v", name, s)
		}
	}
}

func TestProxyEvents(t *testing.T) {
	m, reg := newTest(t)
	m.RequestStarted("www")
	m.RequestStarted("www")
	m.RequestDone(proxy.RequestEvent{Site: "www", Route: "api", Method: "GET", Status: 204,
		Duration: 5 * time.Millisecond, Upstream: "backend", Target: "127.0.0.1:9000",
		UpstreamDuration: 4 * time.Millisecond, BytesIn: 10, BytesOut: 100})
	m.UpstreamHealth("backend", "127.0.0.1:9000", true)
	m.UpstreamHealth("backend", "127.0.0.1:9001", false)
	m.UpstreamRetry("backend")
	m.StreamBytes("tcp", "db", 5, 7)

	tests := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.requests.WithLabelValues("www", "api", "GET", "2xx"), 1},
		{m.requestsInFlight.WithLabelValues("www"), 1},
		{m.upstreamHealthy.WithLabelValues("backend", "127.0.0.1:9000"), 1},
		{m.upstreamHealthy.WithLabelValues("backend", "127.0.0.1:9001"), 0},
		{m.upstreamRetries.WithLabelValues("backend"), 1},
		{m.httpBytes.WithLabelValues("www", "tx"), 100},
		{m.streamBytes.WithLabelValues("tcp", "db", "rx"), 5},
		{m.streamBytes.WithLabelValues("tcp", "db", "tx"), 7},
	}
	for i, tt := range tests {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
	if n := histCount(t, reg, "gmproxy_upstream_response_seconds", map[string]string{"upstream": "backend"}); n != 1 {
		t.Errorf("upstream histogram count %d", n)
	}
	if n := histCount(t, reg, "gmproxy_http_request_duration_seconds", map[string]string{"site": "www", "route": "api"}); n != 1 {
		t.Errorf("request histogram count %d", n)
	}
}

func TestConfigCertsBuild(t *testing.T) {
	m, _ := newTest(t)
	at := time.Unix(1_800_000_000, 0)
	m.ConfigReloaded(true, at)
	m.ConfigReloaded(false, at.Add(time.Minute))
	notAfter := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m.SetCertNotAfter("www", "sign", notAfter)
	m.SetCertNotAfter("www", "bogus-role", notAfter)
	m.SetBuildInfo("v1", "go1.26", "v0.44.1")
	m.SetBuildInfo("v2", "go1.26", "v0.44.1")
	tests := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.reloads.WithLabelValues("success"), 1},
		{m.reloads.WithLabelValues("failure"), 1},
		{m.lastReloadSuccess, 1_800_000_000},
		{m.lastReloadOK, 0},
		{m.certNotAfter.WithLabelValues("www", "sign"), float64(notAfter.Unix())},
		{m.certNotAfter.WithLabelValues("www", "other"), float64(notAfter.Unix())},
		{m.buildInfo.WithLabelValues("v2", "go1.26", "v0.44.1"), 1},
	}
	for i, tt := range tests {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
	if n := testutil.CollectAndCount(m.buildInfo); n != 1 {
		t.Errorf("build_info series = %d, want 1", n)
	}
	m.ResetCertNotAfter()
	if n := testutil.CollectAndCount(m.certNotAfter); n != 0 {
		t.Errorf("cert series after reset = %d", n)
	}
}

// TestSharedTableFallbacks: gmproxy_shared_table_fallbacks_total reads
// the workers' shared tables' counts of clients and requests counted
// alone, one series per table and reason.
func TestSharedTableFallbacks(t *testing.T) {
	var noRoom, busy uint64 = 3, 5
	old := sharedFallbackCounts
	sharedFallbackCounts = []struct {
		table, reason string
		count         func() uint64
	}{
		{"clients", "no_room", func() uint64 { return noRoom }},
		{"rates", "busy", func() uint64 { return busy }},
	}
	defer func() { sharedFallbackCounts = old }()
	_, reg := newTest(t)
	busy = 7
	got := map[string]float64{}
	for _, mf := range gather(t, reg) {
		if mf.GetName() != Namespace+"_shared_table_fallbacks_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			key := ""
			for _, lp := range mt.GetLabel() {
				key += lp.GetName() + "=" + lp.GetValue() + " "
			}
			got[key] = mt.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"reason=no_room table=clients ": 3, "reason=busy table=rates ": 7}
	if !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// TestBoundedLabels feeds every event with many distinct hostile values and
// checks that no label of any gmproxy metric takes more values than its cap.
func TestBoundedLabels(t *testing.T) {
	m, reg := newTest(t)
	const n = 3000
	for i := 0; i < n; i++ {
		// ASCII and Chinese names of every length around maxNameLen,
		// and some with control and format characters.
		v := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", i%150))
		switch i % 4 {
		case 1:
			v = fmt.Sprintf("网上银行%d %s", i, strings.Repeat("银", i%50))
		case 3:
			v = fmt.Sprintf("站点%d\u202e%s\n", i, v)
		}
		addr := fmt.Sprintf("10.0.%d.%d:%d", i/256%256, i%256, 1024+i)
		st := frontdoor.ConnState{Listener: v, Family: v, Cipher: v, SNI: v, Site: v, HandshakeDuration: time.Millisecond}
		m.ConnAccepted(v)
		m.ConnRefused(v, v)
		m.HandshakeStarted(v)
		m.HandshakeDone(frontdoor.HandshakeEvent{State: st})
		m.HandshakeDone(frontdoor.HandshakeEvent{State: st, Err: errors.New(v), Reason: v})
		m.Bytes(v, v, 1, 1, 1, 1)
		m.KeyOp(v, v, 0, 0, nil)
		m.KeyOpAt(v, v, v, 0, 0, nil)
		m.TicketRejectedReason(v, v)
		m.SessionLookup(v, i%2 == 0)
		m.SessionCacheSize(v, i, uint64(i))
		m.TicketIssued(v)
		m.RequestStarted(v)
		m.RequestDone(proxy.RequestEvent{Site: v, Route: "/path/" + v, Method: v, Status: i, Upstream: v, Target: addr})
		m.UpstreamHealth(v, addr, true)
		m.UpstreamRetry(v)
		m.StreamBytes(v, v, 1, 1)
		m.SetCertNotAfter(v, v, time.Now())
	}
	caps := map[string]int{
		"listener": maxListeners + 2, "site": MaxSites + 2, "route": MaxRoutes + 2,
		"upstream": MaxUpstreams + 2, "target": maxTargets + 2, "reason": maxRefusals + 2,
		"protocol": len(protocols) + 2, "result": len(handshakeResults) + 3,
		"op": len(keyOps) + 2, "location": len(keyLocations) + 2, "role": len(certRoles) + 2, "method": len(httpMethods) + 2,
		"code": 7, "direction": 2, "resumed": 2, "client_auth": 2,
		"cipher":  len(cipherNames) + 2,
		"version": 1, "goversion": 1, "gmsm": 1, "table": len(sharedFallbackCounts),
	}
	checked := 0
	for _, mf := range gather(t, reg) {
		if !strings.HasPrefix(mf.GetName(), Namespace+"_") {
			continue
		}
		values := map[string]map[string]bool{}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if values[lp.GetName()] == nil {
					values[lp.GetName()] = map[string]bool{}
				}
				values[lp.GetName()][lp.GetValue()] = true
			}
		}
		for label, vals := range values {
			c, ok := caps[label]
			if !ok {
				t.Errorf("%s: label %q has no cap in this test", mf.GetName(), label)
				continue
			}
			checked++
			if len(vals) > c {
				t.Errorf("%s: label %q took %d values, cap %d", mf.GetName(), label, len(vals), c)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d labels checked", checked)
	}
	// Oversized names and names with a control character are "other"
	// even while under the cap; Chinese names and spaces are not.
	m2, _ := newTest(t)
	for name, want := range map[string]string{
		strings.Repeat("a", maxNameLen+1):   Other,
		strings.Repeat("银", maxNameLen/3+1): Other,
		"a\nb":                              Other,
		"a b":                               "a b",
		"网上银行":                              "网上银行",
	} {
		if got := m2.sites.label(name); got != want {
			t.Errorf("name %q -> %q, want %q", name, got, want)
		}
	}
}

func TestRegistrationOnSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	// A second Metrics on the same registry collides on gmproxy_* names.
	if _, err := New(reg); err == nil {
		t.Fatal("second New on one registry succeeded")
	}
	// A nil registerer gives a private registry with Go and process metrics.
	m := MustNew(nil)
	names := map[string]bool{}
	for _, mf := range gather(t, m.Gatherer()) {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"go_goroutines", "go_memstats_alloc_bytes"} {
		if !names[want] {
			t.Errorf("missing %s", want)
		}
	}
}

func TestAdminMux(t *testing.T) {
	m, _ := newTest(t)
	m.HandshakeStarted("edge")
	m.HandshakeDone(frontdoor.HandshakeEvent{State: frontdoor.ConnState{Listener: "edge", Family: "tls", Protocol: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", HandshakeDuration: time.Millisecond}})
	for _, pprof := range []bool{false, true} {
		reloadErr := errors.New("bad config at line 3")
		reloads := 0
		mux := m.AdminMux(AdminOptions{Pprof: pprof, Reload: func(context.Context) error {
			reloads++
			if reloads == 2 {
				return reloadErr
			}
			return nil
		}})
		mux.HandleFunc("GET /extra", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "extra") })
		srv := httptest.NewServer(mux)
		get := func(method, path string) (int, string) {
			req, _ := http.NewRequest(method, srv.URL+path, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := get("GET", "/metrics"); code != 200 || !strings.Contains(body, `gmproxy_handshakes_total{cipher="TLS_AES_128_GCM_SHA256",listener="edge",protocol="tls",result="success",resumed="false",version="TLSv1.3"} 1`) {
			t.Errorf("/metrics: %d\n%s", code, body)
		}
		if code, _ := get("GET", "/healthz"); code != 200 {
			t.Errorf("/healthz: %d", code)
		}
		m.SetReady(false)
		if code, _ := get("GET", "/readyz"); code != 503 {
			t.Errorf("/readyz not ready: %d", code)
		}
		m.SetReady(true)
		if code, _ := get("GET", "/readyz"); code != 200 {
			t.Errorf("/readyz ready: %d", code)
		}
		if code, body := get("POST", "/reload"); code != 200 || body != "reloaded\n" {
			t.Errorf("/reload: %d %q", code, body)
		}
		if code, body := get("POST", "/reload"); code != 500 || !strings.Contains(body, "line 3") {
			t.Errorf("failing /reload: %d %q", code, body)
		}
		if code, _ := get("GET", "/reload"); code != 405 {
			t.Errorf("GET /reload: %d", code)
		}
		if code, body := get("GET", "/extra"); code != 200 || body != "extra" {
			t.Errorf("/extra: %d %q", code, body)
		}
		code, _ := get("GET", "/debug/pprof/")
		if pprof && code != 200 || !pprof && code != 404 {
			t.Errorf("pprof=%v: /debug/pprof/ %d", pprof, code)
		}
		srv.Close()
	}
}

// TestRequestObserversCached: the observers resolved once per site and
// route count exactly like label lookups, whatever the method spelling.
func TestRequestObserversCached(t *testing.T) {
	m, reg := newTest(t)
	for _, method := range []string{"GET", "get", "GET", "FOO", "POST"} {
		m.RequestStarted("www")
		m.RequestDone(proxy.RequestEvent{Site: "www", Route: "api", Method: method, Status: 200, BytesOut: 10, Upstream: "up", Target: "10.0.0.1:80", UpstreamStatus: 200})
	}
	m.RequestStarted("www")
	m.RequestDone(proxy.RequestEvent{Site: "www", Route: "api", Method: "GET", Status: 503, Upstream: "up", Target: "10.0.0.1:80", UpstreamStatus: 503})
	for i, tt := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.requests.WithLabelValues("www", "api", "GET", "2xx"), 2},
		{m.requests.WithLabelValues("www", "api", "GET", "5xx"), 1},
		{m.requests.WithLabelValues("www", "api", "POST", "2xx"), 1},
		{m.requests.WithLabelValues("www", "api", Other, "2xx"), 2}, // "get" and "FOO"
		{m.requestsInFlight.WithLabelValues("www"), 0},
		{m.httpBytes.WithLabelValues("www", "tx"), 50},
		{m.upstreamStatus.WithLabelValues("up", "2xx"), 5},
		{m.upstreamStatus.WithLabelValues("up", "5xx"), 1},
	} {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
	if n := histCount(t, reg, "gmproxy_upstream_response_seconds", map[string]string{"upstream": "up"}); n != 6 {
		t.Errorf("upstream histogram count %d, want 6", n)
	}
}

func BenchmarkRequestObservers(b *testing.B) {
	m, _ := newTest(b)
	ev := proxy.RequestEvent{Site: "www", Route: "api", Method: "GET", Status: 200, BytesOut: 1024, Upstream: "up"}
	b.ReportAllocs()
	for b.Loop() {
		m.RequestStarted("www")
		m.RequestDone(ev)
	}
}

// Two reports of a cache's size raced (each read its count under the
// cache's lock, then reported): the older count arrives last. It is
// counted already; it must not be taken for a new cache's whole count.
func TestSessionEvictionsLateReport(t *testing.T) {
	m, _ := newTest(t)
	m.SessionCacheSize("tlcp", 100, 1000)
	m.SessionCacheSize("tlcp", 100, 1001)
	m.SessionCacheSize("tlcp", 100, 1000) // the late one
	m.SessionCacheSize("tlcp", 100, 1002)
	if got := testutil.ToFloat64(m.sessionEvictions.WithLabelValues("tlcp")); got != 1002 {
		t.Errorf("evictions = %v, want 1002", got)
	}
}

// TestUpstreamConnectBuckets: the upstream connect histogram tells a
// loopback connect (50 µs) from a slow one (20 ms) from one that reached
// the default connect timeout (5 s): each lands below a distinct finite
// bucket bound, none only in +Inf.
func TestUpstreamConnectBuckets(t *testing.T) {
	m, reg := newTest(t)
	times := []time.Duration{50 * time.Microsecond, 20 * time.Millisecond, 5 * time.Second}
	for _, d := range times {
		m.UpstreamConnect("app", d, nil)
	}
	var h *dto.Histogram
	for _, mf := range gather(t, reg) {
		if mf.GetName() == "gmproxy_upstream_connect_seconds" {
			h = mf.GetMetric()[0].GetHistogram()
		}
	}
	if h == nil {
		t.Fatal("no gmproxy_upstream_connect_seconds")
	}
	// The smallest bucket holding each time: distinct, and finite.
	var bounds []float64
	for _, d := range times {
		b := math.Inf(1)
		for _, bk := range h.GetBucket() {
			if bk.GetUpperBound() >= d.Seconds() {
				b = bk.GetUpperBound()
				break
			}
		}
		if math.IsInf(b, 1) {
			t.Errorf("a %v connect is only in +Inf", d)
		}
		if len(bounds) > 0 && b == bounds[len(bounds)-1] {
			t.Errorf("a %v connect shares its bucket (%g) with a faster one", d, b)
		}
		bounds = append(bounds, b)
	}
}

// TestOCSPNextUpdate: a site's stapled OCSP nextUpdate is a gauge; a zero
// time (nothing stapled) deletes it, and so does a reload that removes the
// site (Retain).
func TestOCSPNextUpdate(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.Retain(ConfigNames{Sites: []string{"www", "api"}})
	next := time.Unix(1.9e9, 0)
	m.SetOCSPNextUpdate("www", next)
	m.SetOCSPNextUpdate("api", next)
	if got := testutil.ToFloat64(m.ocspNextUpdate.WithLabelValues("www")); got != 1.9e9 {
		t.Fatalf("www: %v", got)
	}
	m.SetOCSPNextUpdate("api", time.Time{})
	if n := testutil.CollectAndCount(m.ocspNextUpdate); n != 1 {
		t.Fatalf("%d series after api stopped stapling, want www's", n)
	}
	m.Retain(ConfigNames{Sites: []string{"api"}})
	if n := testutil.CollectAndCount(m.ocspNextUpdate); n != 0 {
		t.Fatalf("%d series after www was removed", n)
	}
}

// TestOCSPStatus: the certificate status of a site's OCSP response is a
// gauge (1: revoked); a negative status (none held) deletes it, and so
// does a reload that removes the site (Retain).
func TestOCSPStatus(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.Retain(ConfigNames{Sites: []string{"www", "api"}})
	m.SetOCSPStatus("www", 1)
	m.SetOCSPStatus("api", 0)
	if got := testutil.ToFloat64(m.ocspStatus.WithLabelValues("www")); got != 1 {
		t.Fatalf("www: %v, want 1 (revoked)", got)
	}
	m.SetOCSPStatus("api", -1)
	if n := testutil.CollectAndCount(m.ocspStatus); n != 1 {
		t.Fatalf("%d series after api held no response, want www's", n)
	}
	m.Retain(ConfigNames{Sites: []string{"api"}})
	if n := testutil.CollectAndCount(m.ocspStatus); n != 0 {
		t.Fatalf("%d series after www was removed", n)
	}
}
