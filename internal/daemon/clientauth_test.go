package daemon

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestClientAuthModes: a site's client_auth reaches each protocol's
// server. With require, a client without a certificate is refused on
// TLCP, TLS 1.3-SM and TLS; with request it is served. With either, a
// certificate from a CA the site does not list is refused and one from a
// listed CA is served.
func TestClientAuthModes(t *testing.T) {
	p, p2 := testPKI(t), testPKI2(t)
	own := clientIdentities(t, p)
	foreign := clientIdentities(t, p2)
	b := newBackend(t)
	for _, mode := range []string{conf.ClientAuthRequire, conf.ClientAuthRequest} {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: mode, CA: "ca.crt"}
		cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}
		d := startDaemon(t, cfg)
		for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
			cases := []struct {
				who  string
				id   *clientIdentity
				want bool
			}{
				{"no certificate", nil, mode == conf.ClientAuthRequest},
				{"a certificate of another CA", foreign, false},
				{"a certificate of the site's CA", own, true},
			}
			for _, tc := range cases {
				status, err := fetchWithIdentity(t, d.addr, proto, tc.id)
				if served := err == nil && status == 200; served != tc.want {
					t.Errorf("client_auth %s, %s, %s: status %d, error %v; want served %v", mode, proto, tc.who, status, err, tc.want)
				}
			}
		}
		d.Close()
	}
}

// clientIdentity is a client's certificates for each protocol.
type clientIdentity struct {
	tlcp    tlcp.Certificate
	tls13sm *conf.KeyPair
	tls     tls.Certificate
}

// clientIdentities returns p's SM2 client certificates and an ECDSA one
// issued by p's ECDSA CA (by a throw-away ECDSA CA when p has none).
func clientIdentities(t *testing.T, p *devpki.PKI) *clientIdentity {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	issue := func(tmpl, parent *x509.Certificate, pub, signer any) []byte {
		tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	var caDER []byte
	var caKey any
	if p.ECDSACA != nil {
		caDER, caKey = p.ECDSACA.Cert.Raw, p.ECDSACA.Key
	} else {
		k := newKey()
		caDER = issue(&x509.Certificate{Subject: pkix.Name{CommonName: "other ECDSA CA"}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign}, nil, &k.PublicKey, k)
		caKey = k
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey()
	der := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "ecdsa client"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, caCert, &key.PublicKey, caKey)
	return &clientIdentity{
		tlcp: tlcp.Certificate{
			SignCertificate: [][]byte{p.ClientSign.Cert.Raw}, SignKey: p.ClientSign.Key,
			EncCertificate: p.ClientEnc.Cert.Raw, EncKey: p.ClientEnc.Key,
		},
		tls13sm: pair(p.ClientSign),
		tls:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// fetchWithIdentity makes one GET over proto with id's certificate (none
// when id is nil) and returns the status, or the handshake's or the
// exchange's error.
func fetchWithIdentity(t *testing.T, addr, proto string, id *clientIdentity) (int, error) {
	t.Helper()
	if proto == "tls13sm" {
		var kp *conf.KeyPair
		if id != nil {
			kp = id.tls13sm
		}
		r := smFetch(t, addr, "localhost", kp, nil)
		return r.status, r.err
	}
	var c net.Conn
	switch proto {
	case "tlcp":
		cfg := &tlcp.Config{ServerName: "localhost"}
		if id != nil {
			cfg.Certificates = []tlcp.Certificate{id.tlcp}
		}
		tc := dialTLCP(t, addr, cfg)
		if err := tc.Handshake(); err != nil {
			return 0, err
		}
		c = tc
	default:
		cfg := &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", NextProtos: []string{"http/1.1"}}
		if id != nil {
			// Sent whatever CAs the server names: crypto/tls would
			// otherwise keep back a certificate of another CA.
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &id.tls, nil }
		}
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		tc := tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			return 0, err
		}
		c = tc
	}
	defer c.Close()
	req, _ := http.NewRequest("GET", "https://localhost/auth", nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestRouteMatchesVerifiedClientCertificate: a route's header matcher on
// X-Ssl-Client-Verify reads the proxy's own verification result, not the
// client's copy of the header: on a site with client_auth request, a
// route that asks for "X-Ssl-Client-Verify: SUCCESS" ahead of one that
// answers 403 lets in a client with a verified certificate and keeps out
// one without, even when it sends the header itself.
func TestRouteMatchesVerifiedClientCertificate(t *testing.T) {
	p := testPKI(t)
	own := clientIdentities(t, p)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequest, CA: "ca.crt"}
	cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}
	cfg.Sites[0].Routes = []conf.Route{
		{Name: "admin", PathPrefix: "/admin/", Header: map[string]string{"X-Ssl-Client-Verify": "SUCCESS"}, Upstream: "app"},
		{Name: "deny", PathPrefix: "/admin/", Respond: &conf.Respond{Status: 403}},
		{Name: "rest", PathPrefix: "/", Upstream: "app"},
	}
	d := startDaemon(t, cfg)
	get := func(id *clientIdentity, forged bool) int {
		t.Helper()
		tcfg := &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", NextProtos: []string{"http/1.1"}}
		if id != nil {
			tcfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &id.tls, nil }
		}
		c, err := tls.Dial("tcp", d.addr, tcfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		req, _ := http.NewRequest("GET", "https://localhost/admin/x", nil)
		req.Close = true
		if forged {
			req.Header.Set("X-Ssl-Client-Verify", "SUCCESS")
		}
		return statusOn(t, c, req)
	}
	if got := get(nil, true); got != 403 {
		t.Errorf("no certificate, X-Ssl-Client-Verify: SUCCESS forged: %d, want 403", got)
	}
	if got := get(nil, false); got != 403 {
		t.Errorf("no certificate: %d, want 403", got)
	}
	if got := get(own, false); got != 200 {
		t.Errorf("verified certificate: %d, want 200", got)
	}
}

// TestRouteClientIP: conf's client_ip reaches the proxy's routes: over a
// real TLS connection from 127.0.0.1, a route for 10.0.0.0/8 is passed
// over (403 from the next route) and one for 127.0.0.0/8 serves; and so
// does a route's rate_limit.
func TestRouteClientIP(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sites[0].Routes = []conf.Route{
		{Name: "office", PathPrefix: "/admin/", ClientIP: []string{"10.0.0.0/8"}, Upstream: "app"},
		{Name: "local", PathPrefix: "/local/", ClientIP: []string{"127.0.0.0/8", "::1"}, Upstream: "app"},
		{Name: "limited", PathPrefix: "/limited/", RateLimit: &conf.RateLimit{Rate: conf.Rate(time.Hour)}, Upstream: "app"},
		{Name: "deny", PathPrefix: "/", Respond: &conf.Respond{Status: 403}},
	}
	d := startDaemon(t, cfg)
	get := func(path string) int {
		t.Helper()
		c, err := tls.Dial("tcp", d.addr, &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
		req.Close = true
		req.Header.Set("X-Forwarded-For", "10.1.2.3") // no trusted proxy: ignored
		return statusOn(t, c, req)
	}
	if got := get("/admin/x"); got != 403 {
		t.Errorf("/admin/ (client_ip 10.0.0.0/8) from 127.0.0.1: %d, want 403", got)
	}
	// conf's rate_limit reaches the proxy too: one request an hour.
	if got := get("/limited/x"); got != 200 {
		t.Errorf("/limited/ first request: %d, want 200", got)
	}
	if got := get("/limited/x"); got != 429 {
		t.Errorf("/limited/ (rate_limit 1/h) second request: %d, want 429", got)
	}
	if got := get("/local/x"); got != 200 {
		t.Errorf("/local/ (client_ip 127.0.0.0/8) from 127.0.0.1: %d, want 200", got)
	}
}

// statusOn writes req on c and returns the response's status, its body
// read.
func statusOn(t *testing.T, c net.Conn, req *http.Request) int {
	t.Helper()
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// TestTLSClientCertificateMustAllowSigning: over TLS, a client certificate
// whose keyUsage leaves out digitalSignature (a key-agreement-only ECDSA
// certificate, here with extKeyUsage clientAuth and a trusted issuer) does
// not authenticate: the client proves itself by signing (CertificateVerify),
// which RFC 8446 §4.4.2.2 and RFC 5246 §7.4.6 allow only a certificate
// whose key may sign; OpenSSL (nginx's ssl_verify_client) refuses it so,
// and the TLCP and TLS 1.3-SM handshakes of gmproxy do too. One with
// digitalSignature is served.
func TestTLSClientCertificateMustAllowSigning(t *testing.T) {
	p := testPKI(t)
	if p.ECDSACA == nil {
		t.Skip("no ECDSA CA")
	}
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
	cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}
	d := startDaemon(t, cfg)

	good := clientIdentities(t, p)
	if status, err := fetchWithIdentity(t, d.addr, "tls", good); err != nil || status != 200 {
		t.Fatalf("digitalSignature client certificate: %d, %v; want 200", status, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(p.ECDSACA.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "key agreement only"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageKeyAgreement, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, &key.PublicKey, p.ECDSACA.Key)
	if err != nil {
		t.Fatal(err)
	}
	bad := &clientIdentity{tls: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
	if status, err := fetchWithIdentity(t, d.addr, "tls", bad); err == nil {
		t.Errorf("client certificate without digitalSignature: %d, want the handshake refused", status)
	}
}
