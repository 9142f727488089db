package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// compressBackend answers with the query's content type (ct), length
// (n bytes of text, declared in Content-Length), status, ETag,
// Content-Encoding (ce), Cache-Control (cc), Vary and digests
// (Content-Digest cd, Repr-Digest rd, Digest dg, Content-MD5 md5).
func compressBackend(t *testing.T) string {
	return h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, _ := strconv.Atoi(q.Get("n"))
		body := strings.Repeat("gmproxy compresses text ", n/24+1)[:n]
		for _, f := range [][2]string{{"ct", "Content-Type"}, {"etag", "Etag"}, {"ce", "Content-Encoding"}, {"cc", "Cache-Control"}, {"vary", "Vary"},
			{"cd", "Content-Digest"}, {"rd", "Repr-Digest"}, {"dg", "Digest"}, {"md5", "Content-Md5"}} {
			if v := q.Get(f[0]); v != "" {
				w.Header().Set(f[1], v)
			}
		}
		if q.Get("ct") == "" {
			w.Header()["Content-Type"] = nil // not sniffed
		}
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		status := http.StatusOK
		if s := q.Get("status"); s != "" {
			status, _ = strconv.Atoi(s)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
}

// TestCompress: a route with compress sends the responses of the listed
// types gzip-encoded to a client that accepts gzip, with Vary:
// Accept-Encoding on both variants, no Content-Length or Accept-Ranges
// and a weak ETag on the encoded one; and leaves as they are the
// responses it must not touch. Over HTTP/1.1 (the target's head passed
// on as it came unless the route edits it) and HTTP/2.
func TestCompress(t *testing.T) {
	addr := compressBackend(t)
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(
		RouteConfig{PathPrefix: "/wild", Upstream: "u", Compress: &CompressConfig{Types: []string{"text/*"}}},
		RouteConfig{PathPrefix: "/all", Upstream: "u", Compress: &CompressConfig{Types: []string{"*/*"}}},
		RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		for _, tc := range []struct {
			name, query, accept string
			gzip, vary          bool
			method              string
			route               string // the route's path prefix; "": the default types
		}{
			{name: "html", query: "ct=text/html%3B+charset=utf-8&n=5000&etag=%22v1%22", accept: "gzip, deflate, br", gzip: true, vary: true},
			{name: "no accept-encoding", query: "ct=text/html&n=5000&etag=%22v1%22", vary: true},
			{name: "gzip refused", query: "ct=application/json&n=5000", accept: "gzip;q=0, *", vary: true},
			{name: "star", query: "ct=application/json&n=5000", accept: "br;q=1, *;q=0.5", gzip: true, vary: true},
			{name: "x-gzip", query: "ct=text/css&n=5000", accept: "x-gzip", gzip: true, vary: true},
			{name: "identity only", query: "ct=text/css&n=5000", accept: "identity", vary: true},
			{name: "short", query: "ct=text/html&n=100", accept: "gzip"},
			{name: "not listed", query: "ct=image/png&n=5000", accept: "gzip"},
			{name: "no content type", query: "n=5000", accept: "gzip"},
			{name: "already encoded", query: "ct=text/html&n=5000&ce=br", accept: "gzip"},
			{name: "no-transform", query: "ct=text/html&n=5000&cc=public,+no-transform", accept: "gzip"},
			{name: "partial", query: "ct=text/html&n=5000&status=206", accept: "gzip"},
			// A HEAD gets the fields its GET would (RFC 9110 §9.3.2).
			{name: "HEAD", query: "ct=text/html&n=5000&etag=%22v1%22", accept: "gzip", method: "HEAD", gzip: true, vary: true},
			{name: "HEAD, no accept-encoding", query: "ct=text/html&n=5000&etag=%22v1%22", method: "HEAD", vary: true},
			{name: "HEAD, short", query: "ct=text/html&n=100", accept: "gzip", method: "HEAD"},
			{name: "target's vary kept", query: "ct=text/html&n=5000&vary=Origin", accept: "gzip", gzip: true, vary: true},
			{name: "wildcard type", query: "ct=text/x-custom&n=5000", accept: "gzip", gzip: true, vary: true, route: "/wild"},
			// */* is every type, as nginx's gzip_types *; but what must
			// never be compressed still is not.
			{name: "every type", query: "ct=application/octet-stream&n=5000", accept: "gzip", gzip: true, vary: true, route: "/all"},
			{name: "every type: image", query: "ct=image/png&n=5000", accept: "gzip", gzip: true, vary: true, route: "/all"},
			{name: "every type: not gRPC", query: "ct=application/grpc&n=5000", accept: "gzip", route: "/all"},
			{name: "every type: not an event stream", query: "ct=text/event-stream&n=5000", accept: "gzip", route: "/all"},
			{name: "every type: not encoded twice", query: "ct=application/octet-stream&n=5000&ce=gzip", accept: "gzip", route: "/all"},
		} {
			path := tc.route + "/?"
			method := tc.method
			if method == "" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, f.url+path+tc.query, nil)
			req.Host = "example.test"
			if tc.accept != "" {
				req.Header.Set("Accept-Encoding", tc.accept)
			}
			res, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2 %v %s: %v", h2, tc.name, err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			name := tc.name
			if h2 {
				name += " (h2)"
			}
			n, _ := strconv.Atoi(req.URL.Query().Get("n"))
			vary := strings.Join(res.Header.Values("Vary"), ", ")
			if got := strings.Contains(vary, "Accept-Encoding"); got != tc.vary {
				t.Errorf("%s: Vary %q, want Accept-Encoding: %v", name, vary, tc.vary)
			}
			if tc.name == "target's vary kept" && !strings.Contains(vary, "Origin") {
				t.Errorf("%s: Vary %q lost the target's Origin", name, vary)
			}
			if !tc.gzip {
				if ce := res.Header.Get("Content-Encoding"); ce != req.URL.Query().Get("ce") {
					t.Errorf("%s: Content-Encoding %q, want the target's", name, ce)
				}
				if method == "GET" && len(raw) != n {
					t.Errorf("%s: %d bytes, want the target's %d as they came", name, len(raw), n)
				}
				if et := req.URL.Query().Get("etag"); et != "" && res.Header.Get("Etag") != et {
					t.Errorf("%s: ETag %q, want the target's %q", name, res.Header.Get("Etag"), et)
				}
				continue
			}
			if ce := res.Header.Get("Content-Encoding"); ce != "gzip" {
				t.Errorf("%s: Content-Encoding %q, want gzip", name, ce)
				continue
			}
			// A Content-Length, if any, is the encoding's (the server
			// may count a response the handler wrote whole).
			if cl := res.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(raw)) || res.Header.Get("Accept-Ranges") != "" {
				t.Errorf("%s: Content-Length %q, Accept-Ranges %q kept on the encoding", name, cl, res.Header.Get("Accept-Ranges"))
			}
			if et := req.URL.Query().Get("etag"); et != "" && res.Header.Get("Etag") != "W/"+et {
				t.Errorf("%s: ETag %q, want W/%s", name, res.Header.Get("Etag"), et)
			}
			if method == "HEAD" {
				if len(raw) != 0 {
					t.Errorf("%s: %d bytes of body", name, len(raw))
				}
				continue
			}
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Errorf("%s: not gzip: %v", name, err)
				continue
			}
			plain, err := io.ReadAll(zr)
			if err != nil || len(plain) != n || !strings.HasPrefix(string(plain), "gmproxy compresses text") {
				t.Errorf("%s: %d bytes decoded (%v), want the target's %d", name, len(plain), err, n)
			}
			if len(raw) >= n/4 {
				t.Errorf("%s: %d bytes for %d of repeated text: not compressed", name, len(raw), n)
			}
		}
	}
}

// TestCompressDigestKept: a response whose digest covers its content as
// it is (Content-Digest, Repr-Digest, RFC 9530 §1.2: tied to its
// Content-Encoding; Digest, Content-MD5) goes as it came, its digest
// still true: gzip-encoded, the client checking it would refuse the
// response as corrupt.
func TestCompressDigestKept(t *testing.T) {
	addr := compressBackend(t)
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		for _, d := range [][2]string{
			{"cd", "Content-Digest"}, {"rd", "Repr-Digest"}, {"dg", "Digest"}, {"md5", "Content-Md5"},
		} {
			res, b := getAccepting(t, c, f.url+"/?ct=text/html&n=5000&"+d[0]+"=sha-256%3D%3AX48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE%3D%3A", "gzip")
			if ce := res.Header.Get("Content-Encoding"); ce != "" || len(b) != 5000 || res.Header.Get(d[1]) == "" {
				t.Errorf("h2 %v, %s: Content-Encoding %q, %d bytes, %s %q; want the target's 5000 bytes as they came, with their digest",
					h2, d[1], ce, len(b), d[1], res.Header.Get(d[1]))
			}
		}
	}
}

// TestCompressEncodingEditRefused: a route that compresses and labels its
// responses with a Content-Encoding of its own (response_headers set or
// add, for a target's .svgz or gzip file) is refused: those responses
// would be gzip-encoded again under the one label. Removing the target's
// label is no such contradiction.
func TestCompressEncodingEditRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits HeaderOps
		ok    bool
	}{
		{"set", HeaderOps{Set: map[string]string{"content-encoding": "gzip"}}, false},
		{"add", HeaderOps{Add: map[string]string{"Content-Encoding": "gzip"}}, false},
		{"remove", HeaderOps{Remove: []string{"Content-Encoding"}}, true},
		{"another field", HeaderOps{Set: map[string]string{"Cache-Control": "no-cache"}}, true},
	} {
		cfg := proxyTo("127.0.0.1:1")
		cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}, ResponseHeaders: tc.edits})
		p, err := New(cfg, nil, testLogger(t))
		if p != nil {
			p.Close()
		}
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrCompressedEncodingEdit) {
			t.Errorf("%s: New: %v, want refused: %v", tc.name, err, !tc.ok)
		}
	}
}

// TestCompressResetContent: a 205 goes without content (RFC 9110
// §15.3.6: a server MUST NOT generate any), though its target framed it
// with an empty chunked body of a listed type: encoded, gzip's header and
// trailer would be content.
func TestCompressResetContent(t *testing.T) {
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 205 Reset Content\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		}
	})
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		res, b := getAccepting(t, c, f.url+"/", "gzip")
		if res.StatusCode != http.StatusResetContent || len(b) != 0 || res.Header.Get("Content-Encoding") != "" {
			t.Errorf("h2 %v: %d, Content-Encoding %q, %d bytes of content; want 205 without any", h2, res.StatusCode, res.Header.Get("Content-Encoding"), len(b))
		}
	}
}

// TestCompressStream: a streamed response (no Content-Length) is
// compressed as it comes: what the target flushed reaches the client,
// decodable, before the target ends the response.
func TestCompressStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // before the front closes: its handler gives its place back
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "first event\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "last event\n")
	}))
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{MinLength: 1}})
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	c.Timeout = testwait.Bound(5 * time.Second)
	req, _ := http.NewRequest("GET", f.url+"/", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", res.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("first event\n"))
	if _, err := io.ReadFull(zr, buf); err != nil || string(buf) != "first event\n" {
		t.Fatalf("first event %q, %v: want it before the target's end", buf, err)
	}
}

// TestCompressBusy: past maxCompressing responses being compressed, a
// response goes uncompressed (still varying with Accept-Encoding), and a
// compressed one gives its place back when it ends.
func TestCompressBusy(t *testing.T) {
	addr := compressBackend(t)
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	get := func() string {
		res, _ := getAccepting(t, c, f.url+"/?ct=text/html&n=5000", "gzip")
		if !strings.Contains(res.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("Vary %q, want Accept-Encoding", res.Header.Get("Vary"))
		}
		return res.Header.Get("Content-Encoding")
	}
	// The places are the process's: a response of an earlier test may
	// still hold one as its handler ends.
	deadline := time.Now().Add(testwait.Bound(5 * time.Second))
	for compressing.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d places still taken before the test", compressing.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	old := maxCompressing
	t.Cleanup(func() { maxCompressing = old })
	maxCompressing = 1
	for i := range 3 {
		if ce := get(); ce != "gzip" {
			t.Fatalf("request %d: Content-Encoding %q; want gzip, the one place given back after each", i, ce)
		}
	}
	maxCompressing = 0
	if ce := get(); ce != "" {
		t.Fatalf("Content-Encoding %q with no place left, want none", ce)
	}
}

// TestAcceptsGzip: Accept-Encoding read as RFC 9110 §12.5.3 says.
func TestAcceptsGzip(t *testing.T) {
	for v, want := range map[string]bool{
		"":                       false,
		"gzip":                   true,
		"GZIP;Q=0.1":             true,
		"gzip;q=0":               false,
		"gzip; q=0.000":          false,
		"deflate, br":            false,
		"*":                      true,
		"*;q=0":                  false,
		"gzip;q=0, *":            false,
		"*, gzip;q=0":            false,
		"br, x-gzip":             true,
		"identity, *;q=0":        false,
		"gzip;level=1":           true,
		"gzip;q=nonsense":        false,
		"deflate, gzip;q=1.0, *": true,
	} {
		if got := acceptsGzip(http.Header{"Accept-Encoding": {v}}); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// TestCompressConfigRefused: a level or media type gzip cannot take is
// refused when the proxy is made.
func TestCompressConfigRefused(t *testing.T) {
	for _, c := range []CompressConfig{{Level: 10}, {Level: -1}, {Types: []string{"text"}}, {Types: []string{"/html"}},
		{Types: []string{"*"}}, {Types: []string{"*/html"}}} {
		if _, err := newCompressor(&c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// FuzzAcceptsGzip: any Accept-Encoding is read without a panic, and
// white space around its members does not change the answer.
func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0, *", "*;q=0.5", "x-gzip;q=1.0", "br;q=1, deflate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := acceptsGzip(http.Header{"Accept-Encoding": {v}})
		spaced := strings.ReplaceAll(v, ",", " , ")
		if acceptsGzip(http.Header{"Accept-Encoding": {spaced}}) != got {
			t.Errorf("%q and %q read differently", v, spaced)
		}
	})
}

// TestCompressFieldLines: a field the target sends on several lines is
// one list (RFC 9110 §5.3): a no-transform on the second Cache-Control
// line keeps the response as it came, as on the first.
func TestCompressFieldLines(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Add("Cache-Control", "public")
		w.Header().Add("Cache-Control", "no-transform")
		w.Header().Set("Content-Length", "5000")
		io.WriteString(w, strings.Repeat("x", 5000))
	}))
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		res, raw := getAccepting(t, c, f.url+"/", "gzip")
		if ce := res.Header.Get("Content-Encoding"); ce != "" || len(raw) != 5000 {
			t.Errorf("h2 %v: Content-Encoding %q, %d bytes: want the no-transform response as it came", h2, ce, len(raw))
		}
	}
}

// TestCompressNotModified: the client that holds the encoded variant
// revalidates it with the weak ETag it got; the target, comparing weakly
// (RFC 9110 §13.1.2), answers 304 with its strong one. The 304 carries
// the ETag and Vary a 200 to that request would (RFC 9110 §15.4.5): the
// weak one, else the client's cache would give the encoded bytes the
// identity's strong validator. Every 304 carries Vary: Accept-Encoding,
// as the 200 to either variant does, the identity's too; one revalidated
// by If-Modified-Since alone, to a client taking gzip, the encoding's
// weak ETag (its 200 would have been the encoding); one to HEAD as one to
// GET; one whose fields rule out the encoding (no-transform, a coding)
// neither.
func TestCompressNotModified(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Etag", `"v1"`)
		if cc := r.URL.Query().Get("cc"); cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		if ce := r.URL.Query().Get("ce"); ce != "" {
			w.Header().Set("Content-Encoding", ce) // ServeContent drops it from a 304
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Header.Get("If-Modified-Since") != "" {
			w.WriteHeader(http.StatusNotModified) // net/http's ServeContent keeps no Content-Type on a 304
			return
		}
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(strings.Repeat("x", 5000)))
	}))
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		for _, tc := range []struct {
			name, method, query, accept, inm, ims, etag string
			vary                                        bool
		}{
			{name: "encoded variant", accept: "gzip", inm: `W/"v1"`, etag: `W/"v1"`, vary: true},
			{name: "identity variant", accept: "gzip", inm: `"v1"`, etag: `"v1"`, vary: true},
			{name: "no gzip now", inm: `W/"v1"`, etag: `"v1"`, vary: true},
			{name: "HEAD, encoded variant", method: "HEAD", accept: "gzip", inm: `W/"v1"`, etag: `W/"v1"`, vary: true},
			{name: "by date, gzip", accept: "gzip", ims: "Mon, 07 Dec 2026 00:00:00 GMT", etag: `W/"v1"`, vary: true},
			{name: "by date, no gzip", ims: "Mon, 07 Dec 2026 00:00:00 GMT", etag: `"v1"`, vary: true},
			{name: "no-transform", query: "?cc=no-transform", accept: "gzip", inm: `W/"v1"`, etag: `"v1"`},
			{name: "already encoded", query: "?ce=br", accept: "gzip", inm: `W/"v1"`, etag: `"v1"`},
		} {
			method := tc.method
			if method == "" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, f.url+"/"+tc.query, nil)
			req.Host = "example.test"
			if tc.accept != "" {
				req.Header.Set("Accept-Encoding", tc.accept)
			}
			if tc.inm != "" {
				req.Header.Set("If-None-Match", tc.inm)
			}
			if tc.ims != "" {
				req.Header.Set("If-Modified-Since", tc.ims)
			}
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			vary := strings.Contains(res.Header.Get("Vary"), "Accept-Encoding")
			if res.StatusCode != http.StatusNotModified || res.Header.Get("Etag") != tc.etag || vary != tc.vary {
				t.Errorf("h2 %v, %s: %d, ETag %q, Vary %q; want 304, ETag %s, Vary Accept-Encoding %v", h2, tc.name, res.StatusCode, res.Header.Get("Etag"), res.Header.Get("Vary"), tc.etag, tc.vary)
			}
		}
	}
}

// TestNotModifiedVaries: a 304 varies unless its fields rule out the
// encoding; a Content-Type (net/http's servers drop it from a 304, others
// keep it) of a type not listed does.
func TestNotModifiedVaries(t *testing.T) {
	z, _ := newCompressor(&CompressConfig{})
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"Etag": {`"v"`}}, true},
		{http.Header{"Content-Type": {"text/html; charset=utf-8"}}, true},
		{http.Header{"Content-Type": {"image/png"}}, false},
		{http.Header{"Content-Encoding": {"br"}}, false},
		{http.Header{"Cache-Control": {"max-age=1, no-transform"}}, false},
		{http.Header{"Content-Digest": {"sha-256=:x:"}}, false},
	} {
		if got := z.notModifiedVaries(&http.Response{StatusCode: http.StatusNotModified, Header: tc.h}); got != tc.want {
			t.Errorf("304 with %v: %v, want %v", tc.h, got, tc.want)
		}
	}
}

// TestRevalidatesEncoding: If-None-Match read as a list of entity tags,
// malformed ones without a panic.
func TestRevalidatesEncoding(t *testing.T) {
	res := &http.Response{StatusCode: http.StatusNotModified, Header: http.Header{"Etag": {`"v,1"`}}}
	for inm, want := range map[string]bool{
		`W/"v,1"`:              true,
		`"a", W/"v,1"`:         true,
		`W/"v,1", "v,1"`:       false,
		`"v,1"`:                false,
		`W/"v"`:                false,
		`*`:                    false,
		`W/`:                   false,
		`W/"`:                  false,
		`"`:                    false,
		`W/"v,1`:               false,
		"\t,W/\"v,1\"":         true,
		`W/"x" W/"v,1"`:        true,
		`W/W/"v,1"`:            false,
		`"a",,W/"v,1",`:        true,
		`W/"v,1";q=1, garbage`: true,
	} {
		r := &http.Request{Header: http.Header{"Accept-Encoding": {"gzip"}, "If-None-Match": {inm}}}
		if got := revalidatesEncoding(r, res); got != want {
			t.Errorf("If-None-Match %q: %v, want %v", inm, got, want)
		}
	}
}

// TestCompressPerConnection: one client connection holds at most
// maxCompressingPerConn of the places: a second response compressed at
// once on the same HTTP/2 connection goes uncompressed, while another
// connection still gets gzip; the place comes back when the first ends.
// An event stream is never compressed (it would hold a place for as
// long as its page is open), even where text/* lists it.
func TestCompressPerConnection(t *testing.T) {
	release := make(chan struct{})
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("ct"))
		io.WriteString(w, strings.Repeat("event data ", 200))
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("hold") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	old := maxCompressingPerConn
	t.Cleanup(func() { maxCompressingPerConn = old })
	maxCompressingPerConn = 1
	cfg := proxyTo(addr)
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{Types: []string{"text/*"}}})
	f, c := frontFor(t, cfg, true)
	other := h2cClient(t)
	open := func(c *http.Client, query string) *http.Response {
		req, _ := http.NewRequest("GET", f.url+"/?"+query, nil)
		req.Host = "example.test"
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	done := func(res *http.Response) string {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.Header.Get("Content-Encoding")
	}
	first := open(c, "ct=text/plain&hold=1")
	if ce := first.Header.Get("Content-Encoding"); ce != "gzip" {
		t.Fatalf("first: Content-Encoding %q, want gzip", ce)
	}
	if ce := done(open(c, "ct=text/plain")); ce != "" {
		t.Errorf("second on the same connection: Content-Encoding %q, want none (its one place is taken)", ce)
	}
	if ce := done(open(other, "ct=text/plain")); ce != "gzip" {
		t.Errorf("another connection: Content-Encoding %q, want gzip", ce)
	}
	close(release)
	done(first)
	if ce := done(open(c, "ct=text/plain")); ce != "gzip" {
		t.Errorf("after the first ended: Content-Encoding %q, want gzip (its place given back)", ce)
	}
	if ce := done(open(c, "ct=text/event-stream")); ce != "" {
		t.Errorf("event stream: Content-Encoding %q, want none", ce)
	}
}

// TestCompressNotHTTP10: an HTTP/1.0 request gets the response as the
// target sent it, as with nginx's gzip_http_version 1.1 (its caches
// ignore Vary).
func TestCompressNotHTTP10(t *testing.T) {
	cfg := proxyTo(compressBackend(t))
	cfg.Sites = oneSite(RouteConfig{Upstream: "u", Compress: &CompressConfig{}})
	f := newFront(t, cfg, frontOpts{})
	conn, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	io.WriteString(conn, "GET /?ct=text/html&n=5000 HTTP/1.0\r\nHost: example.test\r\nAccept-Encoding: gzip\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.Header.Get("Content-Encoding") != "" || len(b) != 5000 {
		t.Errorf("HTTP/1.0: Content-Encoding %q, %d bytes; want the target's 5000 as they came", res.Header.Get("Content-Encoding"), len(b))
	}
}

// getAccepting GETs url (Host example.test) from c with Accept-Encoding
// accept ("": none) and returns the response, its body read whole.
func getAccepting(t *testing.T, c *http.Client, url, accept string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "example.test"
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, b
}
