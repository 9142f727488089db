package daemon

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// startMetricsDaemon starts a daemon on cfg with the metrics package as its
// observer.
func startMetricsDaemon(t *testing.T, cfg *conf.Config) (string, *metrics.Metrics) {
	t.Helper()
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := &Env{Logger: log, Observer: m, KeyOps: m, Sessions: m, ProxyObserver: m}
	d, err := New(func() (*Generation, error) { return Build(cfg, env) }, Options{Logger: log, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); env.Close() })
	return d.Addr(cfg.Listeners[0].Address), m
}

// metricValue sums the values of name's series whose labels contain every
// one of parts ("reason=max_handshakes").
func metricValue(t *testing.T, m *metrics.Metrics, name string, parts ...string) float64 {
	t.Helper()
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, mt := range mf.Metric {
			var ls []string
			for _, l := range mt.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			s := strings.Join(ls, ",")
			for _, p := range parts {
				if !strings.Contains(s, p) {
					continue series
				}
			}
			sum += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	return sum
}

// waitMetric waits (at most 20 s, testwait) for cond on name's value.
func waitMetric(t *testing.T, m *metrics.Metrics, what string, cond func(float64) bool, name string, parts ...string) {
	t.Helper()
	var v float64
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); time.Now().Before(deadline); {
		if v = metricValue(t, m, name, parts...); cond(v) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: %s%v stayed at %v", what, name, parts, v)
}

// slowConns opens n connections from the loopback address from that send
// prefix (a PROXY header, say), then nothing or half a ClientHello record
// header, and stay silent. Connections the daemon resets at once count as
// refused by the caller's metrics. The returned function closes them all.
func slowConns(t *testing.T, from, addr string, n int, prefix []byte) (closeAll func()) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 20 * time.Second}
	var mu sync.Mutex
	var conns []net.Conn
	closeAll = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	t.Cleanup(closeAll)
	for i := range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue // reset by a refusal
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		c.Write(prefix)
		if i%2 == 1 {
			c.Write([]byte{0x16, 0x03, 0x01, 0x02}) // a partial record header
		}
	}
	return closeAll
}

// waitIdle waits for the listener's gauges to return to zero: handshakes in
// progress and open connections.
func waitIdle(t *testing.T, m *metrics.Metrics) {
	t.Helper()
	waitMetric(t, m, "handshake slots freed", func(v float64) bool { return v == 0 }, "gmproxy_handshakes_in_progress")
	waitMetric(t, m, "connections closed", func(v float64) bool { return v == 0 }, "gmproxy_connections_active")
}

// TestPerClientLimitsKeepOthersServed (issue 10 item 5): 300 slow
// handshakes from 127.0.0.2 would take every one of the listener's 256
// handshake slots; with max_handshakes_per_client at 1/16 of them, 20
// requests from 127.0.0.1 over TLS, TLCP and TLS 1.3-SM all succeed, the
// refusals are counted by reason, and every gauge returns to zero.
func TestPerClientLimitsKeepOthersServed(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	l := &cfg.Listeners[0]
	l.MaxHandshakes, l.MaxHandshakesPerClient = 256, 256/16
	l.MaxConnections, l.MaxConnectionsPerClient = 4096, 4096/16
	addr, m := startMetricsDaemon(t, cfg)

	closeSlow := slowConns(t, "127.0.0.2", addr, 300, nil)
	const refused = "gmproxy_connections_refused_total"
	waitMetric(t, m, "slow handshakes refused", func(v float64) bool { return v == 300-16 }, refused, "reason="+frontdoor.RefuseMaxHandshakesPerClient)
	if v := metricValue(t, m, "gmproxy_handshakes_in_progress"); v != 16 {
		t.Errorf("%v handshakes in progress, want the 16 of 127.0.0.2", v)
	}

	tc := tlsClient(t, addr, "localhost", false)
	tc.Transport.(*http.Transport).DisableKeepAlives = true
	clients := []*http.Client{tc, smClient(t, addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false), smClient(t, addr, "tls13sm", tls13sm.TLS_SM4_GCM_SM3, false)}
	for _, c := range clients[1:] {
		c.Transport.(*http.Transport).DisableKeepAlives = true
	}
	for i := range 20 {
		if body, resp := get(t, clients[i%3], "https://localhost/ok"); resp.StatusCode != 200 || !strings.HasPrefix(body, "path=/ok") {
			t.Fatalf("request %d from 127.0.0.1: %d %q", i, resp.StatusCode, body)
		}
	}
	for _, r := range frontdoor.RefuseReasons {
		if r == frontdoor.RefuseMaxHandshakesPerClient {
			continue
		}
		if v := metricValue(t, m, refused, "reason="+r+","); v != 0 {
			t.Errorf("refused for %s: %v, want 0", r, v)
		}
	}
	closeSlow()
	waitIdle(t, m)
}

// TestPerClientLimitsAfterProxyProtocol: behind a trusted balancer the
// per-client limits count the address of the PROXY header, not the
// balancer's: one client's slow handshakes are refused while another
// client's request through the same balancer succeeds; a malformed PROXY
// header is refused as proxy_protocol; every gauge returns to zero.
func TestPerClientLimitsAfterProxyProtocol(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	l := &cfg.Listeners[0]
	l.MaxHandshakesPerClient = 4
	l.ProxyProtocol.Enabled = true
	l.ProxyProtocol.Trusted = []string{"127.0.0.1/32"}
	addr, m := startMetricsDaemon(t, cfg)

	slow := proxy.AppendProxyHeaderV1(nil, &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 1000}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 443})
	closeSlow := slowConns(t, "127.0.0.1", addr, 10, slow)
	const refused = "gmproxy_connections_refused_total"
	waitMetric(t, m, "slow handshakes refused", func(v float64) bool { return v == 6 }, refused, "reason="+frontdoor.RefuseMaxHandshakesPerClient)

	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	raw.Write(proxy.AppendProxyHeaderV2(nil, &net.TCPAddr{IP: net.ParseIP("198.51.100.1"), Port: 1000}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 443}))
	fetchXFF(t, raw, "198.51.100.1")

	bad, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	io.WriteString(bad, "PROXY TCP4 300.0.0.1 127.0.0.1 1 2\r\n")
	bad.Read(make([]byte, 1))
	waitMetric(t, m, "bad PROXY header refused", func(v float64) bool { return v == 1 }, refused, "reason="+frontdoor.RefuseProxyProtocol)
	raw.Close()
	bad.Close()
	closeSlow()
	waitIdle(t, m)
}

// TestPerClientLimitsExemptTrustedProxy: a connection from a proxy of
// trusted_proxies carries many clients (the proxy limits each by its
// X-Forwarded-For), so max_connections_per_client and
// max_handshakes_per_client do not hold it: five connections from the
// trusted 127.0.0.1 stay open past a limit of 2 and a request through it
// is served, while the untrusted 127.0.0.2 is still held to 2.
func TestPerClientLimitsExemptTrustedProxy(t *testing.T) {
	for _, tc := range []struct {
		reason            string
		conns, handshakes int
	}{
		{frontdoor.RefuseMaxConnectionsPerClient, 2, 0},
		{frontdoor.RefuseMaxHandshakesPerClient, 0, 2},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			b := newBackend(t)
			cfg := testConfig(t, b.Listener.Addr().String())
			cfg.TrustedProxies = []string{"127.0.0.1"}
			l := &cfg.Listeners[0]
			l.MaxConnectionsPerClient, l.MaxHandshakesPerClient = tc.conns, tc.handshakes
			addr, m := startMetricsDaemon(t, cfg)

			closeTrusted := slowConns(t, "127.0.0.1", addr, 5, nil)
			waitMetric(t, m, "the trusted proxy's connections open", func(v float64) bool { return v == 5 }, "gmproxy_connections_active")
			closeOther := slowConns(t, "127.0.0.2", addr, 5, nil)
			const refused = "gmproxy_connections_refused_total"
			waitMetric(t, m, "the untrusted address held to its limit", func(v float64) bool { return v == 3 }, refused, "reason="+tc.reason)

			c := tlsClient(t, addr, "localhost", false)
			c.Transport.(*http.Transport).DisableKeepAlives = true
			if body, resp := get(t, c, "https://localhost/ok"); resp.StatusCode != 200 || !strings.HasPrefix(body, "path=/ok") {
				t.Fatalf("request through the trusted proxy past its per-client limit: %d %q", resp.StatusCode, body)
			}
			if v := metricValue(t, m, refused, "reason="+tc.reason); v != 3 {
				t.Errorf("refused for %s: %v, want the 3 of 127.0.0.2", tc.reason, v)
			}
			closeTrusted()
			closeOther()
			waitIdle(t, m)
		})
	}
}
