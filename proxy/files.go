package proxy

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Static files: a route with a FilesConfig answers from a directory, as
// nginx's root and Caddy's file_server do, for the assets an edge serves
// beside what it proxies.

// FilesConfig serves a directory's files.
type FilesConfig struct {
	// Root is the directory; a request's path (after StripPrefix) names a
	// file under it. Nothing outside it is served, through ".." or a
	// symbolic link that leads out (os.Root).
	Root string
	// Index is the file served for a path ending in "/". Default
	// "index.html". A directory without one is 404: no listings.
	Index string
	// Precompressed serves name.gz, when there is one, as the gzip
	// encoding of name to the clients that accept it (nginx's
	// gzip_static): compressed once at deploy time, at no cost per
	// request. Default false.
	Precompressed bool
	// Hidden serves the files and directories whose names start with "."
	// (.git, .env, .htpasswd). Default false: they are 404, but for
	// /.well-known/ (RFC 8615).
	Hidden bool
	// Fallback, when set, is the file (a path under Root, e.g.
	// "index.html") served in place of one that does not exist, as
	// nginx's try_files $uri $uri/ /index.html: a single-page
	// application whose own router owns its paths (/orders/42) gets its
	// page for any of them. Not for a hidden name or one the process may
	// not read: those stay 404 and 403. Default none.
	Fallback string
	// Charset is added to the Content-Type of the text files (text/*,
	// JavaScript, JSON, XML), as nginx's charset: "utf-8", "gbk". Default
	// none: the type goes without one, as nginx sends it, and a page's
	// own <meta charset> (or a script's page's) decides; a charset in the
	// header would override it and garble a GBK page.
	Charset string
	// Types adds media types by file name extension (".wasm" or "wasm")
	// to the built-in table, or overrides its entries (nginx's types): e.g.
	// {".apk": "application/octet-stream"}. Default none.
	Types map[string]string
}

// fileServer is a compiled FilesConfig.
type fileServer struct {
	dir           string // Root, opened for each request
	index         string
	hidden        bool
	precompressed bool
	charset       string
	fallback      string            // a clean relative path, "" for none
	types         map[string]string // Types by normaliseExtension
}

func newFileServer(c *FilesConfig) (*fileServer, error) {
	index := c.Index
	if index == "" {
		index = "index.html"
	}
	if strings.ContainsAny(index, `/\`) || index == "." || index == ".." {
		return nil, fmt.Errorf("files: index %q is not a file name", index)
	}
	root, err := os.OpenRoot(c.Root)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	root.Close()
	if c.Charset != "" && !ValidCharset(c.Charset) {
		return nil, fmt.Errorf("files: charset %q is not a charset name", c.Charset)
	}
	if err := CheckFilesFallback(c.Fallback); c.Fallback != "" && err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	var types map[string]string
	for ext, mt := range c.Types {
		if err := CheckMediaType(ext, mt); err != nil {
			return nil, fmt.Errorf("files: types: %w", err)
		}
		if types == nil {
			types = make(map[string]string, len(c.Types))
		}
		types[normaliseExtension(ext)] = mt
	}
	return &fileServer{dir: c.Root, index: index, hidden: c.Hidden, precompressed: c.Precompressed, charset: c.Charset,
		fallback: strings.TrimPrefix(c.Fallback, "/"), types: types}, nil
}

// serveFile answers r from the route's directory: GET and HEAD, with
// ranges and conditional requests (http.ServeContent), a strong ETag made
// of the file's modification time and size, as nginx's.
func (s *site) serveFile(rs *reqState, r *http.Request, rt *route) {
	fsrv := rt.files
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.errorResponseWith(rs, r, http.StatusMethodNotAllowed, "Allow", "GET, HEAD", "method not allowed", "files route "+rt.name+" serves GET and HEAD only")
		return
	}
	p := r.URL.Path
	if rt.strip != "" {
		// Matched as the route's prefix is (pathPrefix): regardless of
		// letter case on a site with case_insensitive_paths, as setURL
		// strips it for an upstream.
		if n, ok := rt.pathPrefix(p, rt.strip); ok {
			p = p[n:]
		}
	}
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	if name == "" {
		name = "."
	}
	notFound := func(why string) {
		s.errorResponse(rs, r, http.StatusNotFound, "not found", "files route "+rt.name+": "+strconv.Quote(name)+": "+why)
	}
	// failed answers a lookup that failed: 404 for what is not there or
	// may not be reached (outside the root, not a directory), 403 for a
	// file the process may not read, 500 (logged as a warning, and not
	// cached as a 404 would be) for the server's own trouble: out of
	// descriptors or memory, an I/O error.
	failed := func(err error) {
		switch {
		case errors.Is(err, fs.ErrPermission):
			s.errorResponse(rs, r, http.StatusForbidden, "forbidden", "files route "+rt.name+": "+strconv.Quote(name)+": "+err.Error())
		case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.EIO):
			s.errorResponse(rs, r, http.StatusInternalServerError, "the file could not be read", "files route "+rt.name+": "+strconv.Quote(name)+": "+err.Error())
		default:
			notFound(err.Error())
		}
	}
	if !fsrv.hidden && hiddenPath(name) {
		notFound("a hidden name (files.hidden is off)")
		return
	}
	// Opened for each request, as nginx looks its root up: a root that
	// is a symbolic link a deploy moves (current -> releases/N) serves the
	// new release at once, and a removed old one is not held open.
	root, err := os.OpenRoot(fsrv.dir)
	if err != nil {
		// The configured directory itself: gone or unreadable is the
		// server's trouble, not a missing file.
		s.errorResponse(rs, r, http.StatusInternalServerError, "the file could not be read", "files route "+rt.name+": root: "+err.Error())
		return
	}
	defer root.Close()
	// Stat before Open: opening a FIFO or a device would block or act.
	fi, err := root.Stat(name)
	dirPath := strings.HasSuffix(r.URL.Path, "/")
	if err == nil && !fi.IsDir() && dirPath {
		// A directory's path naming a file: ENOTDIR to open(2), 404 to
		// nginx, not the file at a URL its relative links miss (nor,
		// below, a directory's index).
		if fsrv.fallback == "" {
			notFound("not a directory")
			return
		}
		err = syscall.ENOTDIR
	}
	if err == nil && fi.IsDir() {
		if !dirPath {
			// Relative links in the index resolve against the
			// directory only with its "/" (as net/http's FileServer).
			to := r.URL.EscapedPath() + "/"
			if r.URL.RawQuery != "" {
				to += "?" + r.URL.RawQuery
			}
			rt.resOps.apply(rs.w.Header())
			http.Redirect(&rs.w, r, to, http.StatusMovedPermanently)
			return
		}
		name = path.Join(name, fsrv.index)
		fi, err = root.Stat(name)
	}
	if fsrv.fallback != "" && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
		// A path the application's own router owns: its page. A path
		// through a file (/app.js/x, /app.js/) names nothing there
		// either, as nginx's try_files finds.
		name = fsrv.fallback
		fi, err = root.Stat(name)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		notFound("no such file")
		return
	case err != nil:
		// Outside the root (a link leading out), not permitted, a
		// name the system refuses, or the server's trouble.
		failed(err)
		return
	case !fi.Mode().IsRegular():
		notFound("not a regular file")
		return
	}
	// The type by the name's extension, else bytes: never sniffed from
	// the content, which could make an uploaded file a page (nginx's
	// types and default_type do the same).
	ct := fsrv.contentType(path.Ext(name))
	// A precompressed sibling (name.gz, as nginx's gzip_static): the
	// response varies with Accept-Encoding, and a client that takes gzip
	// (HTTP/1.1 and later: older caches ignore Vary) gets that file as the
	// gzip encoding of this one, its own ETag and ranges of its bytes.
	vary, encoded := false, false
	if fsrv.precompressed {
		// Not one older than the file: a deploy that changed the file
		// and not its .gz would serve the old content to gzip clients.
		if gfi, err := root.Stat(name + ".gz"); err == nil && gfi.Mode().IsRegular() && !gfi.ModTime().Before(fi.ModTime()) {
			vary = true
			if r.ProtoAtLeast(1, 1) && acceptsGzip(r.Header) {
				name, encoded = name+".gz", true
			}
		}
	}
	if testHookFileOpen != nil {
		testHookFileOpen(name)
	}
	// The name may be another file by now (replaced since the Stat): a
	// FIFO opened without O_NONBLOCK would wait for a writer, so the file
	// opened is checked again, and its own size and time make the ETag.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		failed(err)
		return
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		notFound("not a regular file once opened")
		return
	}
	h := rs.w.Header()
	etag := strconv.FormatInt(fi.ModTime().Unix(), 16) + "-" + strconv.FormatInt(fi.Size(), 16)
	if encoded {
		// Marked as the encoding's: gzip -k gives the .gz the file's
		// time, and a .gz of the file's size would otherwise have its
		// strong ETag, which names one representation (RFC 9110 §8.8.3):
		// the identity's validator would revalidate the encoding.
		etag += "-gzip"
	}
	h["Etag"] = []string{`"` + etag + `"`}
	h["Content-Type"] = []string{ct}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	rt.resOps.apply(h)
	if vary {
		// After the route's edits, as on a compress route: a Vary they
		// set (Origin, for fonts served with CORS) keeps Accept-Encoding,
		// without which a cache would give either variant to any client.
		addVary(h)
	}
	if encoded {
		http.ServeContent(gzipFileWriter{&rs.w}, r, name, fi.ModTime(), f)
		return
	}
	if z := rt.compress; z != nil && z.fileEligible(r, ct, fi.Size()) {
		// Compressed as it is sent (nginx's gzip after gzip_static): a
		// file without a precompressed sibling.
		addVary(h)
		if acceptsGzip(r.Header) {
			var perConn *atomic.Int32
			if rs.ci != nil {
				perConn = &rs.ci.compressing
			}
			enc := &gzipFileEncoder{respWriter: &rs.w, r: r, level: z.level, conn: perConn}
			defer enc.finish()
			http.ServeContent(enc, r, name, fi.ModTime(), f)
			return
		}
	}
	http.ServeContent(&rs.w, r, name, fi.ModTime(), f)
}

// contentType is the Content-Type of a file with extension ext: the
// media type the route's types or the built-in table give it
// (mediaTypeOf), with the route's charset on text types (nginx's charset
// and charset_types) unless the type names its own parameters;
// application/octet-stream for an extension neither table knows.
func (fsrv *fileServer) contentType(ext string) string {
	ct := mediaTypeOf(fsrv.types, ext)
	switch {
	case ct == "":
		return "application/octet-stream"
	case fsrv.charset != "" && textType(ct) && !strings.Contains(ct, ";"):
		return ct + "; charset=" + fsrv.charset
	}
	return ct
}

// textType reports whether the media type mt is text a charset applies
// to: text/*, and JavaScript, JSON and XML under application/ (SVG is XML
// too). Media types are case-insensitive (RFC 9110 §8.3.1): a route's
// types may write Text/HTML.
func textType(mt string) bool {
	mt = strings.ToLower(mt)
	switch mt {
	case "application/javascript", "application/json", "application/xml", "application/manifest+json",
		"application/ld+json", "application/rss+xml", "application/atom+xml", "image/svg+xml":
		return true
	}
	return strings.HasPrefix(mt, "text/")
}

// CheckFilesFallback reports what is wrong with name as a
// FilesConfig.Fallback: it must name a file under the root by a clean
// path ("index.html", "/app/index.html"), not a hidden one (files.hidden
// serves those to no one but by their own path).
func CheckFilesFallback(name string) error {
	rel := strings.TrimPrefix(name, "/")
	switch {
	case rel == "" || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "\\"):
		return fmt.Errorf("fallback %q is not a clean path of a file under the root", name)
	case hiddenPath(rel):
		return fmt.Errorf("fallback %q is under a hidden name", name)
	}
	return nil
}

// ValidCharset reports whether name may be a charset parameter's value
// unquoted: a token of letters, digits and - _ . : + (RFC 2978's names).
func ValidCharset(name string) bool {
	if name == "" || len(name) > 40 {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:+", c) >= 0) {
			return false
		}
	}
	return true
}

// gzipFileWriter is what http.ServeContent writes a precompressed sibling
// through: Content-Encoding goes on the responses that carry its bytes
// (200, 206) only, as ServeContent writes their status. Set before,
// ServeContent would take the response for one compressed on the fly and
// leave out its Content-Length (a file of known size sent chunked, a HEAD
// without its length), and a 412 with no content would claim to be gzip.
type gzipFileWriter struct{ *respWriter }

func (w gzipFileWriter) WriteHeader(code int) {
	if code == http.StatusOK || code == http.StatusPartialContent {
		w.Header()["Content-Encoding"] = []string{"gzip"}
	}
	w.respWriter.WriteHeader(code)
}

// testHookFileOpen, when not nil, runs before serveFile opens the file it
// found (tests change the file there).
var testHookFileOpen func(name string)

// hiddenPath reports whether a segment of the clean relative path name
// starts with ".", but for a leading .well-known: its URIs are meant to be
// public (RFC 8615; an ACME HTTP-01 challenge, security.txt).
func hiddenPath(name string) bool {
	for i, seg := range strings.Split(name, "/") {
		if strings.HasPrefix(seg, ".") && seg != "." && !(i == 0 && seg == ".well-known") {
			return true
		}
	}
	return false
}
