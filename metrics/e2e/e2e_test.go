// Package e2e checks gmproxy's metrics end to end: real TLCP, TLS 1.3-SM and
// TLS handshakes (full, resumed and failed) through frontdoor.Server with a
// *metrics.Metrics as observer, then a scrape of the admin endpoint. It lives
// apart from package metrics so that the metrics unit tests do not depend on
// the protocol packages.
package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/transcript"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

const payload = 1024

func pki(t *testing.T, name string) string {
	t.Helper()
	dir, err := transcript.PKIDir()
	if err != nil {
		t.Fatalf("test PKI: %v", err)
	}
	return filepath.Join(dir, name)
}

func ecdsaCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// server starts frontdoor.Server on loopback with m as observer; each
// established connection gets payload bytes, then the server waits for the
// client to close.
func server(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	tc, err := tlcp.LoadX509KeyPair(pki(t, "server_sign.crt"), pki(t, "server_sign.key"), pki(t, "server_enc.crt"), pki(t, "server_enc.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t13, err := tls13sm.LoadX509KeyPair(pki(t, "server_sign.crt"), pki(t, "server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Private-key work goes through the offload engine, observed by m.
	off := keyoffload.New(keyoffload.Config{Workers: 2}, m)
	t.Cleanup(off.Close)
	tc.SignKey = off.Wrap(tc.SignKey, frontdoor.FamilyTLCP)
	encKey, ok := tc.EncKey.(crypto.Signer)
	if !ok {
		t.Fatalf("encryption key %T is not a crypto.Signer", tc.EncKey)
	}
	tc.EncKey = off.Wrap(encKey, frontdoor.FamilyTLCP)
	t13.PrivateKey = off.Wrap(t13.PrivateKey, frontdoor.FamilyTLS13SM)
	site := &frontdoor.Site{
		Name: "e2e", ServerNames: []string{"localhost"},
		TLCP:    frontdoor.TLCPHandshaker(&tlcp.Config{Certificates: []tlcp.Certificate{tc}}),
		TLS13SM: frontdoor.TLS13SMHandshaker(&tls13sm.Config{Certificates: []tls13sm.Certificate{t13}}),
		TLS:     frontdoor.TLSHandshaker(&tls.Config{Certificates: []tls.Certificate{ecdsaCert(t)}}),
	}
	cfg := &frontdoor.ListenerConfig{Name: "edge", TLCP: true, TLS13SM: true, TLS: true,
		HandshakeTimeout: 5 * time.Second, Sites: frontdoor.NewSites([]*frontdoor.Site{site}, site)}
	srv := frontdoor.NewServer(cfg, m, func(c *frontdoor.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(bytes.Repeat([]byte("m"), payload)); err != nil {
			return
		}
		io.Copy(io.Discard, c)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// exchange dials, handshakes with hs, reads the payload and closes.
func exchange(t *testing.T, addr string, hs func(net.Conn) (net.Conn, error)) bool {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(5 * time.Second))
	c, err := hs(raw)
	if err != nil {
		raw.Close()
		return false
	}
	defer c.Close()
	buf := make([]byte, payload)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Errorf("reading payload: %v", err)
	}
	return true
}

func counter(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if !match(mt, labels) {
				continue
			}
			switch {
			case mt.Counter != nil:
				sum += mt.GetCounter().GetValue()
			case mt.Gauge != nil:
				sum += mt.GetGauge().GetValue()
			case mt.Histogram != nil:
				sum += float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func match(mt *dto.Metric, want map[string]string) bool {
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

func TestMetricsEndToEnd(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.MustNew(reg)
	addr := server(t, m)
	roots := func() *tlcp.Config { return &tlcp.Config{ServerName: "localhost", InsecureSkipVerify: true} }

	// TLCP: full then resumed (session ID), ECC-SM2-SM4-GCM-SM3.
	tcfg := roots()
	tcfg.CipherSuites = []uint16{tlcp.ECC_SM4_GCM_SM3}
	tcfg.ClientSessionCache = tlcp.NewLRUClientSessionCache(4)
	tlcpHS := func(raw net.Conn) (net.Conn, error) {
		c := tlcp.Client(raw, tcfg)
		return c, c.HandshakeContext(context.Background())
	}
	// TLS 1.3-SM: full then resumed (ticket).
	scfg := &tls13sm.Config{ServerName: "localhost", InsecureSkipVerify: true, ClientSessionCache: tls13sm.NewLRUClientSessionCache(4)}
	smHS := func(raw net.Conn) (net.Conn, error) {
		c := tls13sm.Client(raw, scfg)
		return c, c.HandshakeContext(context.Background())
	}
	// Ordinary TLS 1.3.
	gcfg := &tls.Config{ServerName: "localhost", InsecureSkipVerify: true}
	tlsHS := func(raw net.Conn) (net.Conn, error) {
		c := tls.Client(raw, gcfg)
		return c, c.HandshakeContext(context.Background())
	}
	// A failed handshake: plain HTTP on the TLS port.
	plainHS := func(raw net.Conn) (net.Conn, error) {
		io.WriteString(raw, "GET / HTTP/1.0\r\n\r\n")
		var b [1]byte
		raw.Read(b[:])
		return nil, io.EOF
	}

	for _, step := range []struct {
		name string
		hs   func(net.Conn) (net.Conn, error)
		ok   bool
	}{
		{"tlcp full", tlcpHS, true}, {"tlcp resumed", tlcpHS, true},
		{"tls13sm full", smHS, true}, {"tls13sm resumed", smHS, true},
		{"tls", tlsHS, true}, {"plain http", plainHS, false},
	} {
		if got := exchange(t, addr, step.hs); got != step.ok {
			t.Fatalf("%s: handshake ok=%v, want %v", step.name, got, step.ok)
		}
	}

	// Server-side events trail the clients: wait (bounded) until all six
	// connections were closed and reported.
	const conns = 6
	for i := 0; i < 500 && counter(t, reg, "gmproxy_connections_closed_total", nil) < conns; i++ {
		time.Sleep(10 * time.Millisecond)
	}

	ok := map[string]string{"result": "success", "listener": "edge"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	checks := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"tlcp full", "gmproxy_handshakes_total", with(ok, "protocol", "tlcp", "cipher", "ECC-SM2-SM4-GCM-SM3", "resumed", "false"), 1},
		{"tlcp resumed", "gmproxy_handshakes_total", with(ok, "protocol", "tlcp", "cipher", "ECC-SM2-SM4-GCM-SM3", "resumed", "true"), 1},
		{"tls13sm full", "gmproxy_handshakes_total", with(ok, "protocol", "tls13sm", "resumed", "false"), 1},
		{"tls13sm resumed", "gmproxy_handshakes_total", with(ok, "protocol", "tls13sm", "resumed", "true"), 1},
		{"tls", "gmproxy_handshakes_total", with(ok, "protocol", "tls", "version", "TLSv1.3"), 1},
		{"tlcp version", "gmproxy_handshakes_total", with(ok, "protocol", "tlcp", "version", "NTLSv1.1"), 2},
		{"tls13sm version", "gmproxy_handshakes_total", with(ok, "protocol", "tls13sm", "version", "TLSv1.3-SM"), 2},
		{"established connections timed", "gmproxy_connection_duration_seconds", map[string]string{"listener": "edge"}, 5},
		{"tlcp records", "gmproxy_tls_records_total", map[string]string{"protocol": "tlcp", "direction": "tx"}, 2},
		{"tlcp histogram", "gmproxy_handshake_duration_seconds", map[string]string{"protocol": "tlcp"}, 2},
		{"all histograms", "gmproxy_handshake_duration_seconds", nil, 5},
		{"tlcp tx bytes", "gmproxy_tls_bytes_total", map[string]string{"protocol": "tlcp", "cipher": "ECC-SM2-SM4-GCM-SM3", "direction": "tx"}, 2 * payload},
		{"tls13sm tx bytes", "gmproxy_tls_bytes_total", map[string]string{"protocol": "tls13sm", "direction": "tx"}, 2 * payload},
		{"tls tx bytes", "gmproxy_tls_bytes_total", map[string]string{"protocol": "tls", "direction": "tx"}, payload},
		{"accepted", "gmproxy_connections_accepted_total", map[string]string{"listener": "edge"}, conns},
		{"closed", "gmproxy_connections_closed_total", map[string]string{"listener": "edge"}, conns},
		{"active", "gmproxy_connections_active", map[string]string{"listener": "edge"}, 0},
		{"in progress", "gmproxy_handshakes_in_progress", map[string]string{"listener": "edge"}, 0},
		// Full handshakes only: TLCP ECC signs ServerKeyExchange and decrypts
		// the pre-master; TLS 1.3-SM signs CertificateVerify.
		{"tlcp sign", "gmproxy_key_operations_total", map[string]string{"op": "sign", "protocol": "tlcp", "result": "ok"}, 1},
		{"tlcp decrypt", "gmproxy_key_operations_total", map[string]string{"op": "decrypt", "protocol": "tlcp", "result": "ok"}, 1},
		{"tls13sm sign", "gmproxy_key_operations_total", map[string]string{"op": "sign", "protocol": "tls13sm", "result": "ok"}, 1},
		{"key-op exec histogram", "gmproxy_key_operation_duration_seconds", nil, 3},
		{"key-op queue histogram", "gmproxy_key_operation_queue_seconds", nil, 3},
	}
	for _, c := range checks {
		if got := counter(t, reg, c.metric, c.labels); got != c.want {
			t.Errorf("%s: %s%v = %v, want %v", c.name, c.metric, c.labels, got, c.want)
		}
	}
	total := counter(t, reg, "gmproxy_handshakes_total", nil)
	success := counter(t, reg, "gmproxy_handshakes_total", map[string]string{"result": "success"})
	if total-success != 1 {
		t.Errorf("failed handshakes = %v, want 1", total-success)
	}

	// The admin endpoint serves the same numbers.
	srv := httptest.NewServer(m.AdminMux(metrics.AdminOptions{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gmproxy_handshake_duration_seconds_bucket{cipher="ECC-SM2-SM4-GCM-SM3",client_auth="false",listener="edge",protocol="tlcp",resumed="true",version="NTLSv1.1",le="+Inf"} 1`,
		"go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// crypto/tls counts no records: no series at all, rather than a 0 that
	// would read as "no records".
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "gmproxy_tls_records_total{") && strings.Contains(l, `protocol="tls"`) {
			t.Errorf("records exported for ordinary TLS: %s", l)
		}
	}
	if t.Failed() {
		lines := []string{}
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "gmproxy_handshakes_total") || strings.HasPrefix(l, "gmproxy_tls_bytes") {
				lines = append(lines, l)
			}
		}
		t.Logf("scrape:\n%s", strings.Join(lines, "\n"))
	}
}
