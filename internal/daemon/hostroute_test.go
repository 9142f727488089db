package daemon

import (
	"bufio"
	"io"
	"net/http"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestTLCPWithoutSNIRoutedByHost: a TLCP client that sends no SNI (as
// those built on GmSSL do) gets a connection made for the listener's
// default site; its requests go to the site their Host names, as with
// nginx, when the daemon knows that site has TLCP certificates and
// neither site checks client certificates; a site that requires one is
// not reached (421).
func TestTLCPWithoutSNIRoutedByHost(t *testing.T) {
	p := testPKI(t)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	mtls := cfg.Sites[1]
	mtls.Name, mtls.ServerNames = "mtls", []string{"m.example.cn"}
	mtls.Routes = []conf.Route{{Name: "fixed", PathPrefix: "/", Respond: &conf.Respond{Status: 200, Body: "mtls site\n"}}}
	mtls.ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
	mtls.Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
	rsa := cfg.Sites[1]
	rsa.Name, rsa.ServerNames = "rsa", []string{"r.example.cn"}
	rsa.Routes = []conf.Route{{Name: "fixed", PathPrefix: "/", Respond: &conf.Respond{Status: 200, Body: "rsa site\n"}}}
	rsa.TLCP, rsa.TLS13SM = nil, nil
	rsa.Material.TLCPSign, rsa.Material.TLCPEnc, rsa.Material.TLS13SM = nil, nil, nil
	cfg.Sites = append(cfg.Sites, mtls, rsa)
	d := startDaemon(t, cfg)
	for _, c := range []struct {
		host, body string
		code       int
	}{
		{"x.b.example.cn", "other site\n", 200},
		{"m.example.cn", "", 421},
		{"r.example.cn", "", 200}, // no TLCP certificates: the default site's backend
		{"localhost", "", 200},
	} {
		tc := dialTLCP(t, d.addr, &tlcp.Config{InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if sni := tc.ConnectionState().ServerName; sni != "" {
			t.Fatalf("SNI %q sent", sni)
		}
		req, _ := http.NewRequest("GET", "https://"+c.host+"/", nil)
		req.Close = true
		if err := req.Write(tc); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tc.Close()
		if resp.StatusCode != c.code || (c.body != "" && string(body) != c.body) || (c.body == "" && c.code == 200 && string(body) == "rsa site\n") {
			t.Errorf("Host %s: %d %q, want %d %q", c.host, resp.StatusCode, body, c.code, c.body)
		}
	}
}

// TestSameServerNameOnTwoListeners: a server name on a site of each of
// two listeners (nginx's server_name in a server on 443 and in another on
// 8443 with client certificates): each listener's handshakes and
// requests go to its own site, the second requiring a certificate.
func TestSameServerNameOnTwoListeners(t *testing.T) {
	p := testPKI(t)
	own := clientIdentities(t, p)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	mtls := cfg.Sites[1]
	mtls.Name, mtls.ServerNames = "mtls", []string{"localhost"}
	mtls.ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
	mtls.Material.ClientCAs = []*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}
	cfg.Sites = []conf.Site{cfg.Sites[0], mtls}
	cfg.Listeners[0].Sites = []string{"main"}
	second := cfg.Listeners[0]
	second.Address, second.Sites = "127.0.0.2:0", []string{"mtls"}
	cfg.Listeners = append(cfg.Listeners, second)
	d := startDaemon(t, cfg)
	addr2 := d.Addr(second.Address)
	if addr2 == "" {
		t.Fatal("the second listener is not listening")
	}
	for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
		if status, err := fetchWithIdentity(t, d.addr, proto, nil); err != nil || status != 200 {
			t.Errorf("%s, first listener: %d %v, want 200", proto, status, err)
		}
		if status, err := fetchWithIdentity(t, addr2, proto, nil); err == nil {
			t.Errorf("%s, second listener without a certificate: %d, want the handshake refused", proto, status)
		}
		if status, err := fetchWithIdentity(t, addr2, proto, own); err != nil || status != 200 {
			t.Errorf("%s, second listener with a certificate: %d %v, want 200 (its own site, no 421)", proto, status, err)
		}
	}
}
