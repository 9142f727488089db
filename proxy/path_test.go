package proxy

import (
	"bufio"
	"io"
	"net/http"
	"sync"
	"testing"
)

func TestNormalPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/b/", "/a/b/"},
		{"/.well-known/x", "/.well-known/x"},
		{"/a/..b/.c", "/a/..b/.c"},
		{"/x/../admin", "/admin"},
		{"/x/../admin/", "/admin/"},
		{"/./admin", "/admin"},
		{"//admin//x", "/admin/x"},
		{"/admin/.", "/admin/"},
		{"/admin/x/..", "/admin/"},
		{"/..", "/"},
		{"/../../etc/passwd", "/etc/passwd"},
		{"*", "*"},
		{"", "/"}, // an absolute-form target without a path (RFC 9110 §4.2.3)
	} {
		got, changed := normalPath(tc.in)
		if got != tc.want || changed != (tc.in != tc.want) {
			t.Errorf("normalPath(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
		}
	}
}

// TestRoutesMatchNormalPath: a route that answers /admin/ itself (403)
// cannot be passed with dot segments, percent-encoded ones or repeated
// slashes, which a normalising backend would serve as /admin/...; what the
// backend gets is the normal path.
func TestRoutesMatchNormalPath(t *testing.T) {
	var mu sync.Mutex
	var got []string
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		io.WriteString(w, okResponse)
		return true
	})
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", b.addr())}, Sites: oneSite(
		RouteConfig{PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
		RouteConfig{PathPrefix: "/", Upstream: "u"},
	)}
	f := newFront(t, cfg, frontOpts{})
	for _, target := range []string{"/x/../admin/secret", "/./admin/secret", "//admin/secret", "/x/%2e%2e/admin/secret", "/x%2F..%2Fadmin/secret", "/admin/x/../secret", "/admin/."} {
		res, _, _ := rawExchange(t, f.addr, "GET "+target+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
		if res.StatusCode != 403 {
			t.Errorf("GET %s: %d, want 403 from the /admin/ route", target, res.StatusCode)
		}
	}
	mu.Lock()
	if len(got) > 0 {
		t.Errorf("the backend got %v", got)
	}
	got = nil
	mu.Unlock()
	if res, _, _ := rawExchange(t, f.addr, "GET /a/./b/../c//d?q=1 HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n"); res.StatusCode != 200 {
		t.Fatalf("ordinary route: %d", res.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "/a/c/d?q=1" {
		t.Errorf("the backend got %v, want [/a/c/d?q=1]", got)
	}
}
