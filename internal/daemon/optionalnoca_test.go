package daemon

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// oncaClient is one client of TestClientAuthOptionalNoCA: its identity
// and a session cache per protocol, so that its second connection of a
// protocol may resume the first.
type oncaClient struct {
	id    *clientIdentity
	tlcp  tlcp.ClientSessionCache
	sm    tls13sm.ClientSessionCache
	tls   tls.ClientSessionCache
	suite uint16 // TLCP suite (0: the client's default)
}

func newOncaClient(id *clientIdentity, suite uint16) *oncaClient {
	return &oncaClient{id: id, suite: suite, tlcp: tlcp.NewLRUClientSessionCache(4),
		sm: tls13sm.NewLRUClientSessionCache(4), tls: tls.NewLRUClientSessionCache(4)}
}

// oncaResult is what a GET of oncaFetch got.
type oncaResult struct {
	status  int
	body    string
	resumed bool
	err     error
}

// oncaFetch makes one GET of path over proto with cl's certificate (none
// without an identity), offering its cached session.
func oncaFetch(t *testing.T, addr, proto, path string, cl *oncaClient) oncaResult {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	var c net.Conn
	var resumed func() bool
	switch proto {
	case "tlcp":
		cfg := &tlcp.Config{ServerName: "localhost", RootCAs: testRoots(t), NextProtos: []string{"http/1.1"}, ClientSessionCache: cl.tlcp}
		if cl.suite != 0 {
			cfg.CipherSuites = []uint16{cl.suite}
		}
		if cl.id != nil {
			cfg.Certificates = []tlcp.Certificate{cl.id.tlcp}
		}
		tc := tlcp.Client(raw, cfg)
		c, resumed = tc, func() bool { return tc.ConnectionState().DidResume }
	case "tls13sm":
		cfg := &tls13sm.Config{RootCAs: testRoots(t), ServerName: "localhost", ClientSessionCache: cl.sm, NextProtos: []string{"http/1.1"}}
		if kp := cl.id; kp != nil {
			cfg.Certificates = []tls13sm.Certificate{{Certificate: kp.tls13sm.DER(), PrivateKey: kp.tls13sm.Key, Leaf: kp.tls13sm.Leaf()}}
		}
		tc := tls13sm.Client(raw, cfg)
		c, resumed = tc, func() bool { return tc.ConnectionState().DidResume }
	default:
		cfg := &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", NextProtos: []string{"http/1.1"}, ClientSessionCache: cl.tls}
		if cl.id != nil {
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cl.id.tls, nil }
		}
		tc := tls.Client(raw, cfg)
		c, resumed = tc, func() bool { return tc.ConnectionState().DidResume }
	}
	if err := c.(interface{ Handshake() error }).Handshake(); err != nil {
		return oncaResult{err: err}
	}
	res := oncaResult{resumed: resumed()}
	req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
	req.Close = true
	req.Header.Set("X-Ssl-Client-Verify", "SUCCESS") // the client's copy counts for nothing
	if res.err = req.Write(c); res.err != nil {
		return res
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		res.err = err
		return res
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.status, res.body = resp.StatusCode, strings.TrimSpace(string(body))
	return res
}

// oncaConfig: the main site under client_auth optional_no_ca with the
// CAs of p (none when withCA is false); /admin/ is for verified clients
// (a route matching X-Ssl-Client-Verify: SUCCESS ahead of one answering
// 403), the rest goes to a backend that echoes the client-certificate
// headers.
func oncaConfig(t *testing.T, backend string, withCA bool) *conf.Config {
	p := testPKI(t)
	cfg := testConfig(t, backend)
	cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthOptionalNoCA}
	if withCA {
		cfg.Sites[0].ClientAuth.CA = "ca.crt"
		cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}
	}
	cfg.Sites[0].Routes = []conf.Route{
		{Name: "admin", PathPrefix: "/admin/", Header: map[string]string{"X-Ssl-Client-Verify": "SUCCESS"}, Upstream: "app", ClientCertHeaders: true},
		{Name: "deny", PathPrefix: "/admin/", Respond: &conf.Respond{Status: 403}},
		{Name: "all", PathPrefix: "/", Upstream: "app", ClientCertHeaders: true},
	}
	return cfg
}

func echoIdentityBackend(t *testing.T) string {
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "verify=%s sdn=%s", r.Header.Get("X-Ssl-Client-Verify"), r.Header.Get("X-Ssl-Client-S-Dn"))
	}))
	t.Cleanup(b.Close)
	return b.Listener.Addr().String()
}

// TestClientAuthOptionalNoCA: client_auth optional_no_ca (nginx's
// ssl_verify_client optional_no_ca) takes, on TLCP (ECC and ECDHE), TLS
// 1.3-SM and TLS, a client certificate of a CA the site does not list:
// the handshake completes and the backend gets "X-Ssl-Client-Verify:
// FAILED:unable to get local issuer certificate" with the certificate's
// subject; a certificate of the site's CA gets SUCCESS, none NONE, and a
// resumed session the value of its certificate again. A route matching
// X-Ssl-Client-Verify: SUCCESS admits the verified client only (the
// other gets the next route's 403). Without a ca no certificate verifies.
func TestClientAuthOptionalNoCA(t *testing.T) {
	p, p2 := testPKI(t), testPKI2(t)
	own, foreign := clientIdentities(t, p), clientIdentities(t, p2)
	backend := echoIdentityBackend(t)
	failed := "verify=FAILED:" + frontdoor.VerifyUnknownIssuer
	for _, withCA := range []bool{true, false} {
		d := startDaemon(t, oncaConfig(t, backend, withCA))
		for _, proto := range []string{"tlcp", "tlcp-ecdhe", "tls13sm", "tls"} {
			var suite uint16
			if proto == "tlcp-ecdhe" {
				proto, suite = "tlcp", tlcp.ECDHE_SM4_GCM_SM3
			}
			cases := []struct {
				who       string
				id        *clientIdentity
				want      string // the backend's body's start
				sdn       bool   // the backend saw a subject
				admin     int    // status of /admin/
				skipECDHE bool
			}{
				{who: "another CA's certificate", id: foreign, want: failed, sdn: true, admin: 403},
				{who: "the site's CA's certificate", id: own, want: "verify=SUCCESS", sdn: true, admin: 200},
				{who: "no certificate", id: nil, want: "verify=NONE", admin: 403, skipECDHE: true},
			}
			for _, tc := range cases {
				if suite != 0 && tc.skipECDHE {
					continue // ECDHE needs the client's pair
				}
				want, admin := tc.want, tc.admin
				if !withCA && tc.id != nil {
					want, admin = failed, 403
				}
				cl := newOncaClient(tc.id, suite)
				name := fmt.Sprintf("ca %v, %s (suite %#x), %s", withCA, proto, suite, tc.who)
				for i, path := range []string{"/id", "/id", "/admin/x"} {
					r := oncaFetch(t, d.addr, proto, path, cl)
					if r.err != nil {
						t.Errorf("%s, %s: %v; want the handshake to complete", name, path, r.err)
						break
					}
					if i == 1 && !r.resumed {
						t.Errorf("%s: second connection not resumed", name)
					}
					if path == "/admin/x" {
						if r.status != admin {
							t.Errorf("%s, route for X-Ssl-Client-Verify: SUCCESS: status %d (%s), want %d", name, r.status, r.body, admin)
						}
						continue
					}
					hasSDN := !strings.HasSuffix(r.body, "sdn=")
					if r.status != 200 || !strings.HasPrefix(r.body, want+" sdn=") || hasSDN != tc.sdn {
						t.Errorf("%s, %s (resumed %v): backend saw %d %q, want %q with a subject %v", name, path, r.resumed, r.status, r.body, want, tc.sdn)
					}
				}
			}
		}
		d.Close()
	}
}

// TestClientAuthPolicyOptionalNoCA: the site's client-auth policy names
// mode optional_no_ca, so a reload from request (or to require) with the
// same CAs reaches the open connections (421) and the sessions.
func TestClientAuthPolicyOptionalNoCA(t *testing.T) {
	p := testPKI(t)
	site := func(mode string) *conf.Site {
		s := &conf.Site{ClientAuth: conf.ClientAuth{Mode: mode, CA: "ca.crt"}}
		s.Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
		return s
	}
	onca := clientAuthPolicy(site(conf.ClientAuthOptionalNoCA))
	for _, mode := range []string{conf.ClientAuthRequest, conf.ClientAuthRequire} {
		if other := clientAuthPolicy(site(mode)); onca == "" || onca == other {
			t.Errorf("client_auth policies: optional_no_ca %q, %s %q; want two different", onca, mode, other)
		}
	}
	if clientVerifier(site(conf.ClientAuthRequest)) != nil || clientVerifier(site(conf.ClientAuthOptionalNoCA)) == nil {
		t.Error("clientVerifier: want one for optional_no_ca only")
	}
}

// TestClientAuthOptionalNoCAReasons: under optional_no_ca the site's crl
// and verify_depth count as under request, on TLCP, TLS 1.3-SM and TLS,
// but a certificate they refuse is served with its reason in OpenSSL's
// words: "FAILED:certificate revoked" (the TLCP encryption certificate's
// too), "FAILED:CRL has expired", "FAILED:certificate chain too long".
func TestClientAuthOptionalNoCAReasons(t *testing.T) {
	p := testPKI(t)
	own := clientIdentities(t, p)
	deep, deepRoots := deepIdentities(t)
	tlsLeaf, err := x509.ParseCertificate(own.tls.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Minute)
	backend := echoIdentityBackend(t)
	onca := func(cfg *conf.Config) *conf.Config {
		cfg.Sites[0].ClientAuth.Mode = conf.ClientAuthOptionalNoCA
		cfg.Sites[0].Routes = oncaConfig(t, backend, false).Sites[0].Routes
		return cfg
	}
	revoked := frontdoor.VerifyRevoked
	cases := []struct {
		name string
		cfg  *conf.Config
		id   *clientIdentity
		want map[string]string // reason by protocol, "": SUCCESS
	}{
		{"client certificates revoked", onca(crlConfig(t, backend, p, testCRL(t, p.CA, later, p.ClientSign.Cert.SerialNumber), testCRL(t, *p.ECDSACA, later, tlsLeaf.SerialNumber))),
			own, map[string]string{"tlcp": revoked, "tls13sm": revoked, "tls": revoked}},
		{"TLCP encryption certificate revoked", onca(crlConfig(t, backend, p, testCRL(t, p.CA, later, p.ClientEnc.Cert.SerialNumber), testCRL(t, *p.ECDSACA, later))),
			own, map[string]string{"tlcp": revoked}},
		{"CRLs expired", onca(crlConfig(t, backend, p, testCRL(t, p.CA, earlier), testCRL(t, *p.ECDSACA, earlier))),
			own, map[string]string{"tlcp": frontdoor.VerifyCRLExpired, "tls13sm": frontdoor.VerifyCRLExpired, "tls": frontdoor.VerifyCRLExpired}},
		{"chain deeper than verify_depth 0", func() *conf.Config {
			cfg := onca(testConfig(t, backend))
			cfg.Sites[0].ClientAuth.CA, cfg.Sites[0].ClientAuth.VerifyDepth = "ca.crt", new(0)
			cfg.Sites[0].Material.ClientCAs = deepRoots
			return cfg
		}(), deep, map[string]string{"tlcp": frontdoor.VerifyChainTooLong, "tls13sm": frontdoor.VerifyChainTooLong, "tls": frontdoor.VerifyChainTooLong}},
	}
	for _, tc := range cases {
		d := startDaemon(t, tc.cfg)
		for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
			want := "verify=SUCCESS sdn="
			if r := tc.want[proto]; r != "" {
				want = "verify=FAILED:" + r + " sdn="
			}
			r := oncaFetch(t, d.addr, proto, "/id", newOncaClient(tc.id, 0))
			if r.err != nil || r.status != 200 || !strings.HasPrefix(r.body, want) || strings.HasSuffix(r.body, "sdn=") {
				t.Errorf("%s, %s: %d %q, error %v; want %q and a subject", tc.name, proto, r.status, r.body, r.err, want)
			}
		}
		d.Close()
	}
}

// TestOptionalNoCAReloadReachesConnections: a reload that changes a
// site's client_auth mode from optional_no_ca to request (same ca)
// reaches a connection kept alive whose certificate FAILED: its next
// request gets 421, and the client connects again under the new mode,
// which refuses that certificate in the handshake.
func TestOptionalNoCAReloadReachesConnections(t *testing.T) {
	foreign := clientIdentities(t, testPKI2(t))
	backend := echoIdentityBackend(t)
	td := startDaemon(t, oncaConfig(t, backend, true))
	kept := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, Certificates: []tlcp.Certificate{foreign.tlcp}})
	if err := kept.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(kept)
	if st, body, err := keepAliveGET(t, kept, br, "/before"); err != nil || st != 200 || !strings.HasPrefix(body, "verify=FAILED:") {
		t.Fatalf("before the reload: %d %q %v", st, body, err)
	}
	cfg := oncaConfig(t, backend, true)
	cfg.Sites[0].ClientAuth.Mode = conf.ClientAuthRequest
	td.reloadWith(t, cfg)
	if st, body, err := keepAliveGET(t, kept, br, "/after"); err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("kept-alive connection after the reload from optional_no_ca to request: %d %q %v, want 421", st, body, err)
	}
}
