package daemon

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/revocation"
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

// oncaIssue makes a certificate for key with key usage ku and extended
// key usages eku, valid from an hour ago until notAfter, signed by parent
// (nil: by itself).
func oncaIssue(t testing.TB, cn string, parent *devpki.Cert, key crypto.Signer, isCA bool, ku smx509.KeyUsage, eku []smx509.ExtKeyUsage, notAfter time.Time) devpki.Cert {
	t.Helper()
	tmpl := &smx509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, KeyUsage: ku, ExtKeyUsage: eku}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	}
	signer := devpki.Cert{Cert: tmpl, Key: key}
	if parent != nil {
		signer = *parent
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, signer.Cert, key.Public(), signer.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return devpki.Cert{Cert: c, Key: key}
}

func oncaSM2Key(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func oncaECKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// oncaIdentity is the identity of a TLCP pair, a TLS 1.3-SM certificate
// (sign) and a TLS one, each sent with chain.
func oncaIdentity(sign, enc, ec devpki.Cert, smChain, ecChain []devpki.Cert) *clientIdentity {
	id := &clientIdentity{
		tlcp:    tlcp.Certificate{SignCertificate: [][]byte{sign.Cert.Raw}, SignKey: sign.Key, EncCertificate: enc.Cert.Raw, EncKey: enc.Key},
		tls13sm: pair(sign, smChain...),
		tls:     tls.Certificate{Certificate: [][]byte{ec.Cert.Raw}, PrivateKey: ec.Key},
	}
	for _, c := range smChain {
		id.tlcp.SignCertificate = append(id.tlcp.SignCertificate, c.Cert.Raw)
	}
	for _, c := range ecChain {
		id.tls.Certificate = append(id.tls.Certificate, c.Cert.Raw)
	}
	return id
}

var (
	oncaClientEKU = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}
	oncaSignKU    = smx509.KeyUsageDigitalSignature
	oncaEncKU     = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
)

// oncaWant fetches /id over each protocol of want with id's certificates
// from the daemon at addr and checks that the backend saw
// X-Ssl-Client-Verify FAILED:want[proto] ("": SUCCESS) and a subject.
func oncaWant(t *testing.T, addr, name string, id *clientIdentity, want map[string]string) {
	t.Helper()
	for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
		reason, ok := want[proto]
		if !ok {
			continue
		}
		w := "verify=SUCCESS sdn="
		if reason != "" {
			w = "verify=FAILED:" + reason + " sdn="
		}
		r := oncaFetch(t, addr, proto, "/id", newOncaClient(id, 0))
		if r.err != nil || r.status != 200 || !strings.HasPrefix(r.body, w) || strings.HasSuffix(r.body, "sdn=") {
			t.Errorf("%s, %s: %d %q, error %v; want %q and a subject", name, proto, r.status, r.body, r.err, w)
		}
	}
}

// TestClientAuthOptionalNoCASelfSigned: under optional_no_ca a
// self-signed client certificate is served with "X-Ssl-Client-Verify:
// FAILED:self-signed certificate" and one whose chain, as the client
// sends it, ends in a root no CA of ca is with "FAILED:self-signed
// certificate in certificate chain", as OpenSSL 3 and Tongsuo word them
// (X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN)
// and nginx passes them on, with or without a ca; a chain that stops
// short of its root stays "unable to get local issuer certificate". A
// route may match the new reasons.
func TestClientAuthOptionalNoCASelfSigned(t *testing.T) {
	far := time.Now().Add(time.Hour)
	self := oncaIdentity(
		oncaIssue(t, "self-signed sign", nil, oncaSM2Key(t), false, oncaSignKU, oncaClientEKU, far),
		oncaIssue(t, "self-signed enc", nil, oncaSM2Key(t), false, oncaEncKU, oncaClientEKU, far),
		oncaIssue(t, "self-signed ecdsa", nil, oncaECKey(t), false, oncaSignKU, oncaClientEKU, far), nil, nil)
	smRoot := oncaIssue(t, "untrusted SM2 root", nil, oncaSM2Key(t), true, smx509.KeyUsageCertSign, nil, far)
	ecRoot := oncaIssue(t, "untrusted ECDSA root", nil, oncaECKey(t), true, smx509.KeyUsageCertSign, nil, far)
	sign := oncaIssue(t, "chained sign", &smRoot, oncaSM2Key(t), false, oncaSignKU, oncaClientEKU, far)
	enc := oncaIssue(t, "chained enc", &smRoot, oncaSM2Key(t), false, oncaEncKU, oncaClientEKU, far)
	ec := oncaIssue(t, "chained ecdsa", &ecRoot, oncaECKey(t), false, oncaSignKU, oncaClientEKU, far)
	inChain := oncaIdentity(sign, enc, ec, []devpki.Cert{smRoot}, []devpki.Cert{ecRoot})
	rootless := oncaIdentity(sign, enc, ec, nil, nil)
	all := func(r string) map[string]string { return map[string]string{"tlcp": r, "tls13sm": r, "tls": r} }
	backend := echoIdentityBackend(t)
	for _, withCA := range []bool{true, false} {
		cfg := oncaConfig(t, backend, withCA)
		cfg.Sites[0].Routes = append([]conf.Route{
			{Name: "self", PathPrefix: "/self/", Header: map[string]string{"X-Ssl-Client-Verify": "FAILED:" + frontdoor.VerifySelfSigned}, Respond: &conf.Respond{Status: 418}},
			{Name: "chain", PathPrefix: "/self/", Header: map[string]string{"X-Ssl-Client-Verify": "FAILED:" + frontdoor.VerifySelfSignedInChain}, Respond: &conf.Respond{Status: 419}},
		}, cfg.Sites[0].Routes...)
		d := startDaemon(t, cfg)
		name := fmt.Sprintf("ca %v", withCA)
		oncaWant(t, d.addr, name+", self-signed certificate", self, all(frontdoor.VerifySelfSigned))
		oncaWant(t, d.addr, name+", chain ending in an untrusted root", inChain, all(frontdoor.VerifySelfSignedInChain))
		oncaWant(t, d.addr, name+", chain without its root", rootless, all(frontdoor.VerifyUnknownIssuer))
		for id, status := range map[*clientIdentity]int{self: 418, inChain: 419, rootless: 200} {
			for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
				if r := oncaFetch(t, d.addr, proto, "/self/x", newOncaClient(id, 0)); r.err != nil || r.status != status {
					t.Errorf("%s, %s, route matching the reason: %d %q, error %v; want %d", name, proto, r.status, r.body, r.err, status)
				}
			}
		}
		d.Close()
	}
}

// TestClientAuthOptionalNoCAPurpose: under optional_no_ca a client
// certificate whose extended key usage leaves out clientAuth (the TLCP
// encryption certificate's too), or a TLS one whose key usage leaves out
// digitalSignature (the SM protocols refuse those in the handshake), is
// served with "FAILED:unsuitable certificate purpose", OpenSSL 3's words
// for X509_V_ERR_INVALID_PURPOSE.
func TestClientAuthOptionalNoCAPurpose(t *testing.T) {
	p := testPKI(t)
	far := time.Now().Add(time.Hour)
	serverEKU := []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
	sign := oncaIssue(t, "client sign", &p.CA, oncaSM2Key(t), false, oncaSignKU, oncaClientEKU, far)
	enc := oncaIssue(t, "client enc", &p.CA, oncaSM2Key(t), false, oncaEncKU, oncaClientEKU, far)
	ec := oncaIssue(t, "ecdsa client", p.ECDSACA, oncaECKey(t), false, oncaSignKU, oncaClientEKU, far)
	purpose := frontdoor.VerifyPurpose
	cases := []struct {
		name string
		id   *clientIdentity
		want map[string]string
	}{
		{"certificates of the CAs", oncaIdentity(sign, enc, ec, nil, nil), map[string]string{"tlcp": "", "tls13sm": "", "tls": ""}},
		{"signing certificates for serverAuth only", oncaIdentity(
			oncaIssue(t, "server sign", &p.CA, oncaSM2Key(t), false, oncaSignKU, serverEKU, far), enc,
			oncaIssue(t, "ecdsa server", p.ECDSACA, oncaECKey(t), false, oncaSignKU, serverEKU, far), nil, nil),
			map[string]string{"tlcp": purpose, "tls13sm": purpose, "tls": purpose}},
		{"TLCP encryption certificate for serverAuth only", oncaIdentity(sign,
			oncaIssue(t, "server enc", &p.CA, oncaSM2Key(t), false, oncaEncKU, serverEKU, far), ec, nil, nil),
			map[string]string{"tlcp": purpose}},
		{"TLS certificate without digitalSignature", oncaIdentity(sign, enc,
			oncaIssue(t, "ecdsa encipherment", p.ECDSACA, oncaECKey(t), false, smx509.KeyUsageKeyEncipherment, oncaClientEKU, far), nil, nil),
			map[string]string{"tls": purpose}},
	}
	d := startDaemon(t, oncaConfig(t, echoIdentityBackend(t), true))
	for _, tc := range cases {
		oncaWant(t, d.addr, tc.name, tc.id, tc.want)
	}
}

// TestClientVerifierCache: optional_no_ca's verification of a client's
// certificates is done once and its result reused (the resumptions
// present the same certificates), but only while time alone cannot change
// it: a client certificate past its notAfter, or its CA's CRL past its
// nextUpdate, verifies again and FAILS; a clock set back verifies again.
// A site whose crl changed (a reload) reuses no result of the old one,
// and one with the same settings reuses them.
func TestClientVerifierCache(t *testing.T) {
	p := testPKI(t)
	now := time.Now()
	crlNext := now.Add(2 * time.Hour)
	short := oncaIssue(t, "short-lived client", &p.CA, oncaSM2Key(t), false, oncaSignKU, oncaClientEKU, now.Add(time.Hour))
	good, revoking, ecCRL := testCRL(t, p.CA, crlNext), testCRL(t, p.CA, crlNext, p.ClientSign.Cert.SerialNumber), testCRL(t, *p.ECDSACA, crlNext)
	site := func(crl *smx509.RevocationList) *conf.Site {
		s := &crlConfig(t, "127.0.0.1:1", p, crl, ecCRL).Sites[0]
		s.ClientAuth.Mode = conf.ClientAuthOptionalNoCA
		return s
	}
	v := newClientVerify(site(good))
	steps := []struct {
		name     string
		v        *clientVerify
		cert     *smx509.Certificate
		at       time.Time
		want     string
		verified bool
	}{
		{"first", v, p.ClientSign.Cert, now, "", true},
		{"again", v, p.ClientSign.Cert, now.Add(time.Minute), "", false},
		{"short-lived, first", v, short.Cert, now, "", true},
		{"short-lived, again", v, short.Cert, now.Add(59 * time.Minute), "", false},
		{"short-lived, past its notAfter", v, short.Cert, now.Add(61 * time.Minute), frontdoor.VerifyExpired, true},
		{"short-lived, expired again", v, short.Cert, now.Add(62 * time.Minute), frontdoor.VerifyExpired, false},
		{"past the CRL's nextUpdate", v, p.ClientSign.Cert, crlNext.Add(time.Second), frontdoor.VerifyCRLExpired, true},
		{"clock set back", v, p.ClientSign.Cert, now.Add(-time.Second), "", true},
		{"a site of the same settings", newClientVerify(site(good)), p.ClientSign.Cert, now.Add(time.Second), "", false},
		{"a site whose CRL revokes it", newClientVerify(site(revoking)), p.ClientSign.Cert, now.Add(time.Second), frontdoor.VerifyRevoked, true},
	}
	for _, st := range steps {
		before := clientVerifications.Load()
		got := st.v.check(frontdoor.FamilyTLS13SM, []*smx509.Certificate{st.cert}, st.at)
		if verified := clientVerifications.Load() != before; got != st.want || verified != st.verified {
			t.Errorf("%s: %q, verified %v; want %q, verified %v", st.name, got, verified, st.want, st.verified)
		}
	}
}

// TestClientAuthOptionalNoCAResumedNotReverified: under optional_no_ca a
// resumed handshake, on TLCP, TLS 1.3-SM and TLS, verifies its
// certificates no more (the first handshake's result is reused: no
// signature checked again), and after a reload whose crl revokes them
// the next connection, resumed or not, gets FAILED:certificate revoked.
func TestClientAuthOptionalNoCAResumedNotReverified(t *testing.T) {
	p := testPKI(t)
	own := clientIdentities(t, p)
	tlsLeaf, err := x509.ParseCertificate(own.tls.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	backend := echoIdentityBackend(t)
	config := func(smCRL, ecCRL *smx509.RevocationList) *conf.Config {
		cfg := crlConfig(t, backend, p, smCRL, ecCRL)
		cfg.Sites[0].ClientAuth.Mode = conf.ClientAuthOptionalNoCA
		cfg.Sites[0].Routes = oncaConfig(t, backend, false).Sites[0].Routes
		return cfg
	}
	d := startDaemon(t, config(testCRL(t, p.CA, later), testCRL(t, *p.ECDSACA, later)))
	protos := []string{"tlcp", "tls13sm", "tls"}
	clients := map[string]*oncaClient{}
	for _, proto := range protos {
		clients[proto] = newOncaClient(own, 0)
		for i := range 3 {
			before := clientVerifications.Load()
			r := oncaFetch(t, d.addr, proto, "/id", clients[proto])
			verified := clientVerifications.Load() - before
			if r.err != nil || !strings.HasPrefix(r.body, "verify=SUCCESS sdn=") || r.resumed != (i > 0) || verified != map[bool]uint64{true: 1, false: 0}[i == 0] {
				t.Errorf("%s, connection %d: %q, error %v, resumed %v, %d verifications; want SUCCESS, resumed %v, %d", proto, i, r.body, r.err, r.resumed, verified, i > 0, map[bool]uint64{true: 1, false: 0}[i == 0])
			}
		}
	}
	d.reloadWith(t, config(testCRL(t, p.CA, later, p.ClientSign.Cert.SerialNumber), testCRL(t, *p.ECDSACA, later, tlsLeaf.SerialNumber)))
	for _, proto := range protos {
		r := oncaFetch(t, d.addr, proto, "/id", clients[proto])
		if want := "verify=FAILED:" + frontdoor.VerifyRevoked + " sdn="; r.err != nil || !strings.HasPrefix(r.body, want) {
			t.Errorf("%s after the reload revoking the certificate (resumed %v): %q, error %v; want %q", proto, r.resumed, r.body, r.err, want)
		}
	}
}

// BenchmarkClientVerifier: optional_no_ca's check of a TLCP client's
// pair on a site with a CRL, answered by the cache (what a resumption
// costs) and verified (a first handshake).
func BenchmarkClientVerifier(b *testing.B) {
	p := testPKI(b)
	later := time.Now().Add(time.Hour)
	s := &conf.Site{ClientAuth: conf.ClientAuth{Mode: conf.ClientAuthOptionalNoCA, CA: "ca.crt", CRL: "ca.crl"}}
	s.Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
	crl := testCRL(b, p.CA, later)
	s.Material.ClientCRLs = revocation.NewIndex([]revocation.Signed{{List: crl, Issuer: p.CA.Cert}})
	v := newClientVerify(s)
	certs := []*smx509.Certificate{p.ClientSign.Cert, p.ClientEnc.Cert}
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := v.check(frontdoor.FamilyTLCP, certs, time.Now()); r != "" {
				b.Fatal(r)
			}
		}
	})
	b.Run("verified", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := v.verify(frontdoor.FamilyTLCP, certs, time.Now()); r != "" {
				b.Fatal(r)
			}
		}
	})
}

// TestSelfSignedChain: optional_no_ca's chain of the client's
// certificates follows an issuer only when its name and key identifier
// are those the certificate names (OpenSSL's X509_check_issued), takes a
// certificate as self-signed only when its authority key identifier, if
// any, is its own, and ends on certificates that issue each other.
func TestSelfSignedChain(t *testing.T) {
	cert := func(subject, issuer, skid, akid string) *smx509.Certificate {
		c := &smx509.Certificate{RawSubject: []byte(subject), RawIssuer: []byte(issuer)}
		if skid != "" {
			c.SubjectKeyId = []byte(skid)
		}
		if akid != "" {
			c.AuthorityKeyId = []byte(akid)
		}
		return c
	}
	root := cert("R", "R", "r", "r")
	cases := []struct {
		name  string
		certs []*smx509.Certificate
		want  error
	}{
		{"self-signed", []*smx509.Certificate{cert("L", "L", "l", "l")}, &selfSignedError{}},
		{"self-issued under another key", []*smx509.Certificate{cert("L", "L", "l", "old")}, nil},
		{"root sent", []*smx509.Certificate{cert("L", "R", "", "r"), root}, &selfSignedError{inChain: true}},
		{"root of the name under another key sent", []*smx509.Certificate{cert("L", "R", "", "other"), root}, nil},
		{"no root sent", []*smx509.Certificate{cert("L", "I", "", ""), cert("I", "R", "", "")}, nil},
		{"CAs issuing each other", []*smx509.Certificate{cert("L", "A", "", ""), cert("A", "B", "", ""), cert("B", "A", "", "")}, nil},
	}
	for _, tc := range cases {
		got := selfSignedChain(tc.certs[0], tc.certs)
		if (got == nil) != (tc.want == nil) || got != nil && got.(*selfSignedError).inChain != tc.want.(*selfSignedError).inChain {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
