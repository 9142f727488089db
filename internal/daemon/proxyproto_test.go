package daemon

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestProxyProtocolListener: behind a trusted L4 balancer, the PROXY v1
// header's client address reaches the backend in X-Forwarded-For, and the
// TLS handshake that follows the header is sniffed as usual.
func TestProxyProtocolListener(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Listeners[0].ProxyProtocol.Enabled = true
	cfg.Listeners[0].ProxyProtocol.Trusted = []string{"127.0.0.1/32"}
	d := startDaemon(t, cfg)

	raw, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	io.WriteString(raw, "PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n")
	fetchXFF(t, raw, "203.0.113.7")
}

// fetchXFF runs a TLS handshake and GET /xff over raw (after its PROXY
// header) and checks the client address the backend saw.
func fetchXFF(t *testing.T, raw net.Conn, want string) {
	t.Helper()
	p := testPKI(t)
	pool := x509.NewCertPool()
	ca, _ := x509.ParseCertificate(p.ECDSACA.Cert.Raw)
	pool.AddCert(ca)
	c := tls.Client(raw, &tls.Config{ServerName: "localhost", RootCAs: pool, NextProtos: []string{"http/1.1"}})
	req, _ := http.NewRequest("GET", "https://localhost/xff", nil)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "xff="+want+"\n" {
		t.Errorf("backend saw %q, want xff=%s", body, want)
	}
}

// TestProxyProtocolRequired: with proxy_protocol.required, a connection
// from a trusted balancer that does not start with a PROXY header is
// closed rather than served as the balancer's own (its client would be
// counted, logged and matched by client_ip as the balancer); one with a
// header is served. Without it, the header-less connection is served
// with its socket address.
func TestProxyProtocolRequired(t *testing.T) {
	b := newBackend(t)
	for _, required := range []bool{true, false} {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Listeners[0].ProxyProtocol.Enabled = true
		cfg.Listeners[0].ProxyProtocol.Trusted = []string{"127.0.0.1/32"}
		cfg.Listeners[0].ProxyProtocol.Required = required
		d := startDaemon(t, cfg)

		raw, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		io.WriteString(raw, "PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n")
		fetchXFF(t, raw, "203.0.113.7")
		raw.Close()

		raw, err = net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		if !required {
			fetchXFF(t, raw, "127.0.0.1")
			raw.Close()
			continue
		}
		p := testPKI(t)
		pool := x509.NewCertPool()
		ca, _ := x509.ParseCertificate(p.ECDSACA.Cert.Raw)
		pool.AddCert(ca)
		err = tls.Client(raw, &tls.Config{ServerName: "localhost", RootCAs: pool}).Handshake()
		raw.Close()
		if err == nil {
			t.Errorf("required: a trusted connection without a PROXY header completed its handshake; want it closed")
		}
	}
}
