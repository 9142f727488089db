package daemon

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestMetricsWiring: with the metrics package as observer, handshakes of
// every protocol, a failed handshake, private-key operations through the
// offload engine, record-layer bytes and requests are all counted.
func TestMetricsWiring(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := &testDaemon{cfg: cfg}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	td.env = &Env{Logger: log, Observer: m, KeyOps: m, Sessions: m, ProxyObserver: m}
	d, err := New(func() (*Generation, error) { return Build(td.cfg, td.env) }, Options{Logger: log, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer td.env.Close()
	defer d.Close()
	addr := d.Addr(cfg.Listeners[0].Address)

	get(t, smClient(t, addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false), "https://localhost/m")
	get(t, smClient(t, addr, "tlcp", tlcp.ECDHE_SM4_CBC_SM3, false), "https://localhost/m")
	get(t, smClient(t, addr, "tls13sm", tls13sm.TLS_SM4_GCM_SM3, false), "https://localhost/m")
	get(t, tlsClient(t, addr, "localhost", false), "https://localhost/m")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00")) // not a ClientHello
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	c.Read(make([]byte, 1))
	c.Close()
	d.Close() // closes connections: bytes are reported on close

	// gather lists the label sets of name's series with a positive value.
	gather := func(name string) string { return strings.Join(keyOpSeries(t, m, name), "\n") }
	// The refused hello's handshake is counted once its goroutine has
	// written the alert and returned, which may be after this client read
	// the alert and Close returned: waited for, not raced.
	hs := gather("gmproxy_handshakes_total")
	for deadline := time.Now().Add(testwait.Bound(5 * time.Second)); !strings.Contains(hs, "result=protocol_error") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		hs = gather("gmproxy_handshakes_total")
	}
	for _, want := range []string{"protocol=tlcp", "protocol=tls13sm", "protocol=tls", "result=success", "result=protocol_error"} {
		if !strings.Contains(hs, want) {
			t.Errorf("handshakes_total lacks %s:\n%s", want, hs)
		}
	}
	ops := gather("gmproxy_key_operations_total")
	for _, want := range []string{"op=sign,protocol=tlcp", "op=decrypt,protocol=tlcp", "op=key_agreement,protocol=tlcp", "op=sign,protocol=tls13sm", "op=sign,protocol=tls"} {
		if !strings.Contains(ops, want) {
			t.Errorf("key_operations_total lacks %s:\n%s", want, ops)
		}
	}
	by := gather("gmproxy_tls_bytes_total")
	if !strings.Contains(by, "cipher=ECC-SM2-SM4-GCM-SM3,direction=tx,protocol=tlcp") {
		t.Errorf("tls_bytes_total:\n%s", by)
	}
}
