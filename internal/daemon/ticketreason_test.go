package daemon

import (
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// scrape returns the /metrics page of m's admin handler.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.AdminMux(metrics.AdminOptions{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: status %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestTicketRejectionReasons: a ticket sealed by daemon A and offered to
// daemon B (other ticket keys) is counted on B's /metrics as
// reason="undecryptable"; offered to daemon C (tickets off) as
// reason="disabled"; for TLCP and TLS 1.3-SM alike.
func TestTicketRejectionReasons(t *testing.T) {
	b := newBackend(t)
	start := func(tickets bool) (string, *metrics.Metrics) {
		m, err := metrics.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.Tickets = tickets
		return startDaemon(t, cfg, func(e *Env) { e.Sessions = m; e.KeyOps = m }).addr, m
	}
	addrA, _ := start(true)
	addrB, mB := start(true)
	addrC, mC := start(false)
	roots := testRoots(t)

	type mkConn = func(net.Conn) (net.Conn, func() bool)
	protocols := map[string]func() mkConn{
		"tlcp": func() mkConn {
			ccfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
			return func(raw net.Conn) (net.Conn, func() bool) {
				c := tlcp.Client(raw, ccfg)
				if err := c.Handshake(); err != nil {
					t.Fatal(err)
				}
				return c, func() bool { return c.ConnectionState().DidResume }
			}
		},
		"tls13sm": func() mkConn {
			ccfg := &tls13sm.Config{RootCAs: roots, ServerName: "localhost", ClientSessionCache: tls13sm.NewLRUClientSessionCache(4)}
			return func(raw net.Conn) (net.Conn, func() bool) {
				c := tls13sm.Client(raw, ccfg)
				if err := c.Handshake(); err != nil {
					t.Fatal(err)
				}
				return c, func() bool { return c.ConnectionState().DidResume }
			}
		},
	}
	for proto, newConn := range protocols {
		for _, target := range []string{addrB, addrC} {
			conn := newConn() // a fresh client session cache
			if fetchOver(t, addrA, conn) {
				t.Fatalf("%s: first connection resumed", proto)
			}
			if fetchOver(t, target, conn) {
				t.Errorf("%s: a daemon without A's ticket keys resumed A's ticket", proto)
			}
		}
	}
	for _, c := range []struct {
		m      *metrics.Metrics
		reason string
	}{{mB, "undecryptable"}, {mC, "disabled"}} {
		page := scrape(t, c.m)
		for _, proto := range []string{"tlcp", "tls13sm"} {
			want := `gmproxy_session_tickets_rejected_total{protocol="` + proto + `",reason="` + c.reason + `"} 1`
			if !strings.Contains(page, want) {
				var got []string
				for _, l := range strings.Split(page, "\n") {
					if strings.HasPrefix(l, "gmproxy_session_tickets_rejected_total") {
						got = append(got, l)
					}
				}
				t.Errorf("/metrics lacks %s; has:\n%s", want, strings.Join(got, "\n"))
			}
		}
	}
}
