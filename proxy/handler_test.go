package proxy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// echoBackend answers with the request it saw, as JSON.
type seenRequest struct {
	Method, Host, Path string
	Header             http.Header
}

func echoBackend(t testing.TB) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Remove-Me", "1")
		json.NewEncoder(w).Encode(seenRequest{r.Method, r.Host, r.URL.Path, r.Header})
	}))
	t.Cleanup(s.Close)
	return s
}

func decodeSeen(t *testing.T, body string) seenRequest {
	t.Helper()
	var s seenRequest
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("backend answer %q: %v", body, err)
	}
	return s
}

func TestRouting(t *testing.T) {
	a, b := nameBackend(t, "a"), nameBackend(t, "b")
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("a", addrOf(a)), upstream("b", addrOf(b))},
		Sites: []SiteConfig{{
			Name:        "main",
			ServerNames: []string{"example.test", "*.example.test"},
			Routes: []RouteConfig{
				{Name: "health", Path: "/healthz", Respond: &RespondConfig{Body: "ok\n"}},
				{Name: "teapot", Path: "/tea", Respond: &RespondConfig{Status: 418, Body: "short and stout"}},
				{Name: "old", PathPrefix: "/old/", Redirect: &RedirectConfig{To: "https://{host}{uri}", Status: 301}},
				{Name: "canary", Headers: []HeaderMatch{{Name: "X-Canary", Value: "1"}}, Upstream: "b"},
				{Name: "api-host", Hosts: []string{"api.example.test"}, Upstream: "b"},
				{Name: "b-prefix", PathPrefix: "/b/", Upstream: "b"},
				{Name: "default", PathPrefix: "/", Upstream: "a"},
			},
		}},
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	tests := []struct {
		path       string
		hdr        []string
		wantStatus int
		wantBody   string
		wantLoc    string
	}{
		{"/healthz", nil, 200, "ok\n", ""},
		{"/healthz/x", nil, 200, "a", ""}, // exact path only
		{"/tea", nil, 418, "short and stout", ""},
		{"/old/page?q=1", []string{"Host", "www.example.test"}, 301, "", "https://www.example.test/old/page?q=1"},
		{"/x", []string{"X-Canary", "1"}, 200, "b", ""},
		{"/x", []string{"X-Canary", "0"}, 200, "a", ""},
		{"/x", []string{"Host", "api.example.test:8443"}, 200, "b", ""},
		{"/b/1", nil, 200, "b", ""},
		{"/bb", nil, 200, "a", ""},
	}
	for _, tt := range tests {
		code, body, h := get(t, c, f.url+tt.path, tt.hdr...)
		if code != tt.wantStatus {
			t.Errorf("%s %v: status %d, want %d (%q)", tt.path, tt.hdr, code, tt.wantStatus, body)
			continue
		}
		if tt.wantLoc != "" {
			if got := h.Get("Location"); got != tt.wantLoc {
				t.Errorf("%s: Location %q, want %q", tt.path, got, tt.wantLoc)
			}
			continue
		}
		if body != tt.wantBody {
			t.Errorf("%s %v: body %q, want %q", tt.path, tt.hdr, body, tt.wantBody)
		}
	}
}

func TestNoRouteIs404(t *testing.T) {
	cfg := Config{Sites: oneSite(RouteConfig{Path: "/only", Respond: &RespondConfig{}})}
	f := newFront(t, cfg, frontOpts{})
	if code, _, _ := get(t, testClient(t), f.url+"/other"); code != 404 {
		t.Fatalf("status %d, want 404", code)
	}
}

func TestSiteSelection(t *testing.T) {
	cfg := Config{Sites: []SiteConfig{
		{Name: "one", ServerNames: []string{"one.test"}, Routes: []RouteConfig{{Respond: &RespondConfig{Body: "one"}}}},
		{Name: "two", ServerNames: []string{"*.two.test"}, Routes: []RouteConfig{{Respond: &RespondConfig{Body: "two"}}}},
	}}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for host, want := range map[string]string{"one.test": "one", "x.two.test": "two", "unknown.test": "one", "a.b.two.test": "one"} {
		if _, body, _ := get(t, c, f.url+"/", "Host", host); body != want {
			t.Errorf("Host %s: site %q, want %q", host, body, want)
		}
	}
	// The handshake's site wins over Host.
	st := frontdoor.ConnState{Site: "two", Protocol: frontdoor.ProtoTLCP}
	f2 := newFront(t, cfg, frontOpts{state: &st})
	if _, body, _ := get(t, testClient(t), f2.url+"/", "Host", "one.test"); body != "two" {
		t.Errorf("ConnState.Site two: got %q", body)
	}
}

// TestCoalescedRequestForAnotherSite: a client whose SNI chose site one
// asking for site two on the same connection (an HTTP/2 client reusing a
// connection for another name its certificate covers) gets 421, so that
// it opens a connection for site two (RFC 9113 §9.1.2), not site one's
// routes. A client that sent no SNI, or one no site has, could not do
// better on a new connection: its request goes to the site its Host
// names (TestNoSNIRoutedByHost has the conditions). An SNI with a final
// dot chose its site as the name without it does.
func TestCoalescedRequestForAnotherSite(t *testing.T) {
	sm := []string{frontdoor.FamilyTLCP}
	cfg := Config{
		Sites: []SiteConfig{
			{Name: "one", ServerNames: []string{"one.test"}, Families: sm, Routes: []RouteConfig{{Respond: &RespondConfig{Body: "one"}}}},
			{Name: "two", ServerNames: []string{"*.two.test"}, Families: sm, Routes: []RouteConfig{{Respond: &RespondConfig{Body: "two"}}}},
		},
		ListenerSites: map[string][]string{":443": {"one", "two"}},
	}
	for _, c := range []struct {
		sni, host string
		code      int
		body      string
	}{
		{"one.test", "x.two.test", 421, ""},
		{"one.test", "one.test", 200, "one"},
		{"one.test", "unknown.test", 200, "one"},
		{"", "x.two.test", 200, "two"},
		{"unknown.test", "x.two.test", 200, "two"},
		// A final dot (which the TLCP and TLS 1.3-SM stacks report as
		// sent) names the host frontdoor chose the site by.
		{"one.test.", "x.two.test", 421, ""},
		{"ONE.test.", "x.two.test", 421, ""},
	} {
		st := frontdoor.ConnState{Listener: ":443", Site: "one", SNI: c.sni, Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP}
		f := newFront(t, cfg, frontOpts{state: &st})
		code, body, _ := get(t, testClient(t), f.url+"/", "Host", c.host)
		if code != c.code || (c.body != "" && body != c.body) {
			t.Errorf("SNI %q, Host %s: %d %q, want %d %q", c.sni, c.host, code, body, c.code, c.body)
		}
	}
}

// TestNoSNIRoutedByHost: a connection whose client sent no SNI, or one
// naming no site of the listener (TLCP clients built on GmSSL send none),
// is made for the listener's default site; its requests go to the site
// their Host names, as nginx chooses a server by Host then, only when
// that site is on the same listener, has a certificate for the
// connection's protocol family, serves HTTP, and neither site checks
// client certificates. Otherwise the default site serves them, or 421
// when either site checks client certificates: a request must never
// reach a site requiring a certificate over a handshake that asked for
// none (nor one made under another site's CAs).
func TestNoSNIRoutedByHost(t *testing.T) {
	tlcp, tls13, rsa := frontdoor.FamilyTLCP, frontdoor.FamilyTLS13SM, frontdoor.FamilyTLS
	site := func(name, host string, fam ...string) SiteConfig {
		return SiteConfig{Name: name, ServerNames: []string{host}, Families: fam, Routes: []RouteConfig{{Respond: &RespondConfig{Body: name}}}}
	}
	auth := site("auth", "auth.test", tlcp, tls13, rsa)
	auth.ClientAuth, auth.ClientAuthPolicy = true, "require:ca1"
	auth2 := site("auth2", "auth2.test", tlcp, tls13, rsa)
	auth2.ClientAuth, auth2.ClientAuthPolicy = true, "require:ca1"
	// far: a site of another listener only, where the Host's site
	// could not have made the connection.
	cfg := Config{
		Sites: []SiteConfig{
			site("one", "one.test", tlcp, tls13, rsa),
			site("sm", "sm.test", tlcp, tls13),
			site("tlcp", "tlcp.test", tlcp),
			site("rsa", "rsa.test", rsa),
			auth, auth2,
			site("far", "far.test", tlcp, tls13, rsa),
			site("nofam", "nofam.test"),
			{Name: "tcp", ServerNames: []string{"tcp.test"}, Families: []string{tlcp}, Stream: &StreamConfig{Upstream: "u"}},
		},
		Upstreams:     []UpstreamConfig{upstream("u", "127.0.0.1:1")},
		ListenerSites: map[string][]string{":443": {"one", "sm", "tlcp", "rsa", "auth", "auth2", "nofam", "tcp"}, ":8443": {"far", "one", "sm"}},
	}
	for _, c := range []struct {
		site, policy, sni, family, host string
		code                            int
		body                            string
	}{
		// Served by the Host's site.
		{"one", "", "", tlcp, "sm.test", 200, "sm"},
		{"one", "", "", tls13, "sm.test", 200, "sm"},
		{"one", "", "", tlcp, "tlcp.test", 200, "tlcp"},
		{"one", "", "", rsa, "rsa.test", 200, "rsa"},
		{"one", "", "unknown.test", tlcp, "sm.test", 200, "sm"},
		{"sm", "", "", tlcp, "one.test", 200, "one"},
		// The Host's site has no certificate of the connection's family.
		{"one", "", "", rsa, "sm.test", 200, "one"},
		{"one", "", "", tls13, "tlcp.test", 200, "one"},
		{"one", "", "", tlcp, "rsa.test", 200, "one"},
		{"one", "", "", tls13, "rsa.test", 200, "one"},
		{"one", "", "", tlcp, "nofam.test", 200, "one"},
		// A stream site serves no HTTP.
		{"one", "", "", tlcp, "tcp.test", 200, "one"},
		// Client certificates: never past them, 421 as before.
		{"one", "", "", tlcp, "auth.test", 421, ""},
		{"one", "", "", rsa, "auth.test", 421, ""},
		{"auth", "require:ca1", "", tlcp, "one.test", 421, ""},
		{"auth", "require:ca1", "", tlcp, "auth2.test", 421, ""},
		{"auth", "require:ca1", "", tlcp, "auth.test", 200, "auth"},
		// The SNI chose the site: 421 for another (RFC 9110 §15.5.20).
		{"one", "", "one.test", tlcp, "sm.test", 421, ""},
		// The Host names no site, or one of another listener only.
		{"one", "", "", tlcp, "unknown.test", 200, "one"},
		{"one", "", "", tlcp, "far.test", 200, "one"},
	} {
		for _, listener := range []string{":443", ":drain"} {
			st := frontdoor.ConnState{Listener: listener, Site: c.site, ClientAuthPolicy: c.policy, SNI: c.sni, Family: c.family}
			want, body := c.code, c.body
			if listener == ":drain" && body != "" {
				// A listener not listed (a reload removed it; its
				// connections drain): no request goes by Host.
				body = c.site
			}
			f := newFront(t, cfg, frontOpts{state: &st})
			code, got, _ := get(t, testClient(t), f.url+"/", "Host", c.host)
			if code != want || (body != "" && got != body) {
				t.Errorf("listener %s, site %s, SNI %q, %s, Host %s: %d %q, want %d %q", listener, c.site, c.sni, c.family, c.host, code, got, want, body)
			}
		}
	}
}

// TestHostOfAnotherListener: sites are chosen by Host (and SNI) among
// those of the connection's listener only. A Host naming a site served on
// another listener only is as a Host naming no site: a 421 would send
// the client to a new connection to this listener, where its SNI cannot
// reach that site either, and so round again. An SNI naming such a site
// named none here.
func TestHostOfAnotherListener(t *testing.T) {
	fam := []string{frontdoor.FamilyTLCP}
	site := func(name string, names ...string) SiteConfig {
		return SiteConfig{Name: name, ServerNames: names, Families: fam, Routes: []RouteConfig{{Respond: &RespondConfig{Body: name}}}}
	}
	auth := site("auth", "auth.test")
	auth.ClientAuth, auth.ClientAuthPolicy = true, "require:ca1"
	cfg := Config{
		Sites:         []SiteConfig{site("one", "one.test"), site("sm", "sm.test"), auth, site("far", "far.test", "*.far.test")},
		ListenerSites: map[string][]string{":443": {"one", "sm", "auth"}, ":8443": {"far"}},
	}
	for _, c := range []struct {
		site, policy, sni, host string
		code                    int
		body                    string
	}{
		{"one", "", "one.test", "far.test", 200, "one"},
		{"one", "", "one.test", "x.far.test", 200, "one"},
		{"auth", "require:ca1", "auth.test", "far.test", 200, "auth"},
		{"auth", "require:ca1", "", "x.far.test", 200, "auth"},
		// An SNI of another listener's site names none here: the
		// request goes by Host.
		{"one", "", "far.test", "sm.test", 200, "sm"},
		{"one", "", "x.far.test", "sm.test", 200, "sm"},
		// On this listener, as before.
		{"one", "", "one.test", "sm.test", 421, ""},
		{"one", "", "far.test", "auth.test", 421, ""},
		// A connection without a handshake's site: by Host among the
		// listener's sites, else the first site.
		{"", "", "", "far.test", 200, "one"},
		{"", "", "", "sm.test", 200, "sm"},
	} {
		st := frontdoor.ConnState{Listener: ":443", Site: c.site, ClientAuthPolicy: c.policy, SNI: c.sni, Family: frontdoor.FamilyTLCP}
		f := newFront(t, cfg, frontOpts{state: &st})
		code, got, _ := get(t, testClient(t), f.url+"/", "Host", c.host)
		if code != c.code || (c.body != "" && got != c.body) {
			t.Errorf("site %q, SNI %q, Host %s: %d %q, want %d %q", c.site, c.sni, c.host, code, got, c.code, c.body)
		}
	}
}

// TestSameNameOnTwoListeners: a server name may belong to a site on each
// of two listeners (nginx's server_name in a server on 443 and in another
// on 8443 that checks client certificates): each listener's connections
// are served by its own site, by SNI and by Host, with no 421.
func TestSameNameOnTwoListeners(t *testing.T) {
	fam := []string{frontdoor.FamilyTLS13SM}
	open := SiteConfig{Name: "open", ServerNames: []string{"a.test"}, Families: fam, Routes: []RouteConfig{{Respond: &RespondConfig{Body: "open"}}}}
	mtls := SiteConfig{Name: "mtls", ServerNames: []string{"a.test"}, Families: fam, ClientAuth: true, ClientAuthPolicy: "require:ca1",
		Routes: []RouteConfig{{Respond: &RespondConfig{Body: "mtls"}}}}
	cfg := Config{Sites: []SiteConfig{open, mtls}, ListenerSites: map[string][]string{":443": {"open"}, ":8443": {"mtls"}}}
	for _, c := range []struct {
		listener, site, policy, sni, host string
	}{
		{":443", "open", "", "a.test", "a.test"},
		{":8443", "mtls", "require:ca1", "a.test", "a.test"},
		{":443", "open", "", "", "a.test"},
		{":8443", "mtls", "require:ca1", "", "a.test"},
		{":8443", "", "", "", "a.test"},
	} {
		st := frontdoor.ConnState{Listener: c.listener, Site: c.site, ClientAuthPolicy: c.policy, SNI: c.sni, Family: frontdoor.FamilyTLS13SM}
		f := newFront(t, cfg, frontOpts{state: &st})
		want := c.site
		if want == "" {
			want = "mtls" // by Host among the listener's sites
		}
		code, got, _ := get(t, testClient(t), f.url+"/", "Host", c.host)
		if code != 200 || got != want {
			t.Errorf("listener %s, site %q, SNI %q, Host %s: %d %q, want 200 %q", c.listener, c.site, c.sni, c.host, code, got, want)
		}
	}
}

func TestHeaderEditsHostAndStrip(t *testing.T) {
	e := echoBackend(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: oneSite(
			RouteConfig{PathPrefix: "/api/", StripPrefix: "/api", Upstream: "e", HostHeader: "internal.svc",
				RequestHeaders:  HeaderOps{Set: map[string]string{"X-Env": "prod"}, Add: map[string]string{"X-Multi": "two"}, Remove: []string{"Cookie"}},
				ResponseHeaders: HeaderOps{Set: map[string]string{"X-Served-By": "gmproxy"}, Remove: []string{"X-Remove-Me"}}},
			RouteConfig{PathPrefix: "/up/", Upstream: "e", HostHeader: "{upstream}"},
			RouteConfig{PathPrefix: "/", Upstream: "e"},
		),
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	_, body, h := get(t, c, f.url+"/api/v1/users", "Cookie", "secret=1", "X-Multi", "one", "X-Env", "dev", "Host", "example.test")
	s := decodeSeen(t, body)
	if s.Path != "/v1/users" || s.Host != "internal.svc" {
		t.Errorf("path %q host %q, want /v1/users internal.svc", s.Path, s.Host)
	}
	if s.Header.Get("Cookie") != "" || s.Header.Get("X-Env") != "prod" || strings.Join(s.Header["X-Multi"], ",") != "one,two" {
		t.Errorf("request header edits not applied: %v", s.Header)
	}
	if h.Get("X-Served-By") != "gmproxy" || h.Get("X-Remove-Me") != "" {
		t.Errorf("response header edits not applied: %v", h)
	}
	_, body, _ = get(t, c, f.url+"/up/x", "Host", "example.test")
	if s := decodeSeen(t, body); s.Host != addrOf(e) {
		t.Errorf("{upstream} host: %q, want %q", s.Host, addrOf(e))
	}
	_, body, _ = get(t, c, f.url+"/x", "Host", "example.test:8443")
	if s := decodeSeen(t, body); s.Host != "example.test:8443" {
		t.Errorf("host passthrough: %q", s.Host)
	}
}

// testClientCert makes a certificate parsed by smx509 (ECDSA is enough for
// identity headers).
func testClientCert(t *testing.T) *smx509.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(0x1234abcd),
		Subject:      pkix.Name{CommonName: "client one", Organization: []string{"Example"}, Country: []string{"CN"}},
		Issuer:       pkix.Name{CommonName: "client one"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestForwardedAndTLSHeaders(t *testing.T) {
	e := echoBackend(t)
	cert := testClientCert(t)
	st := frontdoor.ConnState{
		Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3",
		Resumed: true, SNI: "example.test", ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert},
		HandshakeDuration: 3 * time.Millisecond,
	}
	forged := []string{
		"X-Forwarded-For", "6.6.6.6", "X-Real-IP", "6.6.6.6", "X-Forwarded-Proto", "gopher",
		"X-Forwarded-Host", "evil.test", "X-SSL-Client-S-DN", "CN=admin", "X-SSL-Client-Verify", "SUCCESS",
		"X-SSL-Protocol", "TLSv1.0", "X-SSL-Client-Cert", "forged", "Forwarded", "for=6.6.6.6",
	}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, TLSInfoHeaders: true, ClientCertHeaders: true, ClientCertPEM: true,
			Routes: []RouteConfig{{Upstream: "e"}}}},
	}
	t.Run("untrusted peer with TLCP client cert", func(t *testing.T) {
		f := newFront(t, cfg, frontOpts{state: &st})
		_, body, _ := get(t, testClient(t), f.url+"/", append([]string{"Host", "example.test"}, forged...)...)
		h := decodeSeen(t, body).Header
		want := map[string]string{
			"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "X-Forwarded-Proto": "https",
			"X-Forwarded-Host": "example.test", "X-Ssl-Protocol": "NTLSv1.1", "X-Ssl-Cipher": "ECC-SM2-SM4-GCM-SM3",
			"X-Ssl-Session-Reused": "r", "X-Ssl-Client-Verify": "SUCCESS", "X-Ssl-Client-S-Dn": cert.Subject.String(),
			"X-Ssl-Client-I-Dn": cert.Issuer.String(), "X-Ssl-Client-Serial": "1234ABCD", "Forwarded": "",
		}
		for k, v := range want {
			if got := strings.Join(h[k], "|"); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		pemText, err := url.QueryUnescape(h.Get("X-Ssl-Client-Cert"))
		if err != nil || !strings.HasPrefix(pemText, "-----BEGIN CERTIFICATE-----\n") {
			t.Errorf("X-Ssl-Client-Cert %q: not an escaped PEM (%v)", h.Get("X-Ssl-Client-Cert"), err)
		}
		if strings.Contains(h.Get("X-Ssl-Client-Cert"), " ") || strings.Contains(h.Get("X-Ssl-Client-Cert"), "+") {
			t.Errorf("X-Ssl-Client-Cert not escaped: %q", h.Get("X-Ssl-Client-Cert"))
		}
	})
	t.Run("plain connection strips everything", func(t *testing.T) {
		f := newFront(t, cfg, frontOpts{})
		_, body, _ := get(t, testClient(t), f.url+"/", append([]string{"Host", "example.test"}, forged...)...)
		h := decodeSeen(t, body).Header
		for _, k := range []string{"X-Ssl-Client-S-Dn", "X-Ssl-Client-Verify", "X-Ssl-Protocol", "X-Ssl-Client-Cert"} {
			if v := h.Get(k); v != "" {
				t.Errorf("forged %s reached the backend: %q", k, v)
			}
		}
		if h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-For") != "127.0.0.1" {
			t.Errorf("forwarded headers: %v", h)
		}
	})
	t.Run("trusted peer keeps the chain", func(t *testing.T) {
		c2 := cfg
		c2.TrustedProxies = []string{"127.0.0.0/8", "10.0.0.0/8"}
		f := newFront(t, c2, frontOpts{})
		_, body, _ := get(t, testClient(t), f.url+"/", "Host", "example.test", "X-Forwarded-For", "198.51.100.9, 10.1.1.1",
			"X-Forwarded-Proto", "https", "X-SSL-Client-S-DN", "CN=admin")
		h := decodeSeen(t, body).Header
		if got := h.Get("X-Forwarded-For"); got != "198.51.100.9, 10.1.1.1, 127.0.0.1" {
			t.Errorf("X-Forwarded-For %q", got)
		}
		if got := h.Get("X-Real-Ip"); got != "198.51.100.9" {
			t.Errorf("X-Real-IP %q, want the first untrusted hop", got)
		}
		if h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Ssl-Client-S-Dn") != "" {
			t.Errorf("trusted: %v", h)
		}
		_, body, _ = get(t, testClient(t), f.url+"/", "Host", "example.test", "X-Forwarded-For", "unknown, 10.1.1.1")
		if got := decodeSeen(t, body).Header.Get("X-Real-Ip"); got != "10.1.1.1" {
			t.Errorf("X-Real-IP with a non-address hop: %q, want the last valid trusted hop", got)
		}
		// An empty X-Forwarded-For from a trusted hop is no chain.
		_, body, _ = get(t, testClient(t), f.url+"/", "Host", "example.test", "X-Forwarded-For", " ")
		if got := decodeSeen(t, body).Header.Get("X-Forwarded-For"); got != "127.0.0.1" {
			t.Errorf("X-Forwarded-For after an empty one: %q, want the peer only", got)
		}
	})
	t.Run("no client cert", func(t *testing.T) {
		st2 := st
		st2.PeerCertificates, st2.ClientAuth, st2.Resumed = nil, false, false
		f := newFront(t, cfg, frontOpts{state: &st2})
		_, body, _ := get(t, testClient(t), f.url+"/", "Host", "example.test", "X-SSL-Client-S-DN", "CN=admin")
		h := decodeSeen(t, body).Header
		if h.Get("X-Ssl-Client-Verify") != "NONE" || h.Get("X-Ssl-Client-S-Dn") != "" || h.Get("X-Ssl-Session-Reused") != "." {
			t.Errorf("headers: %v", h)
		}
	})
}

func TestMatchName(t *testing.T) {
	for _, tt := range []struct {
		pat, host string
		want      bool
	}{
		{"example.test", "EXAMPLE.test", true},
		{"*.example.test", "a.example.test", true},
		{"*.example.test", "a.b.example.test", false},
		{"*.example.test", "example.test", false},
		{"*.example.test", ".example.test", false},
	} {
		if got := matchName(tt.pat, tt.host); got != tt.want {
			t.Errorf("matchName(%q,%q)=%v", tt.pat, tt.host, got)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"unknown upstream": {Sites: oneSite(RouteConfig{Upstream: "nope"})},
		"two actions":      {Sites: oneSite(RouteConfig{Respond: &RespondConfig{}, Redirect: &RedirectConfig{To: "/"}})},
		"bad balance":      {Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: "127.0.0.1:1"}}, Balance: "random"}}, Sites: oneSite(RouteConfig{Upstream: "u"})},
		"hash without key": {Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: "127.0.0.1:1"}}, Balance: "hash"}}, Sites: oneSite(RouteConfig{Upstream: "u"})},
		"bad target":       {Upstreams: []UpstreamConfig{upstream("u", "nohostport")}, Sites: oneSite(RouteConfig{Upstream: "u"})},
		"bad protocol":     {Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: "127.0.0.1:1"}}, Protocol: "gopher"}}, Sites: oneSite(RouteConfig{Upstream: "u"})},
		"bad trusted":      {TrustedProxies: []string{"not-an-ip"}, Sites: oneSite(RouteConfig{Respond: &RespondConfig{}})},
		"no sites":         {},
		// An informational status is no final response (RFC 9110
		// §15.2): 101 would switch the connection to no protocol, 103
		// goes out ahead of an implicit 200.
		"respond 101": {Sites: oneSite(RouteConfig{Respond: &RespondConfig{Status: 101}})},
		"respond 103": {Sites: oneSite(RouteConfig{Respond: &RespondConfig{Status: 103, Body: "x"}})},
		"respond 600": {Sites: oneSite(RouteConfig{Respond: &RespondConfig{Status: 600}})},
		// Sent as the Host of every request: one that names no host
		// reached the target empty or as a list.
		"host_header with a space": {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", HostHeader: "backend internal"})},
		// A value with a line break or other control byte: http.Transport
		// refuses the request (502, the target charged), an HTTP/1.1
		// writer alters it.
		"request_headers value with a line break": {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", RequestHeaders: HeaderOps{Set: map[string]string{"X-Token": "abc\n"}}})},
		"response_headers value with a control":   {Sites: oneSite(RouteConfig{Respond: &RespondConfig{}, ResponseHeaders: HeaderOps{Add: map[string]string{"X-A": "a\x01b"}}})},
		"host_header list":                        {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", HostHeader: "a.example,b.example"})},
		// The Host sent is r.Host (host_header): an edit of the field was
		// silently ignored, the target got the client's Host.
		"request_headers set Host": {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", RequestHeaders: HeaderOps{Set: map[string]string{"host": "internal.svc"}}})},
		// Framing is the proxy's: a request's edit was ignored, a
		// response's declared a length its body did not have.
		"request_headers remove Transfer-Encoding": {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", RequestHeaders: HeaderOps{Remove: []string{"Transfer-Encoding"}}})},
		"response_headers set Content-Length":      {Sites: oneSite(RouteConfig{Respond: &RespondConfig{}, ResponseHeaders: HeaderOps{Set: map[string]string{"content-length": "3"}}})},
		"response_headers add Trailer":             {Sites: oneSite(RouteConfig{Respond: &RespondConfig{}, ResponseHeaders: HeaderOps{Add: map[string]string{"Trailer": "X-A"}}})},
		// Each hop's connection fields are the proxy's: nginx's
		// keep-alive idiom (proxy_set_header Connection "") carried over
		// replaced the Connection: Upgrade of every WebSocket handshake;
		// a response's edit, that of the 101 to the client.
		"request_headers set Connection":     {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", RequestHeaders: HeaderOps{Set: map[string]string{"Connection": ""}}})},
		"request_headers add Upgrade":        {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", RequestHeaders: HeaderOps{Add: map[string]string{"upgrade": "websocket"}}})},
		"response_headers remove Connection": {Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")}, Sites: oneSite(RouteConfig{Upstream: "u", ResponseHeaders: HeaderOps{Remove: []string{"Connection"}}})},
	} {
		if p, err := New(cfg, nil, testLogger(t)); err == nil {
			p.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestForgedHeaderSpellings: a client's copy of a header gmproxy sets
// never reaches the backend, also when spelled with '_' for '-' (CGI-style
// backends map both to one variable) or in another case.
func TestForgedHeaderSpellings(t *testing.T) {
	e := echoBackend(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, TLSInfoHeaders: true, ClientCertHeaders: true,
			Routes: []RouteConfig{{Upstream: "e"}}}},
	}
	st := frontdoor.ConnState{Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3"}
	f := newFront(t, cfg, frontOpts{state: &st})
	var hdr []string
	for _, k := range append(SetRequestHeaders, HeaderForwarded) {
		hdr = append(hdr, strings.ReplaceAll(k, "-", "_"), "forged", strings.ToLower(strings.ReplaceAll(k, "-", "_")), "forged")
	}
	hdr = append(hdr, "X_Other_Header", "kept")
	_, body, _ := get(t, testClient(t), f.url+"/", append([]string{"Host", "example.test"}, hdr...)...)
	h := decodeSeen(t, body).Header
	for k, v := range h {
		if strings.Contains(strings.Join(v, ","), "forged") {
			t.Errorf("forged %s: %q reached the backend", k, v)
		}
	}
	if h.Get("X_other_header") != "kept" {
		t.Errorf("an unrelated header with '_' was dropped: %v", h)
	}
	if h.Get("X-Ssl-Client-Verify") != "NONE" {
		t.Errorf("X-Ssl-Client-Verify %q, want NONE", h.Get("X-Ssl-Client-Verify"))
	}
}

// TestUnverifiedCertificateIsNoIdentity: a TLCP ECDHE client sends its
// certificates even to a site without client authentication; nobody
// verified them, so the backend gets Verify NONE and no identity.
func TestUnverifiedCertificateIsNoIdentity(t *testing.T) {
	e := echoBackend(t)
	cert := testClientCert(t)
	st := frontdoor.ConnState{Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECDHE-SM2-SM4-GCM-SM3",
		ClientAuth: false, PeerCertificates: []*smx509.Certificate{cert, cert}}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, ClientCertHeaders: true, ClientCertPEM: true,
			Routes: []RouteConfig{{Upstream: "e"}}}},
	}
	f := newFront(t, cfg, frontOpts{state: &st})
	_, body, _ := get(t, testClient(t), f.url+"/", "Host", "example.test")
	h := decodeSeen(t, body).Header
	if h.Get("X-Ssl-Client-Verify") != "NONE" {
		t.Errorf("X-Ssl-Client-Verify %q, want NONE", h.Get("X-Ssl-Client-Verify"))
	}
	for _, k := range []string{HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s %q derived from an unverified certificate", k, v)
		}
	}
}

// TestMisdirectedToClientAuthSite: a connection whose handshake chose one
// site (by SNI, or the default without SNI) may not carry requests for
// another configured site when either authenticates clients: the
// certificate check (or its absence) was the first site's. 421 tells the
// client to connect again with the right name.
func TestMisdirectedToClientAuthSite(t *testing.T) {
	e := echoBackend(t)
	sites := func(secureAuth bool) []SiteConfig {
		return []SiteConfig{
			{Name: "open", ServerNames: []string{"open.test"}, Routes: []RouteConfig{{Upstream: "e"}}},
			{Name: "secure", ServerNames: []string{"secure.test", "*.secure.test"}, ClientAuth: secureAuth, Routes: []RouteConfig{{Upstream: "e"}}},
		}
	}
	for _, tc := range []struct {
		connSite, host string
		secureAuth     bool
		want           int
	}{
		{"open", "secure.test", true, 421},
		{"open", "api.secure.test:8443", true, 421},
		{"open", "SECURE.test", true, 421},
		{"secure", "open.test", true, 421},
		{"open", "open.test", true, 200},
		{"open", "unknown.test", true, 200},
		{"secure", "secure.test", true, 200},
		{"open", "secure.test", false, 200}, // no client auth anywhere: the handshake's site serves
		// A final dot names the same host.
		{"open", "secure.test.", true, 421},
		{"open", "api.secure.test.:8443", true, 421},
		{"secure", "secure.test.", true, 200},
		// A connection made for a site a reload removed or renamed: its
		// handshake met no site's policy that still exists, and which
		// listener's sites it may reach is not known either.
		{"gone", "open.test", true, 421},
		{"gone", "secure.test", true, 421},
		{"gone", "secure.test", false, 421},
	} {
		t.Run(fmt.Sprintf("%s/%s/auth=%v", tc.connSite, tc.host, tc.secureAuth), func(t *testing.T) {
			cfg := Config{Upstreams: []UpstreamConfig{upstream("e", addrOf(e))}, Sites: sites(tc.secureAuth)}
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: tc.connSite, Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3"}})
			code, body, _ := get(t, testClient(t), f.url+"/", "Host", tc.host)
			if code != tc.want {
				t.Errorf("status %d (%q), want %d", code, body, tc.want)
			}
		})
	}
}

// TestMisdirectedSiteNames: the 421 rule sees a site's names as frontdoor
// does when it picks a handshake's site: a configured final dot does not
// count, and an exact name is another site's even where a wildcard of the
// connection's site would match it.
func TestMisdirectedSiteNames(t *testing.T) {
	e := echoBackend(t)
	for _, tc := range []struct {
		name           string
		open, secure   string
		connSite, host string
		want           int
	}{
		{"configured final dot", "open.test", "secure.test.", "open", "secure.test", 421},
		{"exact name behind a wildcard", "*.example.test", "secure.example.test", "open", "secure.example.test", 421},
		{"wildcard's own name", "*.example.test", "secure.example.test", "open", "www.example.test", 200},
		{"exact name on its own site", "*.example.test", "secure.example.test", "secure", "secure.example.test", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Upstreams: []UpstreamConfig{upstream("e", addrOf(e))}, Sites: []SiteConfig{
				{Name: "open", ServerNames: []string{tc.open}, Routes: []RouteConfig{{Upstream: "e"}}},
				{Name: "secure", ServerNames: []string{tc.secure}, ClientAuth: true, Routes: []RouteConfig{{Upstream: "e"}}},
			}}
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: tc.connSite, Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3"}})
			if code, body, _ := get(t, testClient(t), f.url+"/", "Host", tc.host); code != tc.want {
				t.Errorf("Host %s on a connection for %s: status %d (%.100q), want %d", tc.host, tc.connSite, code, body, tc.want)
			}
		})
	}
}

// TestClientAuthPolicyChangedGets421: a connection whose handshake met
// another client authentication than its site has now (a reload changed
// the mode or the CAs) gets 421 and, over HTTP/1.1, is closed; one that
// met the same is served, as is any connection of a site that no longer
// authenticates clients.
func TestClientAuthPolicyChangedGets421(t *testing.T) {
	e := echoBackend(t)
	for _, tc := range []struct {
		name             string
		siteAuth         bool
		sitePolicy, conn string
		want             int
	}{
		{"same policy", true, "require:aa", "require:aa", 200},
		{"CAs changed", true, "require:bb", "require:aa", 421},
		{"auth added", true, "require:bb", "", 421},
		{"auth removed", false, "", "require:aa", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
				Sites: []SiteConfig{{Name: "s", ServerNames: []string{"s.test"}, ClientAuth: tc.siteAuth, ClientAuthPolicy: tc.sitePolicy, Routes: []RouteConfig{{Upstream: "e"}}}}}
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "s", ClientAuthPolicy: tc.conn, Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3"}})
			res, c, br := rawExchange(t, f.addr, "GET / HTTP/1.1\r\nHost: s.test\r\n\r\n")
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if tc.want != 421 {
				return
			}
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: s.test\r\n\r\n")
			if _, err := http.ReadResponse(br, nil); err == nil {
				t.Errorf("the connection serves another request after its 421")
			}
		})
	}
}

// TestRedirectPlaceholders: a redirect's to replaces {host}, {path},
// {query} and {uri} from the request, as conf documents (the edge example
// redirects with {path}); {path} is the normalised path the route matched.
func TestRedirectPlaceholders(t *testing.T) {
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/p/", Redirect: &RedirectConfig{To: "https://new.test{path}", Status: 301}},
		RouteConfig{PathPrefix: "/q/", Redirect: &RedirectConfig{To: "https://{host}/search?{query}", Status: 302}},
		RouteConfig{PathPrefix: "/u/", Redirect: &RedirectConfig{To: "https://new.test{uri}", Status: 308}},
	)}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for path, want := range map[string]string{
		"/p/a%20b?x=1":     "https://new.test/p/a%20b",
		"/p/x/../y":        "https://new.test/p/y",
		"/q/a?x=1&y=%2F":   "https://h.test/search?x=1&y=%2F",
		"/u/a%20b?x=1&y=2": "https://new.test/u/a%20b?x=1&y=2",
	} {
		code, _, h := get(t, c, f.url+path, "Host", "h.test")
		if code < 300 || code > 308 {
			t.Errorf("%s: status %d, want a redirect", path, code)
			continue
		}
		if got := h.Get("Location"); got != want {
			t.Errorf("%s: Location %q, want %q", path, got, want)
		}
	}
}

// TestRouteTLSHeaders: tls_info_headers, client_cert_headers and
// client_cert_pem are a route's: the client's certificate and the
// connection's TLS details reach the upstream of the route that asks for
// them, not those of the site's other routes.
func TestRouteTLSHeaders(t *testing.T) {
	e := echoBackend(t)
	cert := testClientCert(t)
	st := frontdoor.ConnState{
		Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3",
		SNI: "example.test", ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert},
	}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Routes: []RouteConfig{
			{PathPrefix: "/id/", Upstream: "e", TLSInfoHeaders: true, ClientCertHeaders: true, ClientCertPEM: true},
			{PathPrefix: "/", Upstream: "e"},
		}}},
	}
	f := newFront(t, cfg, frontOpts{state: &st})
	c := testClient(t)
	_, body, _ := get(t, c, f.url+"/id/", "Host", "example.test")
	h := decodeSeen(t, body).Header
	for _, k := range []string{"X-Ssl-Protocol", "X-Ssl-Client-Verify", "X-Ssl-Client-S-Dn", "X-Ssl-Client-Cert"} {
		if h.Get(k) == "" {
			t.Errorf("route with the TLS and certificate headers: %s missing", k)
		}
	}
	_, body, _ = get(t, c, f.url+"/other", "Host", "example.test")
	h = decodeSeen(t, body).Header
	for _, k := range []string{"X-Ssl-Protocol", "X-Ssl-Cipher", "X-Ssl-Client-Verify", "X-Ssl-Client-S-Dn", "X-Ssl-Client-Cert"} {
		if v := h.Get(k); v != "" {
			t.Errorf("route without them: %s = %q reached its upstream", k, v)
		}
	}
}

// TestRedirectURIOfAbsoluteForm: {uri} is the path and query (conf), also
// of a request in absolute form (RFC 9112 §3.2.2), whose request target
// holds a scheme and authority too: "https://new.test{uri}" must not
// become "https://new.testhttp://h.test/u/a".
func TestRedirectURIOfAbsoluteForm(t *testing.T) {
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/u/", Redirect: &RedirectConfig{To: "https://new.test{uri}", Status: 308}},
		RouteConfig{Redirect: &RedirectConfig{To: "https://new.test{uri}", Status: 308}},
	)}
	f := newFront(t, cfg, frontOpts{})
	for target, want := range map[string]string{
		"http://h.test/u/a?x=1": "https://new.test/u/a?x=1",
		"http://h.test/u/a":     "https://new.test/u/a",
		"http://h.test":         "https://new.test/",
		"http://h.test?x=1":     "https://new.test/?x=1",
		"/u/a?x=1":              "https://new.test/u/a?x=1",
	} {
		res, c, _ := rawExchange(t, f.addr, "GET "+target+" HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n")
		c.Close()
		if got := res.Header.Get("Location"); res.StatusCode != 308 || got != want {
			t.Errorf("GET %s: %d Location %q, want 308 %q", target, res.StatusCode, got, want)
		}
	}
}

// TestStripPrefixKeepsEscapes: strip_prefix removes the prefix and leaves
// the rest of the path as the client escaped it: an encoded slash in a
// name ("group%2Fproject", as GitLab's API takes it) stays one, as it does
// on a route without strip_prefix, rather than become a path separator.
func TestStripPrefixKeepsEscapes(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{PathPrefix: "/gl/", StripPrefix: "/gl", Upstream: "u"},
			RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for target, want := range map[string]string{
		"/gl/api/projects/group%2Fproject?x=1": "GET /api/projects/group%2Fproject?x=1 ",
		"/gl/a%2Fb":                            "GET /a%2Fb ",
		"/gl/a%20b":                            "GET /a%20b ",
		"/%67l/a%2Fb":                          "GET /a%2Fb ", // the prefix escaped by the client
		"/gl%2Fa%2Fb":                          "GET /a%2Fb ",
		"/plain/group%2Fproject":               "GET /plain/group%2Fproject ",
	} {
		res, c, _ := rawExchange(t, f.addr, "GET "+target+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
		c.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s: status %d", target, res.StatusCode)
			continue
		}
		select {
		case got := <-rec.got:
			if !strings.HasPrefix(got, want) {
				line, _, _ := strings.Cut(got, "\r\n")
				t.Errorf("GET %s reached the target as %q, want %q", target, line, want)
			}
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("GET %s: nothing reached the target", target)
		}
	}
}

// TestRedirectHostIPv6: {host} of a request to an IPv6 literal
// ("Host: [::1]:8443") keeps its brackets (RFC 3986 §3.2.2):
// "https://{host}{uri}" must give https://[::1]/a, not https://::1/a,
// which names no host.
func TestRedirectHostIPv6(t *testing.T) {
	cfg := Config{Sites: oneSite(RouteConfig{Redirect: &RedirectConfig{To: "https://{host}{uri}", Status: 308}})}
	f := newFront(t, cfg, frontOpts{})
	for host, want := range map[string]string{
		"[::1]:8443":     "https://[::1]/a?b",
		"[::1]":          "https://[::1]/a?b",
		"127.0.0.1:8443": "https://127.0.0.1/a?b",
		"example.test":   "https://example.test/a?b",
	} {
		res, c, _ := rawExchange(t, f.addr, "GET /a?b HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		c.Close()
		if got := res.Header.Get("Location"); res.StatusCode != 308 || got != want {
			t.Errorf("Host %s: %d Location %q, want 308 %q", host, res.StatusCode, got, want)
		}
	}
}

// TestHeaderEditsUnderscoreSpellings: a field the route's request_headers
// remove or set does not reach the backend from the client spelled with
// '_' for '-' either (CGI-style backends read X_Remote_User as
// X-Remote-User; nginx drops such fields by default), while an unrelated
// one and one the route only adds to are kept.
func TestHeaderEditsUnderscoreSpellings(t *testing.T) {
	e := echoBackend(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: oneSite(RouteConfig{Upstream: "e", RequestHeaders: HeaderOps{
			Set:    map[string]string{"X-Remote-User": "gateway"},
			Remove: []string{"X-Internal-Token"},
			Add:    map[string]string{"X-Tag": "route"},
		}}),
	}
	f := newFront(t, cfg, frontOpts{})
	_, body, _ := get(t, testClient(t), f.url+"/", "Host", "example.test",
		"X_Remote_User", "forged", "x_internal_token", "forged", "X_Tag", "client", "X_Other", "kept")
	h := decodeSeen(t, body).Header
	for k, v := range h {
		if strings.Contains(strings.Join(v, ","), "forged") {
			t.Errorf("%s: %q reached the backend past the route's request_headers", k, v)
		}
	}
	if got := h.Get("X-Remote-User"); got != "gateway" {
		t.Errorf("X-Remote-User %q, want the route's", got)
	}
	if h.Get("X_other") != "kept" || h.Get("X_tag") != "client" {
		t.Errorf("unrelated fields with '_' dropped: %v", h)
	}
}

// wantLocations sends each request target of want (an HTTP/1.1 GET with
// Host example.test) and checks the Location of its answer.
func wantLocations(t *testing.T, f *front, want map[string]string) {
	t.Helper()
	for target, loc := range want {
		c := dialRaw(t, f.addr)
		io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: example.test\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		res.Body.Close()
		if got := res.Header.Get("Location"); got != loc {
			t.Errorf("GET %s: %d Location %q, want %q", target, res.StatusCode, got, loc)
		}
	}
}

// TestRelativeRedirectStaysOnSite: a redirect whose to begins with the
// request's own {uri} or {path} (a path on this site) cannot be turned by
// the request into one to another site: a target of "//evil.example/x"
// (or with a backslash, which browsers read as a slash) would give the
// Location "//evil.example/x", a URL of evil.example for the browser; its
// leading slashes become one. A to that names its host is left alone.
func TestRelativeRedirectStaysOnSite(t *testing.T) {
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/p/", Redirect: &RedirectConfig{To: "{path}/", Status: 301}},
		RouteConfig{PathPrefix: "/h/", Redirect: &RedirectConfig{To: "https://{host}{uri}", Status: 301}},
		RouteConfig{PathPrefix: "/", Redirect: &RedirectConfig{To: "{uri}", Status: 301}})}
	f := newFront(t, cfg, frontOpts{})
	wantLocations(t, f, map[string]string{
		"//evil.example/x":      "/evil.example/x",
		"///evil.example/x?q=1": "/evil.example/x?q=1",
		"/%5Cevil.example/x":    "/%5Cevil.example/x",
		"/a/b?c=d":              "/a/b?c=d",
		"/p//evil.example":      "/p/evil.example/",
		"/h//x":                 "https://example.test/h//x",
	})
}

// TestTLSHeaderMatchValueRefused: a route matching X-Ssl-Client-Verify or
// X-Ssl-Session-Reused on a value the proxy never derives is refused: the
// matcher would never match, and a route that answers 403 to
// "X-Ssl-Client-Verify: none" (for NONE) would turn no one away. The
// values the proxy writes, and any value ("" for "*"), are accepted:
// FAILED: with OpenSSL 3's words for a reason, not OpenSSL 1.1's.
func TestTLSHeaderMatchValueRefused(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"X-Ssl-Client-Verify", "none", false},
		{"x-ssl-client-verify", "Success", false},
		{"X-Ssl-Client-Verify", "FAILED", false},
		{"X-Ssl-Client-Verify", "FAILED:self-signed certificate", true},
		{"X-Ssl-Client-Verify", "FAILED:self-signed certificate in certificate chain", true},
		{"X-Ssl-Client-Verify", "FAILED:unsuitable certificate purpose", true},
		{"X-Ssl-Client-Verify", "FAILED:self signed certificate", false},         // OpenSSL 1.1's wording
		{"X-Ssl-Client-Verify", "FAILED:unsupported certificate purpose", false}, // OpenSSL 1.1's wording
		{"X-Ssl-Session-Reused", "yes", false},
		{"X-Ssl-Client-Verify", "NONE", true},
		{"x-ssl-client-verify", "SUCCESS", true},
		{"X-Ssl-Session-Reused", "r", true},
		{"X-Ssl-Session-Reused", ".", true},
		{"X-Ssl-Client-Verify", "", true},
		{"X-Ssl-Client-S-Dn", "CN=ops", true},
	} {
		cfg := Config{Sites: oneSite(
			RouteConfig{Headers: []HeaderMatch{{Name: tc.name, Value: tc.value}}, Respond: &RespondConfig{Status: 403}},
			RouteConfig{Respond: &RespondConfig{Status: 200}})}
		p, err := New(cfg, nil, testLogger(t))
		if p != nil {
			p.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("match %s: %q: error %v, want accepted %v", tc.name, tc.value, err, tc.ok)
		}
	}
}

// TestHostWithEmptyLabel: a Host whose name has an empty label
// ("secure.test..", "secure..test", ".secure.test") names no site, so a
// connection made for a site without client authentication served it
// and passed it on to that site's backend, past the 421 that
// "secure.test" and "secure.test." get; a backend that trims the dots
// ("secure.test..".rstrip(".")) took it for the site that asks for
// certificates. Such a host is no name (RFC 1035 §3.1: only the root's
// label is empty) and is refused with 400, as nginx refuses it.
func TestHostWithEmptyLabel(t *testing.T) {
	e := echoBackend(t)
	cfg := Config{Upstreams: []UpstreamConfig{upstream("e", addrOf(e))}, Sites: []SiteConfig{
		{Name: "open", ServerNames: []string{"open.test"}, Routes: []RouteConfig{{Upstream: "e"}}},
		{Name: "secure", ServerNames: []string{"secure.test"}, ClientAuth: true, Routes: []RouteConfig{{Upstream: "e"}}},
	}}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "open", SNI: "open.test", Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3"}})
	for host, want := range map[string]int{
		"secure.test..":     400,
		"secure.test..:443": 400,
		"secure..test":      400,
		".secure.test":      400,
		".":                 400,
		"secure.test.":      421,
		"open.test.":        200,
	} {
		if code, body, _ := get(t, testClient(t), f.url+"/", "Host", host); code != want {
			t.Errorf("Host %q on a connection for site open: %d (%.100q), want %d", host, code, body, want)
		}
	}
}

// TestNoSNIHostNeedsSiteHandshake: a request on a connection made for
// the listener's default site (no SNI) is served by the site its Host
// names only when that site's own handshakes could have ended as this
// one did: a site of tls min_version 1.3, or of fewer TLCP or TLS 1.3-SM
// suites, is not reached over a TLS 1.2 connection or a suite it does
// not offer, which would pass by its handshake policy (the default site
// serves such a request, as one whose Host names no site).
func TestNoSNIHostNeedsSiteHandshake(t *testing.T) {
	tlcp, tls13, rsa := frontdoor.FamilyTLCP, frontdoor.FamilyTLS13SM, frontdoor.FamilyTLS
	site := func(name string, hs map[string]HandshakeParams) SiteConfig {
		return SiteConfig{Name: name, ServerNames: []string{name + ".test"}, Families: []string{tlcp, tls13, rsa}, Handshakes: hs,
			Routes: []RouteConfig{{Respond: &RespondConfig{Body: name}}}}
	}
	cfg := Config{
		Sites: []SiteConfig{
			site("one", nil),
			site("strict", map[string]HandshakeParams{
				rsa:   {Protocols: []string{"TLSv1.3"}},
				tlcp:  {Ciphers: []string{"ECC-SM2-SM4-GCM-SM3"}},
				tls13: {Ciphers: []string{"TLS_SM4_GCM_SM3"}},
			}),
		},
		ListenerSites: map[string][]string{":443": {"one", "strict"}},
	}
	for _, c := range []struct {
		family, proto, cipher, body string
	}{
		{rsa, "TLSv1.3", "TLS_AES_128_GCM_SHA256", "strict"},
		{rsa, "TLSv1.2", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "one"},
		{tlcp, "NTLSv1.1", "ECC-SM2-SM4-GCM-SM3", "strict"},
		{tlcp, "NTLSv1.1", "ECC-SM2-SM4-CBC-SM3", "one"},
		{tls13, "TLSv1.3-SM", "TLS_SM4_GCM_SM3", "strict"},
		{tls13, "TLSv1.3-SM", "TLS_SM4_CCM_SM3", "one"},
	} {
		st := frontdoor.ConnState{Listener: ":443", Site: "one", Family: c.family, Protocol: c.proto, Cipher: c.cipher}
		f := newFront(t, cfg, frontOpts{state: &st})
		code, got, _ := get(t, testClient(t), f.url+"/", "Host", "strict.test")
		if code != 200 || got != c.body {
			t.Errorf("%s %s %s, Host strict.test: %d %q, want 200 %q", c.family, c.proto, c.cipher, code, got, c.body)
		}
	}
}

// TestSlashBeforePlaceholderRedirectStaysOnSite: a to that is a path on
// this site with slashes before the request's {path} or {uri} ("/{path}",
// as nginx's "return 301 /$uri" is written) gave "//evil.example/x" for a
// request of /evil.example/x: a URL of evil.example for the browser (RFC
// 3986 §4.2, a network-path reference). Its leading slashes become one,
// as for a to that begins with the placeholder; a to that names its host
// ("//{host}{uri}") is left alone.
func TestSlashBeforePlaceholderRedirectStaysOnSite(t *testing.T) {
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/u/", Redirect: &RedirectConfig{To: "/{uri}", Status: 301}},
		RouteConfig{PathPrefix: "/b/", Redirect: &RedirectConfig{To: `\{uri}`, Status: 301}},
		RouteConfig{PathPrefix: "/h/", Redirect: &RedirectConfig{To: "//{host}{uri}", Status: 301}},
		RouteConfig{PathPrefix: "/", Redirect: &RedirectConfig{To: "/{path}", Status: 301}})}
	f := newFront(t, cfg, frontOpts{})
	wantLocations(t, f, map[string]string{
		"/evil.example/x": "/evil.example/x",
		"/u/x?q=1":        "/u/x?q=1",
		"/b/x":            "/b/x",
		"/h/x":            "//example.test/h/x",
	})
}

// TestRedirectToPlaceholdersChecked: a redirect's to with a placeholder
// the proxy does not replace ("{scheme}", "{request_uri}") or an nginx
// variable ("$host$request_uri", as nginx's return is written) went out
// as written, in every Location: a URL no one has. It is refused; the
// known placeholders and a '$' that is no nginx variable are not.
func TestRedirectToPlaceholdersChecked(t *testing.T) {
	for to, ok := range map[string]bool{
		"https://{host}{uri}":              true,
		"https://new.test{path}?{query}":   true,
		"https://new.test/pay?sum=$5&x=$y": true,
		"/price$":                          true,
		"https://$host$request_uri":        false,
		"https://new.test$request_uri":     false,
		"https://{host}$uri":               false,
		"{scheme}://{host}{uri}":           false,
		"https://{host}{request_uri}":      false,
		"https://new.test/{":               false,
		"https://new.test/{uri":            false,
		"https://new.test/{}":              false,
	} {
		cfg := Config{Sites: oneSite(RouteConfig{Redirect: &RedirectConfig{To: to, Status: 301}})}
		p, err := New(cfg, nil, testLogger(t))
		if p != nil {
			p.Close()
		}
		if (err == nil) != ok {
			t.Errorf("redirect to %q: error %v, want accepted %v", to, err, ok)
		}
	}
}

// TestRedirectAndRespondControlCharactersRefused: a redirect's to or a
// respond's content type with a line break (a YAML "|" block ends with
// one) or another control byte was accepted: an HTTP/1.1 writer turned
// it into a space, HTTP/2's dropped the field, so that the redirect had
// no Location over HTTP/2. It is refused, as a header edit's value is.
func TestRedirectAndRespondControlCharactersRefused(t *testing.T) {
	for _, tc := range []struct {
		rc RouteConfig
		ok bool
	}{
		{RouteConfig{Redirect: &RedirectConfig{To: "https://new.test/\n", Status: 301}}, false},
		{RouteConfig{Redirect: &RedirectConfig{To: "https://new.test/\r\nSet-Cookie: a=b", Status: 301}}, false},
		{RouteConfig{Redirect: &RedirectConfig{To: "https://new.test/a b", Status: 301}}, false},
		{RouteConfig{Redirect: &RedirectConfig{To: "https://new.test/a%20b", Status: 301}}, true},
		{RouteConfig{Respond: &RespondConfig{ContentType: "application/json\n"}}, false},
		{RouteConfig{Respond: &RespondConfig{ContentType: "text/html\x00"}}, false},
		{RouteConfig{Respond: &RespondConfig{ContentType: "text/html; charset=utf-8"}}, true},
	} {
		p, err := New(Config{Sites: oneSite(tc.rc)}, nil, testLogger(t))
		if p != nil {
			p.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("redirect %+v respond %+v: error %v, want accepted %v", tc.rc.Redirect, tc.rc.Respond, err, tc.ok)
		}
	}
}

// TestRequestHeadersRemoveUserAgent: request_headers remove User-Agent
// (nginx's proxy_set_header User-Agent "") sent the target Go's own
// "Go-http-client/1.1" in place of the client's: the edit took the field
// out after the guard that keeps the transport from adding its own. The
// target now gets no User-Agent.
func TestRequestHeadersRemoveUserAgent(t *testing.T) {
	e := echoBackend(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites:     oneSite(RouteConfig{Upstream: "e", RequestHeaders: HeaderOps{Remove: []string{"user-agent"}}}),
	}
	f := newFront(t, cfg, frontOpts{})
	for _, ua := range []string{"curl/8.0", ""} {
		kv := []string{"Host", "example.test"}
		if ua != "" {
			kv = append(kv, "User-Agent", ua)
		}
		_, body, _ := get(t, testClient(t), f.url+"/x", kv...)
		if s := decodeSeen(t, body); s.Header["User-Agent"] != nil {
			t.Errorf("client User-Agent %q: the target got %q, want none", ua, s.Header["User-Agent"])
		}
	}
}

// TestRespondHeadContentLength: a HEAD to a respond route got no
// Content-Length, where its GET has the body's: RFC 9110 §9.3.2 asks for
// the GET's header fields, and nginx's return and Caddy's respond send
// it, which clients and monitors that check a page's size by HEAD read.
func TestRespondHeadContentLength(t *testing.T) {
	const body = "service up\n"
	cfg := Config{Sites: oneSite(RouteConfig{Respond: &RespondConfig{Status: 200, Body: body}})}
	f := newFront(t, cfg, frontOpts{})
	for _, method := range []string{"GET", "HEAD"} {
		c := dialRaw(t, f.addr)
		io.WriteString(c, method+" /health HTTP/1.1\r\nHost: example.test\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if cl := res.Header.Get("Content-Length"); cl != fmt.Sprint(len(body)) {
			t.Errorf("%s: Content-Length %q, want %d", method, cl, len(body))
		}
		if want := map[string]string{"GET": body, "HEAD": ""}[method]; string(got) != want {
			t.Errorf("%s: body %q, want %q", method, got, want)
		}
	}
}
