package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Response compression: a route with a CompressConfig sends a target's
// uncompressed responses, or a files route's files, gzip-encoded to the
// clients that accept it, as nginx's gzip module and Caddy's encode do.

// CompressConfig turns on gzip for a route's responses.
type CompressConfig struct {
	// Types lists the media types compressed: a response's Content-Type
	// without parameters, "text/*" for every subtype, "*/*" for every
	// type (nginx's gzip_types *; never gRPC, event streams or answers
	// already encoded). Default DefaultCompressTypes.
	Types []string
	// MinLength: a response that declares a shorter Content-Length goes
	// as it is (one of unknown length is compressed). Default
	// DefaultCompressMinLength.
	MinLength int64
	// Level is gzip's, 1 (fastest) to 9 (smallest). Default
	// DefaultCompressLevel.
	Level int
}

// DefaultCompressTypes are the media types compressed when CompressConfig
// lists none: text and the text-based formats of the web (JSON, XML,
// JavaScript, SVG, WebAssembly's text format is not served as such).
var DefaultCompressTypes = []string{
	"text/html", "text/plain", "text/css", "text/xml", "text/javascript",
	"application/javascript", "application/json", "application/xml",
	"application/manifest+json", "application/ld+json", "image/svg+xml",
}

const (
	// DefaultCompressMinLength: below about 1 KiB gzip's framing (18
	// bytes) and the lost TCP segment savings make compression not worth
	// its CPU.
	DefaultCompressMinLength = 1 << 10
	// DefaultCompressLevel is a middle ground: Go's levels 4 to 9 share
	// one matcher whose effort grows with the level.
	DefaultCompressLevel = 5
)

// maxCompressing bounds the responses compressed at once in a process:
// each holds a gzip writer of about 0.8 MiB (1.2 MiB at level 1), Go's
// flate tables. Past it a response goes uncompressed, which every client
// takes; 128 of them are about 100 MiB at most.
var maxCompressing int64 = 128

// maxCompressingPerConn bounds them per client connection: one HTTP/2
// client reading many large responses slowly would otherwise hold every
// place (each for up to send_timeout, or as long as it reads a trickle),
// and compression would be off for every other client.
var maxCompressingPerConn int32 = 4

// compressing counts the responses being compressed (maxCompressing).
var compressing atomic.Int64

// gzipPools keep the writers of each level between responses: a new one
// is most of compressing a small response.
var gzipPools [gzip.BestCompression + 1]sync.Pool

// compressor is a compiled CompressConfig.
type compressor struct {
	exact     map[string]bool // media types, lower case
	prefixes  []string        // "text/" for "text/*"
	every     bool            // "*/*"
	minLength int64
	level     int
}

func newCompressor(c *CompressConfig) (*compressor, error) {
	if c == nil {
		return nil, nil
	}
	z := &compressor{exact: map[string]bool{}, minLength: intOr(c.MinLength, DefaultCompressMinLength), level: intOr(c.Level, DefaultCompressLevel)}
	if z.level < gzip.BestSpeed || z.level > gzip.BestCompression {
		return nil, fmt.Errorf("compress: level %d, want 1 to 9", z.level)
	}
	types := c.Types
	if len(types) == 0 {
		types = DefaultCompressTypes
	}
	for _, t := range types {
		t = strings.ToLower(strings.TrimSpace(t))
		main, sub, ok := strings.Cut(t, "/")
		if !ok || main == "" || sub == "" {
			return nil, fmt.Errorf("compress: media type %q, want type/subtype, type/* or */*", t)
		}
		switch {
		case main == "*" && sub == "*":
			z.every = true
		case main == "*":
			// No range names the subtype of any type.
			return nil, fmt.Errorf("compress: media type %q, want type/subtype, type/* or */*", t)
		case sub == "*":
			z.prefixes = append(z.prefixes, main+"/")
		default:
			z.exact[t] = true
		}
	}
	return z, nil
}

// ErrCompressedEncodingEdit: a route that compresses sets or adds
// Content-Encoding on its responses (response_headers), as nginx's
// add_header does for a .svgz or a gzip file served as its content. What
// it labels encoded would be gzip-encoded again under the one label, and
// the client, decoding once, would get the first encoding's bytes.
var ErrCompressedEncodingEdit = errors.New("compress would gzip again the responses response_headers label with a Content-Encoding")

// CheckCompressHeaderEdit reports ErrCompressedEncodingEdit for name, a
// response field that a route with compress sets or adds, when it is
// Content-Encoding.
func CheckCompressHeaderEdit(name string) error {
	if http.CanonicalHeaderKey(name) == "Content-Encoding" {
		return ErrCompressedEncodingEdit
	}
	return nil
}

// fieldOf is the values of the response field name (canonical form),
// every line of it, from res's Header or, on the pass-on path, its head.
func fieldOf(res *http.Response, name string) []string {
	if res.Header != nil {
		return res.Header[name]
	}
	if h := passOnHead(res); h != nil {
		return h.Values(name)
	}
	return nil
}

// eligible reports whether res is one the route compresses for a client
// that accepts gzip: then the response varies with Accept-Encoding. Not
// a response that has or may have no body (a 205 framed as one still
// has no content, RFC 9110 §15.3.6), an already encoded one, a
// part of a representation (206: its ranges are the identity's), one its
// target forbids transforming (Cache-Control: no-transform, RFC 9111
// §5.2.2.6) or whose digest covers its bytes as they are (digestFields),
// one shorter than the minimum, or of a type not listed.
func (z *compressor) eligible(r *http.Request, res *http.Response) bool {
	switch sc := res.StatusCode; {
	case sc < 200, sc == http.StatusNoContent, sc == http.StatusResetContent, sc == http.StatusPartialContent, sc == http.StatusNotModified:
		return false
	}
	if res.ContentLength >= 0 && res.ContentLength < z.minLength {
		return false
	}
	if !encodable(res) {
		return false
	}
	cts := fieldOf(res, "Content-Type")
	return len(cts) > 0 && z.typeListed(cts[0])
}

// notModifiedVaries reports whether res, a 304 on the route, is one
// whose 200 the route would compress as far as its fields tell: a 304
// carries the Vary (and ETag) the 200 to the same request would have
// (RFC 9110 §15.4.5), whether or not this client takes gzip, else a
// cache freshening its stored variant by it (RFC 9111 §4.3.4) serves
// either variant to any client. Its fields seldom include Content-Type or
// the length: what they leave open counts as compressed.
func (z *compressor) notModifiedVaries(res *http.Response) bool {
	if !encodable(res) {
		return false
	}
	cts := fieldOf(res, "Content-Type")
	return len(cts) == 0 || z.typeListed(cts[0])
}

// encodable reports whether res's fields let it be encoded: none names a
// content coding, no-transform or a digest of its bytes (eligible).
func encodable(res *http.Response) bool {
	// A list field's lines are one list (RFC 9110 §5.3): a coding or a
	// no-transform on any line counts.
	for _, ce := range fieldOf(res, "Content-Encoding") {
		for c := range strings.SplitSeq(ce, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	for _, cc := range fieldOf(res, "Cache-Control") {
		if hasToken(cc, "no-transform") {
			return false
		}
	}
	for _, d := range digestFields {
		if len(fieldOf(res, d)) > 0 {
			return false
		}
	}
	return true
}

// digestFields name the digests of a response's content as it is sent:
// Content-Digest and Repr-Digest (RFC 9530 §1.2: tied to the
// Content-Encoding), and the older Digest (RFC 3230) and Content-MD5
// (RFC 1864). Encoded, a response would carry a digest of other bytes,
// and a client that checks it would refuse the response as corrupt: it
// goes as the target sent it, as with no-transform.
var digestFields = [...]string{"Content-Digest", "Repr-Digest", "Digest", "Content-Md5"}

// typeListed reports whether the Content-Type ct is one of the types
// compressed.
func (z *compressor) typeListed(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.ToLower(strings.TrimSpace(ct))
	if ct == "text/event-stream" {
		// Open for as long as its page is, each event flushed through
		// alone: it would hold a writer's megabyte all that time for
		// little gain (text/* would list it).
		return false
	}
	if ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") {
		// gRPC messages are frames the client reads from the body
		// itself, each compressed on its own if at all (grpc-encoding):
		// a gRPC client ignores Content-Encoding and would take the gzip
		// stream for frames, failing the call. (gRPC-Web, whose browser
		// clients decode an HTTP content coding, is another type.)
		return false
	}
	if z.every || z.exact[ct] {
		return true
	}
	for _, p := range z.prefixes {
		if strings.HasPrefix(ct, p) {
			return true
		}
	}
	return false
}

// hasToken reports whether the comma-separated list v holds tok (case
// insensitively, parameters ignored).
func hasToken(v, tok string) bool {
	for part := range strings.SplitSeq(v, ",") {
		if i := strings.IndexAny(part, ";="); i >= 0 {
			part = part[:i]
		}
		if strings.EqualFold(strings.TrimSpace(part), tok) {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (RFC 9110 §12.5.3): gzip or x-gzip, else *, with a weight above 0.
func acceptsGzip(h http.Header) bool {
	star := false
	for _, line := range h["Accept-Encoding"] {
		for part := range strings.SplitSeq(line, ",") {
			name, params, _ := strings.Cut(part, ";")
			name = strings.TrimSpace(name)
			ok := weightAboveZero(params)
			switch {
			case strings.EqualFold(name, "gzip"), strings.EqualFold(name, "x-gzip"):
				return ok // an explicit gzip decides
			case name == "*":
				star = ok
			}
		}
	}
	return star
}

// weightAboveZero reports whether the parameters of an Accept-Encoding
// member leave it a weight above 0 (none: 1).
func weightAboveZero(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err == nil && q > 0
	}
	return true
}

// addVary adds Accept-Encoding to dst's Vary unless it is there (or *).
func addVary(dst http.Header) {
	for _, v := range dst["Vary"] {
		if hasToken(v, "accept-encoding") || strings.TrimSpace(v) == "*" {
			return
		}
	}
	dst["Vary"] = append(dst["Vary"], "Accept-Encoding")
}

// encodeHeader makes dst, a copy of an eligible response's header,
// that of its gzip encoding: Content-Encoding, no Content-Length (the
// length is known at the end only: chunked, or the end of the stream),
// no Accept-Ranges (ranges would be of the encoding), and a strong ETag
// made weak, since the bytes differ from the identity's (as nginx does).
func encodeHeader(dst http.Header) {
	dst["Content-Encoding"] = []string{"gzip"}
	delete(dst, "Content-Length")
	delete(dst, "Accept-Ranges")
	weakenETag(dst)
}

// weakenETag makes dst's strong ETag weak.
func weakenETag(dst http.Header) {
	if et := dst["Etag"]; len(et) == 1 && strings.HasPrefix(et[0], `"`) {
		dst["Etag"] = []string{"W/" + et[0]}
	}
}

// revalidatesEncoding reports whether res, a 304 to r, revalidates the
// gzip encoding the client holds: r accepts gzip and its If-None-Match
// names the weak ETag encodeHeader made of res's strong one, not that
// one itself. The target compared them weakly (RFC 9110 §13.1.2) and
// answered with its strong ETag; but a 304 carries the ETag and Vary a
// 200 to the same request would have (§15.4.5), the encoding's, and a
// cache that took the strong one would give the encoded bytes the
// identity's validator (RFC 9111 §4.3.4). Without If-None-Match (a
// revalidation by If-Modified-Since alone) the client holds no ETag to
// keep, and the 200 to an HTTP/1.1 request accepting gzip would have
// been the encoding, its ETag weak: so is the 304's. Where the 200 would
// not have been encoded after all (too short, of a type not listed: a
// 304 seldom says) a weak ETag only costs strong comparisons (If-Range
// then sends the whole representation), while a strong one on encoded
// bytes would pass the identity's ranges.
func revalidatesEncoding(r *http.Request, res *http.Response) bool {
	et := fieldOf(res, "Etag")
	if len(et) != 1 || !strings.HasPrefix(et[0], `"`) || !acceptsGzip(r.Header) {
		return false
	}
	if len(r.Header["If-None-Match"]) == 0 {
		return r.ProtoAtLeast(1, 1)
	}
	weak, strong := false, false
	for _, line := range r.Header["If-None-Match"] {
		for s := line; ; {
			s = strings.TrimLeft(s, " \t,")
			w := strings.HasPrefix(s, "W/")
			if w {
				s = s[2:]
			}
			if len(s) < 2 || s[0] != '"' {
				break // the end, * or malformed
			}
			i := strings.IndexByte(s[1:], '"')
			if i < 0 {
				break
			}
			if s[:i+2] == et[0] {
				weak, strong = weak || w, strong || !w
			}
			s = s[i+2:]
		}
	}
	return weak && !strong
}

// gzipBody is a response body read gzip-encoded: the target's bytes go
// through a pooled gzip writer into out, from which Read serves. With
// flushEach, every read of the target's body is flushed through (a
// stream's events reach the client as they come); else gzip keeps what
// it needs to compress well until the end.
type gzipBody struct {
	src       io.ReadCloser // set before the first Read
	conn      *atomic.Int32 // the connection's count of them, or nil
	zw        *gzip.Writer
	level     int
	out       bytes.Buffer
	in        *[]byte
	flushEach bool
	done      bool
}

// errCompressBusy: maxCompressing responses are being compressed, or
// maxCompressingPerConn on the connection.
var errCompressBusy = errors.New("compress: too many responses being compressed")

// newGzipBody takes one of the maxCompressing places and, with conn (the
// client connection's count), one of its maxCompressingPerConn, or
// returns errCompressBusy; Close gives them back. Its src is set before
// the first Read.
func newGzipBody(level int, flushEach bool, conn *atomic.Int32) (*gzipBody, error) {
	if !takeCompressPlace(conn) {
		return nil, errCompressBusy
	}
	b := &gzipBody{level: level, flushEach: flushEach, conn: conn, in: bodyBufPool.Get().(*[]byte)}
	b.zw = pooledGzipWriter(level, &b.out)
	return b, nil
}

// takeCompressPlace takes one of the maxCompressing places and, with
// conn (the client connection's count), one of its
// maxCompressingPerConn; false: none is free, nothing taken.
// releaseCompressPlace gives them back.
func takeCompressPlace(conn *atomic.Int32) bool {
	if conn != nil && conn.Add(1) > maxCompressingPerConn {
		conn.Add(-1)
		return false
	}
	if compressing.Add(1) > maxCompressing {
		compressing.Add(-1)
		if conn != nil {
			conn.Add(-1)
		}
		return false
	}
	return true
}

func releaseCompressPlace(conn *atomic.Int32) {
	compressing.Add(-1)
	if conn != nil {
		conn.Add(-1)
	}
}

// pooledGzipWriter is a writer of level into w, from gzipPools when one
// is there; putGzipWriter returns it.
func pooledGzipWriter(level int, w io.Writer) *gzip.Writer {
	if zw, ok := gzipPools[level].Get().(*gzip.Writer); ok {
		zw.Reset(w)
		return zw
	}
	zw, _ := gzip.NewWriterLevel(w, level) // level checked by newCompressor
	return zw
}

func putGzipWriter(level int, zw *gzip.Writer) {
	zw.Reset(io.Discard) // not holding the response's writer
	gzipPools[level].Put(zw)
}

func (b *gzipBody) Read(p []byte) (int, error) {
	for b.out.Len() == 0 {
		if b.done {
			return 0, io.EOF
		}
		n, err := b.src.Read(*b.in)
		if n > 0 {
			b.zw.Write((*b.in)[:n]) // into out: never fails
			if b.flushEach {
				b.zw.Flush()
			}
		}
		switch {
		case err == io.EOF:
			b.zw.Close() // the rest and gzip's trailer
			b.done = true
		case err != nil:
			return 0, err
		}
	}
	return b.out.Read(p)
}

// Close closes the target's body and gives the writer and the place
// back.
func (b *gzipBody) Close() error {
	var err error
	if b.src != nil {
		err = b.src.Close()
	}
	if b.zw != nil {
		putGzipWriter(b.level, b.zw)
		b.zw = nil
		bodyBufPool.Put(b.in)
		releaseCompressPlace(b.conn)
	}
	return err
}

// fileEligible reports whether a files route's response to r, a file of
// type ct and size bytes, is one the route compresses for a client that
// accepts gzip, as eligible does for a target's: then it varies with
// Accept-Encoding. Its status is known only as http.ServeContent writes
// it: gzipFileEncoder encodes a 200 (the whole file) only. A HEAD is, as
// its GET would be (RFC 9110 §9.3.2: the same fields).
func (z *compressor) fileEligible(r *http.Request, ct string, size int64) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ProtoAtLeast(1, 1) && size >= z.minLength && z.typeListed(ct)
}

// gzipFileEncoder is what http.ServeContent writes a file through on a
// compress route, for a client that accepts gzip: a 200 goes
// gzip-encoded (encodeHeader: no Content-Length or Accept-Ranges, a weak
// ETag), unless maxCompressing responses are (then as it is); a 200 to
// HEAD gets the encoding's fields without taking a place; a 304 that
// revalidates the encoding gets its weak ETag (revalidatesEncoding); the
// others (206: ranges of the identity, 412, 416) go as they are. finish
// ends the encoding.
type gzipFileEncoder struct {
	*respWriter
	r     *http.Request
	level int
	conn  *atomic.Int32 // the client connection's count, or nil
	zw    *gzip.Writer  // while a 200 is being encoded
}

func (w *gzipFileEncoder) WriteHeader(code int) {
	h := w.Header()
	switch {
	case code == http.StatusOK && w.r.Method == http.MethodHead:
		// The GET's fields (RFC 9110 §9.3.2), no body to encode.
		encodeHeader(h)
	case code == http.StatusOK && w.zw == nil && takeCompressPlace(w.conn):
		encodeHeader(h)
		w.zw = pooledGzipWriter(w.level, w.respWriter)
	case code == http.StatusNotModified && revalidatesEncoding(w.r, &http.Response{Header: h}):
		weakenETag(h)
	}
	w.respWriter.WriteHeader(code)
}

func (w *gzipFileEncoder) Write(p []byte) (int, error) {
	if w.zw != nil {
		return w.zw.Write(p)
	}
	return w.respWriter.Write(p)
}

// finish writes the rest of the encoding and gzip's trailer and gives
// the writer and the place back.
func (w *gzipFileEncoder) finish() {
	if w.zw != nil {
		w.zw.Close()
		putGzipWriter(w.level, w.zw)
		w.zw = nil
		releaseCompressPlace(w.conn)
	}
}
