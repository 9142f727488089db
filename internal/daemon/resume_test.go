package daemon

import (
	"bufio"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// fetchOver does one HTTP/1.1 request on a fresh connection made by mk and
// reports whether the handshake resumed.
func fetchOver(t *testing.T, addr string, mk func(net.Conn) (net.Conn, func() bool)) bool {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	c, resumed := mk(raw)
	req, _ := http.NewRequest("GET", "https://localhost/r", nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resumed()
}

// TestResumptionAcrossInstances: two daemons sharing a ticket key file
// resume each other's TLCP tickets and TLS 1.3-SM PSK tickets; one daemon
// resumes TLCP session IDs from its session cache.
func TestResumptionAcrossInstances(t *testing.T) {
	b := newBackend(t)
	keyFile := filepath.Join(t.TempDir(), "ticket.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i := 0; i < 2; i++ {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.TicketKeyFile = keyFile
		cfg.Sessions.Tickets = true
		// conf.Load reads the key file; this config is built in code, so do it here.
		keys, err := ticket.ParseKeyFile(key, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg.TicketKeys = keys
		addrs = append(addrs, startDaemon(t, cfg).addr)
	}
	p := testPKI(t)
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)

	tlcpCfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
	tlcpConn := func(raw net.Conn) (net.Conn, func() bool) {
		c := tlcp.Client(raw, tlcpCfg)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, func() bool { return c.ConnectionState().DidResume }
	}
	sm13Cfg := &tls13sm.Config{RootCAs: roots, ServerName: "localhost", ClientSessionCache: tls13sm.NewLRUClientSessionCache(4)}
	sm13Conn := func(raw net.Conn) (net.Conn, func() bool) {
		c := tls13sm.Client(raw, sm13Cfg)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, func() bool { return c.ConnectionState().DidResume }
	}
	for name, mk := range map[string]func(net.Conn) (net.Conn, func() bool){"tlcp-ticket": tlcpConn, "tls13sm-psk": sm13Conn} {
		if fetchOver(t, addrs[0], mk) {
			t.Errorf("%s: first connection resumed", name)
		}
		if !fetchOver(t, addrs[1], mk) {
			t.Errorf("%s: the second instance did not resume the first one's ticket", name)
		}
	}

	// Session IDs (no tickets): resumed from the daemon's session cache.
	idCfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_CBC_SM3}, SessionTicketsDisabled: true, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
	idConn := func(raw net.Conn) (net.Conn, func() bool) {
		c := tlcp.Client(raw, idCfg)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, func() bool { return c.ConnectionState().DidResume }
	}
	if fetchOver(t, addrs[0], idConn) || !fetchOver(t, addrs[0], idConn) {
		t.Error("TLCP session-ID resumption did not happen on the second connection")
	}
}
