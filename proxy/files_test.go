package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// filesDir is a directory to serve: an index, a stylesheet, a file
// without a known extension, hidden files, a directory with an index and
// one without, links inside and out of it, a FIFO; and a secret beside it.
func filesDir(t *testing.T) string {
	base := t.TempDir()
	root := filepath.Join(base, "www")
	for name, text := range map[string]string{
		"index.html":      "<h1>home</h1>",
		"a.css":           "body { color: red }",
		"data.unknownext": "<script>alert(1)</script>",
		".env":            "SECRET=1",
		".git/config":     "[core]",
		"sub/index.html":  "sub home",
		"empty/x.txt":     "x",
		"../secret.txt":   "outside",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(root, "empty/x.txt"))
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(root, "out")); err != nil {
		t.Skip(err)
	}
	if err := os.Symlink("a.css", filepath.Join(root, "in.css")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestFiles: a files route serves its directory's files by path, with
// the type of their extension (never sniffed), an ETag and ranges; an
// index for a directory's path with its "/", a redirect to it without;
// and nothing outside the directory, hidden, or not a regular file.
func TestFiles(t *testing.T) {
	root := filesDir(t)
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/static/", StripPrefix: "/static", Files: &FilesConfig{Root: root}},
		RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	c.Timeout = testwait.Bound(5 * time.Second) // a FIFO opened would block
	for _, tc := range []struct {
		path, method string
		status       int
		body, ctype  string
	}{
		{path: "/", status: 200, body: "<h1>home</h1>", ctype: "text/html"},
		{path: "/index.html", status: 200, body: "<h1>home</h1>"},
		{path: "/a.css", status: 200, body: "body { color: red }", ctype: "text/css"},
		{path: "/static/a.css", status: 200, body: "body { color: red }"},
		{path: "/a.css", method: "HEAD", status: 200},
		{path: "/a.css", method: "POST", status: 405},
		{path: "/data.unknownext", status: 200, body: "<script>alert(1)</script>", ctype: "application/octet-stream"},
		{path: "/sub/", status: 200, body: "sub home"},
		{path: "/sub", status: 301},
		{path: "/empty/", status: 404},
		{path: "/nothing", status: 404},
		{path: "/.env", status: 404},
		{path: "/.git/config", status: 404},
		{path: "/static/.env", status: 404},
		{path: "/out", status: 404},
		{path: "/in.css", status: 200, body: "body { color: red }"},
		{path: "/fifo", status: 404},
		{path: "/%2e%2e/secret.txt", status: 404},
		{path: "/sub/%2e%2e/%2e%2e/secret.txt", status: 404},
	} {
		method := tc.method
		if method == "" {
			method = "GET"
		}
		req, _ := http.NewRequest(method, f.url+tc.path, nil)
		req.Host = "example.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, tc.path, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || tc.body != "" && string(b) != tc.body {
			t.Errorf("%s %s: %d %q, want %d %q", method, tc.path, res.StatusCode, b, tc.status, tc.body)
		}
		if tc.ctype != "" && res.Header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s: Content-Type %q, want %q", tc.path, res.Header.Get("Content-Type"), tc.ctype)
		}
		switch {
		case tc.status == 405 && res.Header.Get("Allow") != "GET, HEAD":
			t.Errorf("%s %s: Allow %q", method, tc.path, res.Header.Get("Allow"))
		case tc.status == 301 && res.Header.Get("Location") != tc.path+"/":
			t.Errorf("%s: Location %q, want %s/", tc.path, res.Header.Get("Location"), tc.path)
		case method == "HEAD" && (len(b) != 0 || res.ContentLength != int64(len("body { color: red }"))):
			t.Errorf("HEAD %s: %d bytes, Content-Length %d", tc.path, len(b), res.ContentLength)
		}
	}

	// Conditional and range requests against the ETag.
	status, _, h := get(t, c, f.url+"/a.css")
	etag := h.Get("Etag")
	if status != 200 || !strings.HasPrefix(etag, `"`) || h.Get("Last-Modified") == "" {
		t.Fatalf("ETag %q, Last-Modified %q", etag, h.Get("Last-Modified"))
	}
	if status, body, _ := get(t, c, f.url+"/a.css", "If-None-Match", etag); status != 304 || body != "" {
		t.Errorf("If-None-Match: %d %q, want 304", status, body)
	}
	if status, body, _ := get(t, c, f.url+"/a.css", "Range", "bytes=0-3"); status != 206 || body != "body" {
		t.Errorf("Range: %d %q, want 206 \"body\"", status, body)
	}
}

// TestFilesRawTraversal: a request target with ".." segments, as a
// client that does not clean its paths sends it, stays in the directory.
func TestFilesRawTraversal(t *testing.T) {
	root := filesDir(t)
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}
	f := newFront(t, cfg, frontOpts{})
	for _, target := range []string{"/../secret.txt", "/sub/../../secret.txt", "/./../secret.txt"} {
		conn, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		b, _ := io.ReadAll(res.Body)
		conn.Close()
		if strings.Contains(string(b), "outside") {
			t.Errorf("%s: served the file outside the directory: %d %q", target, res.StatusCode, b)
		}
	}
}

// TestFilesHidden: hidden: true serves dot files.
func TestFilesHidden(t *testing.T) {
	root := filesDir(t)
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Hidden: true, Index: "a.css"}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	if status, body, _ := get(t, c, f.url+"/.env"); status != 200 || body != "SECRET=1" {
		t.Errorf("/.env: %d %q, want it served", status, body)
	}
	if status, body, _ := get(t, c, f.url+"/"); status != 200 || body != "body { color: red }" {
		t.Errorf("/ with index a.css: %d %q", status, body)
	}
}

// TestFilesCaseInsensitiveStrip: on a site with case_insensitive_paths,
// strip_prefix is removed whatever its letter case, as on a route to an
// upstream: "/STATIC/a.css" is root/a.css, not root/STATIC/a.css.
func TestFilesCaseInsensitiveStrip(t *testing.T) {
	root := filesDir(t)
	sites := oneSite(RouteConfig{PathPrefix: "/static/", StripPrefix: "/static", Files: &FilesConfig{Root: root}})
	sites[0].CaseInsensitivePaths = true
	f := newFront(t, Config{Sites: sites}, frontOpts{})
	c := testClient(t)
	for _, p := range []string{"/static/a.css", "/STATIC/a.css", "/Static/a.css"} {
		if status, body, _ := get(t, c, f.url+p, "Host", "example.test"); status != 200 || body != "body { color: red }" {
			t.Errorf("%s: %d %q, want root/a.css", p, status, body)
		}
	}
	if status, _, h := get(t, c, f.url+"/STATIC/sub", "Host", "example.test"); status != 301 || h.Get("Location") != "/STATIC/sub/" {
		t.Errorf("/STATIC/sub: %d to %q, want 301 to /STATIC/sub/", status, h.Get("Location"))
	}
}

// TestFilesRootClosedOnError: when New fails after a files route opened
// its directory (a later route or site does not compile, a duplicate site),
// the directory is closed, not left open until a collection finds it: a
// reload retried against a broken configuration would pile them up.
func TestFilesRootClosedOnError(t *testing.T) {
	for name, sites := range map[string]func(files RouteConfig) []SiteConfig{
		"later route": func(files RouteConfig) []SiteConfig {
			return oneSite(files, RouteConfig{PathPrefix: "/x/", Upstream: "nope"})
		},
		"later site": func(files RouteConfig) []SiteConfig {
			return append(oneSite(files), SiteConfig{Name: "t", ServerNames: []string{"t.test"}, Routes: []RouteConfig{{Upstream: "nope"}}})
		},
		"duplicate site": func(files RouteConfig) []SiteConfig { return append(oneSite(files), oneSite(files)...) },
	} {
		root := filesDir(t)
		cfg := Config{Sites: sites(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}
		if p, err := New(cfg, nil, testLogger(t)); err == nil {
			p.Close()
			t.Fatalf("%s: New succeeded", name)
		}
		if fds := openDirFDs(t, root); len(fds) > 0 {
			t.Errorf("%s: %s still open (fds %v)", name, root, fds)
		}
	}
}

// openDirFDs lists the process's descriptors open on dir (Linux).
func openDirFDs(t *testing.T, dir string) []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	var fds []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == dir {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// TestFilesSwappedForFIFO: a file replaced by a FIFO between its lookup
// and its opening (a deploy, a local user) is refused, not opened: the
// open would wait for a writer, holding the request and its goroutine
// for as long as none comes.
func TestFilesSwappedForFIFO(t *testing.T) {
	root := filesDir(t)
	swap := filepath.Join(root, "swap.txt")
	if err := os.WriteFile(swap, []byte("file"), 0o644); err != nil {
		t.Fatal(err)
	}
	testHookFileOpen = func(name string) {
		if name == "swap.txt" {
			os.Remove(swap)
			if err := syscall.Mkfifo(swap, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() {
		testHookFileOpen = nil
		// A reader waiting in open(2) goes on once a writer opens.
		if w, err := os.OpenFile(swap, os.O_RDWR, 0); err == nil {
			w.Close()
		}
	})
	f := newFront(t, Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}, frontOpts{})
	c := testClient(t)
	c.Timeout = testwait.Bound(5 * time.Second) // the FIFO opened blocks
	req, _ := http.NewRequest("GET", f.url+"/swap.txt", nil)
	req.Host = "example.test"
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET /swap.txt (a FIFO by then): %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("GET /swap.txt (a FIFO by then): %d, want 404", res.StatusCode)
	}
}

// TestFilesFileWithSlash: a path ending in "/" names a directory (its
// index); a file's name with a "/" after it is 404, as open(2) and nginx
// have it, not the file under a URL whose relative links resolve
// elsewhere.
func TestFilesFileWithSlash(t *testing.T) {
	root := filesDir(t)
	f := newFront(t, Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}, frontOpts{})
	c := testClient(t)
	for _, p := range []string{"/a.css/", "/sub/index.html/", "/in.css/"} {
		if status, body, _ := get(t, c, f.url+p, "Host", "example.test"); status != 404 {
			t.Errorf("%s: %d %q, want 404", p, status, body)
		}
	}
	if status, body, _ := get(t, c, f.url+"/sub/", "Host", "example.test"); status != 200 || body != "sub home" {
		t.Errorf("/sub/: %d %q, want its index", status, body)
	}
}

// TestFilesRootFollowsItsLink: a root that is a symbolic link a deploy
// moves (current -> releases/N) serves the new release at once, without
// a reload, and /.well-known/ is served though hidden names are not
// (RFC 8615: an ACME challenge, security.txt).
func TestFilesRootFollowsItsLink(t *testing.T) {
	base := t.TempDir()
	for _, rel := range []string{"r1", "r2"} {
		for name, text := range map[string]string{"v.txt": rel, ".well-known/acme-challenge/tok": "proof-" + rel} {
			p := filepath.Join(base, rel, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	current := filepath.Join(base, "current")
	if err := os.Symlink("r1", current); err != nil {
		t.Skip(err)
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: current}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	if status, body, _ := get(t, c, f.url+"/v.txt"); status != 200 || body != "r1" {
		t.Fatalf("before the deploy: %d %q", status, body)
	}
	if err := os.Symlink("r2", current+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(current+".new", current); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(base, "r1")); err != nil {
		t.Fatal(err)
	}
	if status, body, _ := get(t, c, f.url+"/v.txt"); status != 200 || body != "r2" {
		t.Errorf("after the deploy: %d %q, want the new release's", status, body)
	}
	if status, body, _ := get(t, c, f.url+"/.well-known/acme-challenge/tok"); status != 200 || body != "proof-r2" {
		t.Errorf("/.well-known/: %d %q, want it served", status, body)
	}
	if status, _, _ := get(t, c, f.url+"/x/.well-known/acme-challenge/tok"); status != 404 {
		t.Errorf("a .well-known below the top: %d, want 404 (hidden)", status)
	}
}

// TestFilesRootClosedAfterRequest: the directory a request opened (the
// root is looked up for each) is closed when it is answered.
func TestFilesRootClosedAfterRequest(t *testing.T) {
	root := filesDir(t)
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, path := range []string{"/a.css", "/nothing", "/sub"} {
		get(t, c, f.url+path)
	}
	// The handler closes it after the response is out: waited for.
	deadline := time.Now().Add(testwait.Bound(5 * time.Second))
	for fds := openDirFDs(t, root); len(fds) > 0; fds = openDirFDs(t, root) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still open after 3 requests (fds %v)", root, fds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFilesPrecompressed: with precompressed, a file's .gz sibling goes
// as its gzip encoding to a client that accepts gzip (the file's type,
// its own ETag), both variants with Vary: Accept-Encoding; a file without
// one, with one older than itself, or on a route without precompressed,
// goes as it is, without Vary.
func TestFilesPrecompressed(t *testing.T) {
	root := t.TempDir()
	js := strings.Repeat("console.log('gmproxy');\n", 100)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, js)
	zw.Close()
	for name, b := range sortedFiles(map[string][]byte{"app.js": []byte(js), "app.js.gz": gz.Bytes(), "plain.css": []byte("p {}"),
		"stale.js": []byte(js), "stale.js.gz": gz.Bytes()}) {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// stale.js changed after its .gz was made: the .gz is not its encoding.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "stale.js.gz"), old, old); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/off/", StripPrefix: "/off", Files: &FilesConfig{Root: root}},
		RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Precompressed: true}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	fetch := func(path string, gzipOK bool) (*http.Response, []byte) {
		accept := ""
		if gzipOK {
			accept = "gzip"
		}
		return getAccepting(t, c, f.url+path, accept)
	}
	res, b := fetch("/app.js", true)
	if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(b, gz.Bytes()) || res.Header.Get("Vary") != "Accept-Encoding" ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("gzip accepted: Content-Encoding %q, Vary %q, Content-Type %q, %d bytes; want app.js.gz as app.js's encoding",
			res.Header.Get("Content-Encoding"), res.Header.Get("Vary"), res.Header.Get("Content-Type"), len(b))
	}
	gzTag := res.Header.Get("Etag")
	res, b = fetch("/app.js", false)
	if res.Header.Get("Content-Encoding") != "" || string(b) != js || res.Header.Get("Vary") != "Accept-Encoding" || res.Header.Get("Etag") == gzTag {
		t.Errorf("identity: Content-Encoding %q, Vary %q, ETag %q (encoding's %q), %d bytes", res.Header.Get("Content-Encoding"), res.Header.Get("Vary"), res.Header.Get("Etag"), gzTag, len(b))
	}
	for _, path := range []string{"/plain.css", "/off/app.js", "/stale.js"} {
		if res, b := fetch(path, true); res.Header.Get("Content-Encoding") != "" || res.Header.Get("Vary") != "" || len(b) == 0 || bytes.Equal(b, gz.Bytes()) {
			t.Errorf("%s: Content-Encoding %q, Vary %q; want the file as it is", path, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"))
		}
	}
}

// TestFilesPrecompressedLength: the .gz sibling goes with its length, as
// the file itself does (not chunked, and a HEAD says it), and only the
// responses that carry its bytes say Content-Encoding: gzip (not a 412).
func TestFilesPrecompressedLength(t *testing.T) {
	root := t.TempDir()
	gz := make([]byte, 256<<10) // past any buffer that would find the length at the end
	for i := range gz {
		gz[i] = byte(i * 7919 >> 3)
	}
	for name, b := range sortedFiles(map[string][]byte{"big.txt": []byte("identity"), "big.txt.gz": gz}) {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Precompressed: true}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, tc := range []struct {
		method, cond string
		status       int
		length       int64
		encoding     string
	}{
		{method: "GET", status: 200, length: int64(len(gz)), encoding: "gzip"},
		{method: "HEAD", status: 200, length: int64(len(gz)), encoding: "gzip"},
		{method: "GET", cond: `"nope"`, status: 412, length: 0},
	} {
		req, _ := http.NewRequest(tc.method, f.url+"/big.txt", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		if tc.cond != "" {
			req.Header.Set("If-Match", tc.cond)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || res.ContentLength != tc.length || len(res.TransferEncoding) != 0 || res.Header.Get("Content-Encoding") != tc.encoding {
			t.Errorf("%s If-Match %q: %d, Content-Length %d, Transfer-Encoding %q, Content-Encoding %q (%d bytes); want %d, %d, none, %q",
				tc.method, tc.cond, res.StatusCode, res.ContentLength, res.TransferEncoding, res.Header.Get("Content-Encoding"), n, tc.status, tc.length, tc.encoding)
		}
	}
}

// TestFilesPrecompressedVaryKept: a route's response_headers that set
// Vary (Vary: Origin for fonts served with CORS) keep Accept-Encoding in
// it on both variants, as on a compress route: without it a cache would
// give the gzip bytes to clients that never took gzip.
func TestFilesPrecompressedVaryKept(t *testing.T) {
	root := t.TempDir()
	for name, b := range sortedFiles(map[string]string{"f.svg": "<svg/>", "f.svg.gz": "gzip bytes"}) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Precompressed: true},
		ResponseHeaders: HeaderOps{Set: map[string]string{"Vary": "Origin"}}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, ae := range []string{"gzip", "identity"} {
		req, _ := http.NewRequest("GET", f.url+"/f.svg", nil)
		req.Header.Set("Accept-Encoding", ae)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		vary := strings.Join(res.Header.Values("Vary"), ", ")
		if !strings.Contains(vary, "Origin") || !strings.Contains(vary, "Accept-Encoding") {
			t.Errorf("Accept-Encoding %s: Vary %q, want Origin and Accept-Encoding", ae, vary)
		}
	}
}

// TestFilesRootGone: a files route whose directory is gone answers 500,
// the server's trouble (logged as a warning, and not cached downstream
// as a 404 would be), not 404 for every file.
func TestFilesRootGone(t *testing.T) {
	root := filepath.Join(t.TempDir(), "www")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}
	f := newFront(t, cfg, frontOpts{})
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := get(t, testClient(t), f.url+"/app.css"); status != 500 {
		t.Errorf("root gone: %d, want 500", status)
	}
}

// TestFilesCompressed: a files route with compress sends a file of a
// listed type gzip-encoded, as it is sent, to the clients that take gzip
// (a weak ETag, no Content-Length or Accept-Ranges), with Vary:
// Accept-Encoding on both variants; a HEAD gets the fields its GET
// would (RFC 9110 §9.3.2), without the identity's Content-Length; ranges,
// short files and other types go as they are; a 304 that revalidates the
// encoding (by If-None-Match, or If-Modified-Since alone) carries its
// weak ETag; a precompressed sibling goes in place of compressing. Over
// HTTP/1.1 and HTTP/2; the places taken are given back.
func TestFilesCompressed(t *testing.T) {
	root := t.TempDir()
	css := strings.Repeat("body { color: red; margin: 0 }\n", 200)
	for name, b := range sortedFiles(map[string]string{"big.css": css, "small.css": "p {}", "pic.png": css, "pre.js": css, "pre.js.gz": "the sibling's bytes"}) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The sibling no older than its file, whichever was written last.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(root, "pre.js.gz"), later, later); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Precompressed: true}, Compress: &CompressConfig{}})}
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		do := func(method, path string, hdr ...string) (*http.Response, []byte) {
			req, _ := http.NewRequest(method, f.url+path, nil)
			req.Host = "example.test"
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			res, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2 %v: %s %s: %v", h2, method, path, err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return res, b
		}
		varies := func(res *http.Response) bool { return strings.Contains(res.Header.Get("Vary"), "Accept-Encoding") }

		res, plain := do("GET", "/big.css")
		strong, lm := res.Header.Get("Etag"), res.Header.Get("Last-Modified")
		if res.StatusCode != 200 || string(plain) != css || res.Header.Get("Content-Encoding") != "" || !varies(res) || !strings.HasPrefix(strong, `"`) {
			t.Errorf("h2 %v identity: %d, Content-Encoding %q, Vary %q, ETag %q, %d bytes", h2, res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"), strong, len(plain))
		}
		res, b := do("GET", "/big.css", "Accept-Encoding", "gzip")
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" || !varies(res) || res.Header.Get("Etag") != "W/"+strong ||
			res.Header.Get("Accept-Ranges") != "" || res.ContentLength > 0 && res.ContentLength != int64(len(b)) {
			t.Errorf("h2 %v gzip: %d, Content-Encoding %q, Vary %q, ETag %q (identity's %q), Accept-Ranges %q, Content-Length %d of %d bytes",
				h2, res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"), res.Header.Get("Etag"), strong, res.Header.Get("Accept-Ranges"), res.ContentLength, len(b))
		} else if zr, err := gzip.NewReader(bytes.NewReader(b)); err != nil {
			t.Errorf("h2 %v gzip: not gzip: %v", h2, err)
		} else if d, err := io.ReadAll(zr); err != nil || string(d) != css || len(b) >= len(css)/4 {
			t.Errorf("h2 %v gzip: %d bytes decoded to %d (%v), want the file's %d", h2, len(b), len(d), err, len(css))
		}
		// Ranges are of the identity's bytes (a 206 is never encoded).
		res, b = do("GET", "/big.css", "Accept-Encoding", "gzip", "Range", "bytes=5-9")
		if res.StatusCode != 206 || string(b) != css[5:10] || res.Header.Get("Content-Encoding") != "" || res.Header.Get("Etag") != strong {
			t.Errorf("h2 %v range: %d %q, Content-Encoding %q, ETag %q; want 206 %q of the identity", h2, res.StatusCode, b, res.Header.Get("Content-Encoding"), res.Header.Get("Etag"), css[5:10])
		}
		// Revalidation: the encoding's weak ETag back for a client that
		// holds the encoding, the strong one for one that holds the
		// identity.
		for _, tc := range []struct{ inm, want string }{{"W/" + strong, "W/" + strong}, {strong, strong}} {
			res, _ = do("GET", "/big.css", "Accept-Encoding", "gzip", "If-None-Match", tc.inm)
			if res.StatusCode != 304 || res.Header.Get("Etag") != tc.want || !varies(res) {
				t.Errorf("h2 %v If-None-Match %s: %d, ETag %q, Vary %q; want 304 with %s", h2, tc.inm, res.StatusCode, res.Header.Get("Etag"), res.Header.Get("Vary"), tc.want)
			}
		}
		// Revalidated by date alone the client holds no ETag: a 200
		// would have been the encoding, and the 304 carries its ETag.
		if res, _ = do("GET", "/big.css", "Accept-Encoding", "gzip", "If-Modified-Since", lm); res.StatusCode != 304 || res.Header.Get("Etag") != "W/"+strong || !varies(res) {
			t.Errorf("h2 %v If-Modified-Since %s: %d, ETag %q, Vary %q; want 304 with W/%s", h2, lm, res.StatusCode, res.Header.Get("Etag"), res.Header.Get("Vary"), strong)
		}
		res, b = do("HEAD", "/big.css", "Accept-Encoding", "gzip")
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" || !varies(res) || res.Header.Get("Etag") != "W/"+strong ||
			res.Header.Get("Accept-Ranges") != "" || res.Header.Get("Content-Length") != "" || len(b) != 0 {
			t.Errorf("h2 %v HEAD: %d, Content-Encoding %q, Vary %q, ETag %q, Accept-Ranges %q, Content-Length %q, %d bytes; want the gzip GET's head",
				h2, res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"), res.Header.Get("Etag"), res.Header.Get("Accept-Ranges"), res.Header.Get("Content-Length"), len(b))
		}
		res, _ = do("HEAD", "/big.css")
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "" || !varies(res) || res.Header.Get("Etag") != strong || res.ContentLength != int64(len(css)) {
			t.Errorf("h2 %v HEAD identity: %d, Content-Encoding %q, Vary %q, ETag %q, Content-Length %d; want the identity GET's head",
				h2, res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"), res.Header.Get("Etag"), res.ContentLength)
		}
		for _, path := range []string{"/small.css", "/pic.png"} {
			res, b = do("GET", path, "Accept-Encoding", "gzip")
			if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "" || varies(res) || len(b) == 0 {
				t.Errorf("h2 %v %s: %d, Content-Encoding %q, Vary %q; want the file as it is", h2, path, res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"))
			}
		}
		res, b = do("GET", "/pre.js", "Accept-Encoding", "gzip")
		if res.Header.Get("Content-Encoding") != "gzip" || string(b) != "the sibling's bytes" {
			t.Errorf("h2 %v precompressed: Content-Encoding %q, %q; want the .gz sibling", h2, res.Header.Get("Content-Encoding"), b)
		}
	}
	deadline := time.Now().Add(testwait.Bound(5 * time.Second))
	for compressing.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d compression places still taken after the responses", compressing.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFilesCompressBusy: with no compression place free a file goes as
// it is, with its length, still varying with Accept-Encoding.
func TestFilesCompressBusy(t *testing.T) {
	root := t.TempDir()
	css := strings.Repeat("body { color: red }\n", 200)
	if err := os.WriteFile(filepath.Join(root, "big.css"), []byte(css), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}, Compress: &CompressConfig{}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	old := maxCompressing
	t.Cleanup(func() { maxCompressing = old })
	maxCompressing = 0
	res, b := getAccepting(t, c, f.url+"/big.css", "gzip")
	if res.Header.Get("Content-Encoding") != "" || string(b) != css || res.ContentLength != int64(len(css)) || res.Header.Get("Vary") != "Accept-Encoding" {
		t.Errorf("Content-Encoding %q, Content-Length %d, Vary %q, %d bytes; want the file as it is", res.Header.Get("Content-Encoding"), res.ContentLength, res.Header.Get("Vary"), len(b))
	}
}

// TestFilesPrecompressedETagDistinct: the .gz sibling's ETag is never the
// file's, even when both have the same size and time (gzip -k keeps the
// file's time on its .gz): a strong validator names one representation
// (RFC 9110 §8.8.3), and a client or cache holding the identity would get
// 304 for the gzip encoding's request, then use the wrong bytes (RFC 9111
// §4.3.4 picks the stored response by the ETag).
func TestFilesPrecompressedETagDistinct(t *testing.T) {
	root := t.TempDir()
	same := time.Now().Add(-time.Hour).Truncate(time.Second)
	for name, b := range sortedFiles(map[string]string{"a.txt": "identity bytes 01234", "a.txt.gz": "gzip-ish bytes 56789"}) {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, same, same); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Precompressed: true}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	res, b := getAccepting(t, c, f.url+"/a.txt", "")
	idTag := res.Header.Get("Etag")
	if string(b) != "identity bytes 01234" || idTag == "" {
		t.Fatalf("identity: %q, ETag %q", b, idTag)
	}
	res, b = getAccepting(t, c, f.url+"/a.txt", "gzip")
	if gzTag := res.Header.Get("Etag"); string(b) != "gzip-ish bytes 56789" || gzTag == "" || gzTag == idTag {
		t.Errorf("gzip: %q, ETag %q (identity's %q); want the .gz with an ETag of its own", b, gzTag, idTag)
	}
	// The identity's validator does not revalidate the encoding.
	status, body, h := get(t, c, f.url+"/a.txt", "Host", "example.test", "Accept-Encoding", "gzip", "If-None-Match", idTag)
	if status != 200 || body != "gzip-ish bytes 56789" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("gzip, If-None-Match the identity's ETag: %d %q (Content-Encoding %q), want 200 with the .gz", status, body, h.Get("Content-Encoding"))
	}
}

// TestFilesCharset: a text file's Content-Type carries no charset unless
// the route names one (nginx's charset), so that a GBK page's own <meta
// charset> decides; a named charset goes on text types only; one that is
// not a charset name (it would add parameters) is refused.
func TestFilesCharset(t *testing.T) {
	root := t.TempDir()
	gbkPage := "<meta charset=\"gbk\"><p>\xc4\xe3\xba\xc3</p>" // 你好 in GBK
	for name, b := range sortedFiles(map[string]string{"p.html": gbkPage, "app.js": "x()", "d.json": "{}", "i.png": "\x89PNG"}) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/gbk/", StripPrefix: "/gbk", Files: &FilesConfig{Root: root, Charset: "gbk"}},
		RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for path, want := range map[string]string{
		"/p.html": "text/html", "/i.png": "image/png",
		"/gbk/p.html": "text/html; charset=gbk", "/gbk/d.json": "application/json; charset=gbk", "/gbk/i.png": "image/png",
	} {
		res, b := getAccepting(t, c, f.url+path, "")
		if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != want {
			t.Errorf("%s: %d, Content-Type %q, want %q", path, res.StatusCode, ct, want)
		}
		if path == "/p.html" && string(b) != gbkPage {
			t.Errorf("%s: the page's bytes changed", path)
		}
	}
	res, _ := getAccepting(t, c, f.url+"/app.js", "")
	if ct := res.Header.Get("Content-Type"); strings.Contains(ct, "charset") || !strings.Contains(ct, "javascript") {
		t.Errorf("/app.js: Content-Type %q, want a JavaScript type without a charset", ct)
	}
	for _, bad := range []string{"utf-8; x=1", "utf 8", "\"utf-8\""} {
		if _, err := New(Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Charset: bad}})}, NopObserver{}, testLogger(t)); err == nil {
			t.Errorf("charset %q accepted", bad)
		}
	}
}

// TestFilesFallback: with a fallback, a path that names no file gets the
// fallback's content (a single-page application's router owns it), with
// the fallback's type and ETag and conditional requests against it; a
// file that exists, a directory's index, a hidden name (404) and the
// redirect of a directory's path without its "/" are as without one; a
// fallback that is gone is 404 for them.
func TestFilesFallback(t *testing.T) {
	root := t.TempDir()
	for name, b := range sortedFiles(map[string]string{"index.html": "<app/>", "app.js": "x()", "docs/index.html": "docs", ".env": "SECRET=1"}) {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Fallback: "/index.html"}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var appTag string
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/orders/42", 200, "<app/>"},
		{"/nope.js", 200, "<app/>"},
		{"/app.js", 200, "x()"},
		{"/app.js/x", 200, "<app/>"}, // through a file: nothing there (try_files)
		{"/app.js/", 200, "<app/>"},
		{"/docs/", 200, "docs"},
		{"/docs", 301, ""},
		{"/.env", 404, ""},
		{"/.git/config", 404, ""},
	} {
		res, b := getAccepting(t, c, f.url+tc.path, "")
		if res.StatusCode != tc.status || tc.body != "" && string(b) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.path, res.StatusCode, b, tc.status, tc.body)
		}
		if tc.path == "/orders/42" {
			appTag = res.Header.Get("Etag")
			if ct := res.Header.Get("Content-Type"); ct != "text/html" {
				t.Errorf("%s: Content-Type %q, the fallback's text/html", tc.path, ct)
			}
		}
	}
	req, _ := http.NewRequest("GET", f.url+"/orders/43", nil)
	req.Host = "example.test"
	req.Header.Set("If-None-Match", appTag)
	if res, err := c.Do(req); err != nil || res.StatusCode != 304 {
		t.Errorf("If-None-Match the fallback's ETag %q: %v %v, want 304", appTag, res, err)
	} else {
		res.Body.Close()
	}
	os.Remove(filepath.Join(root, "index.html"))
	if res, _ := getAccepting(t, c, f.url+"/orders/42", ""); res.StatusCode != 404 {
		t.Errorf("fallback gone: %d, want 404", res.StatusCode)
	}
	for _, bad := range []string{"../x.html", "a/../../x", ".env", "/a/.git/x", "a\\b", "./index.html"} {
		if err := CheckFilesFallback(bad); err == nil {
			t.Errorf("fallback %q accepted", bad)
		}
	}
}

// sortedFiles yields m's names and contents in name order: a file before
// its .gz sibling, which a precompressed route serves only when it is not
// older than the file (written in map order, it sometimes was).
func sortedFiles[V string | []byte](m map[string]V) func(func(string, V) bool) {
	return func(yield func(string, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// TestFilesMediaTypes: a file's Content-Type comes from the built-in
// table whatever the host's /etc/mime.types holds (Go's own table lacks
// .woff2, .ico, .txt and .crl, which a host without the file served as
// bytes), in any letter case; a route's types add to the table and
// override it, their parameters kept and the route's charset not added to
// them.
func TestFilesMediaTypes(t *testing.T) {
	root := t.TempDir()
	names := []string{"f.woff2", "favicon.ico", "notes.txt", "ca.crl", "ca.cer", "doc.ofd", "APP.JS",
		"m.wasm", "app.apk", "x.gbk", "y.unknownext", "page.tpl"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(root, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	types := map[string]string{"APK": "application/octet-stream", ".gbk": "text/plain; charset=gbk", "ofd": "application/x-ofd",
		"tpl": "Text/HTML"} // media types are case-insensitive (RFC 9110 §8.3.1): still text
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Files: &FilesConfig{Root: root, Charset: "utf-8", Types: types}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for name, want := range map[string]string{
		"f.woff2":      "font/woff2",
		"favicon.ico":  "image/x-icon",
		"notes.txt":    "text/plain; charset=utf-8",
		"ca.crl":       "application/pkix-crl",
		"ca.cer":       "application/pkix-cert",
		"doc.ofd":      "application/x-ofd",
		"APP.JS":       "text/javascript; charset=utf-8",
		"m.wasm":       "application/wasm",
		"app.apk":      "application/octet-stream",
		"x.gbk":        "text/plain; charset=gbk",
		"y.unknownext": "application/octet-stream",
		"page.tpl":     "Text/HTML; charset=utf-8",
	} {
		req, _ := http.NewRequest("GET", f.url+"/"+name, nil)
		req.Host = "example.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != want {
			t.Errorf("%s: %d, Content-Type %q, want %q", name, res.StatusCode, ct, want)
		}
	}
	for ext, mt := range map[string]string{"": "text/plain", "a.b": "text/plain", "wasm": "wasm", "css": "text/css; x"} {
		if _, err := newFileServer(&FilesConfig{Root: root, Types: map[string]string{ext: mt}}); err == nil {
			t.Errorf("types {%q: %q} accepted", ext, mt)
		}
	}
}
