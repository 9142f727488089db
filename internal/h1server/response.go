package h1server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The write buffer: the serialized header at its start, then room for the
// headers added when the response is committed (headerReserve), then the
// body bytes, then room for the chunk and message ends (tailReserve).
// When the handler returns with the whole body in the buffer, the header
// block is moved next to the body and everything leaves in one Write.
const (
	bufSize = 20 << 10
	// directWriteMin is the size from which a handler's Write bypasses the
	// buffer once the header is out (a full TLS/TLCP record's worth).
	directWriteMin = 16 << 10
	headerReserve  = 320
	chunkReserve   = 16 // a chunk-size line
	tailReserve    = 8  // "\r\n" after a chunk, "0\r\n\r\n" after the last
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// response is the http.ResponseWriter of one request; a connection
// reuses its own for each request.
type response struct {
	c      *conn
	req    *http.Request
	header http.Header

	bufp    *[]byte // pooled buffer, nil until the first header or body byte
	buf     []byte
	hdrEnd  int // buf[:hdrEnd]: status line and handler fields
	off, n  int // buf[off:n]: body bytes not yet written
	written int64

	wroteHeader bool // a final status was set
	committed   bool // the header went out
	handlerDone bool
	status      int
	isHEAD      bool
	proto11     bool
	chunking    bool
	closeAfter  bool
	// lastWrite: when the response ends the connection, its final write
	// may carry the protocol's close_notify (see lastWriter).
	lastWrite bool
	// contentLength is the declared length, or -1.
	contentLength int64
	err           error // the connection failed a write

	// Taken from the handler's header at WriteHeader.
	te                     string
	hasTE, hasCT, hasCE    bool
	hasDate, trailers      bool
	connVals               []string // the handler's Connection field
	declared               []string // trailer names declared in Trailer
	keys                   []string // scratch for sorting
	wants10KeepAlive       bool
	wantsClose             bool
	expectContinue         bool
	continueArmed          atomic.Bool // 100 Continue may still be sent
	contMu                 sync.Mutex  // orders 100 Continue with 1xx writes
	superfluousWriteLogged bool
}

// start prepares w for req.
func (w *response) start(req *http.Request) {
	w.req = req
	if w.header == nil {
		w.header = make(http.Header)
	}
	w.status, w.written, w.contentLength = 0, 0, -1
	w.wroteHeader, w.committed, w.handlerDone, w.chunking, w.err = false, false, false, false, nil
	w.isHEAD = req.Method == http.MethodHead
	w.proto11 = req.ProtoAtLeast(1, 1)
	w.closeAfter = req.Close
	conn := req.Header["Connection"]
	w.wants10KeepAlive = req.ProtoMajor == 1 && req.ProtoMinor == 0 && httpguts.HeaderValuesContainsToken(conn, "keep-alive")
	w.wantsClose = req.Close || httpguts.HeaderValuesContainsToken(conn, "close")
	w.superfluousWriteLogged = false
	w.expectContinue = false
}

// reset clears w between connections, keeping its allocations (those of
// a small header).
func (w *response) reset() {
	w.releaseBuf()
	w.dropHeader()
	h, keys, declared := w.header, w.keys[:0], w.declared[:0]
	w.c = nil
	w.header, w.keys, w.declared = h, keys, declared
	w.continueArmed.Store(false)
}

// maxKeptFields bounds the header fields (and trailer names) whose
// storage a connection keeps for its next response once one is done.
const maxKeptFields = 64

// dropHeader empties the header map for the next response, and lets go
// of the request and of what a big header grew: emptying a map keeps
// its buckets, so a connection waiting (up to idle_timeout) for its next
// request, then the pooled state after it, would hold storage for the
// largest header it ever sent. The key lists' capacities stand for the
// map's largest size (sortedKeys listed it whole), bar fields the
// handler deleted before writing the header.
func (w *response) dropHeader() {
	if len(w.header) > maxKeptFields || cap(w.keys) > maxKeptFields {
		w.header, w.keys = make(http.Header), nil // a handler's goroutine left behind must not write to a nil map
	} else {
		clear(w.header)
	}
	if cap(w.declared) > maxKeptFields {
		w.declared = nil
	}
	w.req, w.connVals = nil, nil
}

func (w *response) Header() http.Header { return w.header }

func (w *response) getBuf() {
	if w.bufp == nil {
		w.bufp = bufPool.Get().(*[]byte)
		w.buf = *w.bufp
	}
}

// releaseBuf gives the response's buffer back: the pooled one to its
// pool, one of a huge header's own (setHeaderBlock) to the collector, so
// that neither stays with a connection waiting for its next request.
func (w *response) releaseBuf() {
	if w.bufp != nil {
		bufPool.Put(w.bufp)
	}
	w.bufp, w.buf = nil, nil
}

func (w *response) WriteHeader(code int) {
	if w.c.hijacked {
		w.c.srv.logger().Debug("http: WriteHeader on hijacked connection", "remote", w.c.remoteAddr)
		return
	}
	if w.wroteHeader {
		if !w.superfluousWriteLogged {
			w.superfluousWriteLogged = true
			w.c.srv.logger().Debug("http: superfluous WriteHeader", "remote", w.c.remoteAddr, "status", code)
		}
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code)) // as net/http
	}
	if code < 101 || code > 199 {
		w.disableContinue()
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	if cl := w.header["Content-Length"]; len(cl) > 0 {
		v, err := strconv.ParseInt(cl[0], 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logger().Debug("http: invalid Content-Length", "value", cl[0])
			delete(w.header, "Content-Length")
		}
	}
	w.serializeHeader()
}

// Fields is a response header given as field lines rather than a map:
// a backend's plain head that a proxy passes on as it came (h1head.Head).
type Fields interface {
	// AppendFields appends the field lines, "Name: value\r\n" each: names
	// are tokens, values have no control character but HTAB.
	AppendFields(b []byte) []byte
	// Get returns the first value of the field called name (compared
	// ignoring ASCII case).
	Get(name string) (string, bool)
}

// WriteFields is WriteHeader(code) for a response of contentLength bytes
// whose header is f instead of the Header map: f's lines go out as they
// are, with what the server adds (Date unless f has one; Connection:
// close when the connection ends) but never a Content-Type: f is a head
// made elsewhere (a proxy's backend's), whose lack of a type is not the
// server's to fill by sniffing the body. It does nothing and reports false when
// the response does not fit that: a status was already written, the
// Header map is not empty, code is not a final status with a body (2xx to
// 5xx but 204 and 304), contentLength is negative, the request is HEAD or
// not HTTP/1.1, or f has a Connection, Transfer-Encoding or Trailer
// field; the caller then uses the Header map and WriteHeader.
func (w *response) WriteFields(code int, contentLength int64, f Fields) bool {
	if w.c.hijacked || w.wroteHeader || len(w.header) > 0 || code < 200 || code > 599 ||
		!bodyAllowedForStatus(code) || contentLength < 0 || w.isHEAD || !w.proto11 {
		return false
	}
	for _, k := range [...]string{"Connection", "Transfer-Encoding", "Trailer"} {
		if _, ok := f.Get(k); ok {
			return false
		}
	}
	w.disableContinue()
	w.wroteHeader = true
	w.status = code
	w.contentLength = contentLength
	w.te, w.hasTE, w.trailers = "", false, false
	w.hasCT = true // no sniffed type: f is complete as it is
	ce, _ := f.Get("Content-Encoding")
	w.hasCE = ce != ""
	_, w.hasDate = f.Get("Date")
	w.connVals = nil
	w.declared = w.declared[:0]
	w.getBuf()
	w.setHeaderBlock(f.AppendFields(appendStatusLine(w.buf[:0], w.proto11, code)))
	return true
}

// disableContinue stops a pending 100 Continue: a final response (or a
// 100 sent by the handler) answers the expectation.
func (w *response) disableContinue() {
	if w.continueArmed.Load() {
		w.contMu.Lock()
		w.continueArmed.Store(false)
		w.contMu.Unlock()
	}
}

// writeContinue sends 100 Continue unless a response started (called by
// the body's first Read, on whatever goroutine reads it).
func (w *response) writeContinue() error {
	w.contMu.Lock()
	defer w.contMu.Unlock()
	if !w.continueArmed.Load() {
		return nil
	}
	w.continueArmed.Store(false)
	_, err := w.c.rwc.Write(continueLine)
	return err
}

func appendStatusLine(b []byte, proto11 bool, code int) []byte {
	if proto11 {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	if text := http.StatusText(code); text != "" {
		b = append(b, ' ')
		b = append(b, text...)
	} else {
		b = append(b, " status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// appendField appends one header line as net/http writes it: CR and LF
// in the value become spaces, surrounding white space is dropped.
func appendField(b []byte, k, v string) []byte {
	i, j := 0, len(v)
	for i < j && isSpace(v[i]) {
		i++
	}
	for j > i && isSpace(v[j-1]) {
		j--
	}
	b = append(b, k...)
	b = append(b, ": "...)
	for ; i < j; i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, "\r\n"...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// writeInformational sends a 1xx response at once, with the handler's
// fields (RFC 8297: they stay for the final response).
func (w *response) writeInformational(code int) {
	if !w.proto11 {
		// RFC 9110 §15.2: a server must not send a 1xx response to an
		// HTTP/1.0 client, which takes the first status line it reads
		// for the response (a 103's empty body, then the real response
		// read as garbage).
		return
	}
	w.contMu.Lock()
	defer w.contMu.Unlock()
	if w.err != nil {
		return
	}
	b := appendStatusLine(make([]byte, 0, 256), w.proto11, code)
	for _, k := range w.sortedKeys() {
		if k == "Content-Length" || k == "Transfer-Encoding" || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range w.header[k] {
			b = appendField(b, k, v)
		}
	}
	b = append(b, "\r\n"...)
	if _, err := w.c.rwc.Write(b); err != nil {
		w.err = err
	}
}

func (w *response) sortedKeys() []string {
	ks := w.keys[:0]
	for k := range w.header {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	w.keys = ks
	return ks
}

func bodyAllowedForStatus(code int) bool {
	return !(code >= 100 && code <= 199 || code == 204 || code == 304)
}

// serializeHeader writes the status line and the handler's fields into
// the buffer (changes to the header map after WriteHeader are not sent,
// trailers aside) and notes what commit needs from them.
func (w *response) serializeHeader() {
	h := w.header
	code := w.status
	w.te = ""
	if te := h["Transfer-Encoding"]; len(te) > 0 {
		w.te = te[0]
	}
	w.hasTE = w.te != ""
	_, w.hasCT = h["Content-Type"]
	w.hasCE = len(h["Content-Encoding"]) > 0 && h["Content-Encoding"][0] != ""
	_, w.hasDate = h["Date"]
	w.connVals = h["Connection"]
	w.declared = w.declared[:0]
	w.trailers = false
	for _, v := range h["Trailer"] {
		w.trailers = true
		for f := range strings.SplitSeq(v, ",") {
			f = http.CanonicalHeaderKey(strings.TrimSpace(f))
			switch f {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				w.declared = append(w.declared, f)
			}
		}
	}
	if w.contentLength != -1 && w.hasTE && w.te != "identity" {
		w.c.srv.logger().Debug("http: response with both Transfer-Encoding and Content-Length", "te", w.te)
		w.contentLength = -1
	}
	noBody := w.isHEAD || !bodyAllowedForStatus(code)
	// Which of the handler's framing fields go out as they are.
	keepTE := !noBody && w.contentLength == -1 && w.proto11 && w.hasTE && w.te != "identity" && w.te != "chunked"
	keepCL := w.contentLength != -1 && !(code == 304 || !bodyAllowedForStatus(code))
	keepCT := code != 304

	w.getBuf()
	b := appendStatusLine(w.buf[:0], w.proto11, code)
	for _, k := range w.sortedKeys() {
		switch {
		case strings.HasPrefix(k, http.TrailerPrefix):
			w.trailers = true
			continue
		case k == "Connection":
			continue // commit decides
		case k == "Transfer-Encoding" && !keepTE,
			k == "Content-Length" && !keepCL,
			k == "Content-Type" && !keepCT,
			!httpguts.ValidHeaderFieldName(k):
			continue
		}
		for _, v := range h[k] {
			b = appendField(b, k, v)
		}
	}
	w.setHeaderBlock(b)
}

// setHeaderBlock takes b, the status line and the handler's fields
// written at the start of w.buf, as the header block; body bytes follow
// after room for the fields commit adds.
func (w *response) setHeaderBlock(b []byte) {
	if len(b)+headerReserve+chunkReserve > len(w.buf)-tailReserve-1024 || len(b) > 0 && &b[0] != &w.buf[0] {
		// Huge header (or one that outgrew the buffer while written):
		// a buffer of its own.
		nb := make([]byte, len(b)+headerReserve+bufSize)
		copy(nb, b)
		w.releaseBuf()
		w.buf, b = nb, nb[:len(b)]
	}
	w.hdrEnd = len(b)
	w.off = w.hdrEnd + headerReserve
	w.n = w.off
}

func (w *response) Write(p []byte) (int, error) {
	if w.c.hijacked {
		return 0, http.ErrHijacked
	}
	if w.continueArmed.Load() {
		w.disableContinue()
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.committed && w.isHEAD {
		return len(p), nil
	}
	n := 0
	for len(p) > 0 {
		if w.committed && !w.chunking && w.n == w.off && len(p) >= directWriteMin {
			// Nothing buffered and a large write: it goes to the
			// connection as it is (as bufio.Writer does), so that the
			// record layer seals it in as few, full records as it can
			// (TLCP's SM4-CBC encrypts the records of one write side by
			// side; 20 KiB buffer flushes made it seal one full record
			// and a short one at a time).
			k, err := w.c.rwc.Write(p)
			n += k
			if err != nil {
				w.err = err
				return n, err
			}
			return n, nil
		}
		room := len(w.buf) - tailReserve - w.n
		if room == 0 {
			if err := w.flush(false); err != nil {
				return n, err
			}
			if w.isHEAD {
				return n + len(p), nil
			}
			continue
		}
		k := copy(w.buf[w.n:w.n+min(room, len(p))], p)
		w.n += k
		n += k
		p = p[k:]
	}
	return n, nil
}

func (w *response) WriteString(s string) (int, error) {
	// Small strings (the common case) are copied without a conversion.
	if w.wroteHeader && !w.committed && len(s) <= len(w.buf)-tailReserve-w.n && w.contentLength == -1 && w.err == nil && bodyAllowedForStatus(w.status) && !w.continueArmed.Load() {
		w.n += copy(w.buf[w.n:], s)
		w.written += int64(len(s))
		return len(s), nil
	}
	return w.Write([]byte(s))
}

func (w *response) Flush() { w.FlushError() }

func (w *response) FlushError() error {
	if w.c.hijacked {
		return http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.flush(false)
}

// flush writes the header (once) and the buffered body bytes in one
// Write; final adds the end of a chunked body with its trailers.
func (w *response) flush(final bool) error {
	if w.err != nil {
		return w.err
	}
	data := w.n - w.off
	noBody := w.isHEAD || !bodyAllowedForStatus(w.status)
	var out []byte
	start := w.off
	if !w.committed {
		w.committed = true
		hdr := w.commitHeader(final)
		if w.chunking && data > 0 {
			hdr = appendChunkLine(hdr, data)
		}
		start = w.off - len(hdr)
		copy(w.buf[start:w.off], hdr)
	} else if w.chunking && data > 0 {
		var line [chunkReserve]byte
		l := appendChunkLine(line[:0], data)
		start = w.off - len(l)
		copy(w.buf[start:], l)
	} else if data == 0 && !(final && w.chunking) {
		return nil
	}
	end := w.n
	if noBody {
		end = w.off // the body bytes were for Content-Length and sniffing only
	} else if w.chunking && data > 0 {
		end += copy(w.buf[end:], "\r\n")
	}
	out = w.buf[start:end]
	if final && w.chunking && !noBody {
		out = w.appendChunkedEnd(out)
	}
	if len(out) > 0 {
		var err error
		if lw, ok := w.c.rwc.(lastWriter); ok && final && w.closeAfter && w.lastWrite {
			_, err = lw.WriteLast(out)
		} else {
			_, err = w.c.rwc.Write(out)
		}
		if err != nil {
			w.err = err
			return err
		}
	}
	w.off, w.n = chunkReserve, chunkReserve
	return nil
}

// lastWriter is a connection that can write a server's last bytes
// together with its protocol's close_notify, in one write (a TLCP or
// TLS 1.3-SM connection through frontdoor.Conn): the response and the
// close cost one system call and one wake-up of the client.
type lastWriter interface {
	WriteLast(p []byte) (int, error)
}

func appendChunkLine(b []byte, n int) []byte {
	b = strconv.AppendInt(b, int64(n), 16)
	return append(b, "\r\n"...)
}

// appendChunkedEnd appends the last chunk and the trailers: the fields
// declared in Trailer and those set with http.TrailerPrefix, but none that
// may not be a trailer (RFC 9110 §6.5.1: framing, routing, authentication,
// caching controls...; httpguts.ValidTrailerHeader), as net/http drops
// them.
func (w *response) appendChunkedEnd(b []byte) []byte {
	b = append(b, "0\r\n"...)
	for _, k := range w.sortedKeys() {
		name, ok := strings.CutPrefix(k, http.TrailerPrefix)
		if !ok {
			if !slices.Contains(w.declared, k) {
				continue
			}
			name = k
		}
		if !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidTrailerHeader(name) {
			continue
		}
		for _, v := range w.header[k] {
			b = appendField(b, name, v)
		}
	}
	return append(b, "\r\n"...)
}

// commitHeader completes the header block with the fields the server
// adds (RFC 9112 framing, Connection, Date, a sniffed Content-Type) and
// returns it; final says the handler returned, so that a body that fits
// the buffer gets a Content-Length.
func (w *response) commitHeader(final bool) []byte {
	code := w.status
	data := w.buf[w.off:w.n]
	bodyAllowed := bodyAllowedForStatus(code)
	var autoCL bool
	if final && !w.trailers && !w.hasTE && bodyAllowed && w.contentLength == -1 && (!w.isHEAD || len(data) > 0) {
		w.contentLength = int64(len(data))
		autoCL = true
	}
	hasCL := w.contentLength != -1
	keepAlives := !w.c.srv.shutting.Load()
	var keepAliveField bool
	if w.wants10KeepAlive && (w.isHEAD || hasCL || !bodyAllowed) {
		keepAliveField = len(w.connVals) == 0
	} else if !w.proto11 || w.wantsClose {
		w.closeAfter = true
	}
	handlerClose := httpguts.HeaderValuesContainsToken(w.connVals, "close")
	if handlerClose || !keepAlives {
		w.closeAfter = true
	}
	if code == http.StatusSwitchingProtocols {
		// RFC 9110 §15.2.2: after a 101 the connection speaks the
		// protocol switched to, from the byte after the empty line. A
		// handler that hijacks the connection speaks it; one that does
		// not leaves nothing on the server that can, and the client's
		// bytes in that protocol must not be read as requests: the
		// connection closes once the handler returns. (net/http's
		// server reads them as requests.)
		w.closeAfter = true
	}
	if w.expectContinue && !w.c.body.sawEOF() {
		// The body the client offered was not read (RFC 9110 §10.1.1):
		// what follows on the connection is unknown.
		w.closeAfter = true
	}
	noBody := w.isHEAD || !bodyAllowed
	var chunkedField bool
	switch {
	case noBody, hasCL:
	case w.proto11:
		if w.hasTE && w.te == "identity" {
			w.closeAfter = true // delimited by closing
		} else {
			w.chunking, chunkedField = true, true
		}
	default:
		w.closeAfter = true
	}

	b := w.buf[:w.hdrEnd]
	dropConn := w.closeAfter && (!keepAlives || !handlerClose) && !(code == http.StatusSwitchingProtocols && len(w.header["Upgrade"]) > 0)
	if !dropConn {
		for _, v := range w.connVals {
			b = appendField(b, "Connection", v)
		}
	}
	if !w.hasDate {
		b = appendDate(b)
	}
	if autoCL {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, w.contentLength, 10)
		b = append(b, "\r\n"...)
	}
	if bodyAllowed && !w.hasCT && !w.hasCE && !w.hasTE && len(data) > 0 {
		b = append(b, "Content-Type: "...)
		b = append(b, http.DetectContentType(data)...)
		b = append(b, "\r\n"...)
	}
	switch {
	case dropConn && w.proto11:
		b = append(b, "Connection: close\r\n"...)
	case keepAliveField && !w.closeAfter:
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	if chunkedField {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	return append(b, "\r\n"...)
}

type dateEntry struct {
	sec int64
	b   []byte
}

var dateCache atomic.Pointer[dateEntry]

// appendDate appends a Date field (RFC 9110 §6.6.1), formatted once a
// second.
func appendDate(b []byte) []byte {
	now := time.Now()
	d := dateCache.Load()
	if d == nil || d.sec != now.Unix() {
		d = &dateEntry{sec: now.Unix(), b: now.UTC().AppendFormat([]byte("Date: "), http.TimeFormat)}
		d.b = append(d.b, "\r\n"...)
		dateCache.Store(d)
	}
	return append(b, d.b...)
}

// finish completes the response after the handler returned.
func (w *response) finish() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.flush(true)
	if !w.isHEAD && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.written != w.contentLength {
		w.closeAfter = true // short body: the client waits for the rest
	}
	w.releaseBuf()
	w.dropHeader()
}

// Discard drops a response none of which has reached the connection (its
// status, header and buffered body), so that the handler can write
// another in its place: a proxy whose target broke off a response it was
// still buffering answers 502 rather than close the connection with
// nothing sent, which a client cannot tell from a server that never
// answered. It reports false, and drops nothing, once the header has
// gone out, or when the connection failed or was hijacked.
func (w *response) Discard() bool {
	if w.committed || w.c.hijacked || w.err != nil {
		return false
	}
	w.wroteHeader, w.status, w.written, w.contentLength = false, 0, 0, -1
	w.releaseBuf() // the next header takes a pooled buffer again
	clear(w.header)
	return true
}

// abort drops the response of a handler that panicked.
func (w *response) abort() {
	w.handlerDone = true
	w.releaseBuf()
	w.dropHeader()
}

// Hijack implements http.Hijacker: the server lets go of the connection;
// the returned reader holds what was read past the request.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	if w.handlerDone {
		return nil, nil, errors.New("h1server: Hijack after the handler returned")
	}
	if c.hijacked {
		return nil, nil, http.ErrHijacked
	}
	w.disableContinue()
	if w.wroteHeader {
		if err := w.flush(false); err != nil {
			return nil, nil, err
		}
	}
	c.watch.end(c)
	c.hijacked = true
	// The request's deadlines (ReadTimeout, WriteTimeout, a handler's
	// kept write deadline) are the server's bounds on one HTTP exchange,
	// not on the protocol taking over (a WebSocket lives for hours): the
	// hijacker gets the connection without them, as from net/http.
	c.rwc.SetDeadline(time.Time{})
	c.wdl = time.Time{}
	if c.r.hasByte {
		c.br.Peek(c.br.Buffered() + 1)
	}
	c.r.remain, c.r.scanning = noLimit, false
	c.srv.untrack(c)
	w.releaseBuf()
	return c.rwc, bufio.NewReadWriter(c.br, bufio.NewWriter(c.rwc)), nil
}

// SetReadDeadline and SetWriteDeadline are for http.ResponseController.
func (w *response) SetReadDeadline(t time.Time) error { return w.c.rwc.SetReadDeadline(t) }

// A write deadline the handler sets outlives its response, as with
// net/http's server, unless the server has a WriteTimeout (which it sets
// for each request and clears after the response) or the deadline is
// less than minKeptWrite away when the next request starts.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.wdl = t
	return w.c.rwc.SetWriteDeadline(t)
}

// minKeptWrite: a handler's write deadline closer than this when the next
// request starts is cleared.
const minKeptWrite = time.Second

// WriteDeadline returns the write deadline in place that a handler set,
// for this request or an earlier one of the connection; zero when there
// is none (none was set, the server's WriteTimeout governs, or it was
// cleared).
func (w *response) WriteDeadline() time.Time { return w.c.wdl }

// EnableFullDuplex is for http.ResponseController: the request body can
// always be read after the response started.
func (w *response) EnableFullDuplex() error { return nil }
