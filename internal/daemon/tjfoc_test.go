package daemon

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tjfoc/gmsm/gmtls"
	tjx509 "github.com/tjfoc/gmsm/x509"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestE2ETjfocClient: tjfoc's gmtls client (a third-party TLCP stack,
// ECC_SM4_CBC_SM3, the only suite of its that follows GB/T 38636 key
// exchange) reaches the backend through the daemon.
func TestE2ETjfocClient(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	p := testPKI(t)
	ca, err := tjx509.ParseCertificate(p.CA.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	roots := tjx509.NewCertPool()
	roots.AddCert(ca)
	raw, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	c := gmtls.Client(raw, &gmtls.Config{
		GMSupport:    &gmtls.GMSupport{},
		ServerName:   "localhost",
		RootCAs:      roots,
		CipherSuites: []uint16{gmtls.GMTLS_SM2_WITH_SM4_SM3},
	})
	if err := c.Handshake(); err != nil {
		t.Fatalf("tjfoc handshake: %v", err)
	}
	io.WriteString(c, "GET /tjfoc HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if want := "path=/tjfoc proto=NTLSv1.1 cipher=ECC-SM2-SM4-CBC-SM3\n"; string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
	if !strings.HasPrefix(resp.Proto, "HTTP/1.1") {
		t.Errorf("proto %s", resp.Proto)
	}
}
