package daemon

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/tlcp"
)

// keepAliveGET sends one keep-alive GET over c and returns status and body.
func keepAliveGET(t *testing.T, c *tlcp.Conn, br *bufio.Reader, path string) (int, string, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
	if err := req.Write(c); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return 0, "", err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, string(b), nil
}

// TestReloadAddingClientAuthReachesOpenConnections: a TLCP connection made
// without a client certificate while site "main" did not authenticate
// clients is not served after a reload makes main require client
// certificates (the next request on a kept-alive connection uses the new
// configuration, which refuses that client): its next request gets 421
// and the connection is closed, so the client connects again and is
// asked for a certificate.
func TestReloadAddingClientAuthReachesOpenConnections(t *testing.T) {
	p := testPKI(t)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := startDaemon(t, cfg)

	c := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if st, _, err := keepAliveGET(t, c, br, "/before"); err != nil || st != 200 {
		t.Fatalf("before reload: %d %v", st, err)
	}

	strict := testConfig(t, b.Listener.Addr().String())
	strict.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
	strict.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
	td.reloadWith(t, strict)

	// A new connection without a certificate is refused now.
	if st, err := fetchWithIdentity(t, td.addr, "tlcp", nil); err == nil && st == 200 {
		t.Fatalf("new connection without a certificate served after the reload")
	}
	st, body, err := keepAliveGET(t, c, br, "/after")
	if err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("after a reload that made site main require client certificates, the kept-alive connection made without one: %d %q %v, want 421", st, strings.TrimSpace(body), err)
	}
	if _, _, err := keepAliveGET(t, c, br, "/again"); err == nil {
		t.Errorf("the connection is still open after its 421")
	}
}

// TestReloadRemovingClientCAReachesOpenConnections: a client
// authenticated by CA1 does not keep its open connection after a reload
// removes CA1 (the operator distrusts that CA): its next request gets 421,
// as resumption is refused (client_cert_invalid).
func TestReloadRemovingClientCAReachesOpenConnections(t *testing.T) {
	p, p2 := testPKI(t), testPKI2(t)
	b := newBackend(t)
	withCAs := func(cas ...*smx509.Certificate) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
		cfg.Sites[0].Material.ClientCAs = cas
		return cfg
	}
	td := startDaemon(t, withCAs(p.CA.Cert))
	id := clientIdentities(t, p)
	c := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		Certificates: []tlcp.Certificate{id.tlcp}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if st, _, err := keepAliveGET(t, c, br, "/before"); err != nil || st != 200 {
		t.Fatalf("before reload: %d %v", st, err)
	}
	td.reloadWith(t, withCAs(p2.CA.Cert))
	if st, err := fetchWithIdentity(t, td.addr, "tlcp", id); err == nil && st == 200 {
		t.Fatalf("new connection with a CA1 certificate served after CA1 was removed")
	}
	st, body, err := keepAliveGET(t, c, br, "/after")
	if err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("after a reload removed the client's CA, its kept-alive connection: %d %q %v, want 421", st, strings.TrimSpace(body), err)
	}
}

// TestReloadKeepingClientAuthKeepsConnections: a reload that leaves a
// site's client authentication as it was (here it changes an upstream
// timeout) keeps the authenticated connections serving; and one that
// renames the connection's site answers 421 on them.
func TestReloadKeepingClientAuthKeepsConnections(t *testing.T) {
	p := testPKI(t)
	b := newBackend(t)
	mk := func(name string, idle time.Duration) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[0].Name = name
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
		cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
		cfg.Sites[1].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthNone}
		cfg.Upstreams[0].Timeouts.Idle = idle
		return cfg
	}
	td := startDaemon(t, mk("main", time.Minute))
	id := clientIdentities(t, p)
	c := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		Certificates: []tlcp.Certificate{id.tlcp}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if st, _, err := keepAliveGET(t, c, br, "/before"); err != nil || st != 200 {
		t.Fatalf("before the reload: %d %v", st, err)
	}
	td.reloadWith(t, mk("main", 2*time.Minute))
	if st, body, err := keepAliveGET(t, c, br, "/after"); err != nil || st != 200 || !strings.Contains(body, "path=/after") {
		t.Errorf("after a reload that kept the client authentication: %d %q %v, want 200", st, strings.TrimSpace(body), err)
	}
	td.reloadWith(t, mk("renamed", 2*time.Minute))
	if st, body, err := keepAliveGET(t, c, br, "/renamed"); err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("after a reload that renamed the connection's site: %d %q %v, want 421", st, strings.TrimSpace(body), err)
	}
}

// TestReloadTakingSiteOffListenerReachesOpenConnections: a reload that
// takes a site off a listener (listeners[].sites: the operator stops
// exposing it on that address) reaches the connections already made for
// it there: a new handshake on the listener gets another site now, and
// the next request of a kept-alive connection gets 421 instead of
// reaching the site through the listener that no longer serves it.
func TestReloadTakingSiteOffListenerReachesOpenConnections(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := startDaemon(t, cfg)
	c := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if st, body, err := keepAliveGET(t, c, br, "/before"); err != nil || st != 200 || !strings.Contains(body, "path=/before") {
		t.Fatalf("before reload: %d %q %v", st, body, err)
	}

	narrowed := testConfig(t, b.Listener.Addr().String())
	narrowed.Listeners[0].Sites = []string{"other"}
	td.reloadWith(t, narrowed)

	st, body, err := keepAliveGET(t, c, br, "/after")
	if err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("after a reload took site main off the listener, its kept-alive connection there: %d %q %v, want 421", st, strings.TrimSpace(body), err)
	}
}

// TestReloadRemovingECDHEClientCAReachesOpenConnections: a TLCP site
// whose client_auth mode is none still verifies the sign/enc pair every
// ECDHE handshake requires, against its ca when it has one (the
// connection is then authenticated, as X-Ssl-Client-Verify says). A
// reload that replaces that CA (the operator distrusts it) reaches such a
// connection as it does under request and require: its next request gets
// 421, where it went on being served as verified by the CA removed.
func TestReloadRemovingECDHEClientCAReachesOpenConnections(t *testing.T) {
	p, p2 := testPKI(t), testPKI2(t)
	b := newBackend(t)
	withCA := func(ca *smx509.Certificate) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthNone, CA: "ca.crt"}
		cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{ca}
		return cfg
	}
	td := startDaemon(t, withCA(p.CA.Cert))
	id := clientIdentities(t, p)
	dial := func() *tlcp.Conn {
		return dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3},
			Certificates: []tlcp.Certificate{id.tlcp}})
	}
	c := dial()
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if len(c.ConnectionState().PeerCertificates) == 0 {
		t.Fatal("the server's certificate missing")
	}
	br := bufio.NewReader(c)
	if st, _, err := keepAliveGET(t, c, br, "/before"); err != nil || st != 200 {
		t.Fatalf("before reload: %d %v", st, err)
	}
	td.reloadWith(t, withCA(p2.CA.Cert))
	if nc := dial(); nc.Handshake() == nil {
		nc.Close()
		t.Fatal("a new ECDHE connection with a certificate of the CA removed was accepted: the site does not verify ECDHE clients against its ca")
	}
	st, body, err := keepAliveGET(t, c, br, "/after")
	if err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("after a reload replaced the CA that verified its ECDHE client certificate, the kept-alive connection: %d %q %v, want 421", st, strings.TrimSpace(body), err)
	}
}
