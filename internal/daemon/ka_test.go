package daemon

import (
	"io"
	"net/http"
	"testing"

	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestKeepAliveEveryProtocol: several requests on one kept-alive connection
// per protocol (TLS 1.3-SM sends NewSessionTickets after the handshake).
func TestKeepAliveEveryProtocol(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	for _, tc := range []struct {
		name string
		c    *http.Client
	}{
		{"tlcp", smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_CBC_SM3, false)},
		{"tls13sm", smClient(t, d.addr, "tls13sm", tls13sm.TLS_SM4_GCM_SM3, false)},
		{"tls13sm-h2", smClient(t, d.addr, "tls13sm", tls13sm.TLS_SM4_CCM_SM3, true)},
		{"tls", tlsClient(t, d.addr, "localhost", false)},
	} {
		for i := 0; i < 5; i++ {
			resp, err := tc.c.Get("https://localhost/1k")
			if err != nil {
				t.Fatalf("%s request %d: %v", tc.name, i, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || len(body) != 1024 {
				t.Fatalf("%s request %d: %d bytes, %v", tc.name, i, len(body), err)
			}
		}
	}
}
