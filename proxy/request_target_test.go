package proxy

// What a client may put in a request target and Host: hosts a site could
// name, and paths that route as the backends behind will read them.

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestAbsoluteFormAuthorityValidated: a request in absolute form (RFC 9112
// §3.2.2) takes its Host from the target's authority, whatever the Host
// field says; an authority that is no valid host ('"', '<', '>') gets 400
// (RFC 9112 §3.2) and nothing goes upstream: it would reach the backend in
// X-Forwarded-Host, or blank its Host.
func TestAbsoluteFormAuthorityValidated(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "fixed", PathPrefix: "/fixed/", Upstream: "u", HostHeader: "backend.internal"},
			RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for _, raw := range []string{
		// Host field present and valid, authority invalid.
		"GET http://x\"<svg>/fixed/a HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n",
		// HTTP/1.0 without any Host field: validHost is not even called.
		"GET http://x\"<svg>/fixed/a HTTP/1.0\r\n\r\n",
		// Default host handling: the backend gets "Host: " (empty).
		"GET http://x\"<svg>/a HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n",
	} {
		wantNotForwarded(t, f.addr, rec, raw, "400")
	}
}

// TestHostWithInvalidPortRefused: Host = uri-host [":" port], port =
// *DIGIT (RFC 9110 §7.2, RFC 3986 §3.2.3). "a.example:1:1" names no site
// as the proxy reads it (up to the last colon), but a.example to backends
// that read up to the first: sent on a connection made for site b, it would
// reach a backend shared with the client-authenticated site a past the 421
// that guards it. It gets 400, as does "a.example:443:".
func TestHostWithInvalidPortRefused(t *testing.T) {
	addr, rec := siteBFront(t)
	wantNotForwarded(t, addr, rec, "GET /secret HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n", "421")
	for _, host := range []string{"a.example:1:1", "a.example:443:"} {
		wantNotForwarded(t, addr, rec, "GET /secret HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n", "400")
	}
}

// TestPathParametersDoNotPassDenyRoute: servlet containers and Spring drop
// ";params" from each segment before normalising, so they serve
// /x/..;/admin/ and /admin;x/ as /admin/. A request whose path routes
// elsewhere once its parameters are removed is refused (400), so it cannot
// pass a route that denies /admin/; a path whose parameters do not change
// the route is forwarded as sent.
func TestPathParametersDoNotPassDenyRoute(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "deny", PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	if st := statusOf(rawRoundTrip(t, f.addr, "GET /x/../admin/ HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 3*time.Second)); !strings.Contains(st, " 403 ") {
		t.Fatalf("control /x/../admin/: got %q, want 403", st)
	}
	for _, p := range []string{"/x/..;/admin/", "/admin;x/", "/.;/admin/"} {
		wantNotForwarded(t, f.addr, rec, "GET "+p+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "400", "403")
	}
	// Parameters that leave the route as it is go through as sent.
	wantForwarded(t, f.addr, rec, "GET /app;jsessionid=1/page HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "GET /app;jsessionid=1/page ")
}

// connectionOptionsRequest builds a request of about 62 KB: headers
// distinct fields "hNNNN" and a Connection field listing tokens options,
// each the token tok.
func connectionOptionsRequest(headers, tokens int, tok string) string {
	var b strings.Builder
	b.WriteString("GET /a HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n")
	for i := 0; i < headers; i++ {
		b.WriteString("h")
		b.WriteString(strconv.Itoa(10000 + i)[1:])
		b.WriteString(":\r\n")
	}
	b.WriteString("Connection: ")
	b.WriteString(strings.Repeat(tok+",", tokens))
	b.WriteString("\r\n\r\n")
	return b.String()
}

// TestConnectionOptionsCostLinear: removing the fields a Connection field
// names (RFC 9110 §7.6.1) walks the header map for a few options at most:
// a head of thousands of options over thousands of fields (within
// max_header_bytes) costs their sum, not their product; every named field
// is still removed.
func TestConnectionOptionsCostLinear(t *testing.T) {
	h := http.Header{}
	var opts []string
	for i := range 3000 {
		name := fmt.Sprintf("X-F%d", i)
		h[name] = []string{"v"}
		if i%2 == 0 {
			opts = append(opts, strings.ToLower(name))
		}
	}
	h["Keep"] = []string{"v"}
	walks := removeConnectionOptions(h, []string{strings.Join(opts, ", ")})
	if walks > maxFoldOptions {
		t.Errorf("%d walks over the header for %d options, want at most %d", walks, len(opts), maxFoldOptions)
	}
	if len(h) != 1501 || h["Keep"] == nil {
		t.Errorf("%d fields left, want the 1500 not named and Keep", len(h))
	}
	// The end-to-end path: such a head is answered and the named fields
	// do not reach the target (its 2000 fields count 32 bytes each
	// against max_header_bytes, as in HTTP/2: 128 KiB).
	rec := newRawRecorder(t)
	cfg := proxyTo(rec.addr)
	cfg.Limits.MaxHeaderBytes = 128 << 10
	f := newFront(t, cfg, frontOpts{})
	if resp := rawRoundTrip(t, f.addr, connectionOptionsRequest(2000, 2500, "zzzzz"), 20*time.Second); !strings.Contains(statusOf(resp), " 200 ") {
		t.Fatalf("got %q, want 200", statusOf(resp))
	}
}

// TestHostListRefused: a reg-name may hold ',' (RFC 3986 §3.2.2), but
// "Host: a.example,b.example" names no origin a site serves, and backends
// that read X-Forwarded-Host as a list take its first member (a.example):
// forwarded on a connection made for site b, it would reach site a's shared
// backend past the 421. It gets 400.
func TestHostListRefused(t *testing.T) {
	addr, rec := siteBFront(t)
	wantNotForwarded(t, addr, rec, "GET /secret HTTP/1.1\r\nHost: a.example,b.example\r\nConnection: close\r\n\r\n", "400")
}

// wantNotForwarded sends raw to the front at addr and checks that the
// answer has one of the statuses and that rec received nothing.
func wantNotForwarded(t *testing.T, addr string, rec *rawRecorder, raw string, statuses ...string) {
	t.Helper()
	n := len(rec.all())
	st := statusOf(rawRoundTrip(t, addr, raw, 3*time.Second))
	ok := false
	for _, want := range statuses {
		ok = ok || strings.Contains(st, " "+want+" ")
	}
	if !ok {
		t.Errorf("request %q: got %q, want %v", raw, st, statuses)
	}
	for _, got := range rec.all()[n:] {
		t.Errorf("request %q reached the backend as:\n%q", raw, got)
	}
}

// wantForwarded sends the request raw to addr and checks that it gets a 200
// and reaches the backend once, with a request line starting with line.
func wantForwarded(t *testing.T, addr string, rec *rawRecorder, raw, line string) {
	t.Helper()
	n := len(rec.all())
	if st := statusOf(rawRoundTrip(t, addr, raw, 3*time.Second)); !strings.Contains(st, " 200 ") {
		t.Errorf("request %q: got %q, want 200", raw, st)
	}
	if got := rec.all()[n:]; len(got) != 1 || !strings.HasPrefix(got[0], line) {
		t.Errorf("request %q: the backend got %q, want %q", raw, got, line)
	}
}

// siteBFront serves sites a (client certificates required) and b, both
// to one recorded backend, on connections whose handshake was made for
// site b without a client certificate.
func siteBFront(t *testing.T) (addr string, rec *rawRecorder) {
	rec = newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: []SiteConfig{
			{Name: "a", ServerNames: []string{"a.example"}, ClientAuth: true, Routes: []RouteConfig{{Upstream: "u"}}},
			{Name: "b", ServerNames: []string{"b.example"}, Routes: []RouteConfig{{Upstream: "u"}}},
		},
	}
	st := &frontdoor.ConnState{Site: "b", SNI: "b.example", Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256"}
	return newFront(t, cfg, frontOpts{state: st}).addr, rec
}

// TestBackslashDoesNotPassDenyRoute: IIS, ASP.NET and other Windows
// backends read '\' (sent as is or as %5C) as '/', so they serve
// /x/..\admin/ as /admin/. A request whose path routes elsewhere with its
// backslashes read as slashes is refused (400), so it cannot pass a route
// that denies /admin/; a backslash that leaves the route as it is goes
// through as sent.
func TestBackslashDoesNotPassDenyRoute(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "deny", PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for _, p := range []string{`/x/..\admin/`, `/x/..%5Cadmin/`, `/x/..%5cadmin/`, `\admin\`, `/admin\`, `/.\admin/`} {
		wantNotForwarded(t, f.addr, rec, "GET "+p+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "400", "403")
	}
	wantForwarded(t, f.addr, rec, "GET /files/a%5Cb HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "GET /files/a%5Cb ")
}

// TestNULInPathRefused: a NUL in the decoded path (%00) is refused (400),
// as nginx does: backends in C and many file APIs end the path at it, so
// "/admin%00" would reach such a backend as /admin past a route that
// denies /admin exactly, and "/admin/%00.png" past routes by suffix.
func TestNULInPathRefused(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "deny", Path: "/admin", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for _, p := range []string{"/admin%00", "/admin%00.png", "/x%00/y"} {
		wantNotForwarded(t, f.addr, rec, "GET "+p+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "400")
	}
}

// TestCaseInsensitivePaths: on a site with CaseInsensitivePaths (backends
// that read "/ADMIN/" as "/admin/": IIS, ASP.NET), a route that denies a
// path or a prefix cannot be passed by changing letter case, strip_prefix
// removes the prefix however it is cased, and the path reaches the target
// as written; on a site without it, paths match as written.
func TestCaseInsensitivePaths(t *testing.T) {
	rec := newRawRecorder(t)
	routes := []RouteConfig{
		{Name: "deny", PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
		{Name: "login", Path: "/login.aspx", Respond: &RespondConfig{Status: 403, Body: "no"}},
		{Name: "api", PathPrefix: "/api/", StripPrefix: "/api", Upstream: "u"},
		{Upstream: "u"},
	}
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", rec.addr)}, Sites: oneSite(routes...)}
	cfg.Sites[0].CaseInsensitivePaths = true
	f := newFront(t, cfg, frontOpts{})
	for _, p := range []string{"/ADMIN/", "/Admin/x", "/aDmIn%2F", "/LOGIN.ASPX", "/Login.Aspx", `/ADMIN\`} {
		wantNotForwarded(t, f.addr, rec, "GET "+p+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "403", "400")
	}
	for _, tc := range []struct{ path, want string }{
		{"/API/v1/Items", "GET /v1/Items "},
		{"/Api/a%2Fb", "GET /a%2Fb "},
		{"/AP%49/a%2Fb", "GET /a%2Fb "}, // the prefix escaped by the client
		{"/Other/Page", "GET /Other/Page "},
		{"/login.aspx.bak", "GET /login.aspx.bak "},
	} {
		wantForwarded(t, f.addr, rec, "GET "+tc.path+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", tc.want)
	}

	// Without the setting, case counts (as nginx's location).
	cfg.Sites[0].CaseInsensitivePaths = false
	f = newFront(t, cfg, frontOpts{})
	wantForwarded(t, f.addr, rec, "GET /ADMIN/ HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "GET /ADMIN/ ")
}

func FuzzFoldPrefix(f *testing.F) {
	for _, s := range [][2]string{{"/ADMIN/x", "/admin/"}, {"/ıd", "/I"}, {"/\xff", "/\xff"}, {"/K", "/k"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, prefix string) {
		n, ok := foldPrefix(p, prefix)
		if !ok {
			if strings.HasPrefix(p, prefix) && utf8.ValidString(prefix) {
				t.Fatalf("foldPrefix(%q, %q) refused an exact prefix", p, prefix)
			}
			return
		}
		if n < 0 || n > len(p) {
			t.Fatalf("foldPrefix(%q, %q) = %d out of range", p, prefix, n)
		}
		if !strings.EqualFold(strings.ToUpper(p[:n]), strings.ToUpper(prefix)) {
			t.Fatalf("foldPrefix(%q, %q) matched %q", p, prefix, p[:n])
		}
	})
}

// TestRouteHeaderMatchOnProxyHeaders: a route may not match on a header
// the proxy sets or removes from clients (the matcher would read the
// client's forgeable copy), spelled in any case or with '_'; the TLS
// headers it derives itself are matched against its own values, so a
// client's copy of one never matches.
func TestRouteHeaderMatchOnProxyHeaders(t *testing.T) {
	for _, name := range []string{"X-Real-IP", "x-forwarded-for", "Forwarded", "True-Client-IP", "X_Real_IP", "x_ssl_client_verify"} {
		cfg := Config{Sites: oneSite(RouteConfig{Headers: []HeaderMatch{{Name: name, Value: "1"}}, Respond: &RespondConfig{Status: 200}})}
		if p, err := New(cfg, nil, nil); err == nil {
			p.Close()
			t.Errorf("a route matching on %s accepted", name)
		}
	}
	cfg := Config{Sites: oneSite(
		RouteConfig{Name: "verified", Headers: []HeaderMatch{{Name: "x-ssl-client-verify", Value: "SUCCESS"}}, Respond: &RespondConfig{Status: 200, Body: "in"}},
		RouteConfig{Respond: &RespondConfig{Status: 403, Body: "out"}})}
	f := newFront(t, cfg, frontOpts{})
	// Plain HTTP: no TLS, so no verified certificate, whatever the client says.
	if st := statusOf(rawRoundTrip(t, f.addr, "GET / HTTP/1.1\r\nHost: example.test\r\nX-Ssl-Client-Verify: SUCCESS\r\nConnection: close\r\n\r\n", 3*time.Second)); !strings.Contains(st, " 403 ") {
		t.Errorf("forged X-Ssl-Client-Verify: %q, want 403", st)
	}
}

// TestRouteHeaderMatchOnHost: the server moves Host out of the request's
// header fields (into Request.Host), so a matcher on it would never match:
// a route that denies "Host: internal.example" would let every request
// through. Such a matcher is refused; a route's host condition is the way.
func TestRouteHeaderMatchOnHost(t *testing.T) {
	cfg := Config{Sites: oneSite(
		RouteConfig{Name: "deny", Headers: []HeaderMatch{{Name: "host", Value: "internal.example"}}, Respond: &RespondConfig{Status: 403, Body: "out"}},
		RouteConfig{Respond: &RespondConfig{Status: 200, Body: "in"}})}
	p, err := New(cfg, nil, nil)
	if err == nil {
		defer p.Close()
		f := newFront(t, cfg, frontOpts{})
		st := statusOf(rawRoundTrip(t, f.addr, "GET / HTTP/1.1\r\nHost: internal.example\r\nConnection: close\r\n\r\n", 3*time.Second))
		t.Errorf("a route matching on Host accepted; a request for internal.example got %q", st)
	}
}

// FuzzEscapedPrefixLen: for any request path the client escaped and any
// prefix length of its decoded form, the escaped remainder setURL keeps
// decodes to the decoded remainder, or is dropped; never a panic.
func FuzzEscapedPrefixLen(f *testing.F) {
	for _, s := range []string{"/AP%49/a%2Fb", "/gl%2Fa%2Fb", "/%67l/a%20b", "/a", "/%41%42/%2F%2F/x"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, target string, cut uint8) {
		u, err := url.ParseRequestURI(target)
		if err != nil || u.RawPath == "" {
			return
		}
		n := min(int(cut), len(u.Path))
		esc := u.EscapedPath()
		m, ok := escapedPrefixLen(esc, n)
		if !ok {
			t.Fatalf("escapedPrefixLen(%q, %d) found no end for a prefix of %q", esc, n, u.Path)
		}
		if got, err := url.PathUnescape(esc[:m]); err != nil || got != u.Path[:n] {
			t.Fatalf("%q[:%d] decodes to %q, %v; want %q", esc, m, got, err, u.Path[:n])
		}
	})
}

// TestStripPrefixLeavesNoDotSegment: a strip_prefix that ends inside a
// segment (nginx's "location /api" with "proxy_pass http://b/") turns
// "/api../admin" into "/../admin", which the target and the files route
// read as /admin: the route that denies /api/admin/ must not be passed
// so, in any reading of the dot segment (";params", '\'). A prefix that
// ends inside a segment still strips an ordinary one ("/apiv1" is /v1).
func TestStripPrefixLeavesNoDotSegment(t *testing.T) {
	rec := newRawRecorder(t)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "private", "a.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "deny", PathPrefix: "/api/admin", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Name: "deny-files", PathPrefix: "/static/private", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Name: "api", PathPrefix: "/api", StripPrefix: "/api", Upstream: "u"},
			RouteConfig{Name: "static", PathPrefix: "/static", StripPrefix: "/static", Files: &FilesConfig{Root: root}},
			RouteConfig{Name: "rest", Respond: &RespondConfig{Status: 404}}),
	}
	f := newFront(t, cfg, frontOpts{})
	for _, p := range []string{"/api../admin/x", "/api%2e%2e/admin/x", "/api..", "/api./admin/x", "/api..;/admin/x", `/api..\admin/x`, "/api..%2Fadmin/x"} {
		wantNotForwarded(t, f.addr, rec, "GET "+p+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "400")
	}
	for _, p := range []string{"/static../private/a.txt", "/static%2e%2e/private/a.txt"} {
		st := statusOf(rawRoundTrip(t, f.addr, "GET "+p+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 3*time.Second))
		if !strings.Contains(st, " 400 ") {
			t.Errorf("GET %s: got %q, want 400", p, st)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{"/api/v1", "GET /v1 "},
		{"/apiv1/x", "GET /v1/x "},
		{"/api.../x", "GET /.../x "},
		{"/api..x/y", "GET /..x/y "},
	} {
		wantForwarded(t, f.addr, rec, "GET "+tc.path+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", tc.want)
	}
}

// TestEmptyPathRoutesAsSlash: an absolute-form target without a path
// ("http://h.test", "http://h.test?x") names the path "/" (RFC 9110
// §4.2.3, RFC 9112 §3.2.1), which the target gets: the routes of "/" take
// it, a path: / that denies it included.
func TestEmptyPathRoutesAsSlash(t *testing.T) {
	rec := newRawRecorder(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", rec.addr)},
		Sites: oneSite(
			RouteConfig{Name: "deny", Path: "/", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Name: "app", PathPrefix: "/", Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	for _, target := range []string{"http://example.test", "http://example.test?x=1", "HTTP://example.test:80"} {
		wantNotForwarded(t, f.addr, rec, "GET "+target+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "403")
	}
	// Without the route of "/", the path_prefix / route takes it.
	cfg.Sites[0].Routes = cfg.Sites[0].Routes[1:]
	f = newFront(t, cfg, frontOpts{})
	wantForwarded(t, f.addr, rec, "GET http://example.test?x=1 HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", "GET /?x=1 ")
}
