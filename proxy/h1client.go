package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/h1head"
	"github.com/gmproxy/gmproxy/internal/h1server"
	"github.com/gmproxy/gmproxy/internal/monoclock"
	"golang.org/x/net/http/httpguts"
)

// h1Client is the upstream HTTP/1.1 client of the common request: one
// without Upgrade and without a body, or with a small body of known
// length (h1Carries). It writes the request and reads the response on the
// caller's goroutine over a pooled connection, where http.Transport hands
// every request to a per-connection write goroutine and every response
// back from a read goroutine (two goroutine wake-ups and their futex calls
// per request). Other requests (Expect: 100-continue, bodies of unknown or
// larger length, trailers) and Upgrade requests stay on http.Transport.
//
// Semantics kept from the Transport configuration of the upstream:
// MaxIdleConnsPerHost (negative: no pool), IdleConnTimeout,
// ResponseHeaderTimeout (a timeout error, 504 for the proxy),
// MaxResponseHeaderBytes, the request context aborting the exchange, dial
// errors as *dialError, 1xx responses other than 101 skipped, and one
// transparent retry on a fresh connection when a reused one turns out to
// be closed before any response byte (replayable requests only, as
// http.Transport does). Every request takes a pooled connection only
// after checking that the backend has neither closed it nor sent anything
// on it (alive): http.Transport learns both from its read goroutine, which
// this client does not have.
type h1Client struct {
	dial           DialFunc
	maxIdle        int
	idleTimeout    time.Duration
	headerTimeout  time.Duration
	readTimeout    time.Duration // between two reads of a body; 0: none
	writeTimeout   time.Duration // a write of the request taking no byte; 0: none
	maxHeaderBytes int64

	// gone reports whether addr is the address of a target a refresh of
	// the upstream's names removed: a connection to it that ends an
	// exchange is closed, not pooled (nil: none is ever removed).
	gone func(addr string) bool

	mu   sync.Mutex
	idle map[string][]*h1Conn // by target address, most recent last
}

// newH1Client makes the client of an upstream whose Transport is t;
// readTimeout bounds the wait for each read of a response body and
// writeTimeout that for each write of a request (0: none), as
// Upstream.readTimeout and writeTimeout do on the Transport's exchanges.
func newH1Client(t *http.Transport, dial DialFunc, readTimeout, writeTimeout time.Duration) *h1Client {
	return &h1Client{
		dial:           dial,
		maxIdle:        t.MaxIdleConnsPerHost,
		idleTimeout:    t.IdleConnTimeout,
		headerTimeout:  t.ResponseHeaderTimeout,
		readTimeout:    readTimeout,
		writeTimeout:   writeTimeout,
		maxHeaderBytes: t.MaxResponseHeaderBytes,
		idle:           map[string][]*h1Conn{},
	}
}

// h1Conn is one pooled backend connection.
type h1Conn struct {
	cl    *h1Client
	addr  string
	c     net.Conn
	lr    headerLimitReader
	br    *bufio.Reader
	bw    *bufio.Writer
	timer *time.Timer // closes the connection when idle too long
	// interrupt fails a blocked read or write (the request's context
	// ended); made once per connection rather than once per exchange.
	interrupt func()
	// hdrArmed is when the header timeout's read deadline was set
	// (monoclock ns; 0: none in place). The deadline runs on the
	// monotonic clock, and so must its age: on the wall clock, a step
	// back kept a deadline long past, failing the next request at once.
	hdrArmed int64
	// sw bounds the writes of requests by the write timeout (bw writes
	// through it when there is one); interrupted tells it an interrupt
	// put the deadlines in the past.
	sw          sendTimed
	interrupted atomic.Bool
	// cw is what bw writes to (the connection, or sw): it keeps the
	// error of a failed write, the target's doing, which a failed copy
	// of the body does not tell from the client's.
	cw connWriter
	// otherArmed: a read deadline not hdrArmed's (a body's read timeout,
	// a route's own header wait) may be left on the connection, which an
	// exchange without a header timeout clears, and one with the
	// client's replaces.
	otherArmed bool
	// head holds the fields of the last response read with passOn, until
	// its body is read (the connection is not reused before).
	head h1head.Head
	// scan finds the Connection fields of a head read by http.ReadResponse.
	scan h1head.HeadScan
}

// headerLimitReader bounds the bytes read from the connection while a
// response header is parsed (n < 0: no bound), and gives them to scan
// while one is set.
type headerLimitReader struct {
	c    net.Conn
	n    int64
	scan *h1head.HeadScan
}

var errResponseHeaderTooLarge = errors.New("proxy: upstream response header too large")

func (r *headerLimitReader) Read(p []byte) (int, error) {
	if r.n < 0 {
		return r.c.Read(p)
	}
	if r.n == 0 {
		return 0, errResponseHeaderTooLarge
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	n, err := r.c.Read(p)
	r.n -= int64(n)
	if r.scan != nil {
		r.scan.Write(p[:n])
	}
	return n, err
}

// aLongTimeAgo is a deadline in the past, to interrupt a blocked read or
// write.
var aLongTimeAgo = time.Unix(1, 0)

// replayable reports whether a request may be sent again after a reused
// connection failed (the rule of http.Transport).
func replayable(r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody {
		return false
	}
	if idempotent(r.Method) {
		return true
	}
	_, a := r.Header["Idempotency-Key"]
	_, b := r.Header["X-Idempotency-Key"]
	return a || b
}

// maxH1Body bounds the request bodies h1Client sends: written before the
// response is read, a body must fit in the backend's socket receive
// buffer (Linux starts it at 128 KiB), so that a backend answering
// before reading it cannot block the write.
const maxH1Body = 64 << 10

// h1Carries reports whether h1Client sends req (one without Upgrade): no
// body, or a body of known length up to maxH1Body without Expect or
// trailers that writeRequest writes itself.
func h1Carries(req *http.Request) bool {
	if req.Body == nil {
		return true
	}
	_, expect := req.Header["Expect"]
	return !expect && req.ContentLength > 0 && req.ContentLength <= maxH1Body && writesPlainly(req)
}

// RoundTrip sends a request h1Carries on a pooled connection.
func (cl *h1Client) RoundTrip(req *http.Request) (*http.Response, error) {
	return cl.roundTripHead(req, false, 0, 0)
}

// roundTripHead is RoundTrip; with passOn a plain final response with a
// body comes back without its Header map (nil) when it has no hop-by-hop
// field: its fields are in the body's passOn head (h1Body.head), for the
// proxy to write to its client as they are, or to fill the map from.
// readTimeout and headerTimeout, when not 0, replace the client's for
// this exchange's response body and head (negative: none; a route's own
// timeouts.read and timeouts.response_header).
func (cl *h1Client) roundTripHead(req *http.Request, passOn bool, readTimeout, headerTimeout time.Duration) (*http.Response, error) {
	if err := checkFields(req.Header); err != nil {
		return nil, err
	}
	ctx := req.Context()
	replay := replayable(req)
	for try := 0; ; try++ {
		pc, reused, err := cl.get(ctx, req.URL.Host)
		if err != nil {
			return nil, err
		}
		res, err, fresh := pc.roundTrip(ctx, req, passOn, readTimeout, headerTimeout)
		if err == nil {
			return res, nil
		}
		if reused && fresh && try == 0 && ctx.Err() == nil && replay {
			continue // the pooled connection was closed by the backend
		}
		return nil, err
	}
}

// checkFields refuses a header http.Transport refuses to send: a name
// that is no token, a value with a control character but HTAB (RFC 9110
// §5.5). http.Request.Write, which writeRequest follows, would send a NUL
// as it is (a backend in C ends the value there), turn a line break into
// a space and drop a bad name: the target would get another request than
// the one the proxy made.
func checkFields(h http.Header) error {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("proxy: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				// The value may be a secret: not in the error.
				return fmt.Errorf("proxy: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// get returns an idle connection to addr, or dials one. An idle connection
// is taken only if alive says so: the backend has neither closed it nor
// sent anything on it since its last response. Bytes nobody asked for (a
// body after a HEAD response, a second response) would otherwise be read
// as the next request's response; net/http's Transport closes such a
// connection too ("Unsolicited response received on idle HTTP channel").
// Bytes that come once the connection carries the next request are not
// seen so: a bodiless response that announced a body is not pooled
// (announcesBody).
func (cl *h1Client) get(ctx context.Context, addr string) (*h1Conn, bool, error) {
	cl.mu.Lock()
	for l := cl.idle[addr]; len(l) > 0; l = cl.idle[addr] {
		pc := l[len(l)-1]
		l[len(l)-1] = nil
		cl.idle[addr] = l[:len(l)-1]
		if !pc.timer.Stop() {
			continue // the idle timer fired and is closing it
		}
		if !alive(pc.c) {
			pc.c.Close()
			continue
		}
		cl.mu.Unlock()
		return pc, true, nil
	}
	cl.mu.Unlock()
	c, err := cl.dial(ctx, "tcp", addr)
	if err != nil {
		var de *dialError
		if !errors.As(err, &de) {
			err = &dialError{err}
		}
		return nil, false, err
	}
	pc := &h1Conn{cl: cl, addr: addr, c: c}
	pc.interrupt = func() {
		pc.interrupted.Store(true)
		c.SetDeadline(aLongTimeAgo)
	}
	pc.lr = headerLimitReader{c: c, n: -1}
	pc.br = bufio.NewReaderSize(&pc.lr, 32<<10)
	if d := cl.writeTimeout; d > 0 {
		// A target that takes none of a request for d (its receive
		// window full) fails the exchange: 504.
		pc.sw = newSendTimed(c, d, &pc.interrupted)
		pc.cw.w = &pc.sw
	} else {
		pc.cw.w = c
	}
	pc.bw = bufio.NewWriterSize(&pc.cw, 4<<10)
	return pc, false, nil
}

// put returns a connection whose exchange ended cleanly to the pool.
func (cl *h1Client) put(pc *h1Conn) {
	if pc.br.Buffered() > 0 { // bytes nobody asked for
		pc.c.Close()
		return
	}
	if cl.gone != nil && cl.gone(pc.addr) {
		// A request in flight when its address was removed: nothing
		// will pick the address again.
		pc.c.Close()
		return
	}
	cl.mu.Lock()
	l := cl.idle[pc.addr]
	if len(l) >= cl.maxIdle {
		cl.mu.Unlock()
		pc.c.Close()
		return
	}
	cl.idle[pc.addr] = append(l, pc)
	if pc.timer == nil {
		pc.timer = time.AfterFunc(cl.idleTimeout, pc.expire)
	} else {
		pc.timer.Reset(cl.idleTimeout)
	}
	cl.mu.Unlock()
}

// expire closes an idle connection whose idle timeout ran out.
func (pc *h1Conn) expire() {
	cl := pc.cl
	cl.mu.Lock()
	l := cl.idle[pc.addr]
	for i, x := range l {
		if x == pc {
			copy(l[i:], l[i+1:])
			l[len(l)-1] = nil
			cl.idle[pc.addr] = l[:len(l)-1]
			break
		}
	}
	cl.mu.Unlock()
	pc.c.Close()
}

// CloseIdleConnections closes the pooled connections (like
// http.Transport's, later connections are pooled again).
func (cl *h1Client) CloseIdleConnections() {
	cl.mu.Lock()
	var all []*h1Conn
	for addr, l := range cl.idle {
		all = append(all, l...)
		delete(cl.idle, addr)
	}
	cl.mu.Unlock()
	for _, pc := range all {
		pc.timer.Stop()
		pc.c.Close()
	}
}

// closeIdleTo closes the pooled connections to addr, an address a
// refresh of the upstream's names removed.
func (cl *h1Client) closeIdleTo(addr string) {
	cl.mu.Lock()
	l := cl.idle[addr]
	delete(cl.idle, addr)
	cl.mu.Unlock()
	for _, pc := range l {
		pc.timer.Stop()
		pc.c.Close()
	}
}

// roundTrip writes req and reads the response header. fresh reports a
// failure before any response byte arrived (the request may be sent again
// on another connection when it is replayable). writeRequest reports
// WroteHeaders to the request's client trace, as http.Transport does.
func (pc *h1Conn) roundTrip(ctx context.Context, req *http.Request, passOn bool, readTimeout, headerTimeout time.Duration) (res *http.Response, err error, fresh bool) {
	// One watcher for the whole exchange: the context's end interrupts
	// the request's write (a body the backend does not read), the header
	// read and, later, the body read.
	w := watchExchange(ctx, pc.interrupt)
	sent, err := writeRequest(pc.bw, req)
	if err == nil && req.Body != nil && !sent {
		err = pc.writeBody(req)
	}
	if err == nil {
		err = pc.bw.Flush()
	}
	var early error
	if err != nil {
		if pc.cw.err == nil || req.Body == nil || ctx.Err() != nil {
			w.stop()
			pc.c.Close()
			// Fresh unless a body was (perhaps partly) read from the client.
			return nil, err, req.Body == nil
		}
		// The target stopped taking the body: it may have answered
		// before reading it (a 413, a 401) and closed, resetting the
		// connection. Its answer, already received, is read as any
		// other and passed on; without one the write's error stands.
		early = err
		pc.c.SetReadDeadline(time.Now().Add(earlyAnswerWait))
		pc.hdrArmed = 0 // not the header timeout's deadline
		// Nor another: one a previous exchange armed is replaced, and
		// must not be cleared below (the early answer's wait with it).
		pc.otherArmed = false
	}
	hd := pc.cl.headerTimeout
	if headerTimeout != 0 {
		hd = max(headerTimeout, 0) // the route's
	}
	switch {
	case early != nil:
	case hd > 0 && headerTimeout != 0:
		// A route's own wait, set for this exchange alone; the next
		// one sets its own.
		pc.c.SetReadDeadline(time.Now().Add(hd))
		pc.hdrArmed, pc.otherArmed = 0, true
		if ctx.Err() != nil {
			pc.interrupt() // the watcher may have run before the line above
		}
	case hd > 0:
		// The deadline is set d + d/8 ahead and kept while it is at
		// least d away: a busy connection sets one every d/8, not one
		// per exchange, and the wait allowed is between d and 9/8 of it.
		if n := monoclock.Now(); pc.hdrArmed == 0 || n-pc.hdrArmed >= int64(hd/8) {
			pc.c.SetReadDeadline(time.Now().Add(hd + hd/8))
			pc.hdrArmed = n
			if ctx.Err() != nil {
				pc.interrupt() // the watcher may have run before the line above
			}
		}
	case pc.otherArmed || pc.hdrArmed != 0:
		// No wait for this head: any deadline left goes.
		pc.c.SetReadDeadline(time.Time{})
		pc.otherArmed, pc.hdrArmed = false, 0
	}
	pc.lr.n = pc.cl.maxHeaderBytes
	if pc.lr.n <= 0 {
		pc.lr.n = 1 << 20
	}
	budget := pc.lr.n
	fresh = pc.br.Buffered() == 0
	for range 8 { // informational responses before the final one
		res, err = pc.readResponse(req, passOn)
		if err != nil || res.StatusCode < 100 || res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		res, fresh = nil, false
	}
	gotBytes := pc.lr.n != budget
	pc.lr.n = -1
	if err == nil && res == nil {
		err = errors.New("proxy: too many informational responses from upstream")
	}
	if err != nil {
		w.stop()
		pc.c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr, false
		}
		if early != nil {
			return nil, early, false
		}
		// Fresh: nothing at all came back (http.ReadResponse reports a
		// connection closed before the status line as ErrUnexpectedEOF).
		fresh = fresh && !gotBytes && !isTimeout(err)
		return nil, err, fresh
	}
	// The body is read under the read timeout, not the header timeout. A
	// body already buffered whole (or none) needs no more reads: the
	// deadline may stay until the next exchange sets its own (an idle
	// pooled connection is not read), one deadline change less per
	// request.
	var rd opDeadline
	if !(res.Body == http.NoBody || res.Body == nil && int64(pc.br.Buffered()) >= res.ContentLength) {
		rd.d = pc.cl.readTimeout
		if readTimeout != 0 {
			rd.d = readTimeout
		}
		if rd.d > 0 {
			dl, _ := rd.due()
			pc.c.SetReadDeadline(dl)
			pc.otherArmed = true
			if ctx.Err() != nil {
				pc.interrupt() // the watcher may have run before the line above
			}
		} else if hd > 0 || early != nil {
			pc.c.SetReadDeadline(time.Time{})
			pc.otherArmed = false
		}
		pc.hdrArmed = 0
	}
	// After a 101 the connection speaks another protocol (RFC 9110
	// §15.2.2); the proxy only tunnels it for a request that asked for
	// the switch, which this client never carries. An HTTP/1.0 response
	// ends its connection too, as in nginx: its framing ignores
	// Transfer-Encoding, which must then be taken as faulty (RFC 9112
	// §6.1).
	keep := early == nil && !res.Close && !req.Close && res.StatusCode != http.StatusSwitchingProtocols && res.ProtoAtLeast(1, 1)
	if res.Body == http.NoBody && announcesBody(res) {
		keep = false
	}
	passed := false
	if res.Header == nil {
		// Read with passOn: passed on only as a final response with a
		// body and no hop-by-hop field, else it gets its map now.
		if passed = res.Body == nil && res.StatusCode >= 200 && !hasHopByHop(&pc.head); !passed {
			pc.head.Fill(res)
		}
	}
	if res.Body == http.NoBody {
		if w.stop() && keep {
			pc.cl.put(pc)
		} else {
			pc.c.Close()
		}
		return res, nil, false
	}
	b := &h1Body{rc: res.Body, pc: pc, watch: w, keep: keep, rd: rd, ctx: ctx}
	if res.Body == nil { // h1head's: the next ContentLength bytes
		b.remain = res.ContentLength
	}
	if passed {
		b.head = &pc.head
	}
	res.Body = b
	return res, nil, false
}

// announcesBody reports whether res, read without a body, announced one:
// a Content-Length above 0 or a Transfer-Encoding, which a response to a
// HEAD and a 304 may carry (RFC 9110 §8.6, §9.3.2; RFC 9112 §6.1). A
// backend that writes that body all the same (a handler that ignores
// HEAD) may write it in a later segment than the head: the pool's peek
// (alive) finds it only when it came before the connection's next
// request, and one arriving after that was read as the next request's
// response, another client's (response desync, a cache poisoned). Such a
// connection is closed instead of pooled: a new connection for each of
// these responses (a 304 from nginx, Apache or net/http has no
// Content-Length; a HEAD's usually has one), against a response given to
// the wrong client. nginx keeps it, and closes it only when the bytes
// come while it is idle.
func announcesBody(res *http.Response) bool {
	if len(res.TransferEncoding) > 0 {
		return true
	}
	v := res.Header["Content-Length"]
	if len(v) == 0 {
		return false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	return err != nil || n > 0
}

// earlyAnswerWait bounds the wait for the answer of a target that stopped
// taking a request's body: the answer came before the failure, so it is
// normally received already.
const earlyAnswerWait = 100 * time.Millisecond

// connWriter writes to w and keeps the error of a failed write.
type connWriter struct {
	w   io.Writer
	err error
}

func (cw *connWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	if err != nil {
		cw.err = err
	}
	return n, err
}

// writeBody writes the request's body of ContentLength bytes after its
// head and closes it, as http.Request.Write does: a body that ends early
// or goes on is an error. An error reading the body (the client's: a
// timeout, max_body) is returned as it is, for the proxy to answer.
func (pc *h1Conn) writeBody(req *http.Request) error {
	defer req.Body.Close()
	n, err := io.CopyN(pc.bw, req.Body, req.ContentLength)
	if err == io.EOF {
		return fmt.Errorf("proxy: request body of %d bytes ended after %d", req.ContentLength, n)
	}
	if err != nil {
		return err
	}
	// Read the end (a request body's reader acts on it: deadlines,
	// trailers).
	var extra [1]byte
	k, err := io.ReadFull(req.Body, extra[:])
	if k > 0 {
		return fmt.Errorf("proxy: request body longer than its %d bytes", req.ContentLength)
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	return nil
}

// readResponse reads a response head: a plain one complete in the buffer
// is parsed by h1head (with passOn into pc.head, without a Header map),
// any other by http.ReadResponse, with its Connection field kept whole.
func (pc *h1Conn) readResponse(req *http.Request, passOn bool) (*http.Response, error) {
	if pc.br.Buffered() == 0 {
		if _, err := pc.br.Peek(1); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // as http.ReadResponse
			}
			return nil, err
		}
	}
	b, _ := pc.br.Peek(pc.br.Buffered())
	if passOn {
		if res, n, ok := h1head.ResponseHead(b, req, &pc.head); ok {
			pc.br.Discard(n)
			return res, nil
		}
	} else if res, n, ok := h1head.Response(b, req); ok {
		pc.br.Discard(n)
		return res, nil
	}
	// http.ReadResponse drops a Connection field that says "close", and
	// the fields it names would reach the client, and a Content-Length
	// beside Transfer-Encoding: the scan, given the head's bytes buffered
	// and those read for it, notes both.
	pc.scan.Reset()
	pc.scan.Write(b)
	pc.lr.scan = &pc.scan
	res, err := http.ReadResponse(pc.br, req)
	pc.lr.scan = nil
	if err != nil {
		return nil, err
	}
	if pc.scan.LengthAndCoding() && res.ProtoAtLeast(1, 1) {
		return nil, errLengthAndCoding
	}
	if !fieldNamesValid(res.Header) {
		return nil, errFieldName
	}
	if res.StatusCode == http.StatusNoContent && pc.scan.Framed() {
		// It announced a body it must not have: what the target writes
		// next could be read as the next exchange's response.
		res.Close = true
	}
	if v := pc.scan.Connection(); len(v) > 0 && len(res.Header["Connection"]) == 0 {
		res.Header["Connection"] = v
	}
	return res, nil
}

// errLengthAndCoding refuses an HTTP/1.1 response head with both
// Content-Length and Transfer-Encoding: net/http reads it as chunked, but
// the two framings may be a backend's response splitting (RFC 9112 §6.3:
// handled as an error); nginx answers 502 too. (An HTTP/1.0 response is
// read by its Content-Length and ends its connection: RFC 9112 §6.1.)
var errLengthAndCoding = errors.New("malformed response: both Content-Length and Transfer-Encoding")

// errFieldName refuses a response head with a field name that is no
// token: net/http keeps "Cache-Control : no-store" (white space before
// the colon or in the name) under its raw name, which no server writes,
// so the field would be lost, where RFC 9112 §5.1 has a proxy remove the
// white space and keep the field; a Cache-Control, Vary or Set-Cookie
// dropped changes what a cache in front serves to others. nginx answers
// 502 ("upstream sent invalid header"). (h1head never takes such a head.)
var errFieldName = errors.New("malformed response: a field name that is no token")

// fieldNamesValid reports whether every name in h is a token.
func fieldNamesValid(h http.Header) bool {
	for k := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
	}
	return true
}

// exchangeWatch interrupts an exchange when its request's context ends.
// A request h1server is handling is watched through its client-gone hook,
// which costs no allocation; any other context with context.AfterFunc.
type exchangeWatch struct {
	hook  h1server.ClientGone
	after func() bool // context.AfterFunc's stop; nil with a hook
}

func watchExchange(ctx context.Context, interrupt func()) exchangeWatch {
	if g, ok := h1server.OnClientGone(ctx, interrupt); ok {
		return exchangeWatch{hook: g}
	}
	return exchangeWatch{after: context.AfterFunc(ctx, interrupt)}
}

// stop ends the watch; false: the interrupt ran or runs.
func (w *exchangeWatch) stop() bool {
	if w.after != nil {
		return w.after()
	}
	return w.hook.Stop()
}

// h1Body is a response body that gives its connection back to the pool
// when read to the end, and closes it when closed early.
type h1Body struct {
	rc     io.ReadCloser // http.ReadResponse's body, or nil
	remain int64         // without rc: the body's bytes still in pc.br
	pc     *h1Conn
	watch  exchangeWatch
	keep   bool
	done   bool
	rd     opDeadline      // the read timeout's deadline (d 0: none)
	ctx    context.Context // the exchange's (watch interrupts it)
	// head is the response's fields when it came without a Header map
	// (roundTripHead), until the body is read.
	head *h1head.Head
}

// hasHopByHop reports whether h has a field that must not be passed on
// (hopHeaders; a Connection field names the others).
func hasHopByHop(h *h1head.Head) bool {
	for _, k := range hopHeaders {
		if _, ok := h.Get(k); ok {
			return true
		}
	}
	return false
}

// passOnHead returns the fields of a response that came without a Header
// map (roundTripHead with passOn), or nil.
func passOnHead(res *http.Response) *h1head.Head {
	if b, ok := res.Body.(*h1Body); ok && res.Header == nil {
		return b.head // nil once the body was read (finish)
	}
	return nil
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.rd.d > 0 {
		if dl, ok := b.rd.due(); ok {
			b.pc.c.SetReadDeadline(dl)
			if b.ctx.Err() != nil {
				b.pc.interrupt() // the watcher may have run before the line above
			}
		}
	}
	var n int
	var err error
	if b.rc != nil {
		n, err = b.rc.Read(p)
	} else {
		n, err = b.readLength(p)
	}
	if err != nil && b.rd.d > 0 && isTimeout(err) {
		err = &readTimeoutError{b.rd.d}
	}
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

// readLength reads a body of known length from the connection: the end
// comes with the last bytes, and the connection's end before them is
// io.ErrUnexpectedEOF (as http.ReadResponse's body).
func (b *h1Body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.pc.br.Read(p)
	b.remain -= int64(n)
	switch {
	case b.remain == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *h1Body) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish releases the connection: to the pool after a complete body when
// the exchange allows keep-alive, closed otherwise.
func (b *h1Body) finish(complete bool) {
	b.done = true
	b.head = nil
	if b.watch.stop() && complete && b.keep {
		b.pc.cl.put(b.pc)
		return
	}
	b.pc.c.Close()
}
