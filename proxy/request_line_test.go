package proxy

// What a client may put in a request line or its h2 pseudo-headers, and
// what of it reaches the target: a request line the target reads as the
// one the routes saw, and a host of the site's.

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// denyAdminConfig: a site that answers /admin/ itself (403) and sends the
// rest to the recording backend at addr.
func denyAdminConfig(addr string) Config {
	return Config{
		Upstreams: []UpstreamConfig{upstream("u", addr)},
		Sites: oneSite(
			RouteConfig{Name: "deny", PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
			RouteConfig{Upstream: "u"}),
	}
}

// backendGot returns the non-empty requests be recorded after the first n.
func backendGot(be *lenientBackend, n int) []string {
	var got []string
	for _, s := range be.all()[n:] {
		if s != "" {
			got = append(got, s)
		}
	}
	return got
}

// requestLine returns the first line of a recorded request.
func requestLine(raw string) string {
	l, _, _ := strings.Cut(raw, "\r\n")
	return l
}

// h2Send sends one request (fields, no body) on a new h2 connection to
// addr and returns the response status ("RST ..." when reset).
func h2Send(t *testing.T, addr string, fields ...string) string {
	t.Helper()
	fr, _ := rawH2(t, addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Block(fields...), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	st := h2Status(t, fr, 1)
	time.Sleep(100 * time.Millisecond) // let the backend record
	return st
}

// TestOpaqueTargetRefused: an absolute-form target with a scheme but no
// "//authority" ("x:admin/secret") parses as an opaque URI with no path:
// no path route would match it (the /admin/ deny route skipped), and the
// backend would get "GET admin/secret", which Werkzeug (Flask) routes as
// /admin/secret. It gets 400 (RFC 9112 §3.2.1: origin-form).
func TestOpaqueTargetRefused(t *testing.T) {
	be := newLenientBackend(t)
	f := newFront(t, denyAdminConfig(be.addr), frontOpts{})
	for _, target := range []string{"x:admin/secret", "http:admin/secret?q=1", "mailto:admin/secret"} {
		n := len(be.all())
		resp := rawRoundTrip(t, f.addr, "GET "+target+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 3*time.Second)
		if st := statusOf(resp); !strings.Contains(st, " 400 ") {
			t.Errorf("GET %s: got %q, want 400 (not origin-form)", target, st)
		}
		for _, got := range backendGot(be, n) {
			t.Errorf("GET %s reached the backend past the /admin/ deny route as %q", target, requestLine(got))
		}
	}
	// An absolute-form target with a path is served as before.
	n := len(be.all())
	resp := rawRoundTrip(t, f.addr, "GET http://example.test/page HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 3*time.Second)
	if st := statusOf(resp); !strings.Contains(st, " 200 ") {
		t.Errorf("GET http://example.test/page: got %q, want 200", st)
	}
	if got := backendGot(be, n); len(got) != 1 || requestLine(got[0]) != "GET /page HTTP/1.1" {
		t.Errorf("GET http://example.test/page reached the backend as %q, want one GET /page", got)
	}
}

// TestH2MethodMustBeToken: x/net/http2 takes any :method; one that is not
// a token ("GET /admin/secret?" with :path /public) would be routed by
// /public and written upstream as "GET /admin/secret? /public HTTP/1.1",
// which nginx serves as /admin/secret. It gets 400 (RFC 9110 §9.1).
func TestH2MethodMustBeToken(t *testing.T) {
	be := newLenientBackend(t)
	f := newFront(t, denyAdminConfig(be.addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	for _, method := range []string{"GET /admin/secret?", "GET\t/admin/secret?", "G@T", "POST /admin/secret?"} {
		n := len(be.all())
		if st := h2Send(t, f.addr, ":method", method, ":scheme", "http", ":authority", "example.test", ":path", "/public"); st != "400" {
			t.Errorf(":method %q: got %s, want 400 (method is not a token)", method, st)
		}
		for _, got := range backendGot(be, n) {
			t.Errorf(":method %q reached the backend as request line %q", method, requestLine(got))
		}
	}
	n := len(be.all())
	if st := h2Send(t, f.addr, ":method", "PROPFIND", ":scheme", "http", ":authority", "example.test", ":path", "/public"); st != "200" {
		t.Errorf(":method PROPFIND (a token): got %s, want 200", st)
	}
	if got := backendGot(be, n); len(got) != 1 || requestLine(got[0]) != "PROPFIND /public HTTP/1.1" {
		t.Errorf("PROPFIND reached the backend as %q", got)
	}
}

// TestH2PathWithSpaceRefused: a space or control byte in an h2 :path
// would reach the request line upstream ("GET /x?a HTTP/1.0 HTTP/1.1"),
// where backends that split it differently read another target or
// version than the proxy routed. It gets 400.
func TestH2PathWithSpaceRefused(t *testing.T) {
	be := newLenientBackend(t)
	f := newFront(t, denyAdminConfig(be.addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	for _, path := range []string{"/x?a HTTP/1.0", "/x?a /admin/secret", "/x?a\tb", "/x?a\x7fb"} {
		n := len(be.all())
		if st := h2Send(t, f.addr, ":method", "GET", ":scheme", "http", ":authority", "example.test", ":path", path); st != "400" && !strings.HasPrefix(st, "RST") {
			t.Errorf(":path %q: got %s, want 400", path, st)
		}
		for _, got := range backendGot(be, n) {
			t.Errorf(":path %q reached the backend as request line %q", path, requestLine(got))
		}
	}
}

// TestMissingHostGetsSiteHost: a request without a host (HTTP/1.1 with an
// empty Host, HTTP/1.0 without Host, h2 without :authority) reaches the
// target with the site's host (RFC 9112 §3.3), in Host and
// X-Forwarded-Host, never with the target's own address (which
// http.Request.Write falls back to).
func TestMissingHostGetsSiteHost(t *testing.T) {
	be := newLenientBackend(t)
	check := func(name string, n int) {
		t.Helper()
		got := backendGot(be, n)
		if len(got) != 1 {
			t.Errorf("%s: the backend got %d requests, want 1", name, len(got))
			return
		}
		lines := strings.Split(got[0], "\r\n")
		var host, xfh []string
		for _, l := range lines {
			k, v, _ := strings.Cut(l, ":")
			switch strings.ToLower(k) {
			case "host":
				host = append(host, strings.TrimSpace(v))
			case "x-forwarded-host":
				xfh = append(xfh, strings.TrimSpace(v))
			}
		}
		if len(host) != 1 || host[0] != "example.test" {
			t.Errorf("%s: the backend got Host %q, want example.test (the site's name; the target is %s)", name, host, be.addr)
		}
		if len(xfh) != 1 || xfh[0] != "example.test" {
			t.Errorf("%s: the backend got X-Forwarded-Host %q, want example.test", name, xfh)
		}
	}
	f := newFront(t, denyAdminConfig(be.addr), frontOpts{})
	for _, raw := range []string{
		"GET /page HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n",
		"GET /page HTTP/1.0\r\n\r\n",
	} {
		n := len(be.all())
		rawRoundTrip(t, f.addr, raw, 3*time.Second)
		check(strings.ReplaceAll(raw, "\r\n", " "), n)
	}
	h2 := newFront(t, denyAdminConfig(be.addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	n := len(be.all())
	h2Send(t, h2.addr, ":method", "GET", ":scheme", "http", ":path", "/page")
	check("h2 without :authority", n)
	// With SNI, the host the handshake named.
	sni := newFront(t, denyAdminConfig(be.addr), frontOpts{state: &frontdoor.ConnState{SNI: "example.test"}})
	n = len(be.all())
	rawRoundTrip(t, sni.addr, "GET /page HTTP/1.0\r\n\r\n", 3*time.Second)
	check("HTTP/1.0 without Host, SNI example.test", n)
	// An SNI with a final dot (the TLCP and TLS 1.3-SM stacks report it
	// as sent) names the host frontdoor chose the site by: the name
	// without it, as a Host with one is read (hostOnly).
	dot := newFront(t, denyAdminConfig(be.addr), frontOpts{state: &frontdoor.ConnState{SNI: "Example.Test."}})
	n = len(be.all())
	rawRoundTrip(t, dot.addr, "GET /page HTTP/1.0\r\n\r\n", 3*time.Second)
	check("HTTP/1.0 without Host, SNI Example.Test.", n)
	// A site without a name and no SNI: nothing to give the target.
	cfg := denyAdminConfig(be.addr)
	cfg.Sites[0].ServerNames = nil
	anon := newFront(t, cfg, frontOpts{})
	n = len(be.all())
	resp := rawRoundTrip(t, anon.addr, "GET /page HTTP/1.0\r\n\r\n", 3*time.Second)
	if st := statusOf(resp); !strings.Contains(st, " 400 ") {
		t.Errorf("HTTP/1.0 without Host to a site without a name: got %q, want 400", st)
	}
	for _, got := range backendGot(be, n) {
		t.Errorf("a request without a host to a site without a name reached the backend: %q", got)
	}
}

// TestAsteriskFormOnlyForOptions: the asterisk-form is for a server-wide
// OPTIONS only (RFC 9112 §3.2.4): "GET *" and the like get 400; OPTIONS *
// is forwarded.
func TestAsteriskFormOnlyForOptions(t *testing.T) {
	be := newLenientBackend(t)
	f := newFront(t, denyAdminConfig(be.addr), frontOpts{})
	for _, m := range []string{"GET", "POST", "DELETE"} {
		n := len(be.all())
		resp := rawRoundTrip(t, f.addr, m+" * HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 3*time.Second)
		if st := statusOf(resp); !strings.Contains(st, " 400 ") {
			t.Errorf("%s *: got %q, want 400", m, st)
		}
		for _, got := range backendGot(be, n) {
			t.Errorf("%s * reached the backend as %q", m, requestLine(got))
		}
	}
	h2 := newFront(t, denyAdminConfig(be.addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	n := len(be.all())
	if st := h2Send(t, h2.addr, ":method", "GET", ":scheme", "http", ":authority", "example.test", ":path", "*"); st == "200" {
		t.Errorf("h2 GET *: got 200, want 400")
	}
	for _, got := range backendGot(be, n) {
		t.Errorf("h2 GET * reached the backend as %q", requestLine(got))
	}
	n = len(be.all())
	resp := rawRoundTrip(t, f.addr, "OPTIONS * HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 3*time.Second)
	if st := statusOf(resp); !strings.Contains(st, " 200 ") {
		t.Errorf("OPTIONS *: got %q, want 200", st)
	}
	if got := backendGot(be, n); len(got) != 1 || requestLine(got[0]) != "OPTIONS * HTTP/1.1" {
		t.Errorf("OPTIONS * reached the backend as %q, want one OPTIONS * HTTP/1.1", got)
	}
	// An absolute-form OPTIONS without path or query is the server-wide
	// one: the last proxy sends it as OPTIONS * (§3.2.4). With a query,
	// or another method, the empty path is "/".
	for target, want := range map[string]string{
		"OPTIONS http://example.test":     "OPTIONS * HTTP/1.1",
		"OPTIONS http://example.test?x=1": "OPTIONS /?x=1 HTTP/1.1",
		"OPTIONS http://example.test/":    "OPTIONS / HTTP/1.1",
		"GET http://example.test":         "GET / HTTP/1.1",
	} {
		n = len(be.all())
		resp := rawRoundTrip(t, f.addr, target+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 3*time.Second)
		if st := statusOf(resp); !strings.Contains(st, " 200 ") {
			t.Errorf("%s: got %q, want 200", target, st)
		}
		if got := backendGot(be, n); len(got) != 1 || requestLine(got[0]) != want {
			t.Errorf("%s reached the backend as %q, want one %s", target, got, want)
		}
	}
}

// TestClientAddressAndCertHeadersFromClientsRemoved: headers backends read
// as a front proxy's account of the client's address or certificate
// (PHP's get_client_ip idiom, WebLogic, Tomcat's SSLValve, Envoy, Traefik,
// IIS ARR) do not pass from an untrusted client.
func TestClientAddressAndCertHeadersFromClientsRemoved(t *testing.T) {
	be := newLenientBackend(t)
	f := newFront(t, denyAdminConfig(be.addr), frontOpts{})
	forged := []string{"Client-Ip", "Wl-Proxy-Client-Ip", "Proxy-Client-Ip", "X-Forwarded", "Forwarded-For",
		"ssl_client_cert", "ssl_cipher", "ssl_session_id", "X-Forwarded-Client-Cert", "X-Forwarded-Tls-Client-Cert", "X-Arr-Clientcert"}
	var b strings.Builder
	b.WriteString("GET /page HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n")
	for _, k := range forged {
		b.WriteString(k + ": 6.6.6.6\r\n")
	}
	b.WriteString("\r\n")
	n := len(be.all())
	rawRoundTrip(t, f.addr, b.String(), 3*time.Second)
	got := backendGot(be, n)
	if len(got) != 1 {
		t.Fatalf("backend got %d requests, want 1", len(got))
	}
	for _, l := range strings.Split(got[0], "\r\n") {
		for _, k := range forged {
			if strings.HasPrefix(strings.ToLower(l), strings.ToLower(k)+":") {
				t.Errorf("a client's %s reached the backend: %q", k, l)
			}
		}
	}
}

// TestAsteriskFormOwnRoutes: OPTIONS * (RFC 9112 §3.2.4) asks about the
// server, not a resource: a redirect route that takes it answers it
// itself (RFC 9110 §9.3.7: 200, Content-Length 0, Allow with the methods
// it redirects), where it redirected to "{host}*" or "/*"; OPTIONS of a
// path is still redirected. A files route refuses it as it refuses
// OPTIONS (405 with Allow, §15.5.6), and not as a path to a file "*"; a
// respond route gives its one answer. Over HTTP/1.1 and HTTP/2.
func TestAsteriskFormOwnRoutes(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "*"), []byte("a file named star"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		route  RouteConfig
		status string
		allow  string
	}{
		{"redirect", RouteConfig{Redirect: &RedirectConfig{To: "https://{host}{uri}", Status: 301}}, "200", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"},
		{"redirect on site", RouteConfig{Redirect: &RedirectConfig{To: "/new{path}"}}, "200", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"},
		{"files", RouteConfig{Files: &FilesConfig{Root: root}}, "405", "GET, HEAD"},
		{"respond", RouteConfig{Respond: &RespondConfig{Status: 403, Body: "no"}}, "403", ""},
	} {
		cfg := Config{Sites: oneSite(tc.route)}
		f := newFront(t, cfg, frontOpts{})
		resp := rawRoundTrip(t, f.addr, "OPTIONS * HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", testwait.Bound(3*time.Second))
		res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(resp)), &http.Request{Method: "OPTIONS"})
		if err != nil {
			t.Errorf("%s: OPTIONS *: %v in %q", tc.name, err, resp)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		if strconv.Itoa(res.StatusCode) != tc.status || res.Header.Get("Allow") != tc.allow || res.Header.Get("Location") != "" || tc.status == "200" && (len(b) != 0 || res.Header.Get("Content-Length") != "0") || strings.Contains(string(b), "star") {
			t.Errorf("%s: OPTIONS *: %d, Allow %q, Location %q, Content-Length %q, %q; want %s, Allow %q, no Location, no content for a 200, not the file",
				tc.name, res.StatusCode, res.Header.Get("Allow"), res.Header.Get("Location"), res.Header.Get("Content-Length"), b, tc.status, tc.allow)
		}
		h2 := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
		if st := h2Send(t, h2.addr, ":method", "OPTIONS", ":scheme", "https", ":authority", "example.test", ":path", "*"); st != tc.status {
			t.Errorf("%s: h2 OPTIONS *: %s, want %s", tc.name, st, tc.status)
		}
		if tc.route.Redirect != nil {
			resp := rawRoundTrip(t, f.addr, "OPTIONS /x HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", testwait.Bound(3*time.Second))
			if !strings.Contains(resp, "\r\nLocation: ") {
				t.Errorf("%s: OPTIONS /x not redirected: %q", tc.name, resp)
			}
		}
	}
}
