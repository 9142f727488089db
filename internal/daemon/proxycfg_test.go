package daemon

import (
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestRouteTimeoutsMapped: a route's timeouts reach the proxy as its own
// (a key left out: 0, the upstream's or listener's; 0 in the file: no
// limit, which the proxy takes as negative).
func TestRouteTimeoutsMapped(t *testing.T) {
	zero, ten := time.Duration(0), 10*time.Second
	for _, c := range []struct {
		in                 *conf.RouteTimeouts
		read, body, header time.Duration
	}{
		{nil, 0, 0, 0},
		{&conf.RouteTimeouts{Read: &ten}, ten, 0, 0},
		{&conf.RouteTimeouts{Read: &zero, Body: &ten}, -1, ten, 0},
		{&conf.RouteTimeouts{Body: &zero}, 0, -1, 0},
		{&conf.RouteTimeouts{ResponseHeader: &ten}, 0, 0, ten},
		{&conf.RouteTimeouts{ResponseHeader: &zero, Read: &ten}, ten, 0, -1},
	} {
		rc := routeConfig(conf.Route{Upstream: "u", Timeouts: c.in})
		if rc.ReadTimeout != c.read || rc.BodyTimeout != c.body || rc.ResponseHeaderTimeout != c.header {
			t.Errorf("%+v: read %v, body %v, response_header %v; want %v, %v, %v", c.in, rc.ReadTimeout, rc.BodyTimeout, rc.ResponseHeaderTimeout, c.read, c.body, c.header)
		}
	}
}

// TestCompressMapped: a route's compress reaches the proxy as written,
// min_length 0 (every length) as 1 (the proxy's 0 is its default).
func TestCompressMapped(t *testing.T) {
	if rc := routeConfig(conf.Route{Upstream: "u"}); rc.Compress != nil {
		t.Fatalf("compress %+v without one in the file", rc.Compress)
	}
	for _, min := range []conf.ByteSize{0, 2048} {
		rc := routeConfig(conf.Route{Upstream: "u", Compress: &conf.Compress{Types: []string{"text/*"}, MinLength: min, Level: 3}})
		c := rc.Compress
		if c == nil || len(c.Types) != 1 || c.Types[0] != "text/*" || c.Level != 3 || c.MinLength != max(int64(min), 1) {
			t.Errorf("min_length %d: %+v", min, c)
		}
	}
}

// TestFilesMapped: a files route reaches the proxy with its root resolved
// against the configuration file's folder, as every path in it is.
func TestFilesMapped(t *testing.T) {
	cfg := &conf.Config{Dir: "/etc/gmproxy", Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{
		{Name: "rel", PathPrefix: "/a/", Files: &conf.Files{Root: "www", Index: "start.html", Hidden: true, Precompressed: true, Charset: "gbk", Fallback: "app.html", Types: map[string]string{"ofd": "application/x-ofd"}}},
		{Name: "abs", PathPrefix: "/", Files: &conf.Files{Root: "/srv/www", Index: "index.html"}},
	}}}}
	rs := proxyConfig(cfg).Sites[0].Routes
	if f := rs[0].Files; f == nil || f.Root != "/etc/gmproxy/www" || f.Index != "start.html" || !f.Hidden || !f.Precompressed || f.Charset != "gbk" || f.Fallback != "app.html" || f.Types["ofd"] != "application/x-ofd" {
		t.Errorf("relative root: %+v", f)
	}
	if f := rs[1].Files; f == nil || f.Root != "/srv/www" || f.Hidden || f.Precompressed {
		t.Errorf("absolute root: %+v", f)
	}
}

// TestRateLimitZoneMapped: a route's rate_limit zone reaches the proxy.
func TestRateLimitZoneMapped(t *testing.T) {
	rc := routeConfig(conf.Route{Upstream: "u", RateLimit: &conf.RateLimit{Rate: conf.Rate(6 * time.Second), Burst: 2, Zone: "login"}})
	if r := rc.RateLimit; r == nil || r.Zone != "login" || r.Burst != 2 || r.Interval != 6*time.Second {
		t.Errorf("rate_limit %+v", r)
	}
}

// TestFilesRootNamedLikeALogWord: a root named off, stdout or stderr is a
// folder beside the configuration file, as validation checked it, not a
// folder of the working directory (those words mean something only to
// the access log).
func TestFilesRootNamedLikeALogWord(t *testing.T) {
	for _, root := range []string{"off", "stdout", "stderr"} {
		cfg := &conf.Config{Dir: "/etc/gmproxy", Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{
			{Name: "r", PathPrefix: "/", Files: &conf.Files{Root: root, Index: "index.html"}},
		}}}}
		if f := proxyConfig(cfg).Sites[0].Routes[0].Files; f == nil || f.Root != "/etc/gmproxy/"+root {
			t.Errorf("root %q: %+v, want /etc/gmproxy/%s", root, f, root)
		}
	}
}

// TestErrorPagesMapped: a site's loaded error pages reach the proxy.
func TestErrorPagesMapped(t *testing.T) {
	pages := map[int][]byte{502: []byte("<h1>soon</h1>")}
	cfg := &conf.Config{Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{{PathPrefix: "/", Respond: &conf.Respond{Status: 200}}},
		Material: conf.SiteMaterial{ErrorPages: pages}}}}
	if got := proxyConfig(cfg).Sites[0].ErrorPages; string(got[502]) != "<h1>soon</h1>" {
		t.Errorf("error pages %v", got)
	}
}

// TestRequestIDMapped: a site's request_id reaches the proxy.
func TestRequestIDMapped(t *testing.T) {
	cfg := &conf.Config{Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, RequestID: "X-Trace",
		Routes: []conf.Route{{PathPrefix: "/", Respond: &conf.Respond{Status: 200}}}}}}
	if got := proxyConfig(cfg).Sites[0].RequestIDHeader; got != "X-Trace" {
		t.Errorf("request ID header %q, want X-Trace", got)
	}
}

// TestPathRegexMapped: a route's path_regex reaches the proxy, and an
// unnamed one is known across reloads by it (not as the catch-all "/").
func TestPathRegexMapped(t *testing.T) {
	rc := routeConfig(conf.Route{PathRegex: `\.php$`, NameByPlace: true, Respond: &conf.Respond{Status: 410}})
	if rc.PathRegex != `\.php$` || rc.Key != `~\.php$` {
		t.Errorf("path_regex %q, key %q", rc.PathRegex, rc.Key)
	}
}

// TestBasicAuthMapped: a route's basic_auth, its users as loaded, reaches
// the proxy.
func TestBasicAuthMapped(t *testing.T) {
	users := map[string][]byte{"ops": []byte("$2y$10$x")}
	rc := routeConfig(conf.Route{Upstream: "u", BasicAuth: &conf.BasicAuth{Realm: "r", Users: users, FailuresPerMinute: 7}})
	if a := rc.BasicAuth; a == nil || a.Realm != "r" || string(a.Users["ops"]) != "$2y$10$x" || a.FailuresPerMinute != 7 {
		t.Errorf("basic_auth %+v", a)
	}
}

// TestSiteFamiliesMapped: the proxy learns which handshake families each
// site has certificates for, which decides whether a request without SNI
// may be served by its Host's site.
func TestSiteFamiliesMapped(t *testing.T) {
	kp := &conf.KeyPair{}
	for _, c := range []struct {
		m    conf.SiteMaterial
		want []string
	}{
		{conf.SiteMaterial{TLCPSign: kp, TLCPEnc: kp}, []string{frontdoor.FamilyTLCP}},
		{conf.SiteMaterial{TLCPSign: kp}, nil},
		{conf.SiteMaterial{TLS13SM: kp}, []string{frontdoor.FamilyTLS13SM}},
		{conf.SiteMaterial{TLS: kp}, []string{frontdoor.FamilyTLS}},
		{conf.SiteMaterial{TLCPSign: kp, TLCPEnc: kp, TLS13SM: kp, TLS: kp}, []string{frontdoor.FamilyTLCP, frontdoor.FamilyTLS13SM, frontdoor.FamilyTLS}},
	} {
		cfg := &conf.Config{Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Material: c.m,
			Routes: []conf.Route{{PathPrefix: "/", Respond: &conf.Respond{Status: 200}}}}}}
		if got := proxyConfig(cfg).Sites[0].Families; !slices.Equal(got, c.want) {
			t.Errorf("families %v, want %v", got, c.want)
		}
	}
}

// TestSiteHandshakesMapped: the proxy learns the versions and suites
// each site's handshakes can end with, named as the handshakes report
// them, a suite list left empty being the stack's default.
func TestSiteHandshakesMapped(t *testing.T) {
	kp := &conf.KeyPair{}
	m := conf.SiteMaterial{TLCPSign: kp, TLCPEnc: kp, TLS13SM: kp, TLS: kp, TLSMinVersion: tls.VersionTLS13,
		TLCPSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, TLS13SMSuites: []uint16{tls13sm.TLS_SM4_GCM_SM3}}
	cfg := &conf.Config{Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Material: m,
		Routes: []conf.Route{{PathPrefix: "/", Respond: &conf.Respond{Status: 200}}}}}}
	hs := proxyConfig(cfg).Sites[0].Handshakes
	want := map[string]proxy.HandshakeParams{
		frontdoor.FamilyTLCP:    {Ciphers: []string{tlcp.CipherSuiteName(tlcp.ECC_SM4_GCM_SM3)}},
		frontdoor.FamilyTLS13SM: {Ciphers: []string{tls13sm.CipherSuiteName(tls13sm.TLS_SM4_GCM_SM3)}},
		frontdoor.FamilyTLS:     {Protocols: []string{"TLSv1.3"}},
	}
	for fam, w := range want {
		if g := hs[fam]; !slices.Equal(g.Protocols, w.Protocols) || !slices.Equal(g.Ciphers, w.Ciphers) {
			t.Errorf("%s: %+v, want %+v", fam, g, w)
		}
	}
	m.TLCPSuites, m.TLS13SMSuites, m.TLSMinVersion = nil, nil, tls.VersionTLS12
	cfg.Sites[0].Material = m
	hs = proxyConfig(cfg).Sites[0].Handshakes
	if g := hs[frontdoor.FamilyTLCP].Ciphers; len(g) != len(tlcp.CipherSuites()) {
		t.Errorf("TLCP default suites %v, want the %d of tlcp.CipherSuites", g, len(tlcp.CipherSuites()))
	}
	if g := hs[frontdoor.FamilyTLS13SM].Ciphers; len(g) != len(tls13sm.CipherSuites()) {
		t.Errorf("TLS 1.3-SM default suites %v, want the %d of tls13sm.CipherSuites", g, len(tls13sm.CipherSuites()))
	}
	if g, ok := hs[frontdoor.FamilyTLS]; ok && (g.Protocols != nil || g.Ciphers != nil) {
		t.Errorf("TLS 1.2 and up: %+v, want any", g)
	}
}

// TestAccessLogBufferMapped: access_log's buffer and flush reach the
// proxy's log as its queue bound and flush interval.
func TestAccessLogBufferMapped(t *testing.T) {
	cfg := &conf.Config{Dir: "/var/log", AccessLog: conf.AccessLog{Path: "gmproxy.log", Format: "json", Buffer: 128 << 10, Flush: 250 * time.Millisecond}}
	a := proxyConfig(cfg).AccessLog
	if a.Path != "/var/log/gmproxy.log" || a.QueueSize != 128<<10 || a.FlushInterval != 250*time.Millisecond {
		t.Fatalf("access log %q, queue %d, flush %v; want /var/log/gmproxy.log, 131072, 250ms", a.Path, a.QueueSize, a.FlushInterval)
	}
}
