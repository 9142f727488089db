package h1server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/h1head"
	"github.com/gmproxy/gmproxy/internal/monoclock"
	"golang.org/x/net/http/httpguts"
)

// Connection states, for Shutdown.
const (
	stateNew    int32 = iota // no request read yet
	stateActive              // reading or serving a request
	stateIdle                // waiting for the next request
)

// conn is one connection being served; it is reused for every request.
type conn struct {
	srv        *Server
	rwc        net.Conn
	started    int64 // monoclock ns: Shutdown's grace for a first request is not moved by a wall clock step
	state      atomic.Int32
	remoteAddr string
	ctx        context.Context // the requests' context, a child of scope
	cancel     context.CancelFunc
	scope      *connScope

	r        connReader
	br       *bufio.Reader
	scan     headScan
	hijacked bool

	w response // the current request's writer
	// body is the current request's body, when it has one: a new one for
	// each request, never reused, since a reader the handler left behind
	// (a transport still sending the body upstream) may read it after the
	// handler returned; it must fail then, not read the next request's
	// bytes, or, once the connection's state is pooled, another client's.
	body *body
	// wdl is the write deadline a handler set that is in place (zero:
	// none): it stays for the next request (see response.WriteDeadline).
	wdl time.Time

	watch watcher

	// hdr is the storage of the plain requests' Header maps
	// (Server.ReuseHeader).
	hdr h1head.Reuse
}

var connPool sync.Pool

func newConn(s *Server, rwc net.Conn) *conn {
	c, _ := connPool.Get().(*conn)
	if c == nil {
		c = new(conn)
		c.watch.cond.L = &c.watch.mu
	}
	c.srv, c.rwc = s, rwc
	c.started = monoclock.Now()
	c.state.Store(stateNew) // a pooled conn ended in another state
	c.wdl = time.Time{}
	c.r = connReader{c: c}
	c.w.c = c
	return c
}

// putConn returns c to the pool once nothing refers to it any more.
func putConn(c *conn) {
	if c.hijacked {
		return // the hijacker may still use the request's writer
	}
	c.w.reset()
	c.release()
	c.srv, c.rwc, c.ctx, c.cancel, c.scope, c.br = nil, nil, nil, nil, nil, nil
	c.remoteAddr, c.hijacked = "", false
	c.scan = headScan{host: c.scan.host[:0]}
	connPool.Put(c)
}

// maxKeptHost bounds the copy of a Host field a connection keeps for the
// next request's scan (a name and a port fit).
const maxKeptHost = 512

// release lets go of what the last request left that the next one does
// not need, once its response is done: the request's fields and body,
// and a long Host field's copy. A connection waiting for its next request
// (up to idle_timeout; many may) then holds a small bounded amount, not
// the largest head it was sent. (The response's part is dropped as it
// ends, dropHeader.)
func (c *conn) release() {
	c.hdr.Clear() // the last request's fields, and its head they point into, go; the storage stays
	if cap(c.scan.host) > maxKeptHost {
		c.scan.host = nil
	}
	c.body = nil
}

var brPool sync.Pool

func getBufioReader(r io.Reader) *bufio.Reader {
	if br, _ := brPool.Get().(*bufio.Reader); br != nil {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, 4<<10)
}

func putBufioReader(br *bufio.Reader) {
	br.Reset(nil)
	brPool.Put(br)
}

// connReader is what the bufio.Reader reads from: the connection, with
// the header size limit, the header scan and the byte a background read
// took.
type connReader struct {
	c        *conn
	remain   int64 // bytes that may still be read (header size limit)
	scanning bool
	hasByte  bool
	byteBuf  [1]byte
}

const noLimit = 1<<63 - 1

// fieldOverhead is what each field line costs against MaxHeaderBytes
// beyond its bytes: the 32 bytes an HTTP/2 field costs against the same
// limit (RFC 7541 §4.1, SETTINGS_MAX_HEADER_LIST_SIZE), so that a head of
// tiny fields does not hold a map many times its size (a 5-byte line
// costs some 100 bytes of header map) on HTTP/1.1 alone.
const fieldOverhead = 32

func (r *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	var n int
	var err error
	if r.hasByte {
		p[0] = r.byteBuf[0]
		r.hasByte = false
		n = 1
	} else {
		n, err = r.c.rwc.Read(p)
	}
	r.remain -= int64(n)
	if r.scanning {
		f := r.c.scan.fields
		r.c.scan.feed(p[:n])
		r.remain -= fieldOverhead * int64(r.c.scan.fields-f)
		r.scanning = !r.c.scan.done
	}
	return n, err
}

// statusError is a request refused before its handler runs.
type statusError struct {
	code int
	text string
}

func (e *statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

var (
	errTooLarge        = &statusError{http.StatusRequestHeaderFieldsTooLarge, ""}
	errURITooLong      = &statusError{http.StatusRequestURITooLong, ""} // as nginx's large_client_header_buffers
	errUnsupportedTE   = &statusError{http.StatusNotImplemented, ""}
	errMissingHost     = &statusError{http.StatusBadRequest, "missing required Host header"}
	errMalformedHost   = &statusError{http.StatusBadRequest, "malformed Host header"}
	errFieldName       = &statusError{http.StatusBadRequest, "invalid header name"}
	errVersion         = &statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	errTE10            = &statusError{http.StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request"}
	errExpectationFail = &statusError{http.StatusExpectationFailed, ""}
)

// serve runs the connection's request loop.
func (c *conn) serve() {
	s := c.srv
	if ra := c.rwc.RemoteAddr(); ra != nil {
		c.remoteAddr = ra.String()
	}
	ctx := context.Background()
	if s.ConnContext != nil {
		ctx = s.ConnContext(ctx, c.rwc)
	}
	c.scope = &connScope{Context: ctx, canEnd: ctx.Done() != nil}
	c.ctx, c.cancel = context.WithCancel(c.scope)
	c.scope.reqCtx = c.ctx
	c.br = getBufioReader(&c.r)
	defer c.end()

	if d := s.readHeaderTimeout(); d > 0 {
		c.rwc.SetReadDeadline(time.Now().Add(d))
	}
	for first := true; ; first = false {
		if !first && c.br.Buffered() == 0 {
			// Wait for the next request's first byte under the idle
			// timeout; the header timeout starts with it.
			c.state.Store(stateIdle)
			if s.shutting.Load() {
				return
			}
			setReadTimeout(c.rwc, s.idleTimeout())
			if _, err := c.br.Peek(1); err != nil {
				return
			}
			if !c.headBuffered() {
				setReadTimeout(c.rwc, s.readHeaderTimeout())
			}
		} else if first && c.br.Buffered() == 0 {
			// New until its first byte: Shutdown closes a connection
			// that sent nothing within newConnGrace (as net/http does).
			// (readRequest counts what this reads against the head's
			// limit.)
			c.r.remain = s.maxHeaderBytes() + 4096
			if _, err := c.br.Peek(1); err != nil {
				c.refuse(err)
				return
			}
		}
		c.state.Store(stateActive)
		req, err := c.readRequest()
		if err != nil {
			c.refuse(err)
			return
		}
		if !c.serveRequest(req) {
			return
		}
		c.release()
		if s.shutting.Load() {
			return
		}
		if c.br.Buffered() > 0 {
			setReadTimeout(c.rwc, s.readHeaderTimeout()) // a pipelined request
		}
	}
}

func setReadTimeout(c net.Conn, d time.Duration) {
	if d > 0 {
		c.SetReadDeadline(time.Now().Add(d))
	} else {
		c.SetReadDeadline(time.Time{})
	}
}

// end closes the connection (unless hijacked) and releases it.
func (c *conn) end() {
	c.cancel()
	if !c.hijacked {
		c.rwc.Close()
		putBufioReader(c.br)
	}
	c.srv.untrack(c)
	putConn(c)
}

// readRequest reads the next request's header and checks it.
func (c *conn) readRequest() (*http.Request, error) {
	s := c.srv
	t0 := time.Now()
	c.scope.start = t0
	// RFC 9112 §2.2: ignore the empty lines some clients send before a
	// request-line (after a body: a POST's, a PUT's), as nginx does
	// before any request; net/http only after a POST. The first byte is
	// buffered already (serve waited for it): only a line end waits for
	// more.
	if b, _ := c.br.Peek(1); len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
		if b, _ := c.br.Peek(4); len(b) > 0 { // a request is longer: waiting is fine
			n := 0
			for n < len(b) && (b[n] == '\r' || b[n] == '\n') {
				n++
			}
			c.br.Discard(n)
		}
	}
	// bufio's read-ahead slack, as net/http; what is buffered already (a
	// pipelined request, or what the wait for the first byte read) counts.
	c.r.remain = s.maxHeaderBytes() + 4096 - int64(c.br.Buffered())
	c.scan.reset()
	if b, _ := c.br.Peek(c.br.Buffered()); len(b) > 0 {
		c.scan.feed(b)
		c.r.remain -= fieldOverhead * int64(c.scan.fields)
	}
	c.r.scanning = !c.scan.done
	req, err := c.readHead(c.ctx)
	c.r.scanning = false
	if err != nil {
		if c.r.remain <= 0 {
			if !c.scan.seen {
				return nil, errURITooLong // the request line did not end
			}
			return nil, errTooLarge
		}
		if c.scan.te && isUnsupportedTE(err) {
			return nil, errUnsupportedTE
		}
		return nil, err
	}
	if c.r.remain < 0 {
		// Over the limit only with the fields' overhead, counted once
		// their bytes were read: the head was read whole all the same.
		return nil, errTooLarge
	}
	c.r.remain = noLimit
	if req.ProtoMajor != 1 {
		return nil, errVersion
	}
	// RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
	// framing. ReadRequest ignores the field in HTTP/1.0 (and frames the
	// body by Content-Length, or as empty), so the chunked body that
	// follows would be read as the next request: refuse it and close, as
	// nginx does.
	if req.ProtoMinor == 0 && c.scan.te {
		return nil, errTE10
	}
	if c.scan.hosts == 0 {
		if req.ProtoMinor >= 1 && req.Method != http.MethodConnect {
			return nil, errMissingHost
		}
	} else if !validHost(req.Host, c.scan.hostValue(), req.URL.Host == "") {
		return nil, errMalformedHost
	}
	// ReadRequest checked the field values and lets through one kind of
	// invalid name (with a space before the colon, go.dev/issue/34540).
	for k := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, errFieldName
		}
	}
	req.RemoteAddr = c.remoteAddr
	if d := s.ReadTimeout; d > 0 {
		c.rwc.SetReadDeadline(t0.Add(d))
	} else {
		c.rwc.SetReadDeadline(time.Time{})
	}
	if d := s.WriteTimeout; d > 0 {
		c.rwc.SetWriteDeadline(time.Now().Add(d))
	}
	return req, nil
}

// headBuffered reports whether the buffer holds a whole request head (an
// empty line after the first, not counting the empty lines readRequest
// skips after a POST): reading it needs no more reads, and so no header
// timeout (one deadline less per keep-alive request).
func (c *conn) headBuffered() bool {
	b, _ := c.br.Peek(c.br.Buffered())
	b = bytes.TrimLeft(b, "\r\n")
	return bytes.Contains(b, []byte("\n\r\n")) || bytes.Contains(b, []byte("\n\n"))
}

// readHead reads the request head: a plain head complete in the buffer
// is parsed here, any other by http.ReadRequest.
func (c *conn) readHead(ctx context.Context) (*http.Request, error) {
	if c.br.Buffered() == 0 {
		if _, err := c.br.Peek(1); err != nil {
			return nil, err // as ReadRequest's, when nothing was read
		}
	}
	b, _ := c.br.Peek(c.br.Buffered())
	var plain http.Request
	var reuse *h1head.Reuse
	if c.srv.ReuseHeader {
		reuse = &c.hdr
	}
	if n, ok := h1head.RequestReusing(b, &plain, reuse); ok {
		c.br.Discard(n)
		return plain.WithContext(ctx), nil
	}
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return nil, err
	}
	return req.WithContext(ctx), nil
}

// validHost checks the Host field: its raw value, and the request's Host
// when it came from the field (origin-form target).
func validHost(reqHost string, raw []byte, fromField bool) bool {
	if fromField && !httpguts.ValidHostHeader(reqHost) {
		return false
	}
	if string(raw) == reqHost {
		return fromField || httpguts.ValidHostHeader(reqHost)
	}
	return httpguts.ValidHostHeader(string(raw))
}

// isUnsupportedTE reports ReadRequest's refusal of a Transfer-Encoding
// (its error type is not exported; the messages are those of
// net/http's transfer.go).
func isUnsupportedTE(err error) bool {
	m := err.Error()
	return strings.HasPrefix(m, "unsupported transfer encoding") || strings.HasPrefix(m, "too many transfer encodings")
}

// refuse answers a request that could not be read, as net/http does, or
// says nothing when the client went away or stalled.
func (c *conn) refuse(err error) {
	const hdrs = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	var se *statusError
	switch {
	case err == errTooLarge || err == errURITooLong:
		line := err.(*statusError).statusLine()
		c.rwc.Write([]byte(line + hdrs + line[len("HTTP/1.1 "):]))
	case err == errUnsupportedTE:
		c.rwc.Write([]byte("HTTP/1.1 501 Not Implemented" + hdrs + "Unsupported transfer encoding"))
	case isCommonNetReadError(err):
		return
	case errors.As(err, &se):
		c.rwc.Write([]byte(se.statusLine() + hdrs + se.statusLine()[len("HTTP/1.1 "):]))
	default:
		const msg = "400 Bad Request"
		c.rwc.Write([]byte("HTTP/1.1 " + msg + hdrs + msg))
	}
	// Whatever was refused, the client may still be sending (the body
	// of a request refused for its Expect, Transfer-Encoding or Host, or
	// the rest of a head): closing with those bytes unread resets the
	// connection, and the answer, delimited by the close (RFC 9112
	// §6.3), reads as cut off, or is lost with the client's receive
	// queue.
	c.linger()
}

func (e *statusError) statusLine() string {
	l := "HTTP/1.1 " + itoa3(e.code) + " " + http.StatusText(e.code)
	if e.text != "" {
		l += ": " + e.text
	}
	return l
}

func itoa3(n int) string {
	return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
}

func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// lingerTime bounds how long a connection closed with unread request
// bytes keeps reading them, so that closing does not reset the
// connection (and lose the response) while the client is still sending.
const lingerTime = 500 * time.Millisecond

// linger reads and drops what the client still sends, until it closes,
// lingerTime passes or 1 MiB was dropped.
func (c *conn) linger() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.rwc.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c.rwc, 1<<20)
}

// serveRequest runs the handler for req and finishes its response. It
// returns whether the connection can serve another request.
func (c *conn) serveRequest(req *http.Request) (keep bool) {
	s := c.srv
	w := &c.w
	w.start(req)
	if c.scan.ambiguous() {
		w.closeAfter = true // RFC 9112 §6.1
	}
	// RFC 9110 §10.1.1: 100-continue is sent when the handler first
	// reads the body; other expectations cannot be met.
	var expectContinue bool
	if ex := req.Header["Expect"]; len(ex) > 0 {
		if !httpguts.HeaderValuesContainsToken(ex[:1], "100-continue") {
			if ex[0] != "" {
				c.refuse(errExpectationFail)
				return false
			}
		} else {
			expectContinue = req.ProtoMinor >= 1 && req.ContentLength != 0
		}
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	w.expectContinue = expectContinue
	c.body = nil
	if hasBody {
		c.body = &body{c: c}
		c.body.start(req.Body, req.ContentLength, expectContinue)
		req.Body = c.body
	}
	if !c.wdl.IsZero() && time.Until(c.wdl) < minKeptWrite {
		// A kept deadline about to pass would fail a handler that sets
		// none of its own.
		c.rwc.SetWriteDeadline(time.Time{})
		c.wdl = time.Time{}
	}
	c.watch.begin(!hasBody)
	if !c.runHandler(req) {
		// The handler panicked: the connection closes. What the client
		// still sends (a body the handler left unread, a pipelined
		// request) is read and dropped for a while first, as on the
		// refusal paths: closing over it would reset the connection and
		// lose what the handler had sent (a 500 it flushed before it
		// failed) in the client's receive queue.
		if !c.hijacked {
			if hasBody {
				c.body.settle() // a reader the handler left behind fails from now on
			}
			if !c.body.sawEOF() || c.br.Buffered() > 0 {
				c.linger()
			}
		}
		return false
	}
	c.watch.end(c)
	if c.hijacked {
		return false
	}
	// A body the handler left unread is read to its end (up to
	// maxDrainBytes) to keep the connection, after the response is out:
	// a client still sending it (a target answered 403 or 413 before
	// reading it) must not wait for the drain, up to idle_timeout, for
	// an answer that is ready. (net/http's server discards up to 256 KiB
	// before its header instead.)
	drain := false
	if hasBody {
		done, keep := c.body.settle()
		drain = !done
		if done && !keep {
			w.closeAfter = true
		}
	}
	// A response after which the connection closes goes out with the
	// protocol's close_notify, unless the close lingers for the client's
	// excess body. A drain that follows (the response closes the
	// connection anyway: Connection: close, HTTP/1.0) only reads, which
	// the protocols allow after close_notify.
	w.lastWrite = !(hasBody && c.body.tooBig)
	w.finish()
	// After a 101 (which closes the connection, see commitHeader) the
	// client may be sending in the new protocol already: closing over
	// those bytes unread would reset the connection under the 101.
	linger := hasBody && c.body.tooBig || w.status == http.StatusSwitchingProtocols
	switch {
	case drain && w.closeAfter:
		// The connection closes whatever the rest of the body is: no
		// need to wait for all of it (up to idle_timeout), only to let
		// the response arrive before the close (linger).
		linger = true
	case drain && !c.body.finish():
		w.closeAfter = true
		linger = c.body.tooBig
	}
	if s.WriteTimeout > 0 {
		// The server's own bound ends with the response. A deadline the
		// handler set stays, as with net/http: the proxy's send_timeout
		// keeps one armed across a connection's requests, re-arming it
		// only when it grows old (response.WriteDeadline).
		c.rwc.SetWriteDeadline(time.Time{})
		c.wdl = time.Time{}
	}
	if c.watch.gone() || w.err != nil {
		return false
	}
	if w.closeAfter {
		if linger {
			c.linger()
		}
		return false
	}
	return true
}

// runHandler calls the handler; a panic is logged (except
// http.ErrAbortHandler) and ends the connection.
func (c *conn) runHandler(req *http.Request) (ok bool) {
	defer func() {
		if ok {
			return
		}
		v := recover()
		c.watch.end(c)
		if v != nil && v != http.ErrAbortHandler {
			buf := make([]byte, 16<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.srv.logger().Error("http: panic serving request", "remote", c.remoteAddr, "uri", req.RequestURI, "panic", v, "stack", string(buf))
		}
		if !c.hijacked {
			c.w.abort()
		}
	}()
	c.srv.Handler.ServeHTTP(&c.w, req)
	return true
}
