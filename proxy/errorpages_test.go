package proxy

import (
	"io"
	"net/http"
	"testing"
)

// TestErrorPages: a site's error pages replace the body of the answers
// the proxy itself gives with their statuses (no route, no target
// answered, a files route's 404), sent as text/html with the status and
// fields (Allow) the answer has; other statuses keep their line of text,
// and a target's own error goes as it is.
func TestErrorPages(t *testing.T) {
	target := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the target's own 404", http.StatusNotFound)
	}))
	sites := oneSite(
		RouteConfig{Path: "/down", Upstream: "down"},
		RouteConfig{Path: "/up", Upstream: "u"},
		RouteConfig{PathPrefix: "/files/", Files: &FilesConfig{Root: t.TempDir()}},
		RouteConfig{Path: "/only-get", Files: &FilesConfig{Root: t.TempDir()}})
	sites[0].ErrorPages = map[int][]byte{404: []byte("<h1>not here</h1>"), 502: []byte("<h1>back soon</h1>"), 405: []byte("<h1>no</h1>")}
	cfg := Config{Upstreams: []UpstreamConfig{upstream("down", "127.0.0.1:1"), upstream("u", target)}, Sites: sites}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, tc := range []struct {
		method, path string
		status       int
		body, ctype  string
	}{
		{"GET", "/nothing", 404, "<h1>not here</h1>", "text/html; charset=utf-8"},
		{"GET", "/files/missing", 404, "<h1>not here</h1>", "text/html; charset=utf-8"},
		{"GET", "/down", 502, "<h1>back soon</h1>", "text/html; charset=utf-8"},
		{"POST", "/only-get", 405, "<h1>no</h1>", "text/html; charset=utf-8"},
		{"GET", "/up", 404, "the target's own 404\n", "text/plain; charset=utf-8"},
	} {
		req, _ := http.NewRequest(tc.method, f.url+tc.path, nil)
		req.Host = "example.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || string(b) != tc.body || res.Header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s %s: %d %q (%s), want %d %q (%s)", tc.method, tc.path, res.StatusCode, b, res.Header.Get("Content-Type"), tc.status, tc.body, tc.ctype)
		}
		if tc.status == 405 && res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("405 with a page: Allow %q", res.Header.Get("Allow"))
		}
	}
}

// TestErrorPagesCharset: a page that is not UTF-8 (a portal's GBK page
// with its <meta charset="gbk">) goes as text/html without a charset, so
// that its own declaration decides, as nginx sends it; a header's
// charset=utf-8 would override the page's (HTML's encoding sniffing puts
// the transport's first) and garble it. A UTF-8 page keeps the charset.
func TestErrorPagesCharset(t *testing.T) {
	gbk := []byte("<meta charset=\"gbk\"><h1>\xd2\xb3\xc3\xe6\xb2\xbb\xb4\xe6\xd4\xda</h1>") // 页面不存在
	sites := oneSite(RouteConfig{Path: "/down", Upstream: "down"})
	sites[0].ErrorPages = map[int][]byte{404: gbk, 502: []byte("<h1>页面暂时无法访问</h1>")}
	cfg := Config{Upstreams: []UpstreamConfig{upstream("down", "127.0.0.1:1")}, Sites: sites}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, tc := range []struct {
		path, ctype string
		page        []byte
	}{
		{"/nothing", "text/html", gbk},
		{"/down", "text/html; charset=utf-8", sites[0].ErrorPages[502]},
	} {
		status, body, h := get(t, c, f.url+tc.path, "Host", "example.test")
		if body != string(tc.page) || h.Get("Content-Type") != tc.ctype {
			t.Errorf("%s: %d %q as %q, want the page as %q", tc.path, status, body, h.Get("Content-Type"), tc.ctype)
		}
	}
}
