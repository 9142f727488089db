package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPathRegex: a route with PathRegex matches the paths in which its
// expression finds a match (unanchored, the query not included), after
// the path's normalisation, as path_prefix does; in letter case unless
// the site has CaseInsensitivePaths; a path whose ";params" would route it
// elsewhere is refused as for the other matchers.
func TestPathRegex(t *testing.T) {
	routes := []RouteConfig{
		{PathRegex: `\.(css|js)$`, Respond: &RespondConfig{Status: 200, Body: "static"}},
		{PathRegex: `^/api/v[0-9]+/`, Respond: &RespondConfig{Status: 200, Body: "api"}},
		{PathPrefix: "/", Respond: &RespondConfig{Status: 200, Body: "rest"}},
	}
	folded := append([]RouteConfig(nil), routes...)
	cfg := Config{Sites: []SiteConfig{
		{Name: "s", ServerNames: []string{"example.test"}, Routes: routes},
		{Name: "i", ServerNames: []string{"fold.test"}, Routes: folded, CaseInsensitivePaths: true},
	}}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, tc := range []struct {
		host, target string
		status       int
		body         string
	}{
		{"example.test", "/a.css", 200, "static"},
		{"example.test", "/deep/b.js?v=1", 200, "static"},
		{"example.test", "/a.css?x=.png", 200, "static"},
		{"example.test", "/a.cssx", 200, "rest"},
		{"example.test", "/x.png?f=a.css", 200, "rest"},
		{"example.test", "/A.CSS", 200, "rest"},
		{"example.test", "/api/v2/users", 200, "api"},
		{"example.test", "/api/vx/users", 200, "rest"},
		{"example.test", "/x/api/v2/", 200, "rest"},
		{"example.test", "/a/../api/v3/", 200, "api"},
		{"example.test", "//api/v3/", 200, "api"},
		{"example.test", "/secret;.css", 400, ""},
		{"fold.test", "/A.CSS", 200, "static"},
		{"fold.test", "/API/V2/x", 200, "api"},
	} {
		req, _ := http.NewRequest("GET", f.url+tc.target, nil)
		req.Host = tc.host
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || tc.body != "" && string(b) != tc.body {
			t.Errorf("%s %s: %d %q, want %d %q", tc.host, tc.target, res.StatusCode, b, tc.status, tc.body)
		}
	}
}

// TestPathRegexRefused: an expression RE2 does not take, one too long,
// or one beside path or path_prefix is refused when the proxy is built.
func TestPathRegexRefused(t *testing.T) {
	for _, rc := range []RouteConfig{
		{PathRegex: `(a`},
		{PathRegex: `(?=x)`},
		{PathRegex: strings.Repeat("a", MaxPathRegexLen+1)},
		{PathRegex: `^/x`, PathPrefix: "/x"},
		{PathRegex: `^/x`, Path: "/x"},
	} {
		rc.Respond = &RespondConfig{Status: 200}
		if _, err := New(Config{Sites: oneSite(rc)}, NopObserver{}, testLogger(t)); err == nil {
			t.Errorf("path_regex %.20q (path %q, path_prefix %q) accepted", rc.PathRegex, rc.Path, rc.PathPrefix)
		}
	}
	if got := RouteLabel(&RouteConfig{PathRegex: `\.php$`}); got != `~\.php$` {
		t.Errorf("label %q", got)
	}
}

// TestPathRegexFoldsAsPrefix: on a site with CaseInsensitivePaths a
// path_regex matches the paths a path_prefix of the same text does, those
// whose letters match upper-cased as Windows compares names: "ı" (dotless
// i) is 'I' upper-cased, so /admın/ is /ADMIN/ to IIS, and a regex route
// that denies /admin/ takes it as the prefix route does.
func TestPathRegexFoldsAsPrefix(t *testing.T) {
	for _, deny := range []RouteConfig{
		{PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
		{PathRegex: `^/admin/`, Respond: &RespondConfig{Status: 403, Body: "no"}},
	} {
		cfg := Config{Sites: oneSite(deny, RouteConfig{Respond: &RespondConfig{Status: 200, Body: "rest"}})}
		cfg.Sites[0].CaseInsensitivePaths = true
		f := newFront(t, cfg, frontOpts{})
		c := testClient(t)
		for _, target := range []string{"/ADMIN/x", "/adm%C4%B1n/x", "/adm\u0131n/x"} {
			req, _ := http.NewRequest("GET", f.url+"/", nil)
			req.URL.Opaque = target
			req.Host = "example.test"
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 403 {
				t.Errorf("route %s, %s: %d %q, want 403", RouteLabel(&deny), target, res.StatusCode, b)
			}
		}
	}
}
