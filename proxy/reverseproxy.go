package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/gmproxy/gmproxy/internal/h1server"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// reqState is the per-request bookkeeping, pooled.
type reqState struct {
	w     respWriter
	start time.Time
	site  *site
	route *route
	ci    *connInfo
	// client is the address the per-client bounds count the request
	// under (requestClient: a trusted proxy's client, else ci.client).
	client     netip.Addr
	target     *Target
	upDur      time.Duration
	upStatus   int
	bytesIn    int64
	clientGone bool
	// rateLimited: answered 429 by the route's rate_limit.
	rateLimited bool
	tried       [maxTries]*Target
	url         url.URL
	hdrVals     [5]string
	trace       attemptTrace
	body        *reqBody // the client's body as sent upstream, nil without one
	// passOn: a plain backend response may go to the client with its
	// field lines as they came, without a Header map (passOnHeader).
	passOn bool

	// out is the request sent upstream, built from the inbound one
	// (newOutgoing), which is never edited: retries, the access log and
	// error messages see the request as the client sent it. outHdr is
	// out's header map, kept (empty) across requests.
	out    http.Request
	outHdr http.Header
	// outHeld: a net/http transport may still read out after its
	// RoundTrip returned (see roundTrip), so putReqState leaves this state
	// to the GC.
	outHeld bool
	// reqID is the request's ID (requestIDOf), "" when its site gives
	// none.
	reqID string
	// authUser is the user the route's basic_auth let in, "" for none.
	authUser string
	// trustedOnly: the outgoing header holds one of
	// TrustedOnlyRequestHeaders (outgoingHeader).
	trustedOnly bool
	// send is the write_timeout watch of the attempt whose response is
	// being copied (net/http's Transport only), and header its
	// response_header watch; ended with the handler (endWatches).
	send   *sendWatch
	header *headerWatch
	// grpcEnd is the deadline of a gRPC call whose grpc-timeout its
	// upstream honours (grpcDeadline), zero for none: the whole exchange
	// (the upload, the wait for the head, the response body) ends then.
	grpcEnd time.Time
}

// endWatches releases the contexts of the watches of the attempt whose
// response was copied: the handler is done with it.
func (rs *reqState) endWatches() {
	if rs.send != nil {
		rs.send.end()
	}
	if rs.header != nil {
		rs.header.end()
	}
}

var reqStatePool = sync.Pool{New: func() any {
	rs := new(reqState)
	rs.trace.init()
	return rs
}}

func getReqState(w http.ResponseWriter) *reqState {
	rs := reqStatePool.Get().(*reqState)
	rs.w = respWriter{rw: w}
	return rs
}

func putReqState(rs *reqState) {
	if rs.outHeld {
		return
	}
	tr, hdr := rs.trace, rs.outHdr
	clear(hdr)
	*rs = reqState{trace: tr, outHdr: hdr}
	reqStatePool.Put(rs)
}

// attemptTrace records whether the request headers reached the backend.
type attemptTrace struct {
	t     *httptrace.ClientTrace
	wrote *atomic.Bool
}

func (a *attemptTrace) init() {
	wrote := new(atomic.Bool)
	a.wrote = wrote
	a.t = &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}
}

// respWriter records status and bytes for logs and metrics. It forwards
// Flush and exposes the underlying writer via Unwrap (for
// http.ResponseController: Hijack, deadlines, full duplex).
type respWriter struct {
	rw          http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	send        sendDeadline // send_timeout; send.ww nil when off
	// closeConn has the response say Connection: close, which
	// x/net/http2 takes for a graceful close of the connection (GOAWAY,
	// then the close once its streams are done): see largeH2Field.
	closeConn bool
}

func (w *respWriter) Header() http.Header { return w.rw.Header() }

func (w *respWriter) WriteHeader(code int) {
	if !w.wroteHeader && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.wroteHeader = true
		w.status = code
		if w.closeConn {
			w.rw.Header()["Connection"] = []string{"close"}
		}
	}
	w.send.arm()
	w.rw.WriteHeader(code)
	w.send.wrote()
}

// fieldsWriter is a ResponseWriter that takes a header as field lines
// (h1server's).
type fieldsWriter interface {
	WriteFields(code int, contentLength int64, f h1server.Fields) bool
}

// writeFields is WriteHeader with the header as field lines, when the
// underlying writer takes them for this response (see
// h1server.WriteFields); false: nothing was written.
func (w *respWriter) writeFields(code int, contentLength int64, f h1server.Fields) bool {
	fw, ok := w.rw.(fieldsWriter)
	if !ok || w.wroteHeader {
		return false
	}
	w.send.arm()
	if !fw.WriteFields(code, contentLength, f) {
		return false
	}
	w.wroteHeader = true
	w.status = code
	return true
}

// passOnHeader reports whether the response to r may be passed on with
// the backend's field lines as they came: the route edits no response
// field, nothing was set in the response header yet, and the client
// speaks HTTP/1.1 to a writer that takes field lines. The backend's
// response must also be plain, without hop-by-hop fields (h1Client checks
// that), and fit the writer (h1server.WriteFields checks that).
func passOnHeader(rs *reqState, r *http.Request, rt *route) bool {
	if !rt.resOps.empty() || r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.Method == http.MethodHead {
		return false
	}
	_, ok := rs.w.rw.(fieldsWriter)
	return ok && len(rs.w.rw.Header()) == 0
}

func (w *respWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.send.arm()
	n, err := w.rw.Write(b)
	w.send.wrote()
	w.bytes += int64(n)
	return n, err
}

func (w *respWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.send.arm()
	if f, ok := w.rw.(http.Flusher); ok {
		f.Flush()
	}
	w.send.wrote()
}

func (w *respWriter) Unwrap() http.ResponseWriter { return w.rw }

// discarder is a ResponseWriter that can drop a response none of which
// went out (h1server's).
type discarder interface {
	Discard() bool
}

// discard drops the response written so far when none of it reached the
// client, so that another can be written; false when it cannot (some of
// it is out, or the writer, x/net/http2's, cannot take it back).
func (w *respWriter) discard() bool {
	d, ok := w.rw.(discarder)
	if !ok || !d.Discard() {
		return false
	}
	w.wroteHeader, w.status, w.bytes = false, 0, 0
	return true
}

// reqBody wraps the client's body: counts bytes, remembers whether the
// transport started reading it (then a retry is impossible) and ignores
// Close so that a failed attempt does not close it under a retry (each
// attempt through a net/http transport reads it through an attemptBody,
// whose Close ends that attempt's reads). With a
// body timeout it bounds the wait for each read (bodyDeadline); at EOF it
// fills the allowed trailers of the outgoing request.
//
// http.Transport writes the body from its own goroutine, which may still
// read after the response came and the handler returned (a target that
// answers before reading the body). The request and its ResponseWriter
// are the server's again then: x/net's SetReadDeadline dereferences
// state it has cleared, and an HTTP/1.1 connection serves its next
// request. So once the handler ends (handlerDone), a read returns
// errHandlerDone and touches neither.
type reqBody struct {
	rc io.ReadCloser
	n  atomic.Int64

	dl       bodyDeadline          // dl.rw nil: no body timeout
	timedOut atomic.Bool           // a read hit the body timeout
	readErr  atomic.Pointer[error] // the first other read error: a malformed or cut body

	send atomic.Pointer[sendWatch] // the Transport's attempt's write_timeout; nil: none

	trailerIn  *http.Request // the client's request (its Trailer is complete at EOF)
	trailerOut http.Header   // the outgoing request's Trailer, nil when none

	mu   sync.Mutex // held while dl or trailerIn is used, never across a read
	done bool       // under mu: the handler returned
	// under mu: the attempt whose read of the client is in progress
	// (nil: none), and whether an attempt's Close cut one (the body is
	// then touched: its rest may have been meant for that target).
	reader *attemptBody
	cut    bool

	// reading is held across a Read: the server reuses rc (the
	// connection's body, then the next request's) once the handler
	// returns, so handlerDone waits for a read that net/http's Transport
	// is still making after the target answered early.
	reading sync.Mutex
	// rd ends such a read at once (a past read deadline); nil when the
	// connection has no read deadlines.
	rd readDeadliner

	// pre is the body read whole before a target was picked (bufferBody),
	// served from preOff on (atomic: an attempt's transport may read in a
	// goroutine of its own); preEOF: the client's body ended there.
	pre    []byte
	preOff atomic.Int64
	preEOF bool
	// budgeted is what pre holds of bodyBuffers, taken for client (the
	// zero Addr: none known), given back when the handler returns.
	budgeted int
	client   netip.Addr
}

// bodyBuffers bounds the bytes of request bodies buffered at once in the
// process (request_buffer): one request holds at most its listener's
// request_buffer, but a client may keep max_requests_per_client of them
// waiting for their last byte, and many clients more. Past the bound a
// body streams, as with buffering off. Each client address
// (frontdoor.ClientKey) may hold RequestBufferPerClient of it, so that one
// address cannot take it all and turn buffering off for everyone else.
var bodyBuffers = newBodyBudget(RequestBufferTotal, RequestBufferPerClient)

// RequestBufferTotal is the bound of bodyBuffers; RequestBufferPerClient
// is what one client address may hold of it (64 bodies of 64 KiB).
const (
	RequestBufferTotal     = 64 << 20
	RequestBufferPerClient = RequestBufferTotal / 16
)

// bodyBudget is a byteBudget of the process with a share per client.
type bodyBudget struct {
	total     byteBudget
	perClient int64
	shards    [clientRequestShards]clientBytesShard
}

type clientBytesShard struct {
	mu sync.Mutex
	m  map[[16]byte]int64
}

func newBodyBudget(total, perClient int64) *bodyBudget {
	b := &bodyBudget{perClient: perClient}
	b.total.left.Store(total)
	return b
}

// take takes n more bytes for a request of client that holds mine already
// (the zero Addr: the process's bound only), or reports that the client's
// share or the process's bound has fewer. A request the client's only
// one holding any may go past the share, up to its request_buffer (at
// most 16 MiB): the share bounds what one address holds with many
// requests, not how large one body a listener buffers may be.
func (b *bodyBudget) take(client netip.Addr, mine, n int) bool {
	if !client.IsValid() {
		return b.total.take(n)
	}
	k := client.As16()
	s := &b.shards[shardOf(&k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.m[k]
	others := held - int64(mine)
	if others > 0 && held+int64(n) > b.perClient || !b.total.take(n) {
		return false
	}
	if s.m == nil {
		s.m = map[[16]byte]int64{}
	}
	s.m[k] = held + int64(n)
	return true
}

// give gives back n bytes client took.
func (b *bodyBudget) give(client netip.Addr, n int) {
	b.total.give(n)
	if !client.IsValid() {
		return
	}
	k := client.As16()
	s := &b.shards[shardOf(&k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := s.m[k] - int64(n); held > 0 {
		s.m[k] = held
	} else {
		delete(s.m, k)
	}
}

// byteBudget is a count of bytes that may still be taken.
type byteBudget struct{ left atomic.Int64 }

// take takes n bytes, or reports that fewer are left.
func (b *byteBudget) take(n int) bool {
	if b.left.Add(-int64(n)) < 0 {
		b.left.Add(int64(n))
		return false
	}
	return true
}

func (b *byteBudget) give(n int) { b.left.Add(int64(n)) }

// untouched reports whether another attempt may send b whole (b may be
// nil: no body): no byte of it went to a target yet, or it is held whole
// in memory (request_buffer), which is then served again from its start,
// as nginx resends a buffered body to the next server. A read of the
// client in progress (a failed attempt's transport still reading) or one
// an attempt's Close cut counts as touched. Called once the failed
// attempt's body is closed: no read of pre is under way.
func (b *reqBody) untouched() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reader != nil || b.cut {
		return false
	}
	if b.pre != nil {
		if b.preEOF {
			b.preOff.Store(0)
			return true
		}
		return b.preOff.Load() == 0
	}
	return b.n.Load() == 0
}

// errHandlerDone ends a read of the client's body after its handler
// returned.
var errHandlerDone = errors.New("proxy: request body read after its handler returned")

// handlerDone marks the handler's end: no read starts after it, and one
// in progress is ended (a past read deadline on the client's connection,
// which is then not kept alive: its body was not read) and waited for.
func (b *reqBody) handlerDone() {
	if b.budgeted > 0 {
		bodyBuffers.give(b.client, b.budgeted)
		b.budgeted = 0
	}
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
	if b.dl.stall != nil {
		b.dl.stall.stop()
	}
	if !b.reading.TryLock() {
		if b.rd != nil {
			b.rd.SetReadDeadline(time.Now())
		}
		b.reading.Lock()
	}
	b.reading.Unlock()
}

func (b *reqBody) Read(p []byte) (int, error) { return b.read(p, nil) }

// read reads for attempt a (nil: h1Client's, which reads on the
// handler's goroutine and never from a closed attempt).
func (b *reqBody) read(p []byte, a *attemptBody) (int, error) {
	if a != nil && b.pre != nil {
		// Under mu, as Close: net/http's Transport closes a failed
		// attempt's body before RoundTrip returns while its writer
		// may go on to read, and what it took of pre would be missing
		// from the next attempt's.
		b.mu.Lock()
		if a.closed {
			b.mu.Unlock()
			return 0, errAttemptClosed
		}
		if off := int(b.preOff.Load()); off < len(b.pre) {
			n := copy(p, b.pre[off:])
			b.preOff.Store(int64(off + n))
			b.mu.Unlock()
			return n, nil
		}
		b.mu.Unlock()
	} else if off := int(b.preOff.Load()); off < len(b.pre) {
		n := copy(p, b.pre[off:])
		b.preOff.Store(int64(off + n))
		return n, nil
	}
	if b.preEOF {
		return 0, io.EOF
	}
	return b.readClient(p, a)
}

// readClient reads the client's body under the body timeout, counting
// it, and copies the trailer at its end.
func (b *reqBody) readClient(p []byte, a *attemptBody) (int, error) {
	b.reading.Lock()
	defer b.reading.Unlock()
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return 0, errHandlerDone
	}
	if a != nil {
		if a.closed {
			b.mu.Unlock()
			return 0, errAttemptClosed
		}
		b.reader = a
		defer b.endRead()
	}
	if b.dl.rw != nil {
		b.dl.arm()
	}
	b.mu.Unlock()
	sw := b.send.Load()
	if sw != nil {
		sw.readStarts()
	}
	n, err := b.rc.Read(p)
	if sw != nil {
		sw.readEnds()
	}
	b.dl.read()
	b.n.Add(int64(n))
	switch {
	case err == nil:
	case err == io.EOF:
		b.mu.Lock()
		if !b.done {
			if b.dl.rw != nil {
				b.dl.release()
			}
			if b.trailerOut != nil {
				fillTrailer(b.trailerOut, b.trailerIn.Trailer)
			}
		}
		b.mu.Unlock()
	case isTimeout(err) && (b.ended() || a != nil && a.isClosed()):
		// handlerDone or the attempt's Close cut this read (a past
		// read deadline): not the client's stall. (Another error is
		// the client's body's own, which the cut did not cause.)
	case b.dl.rw != nil && isTimeout(err):
		b.timedOut.Store(true)
	default:
		b.readErr.CompareAndSwap(nil, &err)
	}
	return n, err
}

// ended reports whether handlerDone ran.
func (b *reqBody) ended() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// readError returns the first error of a read of the client's body other
// than EOF and the body timeout (b may be nil: no body).
func (b *reqBody) readError() error {
	if b == nil {
		return nil
	}
	if e := b.readErr.Load(); e != nil {
		return *e
	}
	return nil
}

// endError is the error the client's HTTP/2 body ended with when no read
// of it met that error yet: x/net ends a stream's context as it closes the
// stream, and closes its body with the reason (a body over its declared
// content-length), which a read returns at once, after what was buffered;
// the transport may have failed on the context before its read came.
// Only after handlerDone (no read in progress, none to come), and only
// for a request whose context ended.
func (b *reqBody) endError() error {
	var buf [512]byte
	for range 64 { // a stream's buffered data is bounded; so is this
		if _, err := b.rc.Read(buf[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	return nil
}

// Close does nothing: h1Client closes the body once it has read it
// whole, and net/http's transports close an attempt's attemptBody.
func (b *reqBody) Close() error { return nil }

func (b *reqBody) endRead() {
	b.mu.Lock()
	b.reader = nil
	b.mu.Unlock()
}

// attemptBody is what one attempt through a net/http transport reads of
// the client's body. A transport closes the body of an exchange it ends
// (the target answered, reset the stream or sent a response the proxy
// refused) while its own goroutine may be blocked reading a client that
// holds its request stream open, and over HTTP/2 RoundTrip and the
// response body's Close wait for that goroutine: the handler would wait
// for the client up to body_timeout, then answer the target's failure as
// the client's stall (408), or hold a gRPC call's trailers. Close ends
// that read (a past read deadline) and every later one of the attempt;
// the client's body itself stays for another attempt when untouched.
type attemptBody struct {
	b      *reqBody
	closed bool // under b.mu
}

// errAttemptClosed ends a read of an attempt its transport closed.
var errAttemptClosed = errors.New("proxy: request body read after its attempt ended")

func (a *attemptBody) Read(p []byte) (int, error) { return a.b.read(p, a) }

func (a *attemptBody) Close() error {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	a.closed = true
	if b.reader == a && !b.done {
		// Under mu, before handlerDone set done, the handler has not
		// returned: the ResponseWriter's deadline is still its own.
		b.cut = true
		if b.dl.stall != nil {
			b.dl.stall.stop()
		}
		if b.rd != nil {
			b.rd.SetReadDeadline(time.Now())
		}
	}
	return nil
}

func (a *attemptBody) isClosed() bool {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	return a.closed
}

// Hop-by-hop headers (RFC 9110 §7.6.1), removed in both directions.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// Shared header values (len == cap, never written through).
var (
	teTrailers  = []string{"trailers"}
	connUpgrade = []string{"Upgrade"}
)

func removeHopByHop(h http.Header) {
	removeConnectionOptions(h, h["Connection"])
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// removeConnectionOptions deletes from h the fields that the Connection
// field values conn name (RFC 9110 §7.6.1).
func removeConnectionOptions(h http.Header, conn []string) (walks int) {
	n := 0
	for _, f := range conn {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = strings.TrimSpace(sf); sf == "" {
				continue
			}
			// The first few options (close, keep-alive, Upgrade: the
			// ordinary ones) are found without allocating; past them, by
			// their canonical key, so that a head of thousands of options
			// and fields costs their sum, not their product.
			if n++; n <= maxFoldOptions {
				deleteFold(h, sf)
				walks++
			} else {
				delete(h, http.CanonicalHeaderKey(sf))
			}
		}
	}
	return walks
}

// maxFoldOptions is how many Connection options deleteFold removes, each
// with a walk over the header.
const maxFoldOptions = 8

// deleteFold deletes the field named by a Connection option. For a valid
// token that is the key equal to it ignoring case (the key
// http.CanonicalHeaderKey would give, found without building it); other
// strings go through CanonicalHeaderKey, which returns them unchanged.
func deleteFold(h http.Header, name string) {
	if !httpguts.ValidHeaderFieldName(name) {
		delete(h, http.CanonicalHeaderKey(name))
		return
	}
	for k := range h {
		if len(k) == len(name) && strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}

func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// hasBody reports whether r comes with content: a Content-Length other
// than 0, or a body of unknown length.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// isExtendedConnect reports whether r is an RFC 8441 extended CONNECT: an
// HTTP/2 CONNECT with a :protocol pseudo-header (a WebSocket over an h2
// stream).
func isExtendedConnect(r *http.Request) bool {
	return r.Method == http.MethodConnect && r.ProtoMajor == 2 && r.Header.Get(":protocol") != ""
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// forward proxies r to the route's upstream with retries.
func (s *site) forward(rs *reqState, r *http.Request, rt *route) {
	ctx := r.Context()
	if rt.maxBody > 0 && r.ContentLength > rt.maxBody {
		s.errorResponse(rs, r, http.StatusRequestEntityTooLarge, "request body too large", "request body over the route's max_body")
		return
	}

	if isExtendedConnect(r) {
		s.forwardExtendedConnect(rs, r, rt)
		return
	}

	clientIP, upType := s.prepareRequest(rs, r, rt)
	rs.passOn = passOnHeader(rs, r, rt)
	if ctx.Err() != nil {
		// Reset (HTTP/2 RST_STREAM) or gone before anything was sent:
		// nothing goes upstream.
		rs.clientGone = true
		return
	}

	var body *reqBody
	var inBody io.ReadCloser = r.Body
	noBody := inBody == nil || inBody == http.NoBody
	if rt.maxBody > 0 && !noBody {
		inBody = http.MaxBytesReader(&rs.w, inBody, rt.maxBody)
	}
	// wrote tells whether an attempt's headers reached the backend; nil
	// when the route retries idempotent requests anyway. HTTP/1 requests
	// use the trace that ConnContext put into the connection context (one
	// request at a time per connection); others get a per-request one.
	var wrote *atomic.Bool
	var actx context.Context // nil: the request's own
	connTrace := r.ProtoMajor == 1 && rs.ci != nil
	_, _, retryAll := rt.retryPolicy()
	if !(rt.retryIdem && idempotent(r.Method)) && !retryAll {
		if connTrace {
			wrote = &rs.ci.wrote
		} else {
			wrote = rs.trace.wrote
			actx = httptrace.WithClientTrace(ctx, rs.trace.t)
		}
	}
	if d, ok := grpcDeadline(r.Header, rt.up.grpcMax); ok {
		// The call's deadline ends its whole exchange, as Envoy's
		// max_stream_duration with grpc_timeout_header_max does, not
		// only the wait for the head: an upload or a response stream
		// going on past it holds a target's stream (reset: RST_STREAM
		// CANCEL over HTTP/2, the connection closed over HTTP/1.1) and
		// the proxy's resources for a client that gave up.
		if actx == nil {
			actx = ctx
		}
		rs.grpcEnd = rs.start.Add(d)
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(actx, rs.grpcEnd)
		defer cancel()
	}
	outreq := rs.newOutgoing(r, rt, actx)
	if r.ContentLength != 0 && !noBody {
		body = &reqBody{rc: inBody, dl: s.p.bodyDeadline(rs, r, rt.bodyTimeout)}
		body.rd, _ = rs.w.rw.(readDeadliner)
		if outreq.Trailer = rt.outgoingTrailer(r.Trailer); outreq.Trailer != nil {
			body.trailerIn, body.trailerOut = r, outreq.Trailer
			// An h2 client may declare both a content-length and
			// trailers; HTTP/1.1 carries trailers only after a chunked
			// body (RFC 9112 §7.1.2), and net/http's Transport sends a
			// body of known length with Content-Length and drops them.
			// Of undeclared length, the body goes chunked to an
			// HTTP/1.1 target, trailers included.
			outreq.ContentLength = -1
		}
		outreq.Body = body
		defer body.handlerDone()
		// Counted however the request ends: a buffered body that
		// stalls or is cut short is answered before any attempt.
		defer func() { rs.bytesIn = body.n.Load() }()
		rs.body = body
	}
	if body != nil && r.ContentLength > 0 && r.ContentLength <= int64(s.p.limitsOf(rs.ci).RequestBuffer) {
		if !s.bufferBody(rs, r, body) {
			return
		}
		if len(body.pre) == int(r.ContentLength) {
			// The client's 100-continue was answered by reading its
			// body; the whole body goes at once, with nothing to wait
			// for from the target (which would hold it up to a second
			// for a 100 that many servers never send).
			delete(outreq.Header, "Expect")
		}
	}
	res, t := s.roundTrip(rs, r, rt, outreq, clientIP, body, wrote)
	defer rs.endWatches()
	if res != nil {
		defer t.inflight.Add(-1)
		s.handleResponse(rs, r, rt, t, res, upType)
	}
}

// bufferBody reads b, a body of declared length within the listener's
// request_buffer, whole before a target is picked (or as much as the
// process's bound on buffered bodies allows): a slow upload then holds
// the client's connection only, not a target connection and a backend
// worker for as long as it trickles in (nginx's proxy_request_buffering).
// The body timeout bounds each read as it would upstream. It answers the
// request itself, and returns false, when the body stalls, is cut short or
// is malformed: no target sees such a request.
func (s *site) bufferBody(rs *reqState, r *http.Request, b *reqBody) bool {
	// The buffer grows with what arrives, not with what the client
	// declares: a declared length costs nothing until its bytes come.
	// Past the process's bound or the client's share of it (bodyBuffers)
	// the rest streams.
	b.client = rs.client
	size := int(r.ContentLength)
	var buf []byte
	var err error
	for len(buf) < size && err == nil {
		if len(buf) == cap(buf) {
			grow := min(size, max(2*cap(buf), 4<<10)) - len(buf)
			if !bodyBuffers.take(b.client, b.budgeted, grow) {
				break
			}
			b.budgeted += grow
			buf = slices.Grow(buf, grow)
		}
		var n int
		n, err = b.readClient(buf[len(buf):min(cap(buf), size)], nil)
		buf = buf[:len(buf)+n]
		if err == io.EOF && len(buf) < size {
			err = io.ErrUnexpectedEOF
		} else if err == io.EOF {
			b.preEOF, err = true, nil
		}
	}
	if err == nil && len(buf) == size && !b.preEOF {
		// The declared length is in, but an HTTP/2 body ends with its
		// stream (END_STREAM, maybe on trailers after the DATA frames),
		// which its reads report apart: the body is whole then, not
		// before, or a client that holds the end of its stream would
		// hold a target connection meanwhile. A byte past the declared
		// length is a stream error the server reports as a read error.
		var extra [1]byte
		var n int
		if n, err = b.readClient(extra[:], nil); err == io.EOF {
			b.preEOF, err = true, nil
		} else if err == nil && n > 0 {
			err = errors.New("request body longer than its declared length")
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case b.timedOut.Load():
			s.bodyTimedOut(rs, r)
		case errors.As(err, &mbe):
			s.errorResponse(rs, r, http.StatusRequestEntityTooLarge, "request body too large", "request body over the route's max_body")
		case r.Context().Err() != nil:
			rs.clientGone = true
		default:
			s.bodyFailed(rs, r, err) // panics (abort) for a cut body
		}
		return false
	}
	b.pre = buf
	return true
}

// noDefaultUserAgent keeps the transport from adding Go's User-Agent to
// an outgoing header h without one: the client sent none, or the route's
// request_headers removed it (called after the edits).
func noDefaultUserAgent(h http.Header) {
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = nil
	}
}

// prepareRequest builds the outgoing request's header in rs.outHdr from
// the inbound one (without hop-by-hop fields, with the forwarded and TLS
// headers and the route's edits) and its URL in rs.url; the inbound
// request is left as the client sent it. It returns the client IP for
// balancing and the Upgrade protocol requested, if any. It allocates
// nothing in the common case (TestOwnPathAllocs).
func (s *site) prepareRequest(rs *reqState, r *http.Request, rt *route) (clientIP, upType string) {
	in := r.Header
	// An HTTP/1.0 request's Upgrade is ignored (RFC 9110 §7.8): a 1.0
	// intermediary in front, which knows no Connection, would take the
	// switched bytes for an ordinary response's body.
	if upType = upgradeType(in); upType != "" && !hasBody(r) && r.ProtoAtLeast(1, 1) {
		upType = rt.allowedUpgrade(upType)
	} else {
		upType = ""
	}
	keepTE := httpguts.HeaderValuesContainsToken(in["Te"], "trailers")
	h := rs.outgoingHeader(in, rt)
	if keepTE {
		h["Te"] = teTrailers
	}
	if upType != "" {
		h["Connection"] = connUpgrade
		h["Upgrade"] = []string{upType}
	}
	clientIP = s.setForwarded(rs, rt, h, r)
	rt.reqOps.apply(h)
	noDefaultUserAgent(h)

	rs.setURL(r, rt)
	return clientIP, upType
}

// setURL sets rs.url to r's URL on rt's upstream, with the route's
// strip_prefix removed. The rest keeps the client's escaping: an escaped
// slash ("a%2Fb") stays one, as on a route that strips nothing, however
// the client escaped the prefix itself ("/AP%49/a%2Fb" under /API).
func (rs *reqState) setURL(r *http.Request, rt *route) {
	rs.url = *r.URL
	rs.url.Scheme = rt.up.scheme
	if rt.strip == "" {
		return
	}
	if n, ok := rt.pathPrefix(rs.url.Path, rt.strip); ok {
		raw := ""
		if rs.url.RawPath != "" {
			// What goes is the prefix and the slashes after it:
			// stripPrefix(Path, n) is "/" + Path[gone:].
			gone := len(rs.url.Path) - len(strings.TrimLeft(rs.url.Path[n:], "/"))
			esc := rs.url.EscapedPath()
			if m, ok := escapedPrefixLen(esc, gone); ok {
				raw = "/" + esc[m:] // dropped by EscapedPath unless it encodes Path
			}
		}
		rs.url.Path = stripPrefix(rs.url.Path, n)
		rs.url.RawPath = raw
	}
}

// escapedPrefixLen returns the length of the leading part of the escaped
// path esc that decodes to the first n bytes of its path; false when no
// part ends there (n inside an escape cannot happen: each %XX is one byte).
func escapedPrefixLen(esc string, n int) (int, bool) {
	i := 0
	for ; n > 0 && i < len(esc); n-- {
		if esc[i] == '%' {
			i += 3
		} else {
			i++
		}
	}
	return i, n == 0 && i <= len(esc)
}

// outgoingHeader returns rs.outHdr (made on first use, empty when pooled)
// holding the fields of the inbound header in that may reach a backend:
// all but the hop-by-hop ones (hopHeaders and those Connection names),
// alwaysStripped, TrustedOnlyRequestHeaders when the peer is not a trusted
// proxy (setForwarded removes those), and the names of SetRequestHeaders
// (and TrustedOnlyRequestHeaders) spelled with '_'
// (many backends — CGI, WSGI, PHP — map both spellings to one variable,
// so X_Ssl_Client_Verify would pass as X-Ssl-Client-Verify), the framing
// fields spelled so (framingAlias), rt's request ID and the fields rt's
// request_headers remove or set among them;
// setForwarded sets or extends the rest of SetRequestHeaders. One pass
// over in's few fields does it, rather than a delete per name. Its value
// slices are the inbound header's: whoever edits the outgoing header
// replaces a field's slice and never writes into one (setHeader,
// headerOps.apply), so in stays as the client sent it.
func (rs *reqState) outgoingHeader(in http.Header, rt *route) http.Header {
	h := rs.outHdr
	if h == nil {
		h = make(http.Header, len(in)+len(SetRequestHeaders))
		rs.outHdr = h
	}
	for k, v := range in {
		switch onCopy[k] {
		case copyDropped:
			continue
		case copyIfTrusted:
			rs.trustedOnly = true // setForwarded removes them unless the peer is trusted
		}
		if !(strings.IndexByte(k, '_') >= 0 && (isSetHeaderName(k) || framingAlias(k) || sameFieldName(k, rt.reqIDHeader) || rt.reqOps.replaces(k))) {
			h[k] = v
		}
	}
	removeConnectionOptions(h, in["Connection"])
	return h
}

// framingAlias reports whether k, a name with '_', is Content-Length or
// Transfer-Encoding to a backend that reads '_' as '-' (Mongrel-derived
// parsers, Puma before 4.3.5 among them). The proxy frames the request
// itself and passes such a field on as an ordinary one: the backend would
// frame the body another way, and read what the proxy sent as body as
// the next request (request smuggling).
func framingAlias(k string) bool {
	return sameFieldName(k, "Content-Length") || sameFieldName(k, "Transfer-Encoding")
}

// What outgoingHeader does with a field (onCopy): copy it (the zero
// value), drop it (hopHeaders and alwaysStripped), or copy it and note
// that setForwarded must remove it unless the peer is a trusted proxy
// (TrustedOnlyRequestHeaders).
const (
	copyDropped = 1 + iota
	copyIfTrusted
)

var onCopy = func() map[string]int8 {
	m := make(map[string]int8, len(hopHeaders)+len(alwaysStripped)+len(TrustedOnlyRequestHeaders))
	for _, k := range hopHeaders {
		m[k] = copyDropped
	}
	for _, k := range alwaysStripped {
		m[k] = copyDropped
	}
	for _, k := range TrustedOnlyRequestHeaders {
		m[k] = copyIfTrusted
	}
	return m
}()

// newOutgoing returns rs.out, the request sent upstream: a shallow copy of
// the inbound r (method, host or rt's fixed host_header, protocol,
// context) with the header prepareRequest built, URL rs.url, no body and
// no trailer (the caller adds them), and ctx as its context when not nil
// (then a new request).
// The transport reads it, never r.
func (rs *reqState) newOutgoing(r *http.Request, rt *route, ctx context.Context) *http.Request {
	out := &rs.out
	if ctx != nil {
		out = r.WithContext(ctx)
	} else {
		*out = *r
	}
	out.Header = rs.outHdr
	out.URL = &rs.url
	out.RequestURI = "" // a server-side field; clients reject it
	out.Close = false   // the client's Connection: close ends its own connection only
	// A nil Body (not NoBody) lets the transport retry a request on a
	// stale keep-alive connection and spares it its body-copy path.
	out.Body, out.Trailer = nil, nil
	if rt.host == hostFixed {
		out.Host = rt.hostValue
	}
	return out
}

// stripPrefix removes path's first n bytes (the prefix that matched) and
// returns the rest with exactly one leading slash ("/api/v1" minus "/api"
// is "/v1", "/api//v1" gives "/v1", "/apiv1" gives "/v1"), as a substring
// of path when it can be.
func stripPrefix(path string, n int) string {
	rest := path[n:]
	trimmed := strings.TrimLeft(rest, "/")
	if n := len(rest) - len(trimmed); n > 0 {
		return rest[n-1:]
	}
	return "/" + trimmed
}

// roundTrip sends outreq to a target of the route's upstream, retrying on
// other targets where that is safe. On success the chosen target's
// in-flight count stays raised (the caller lowers it when the response is
// done); on failure the error response is written and res is nil.
func (s *site) roundTrip(rs *reqState, r *http.Request, rt *route, outreq *http.Request, clientIP string, body *reqBody, wrote *atomic.Bool) (*http.Response, *Target) {
	u := rt.up
	ctx := r.Context()
	// retries.duration counts from the first attempt: a body buffered
	// before it (request_buffer) took the client's time, not the
	// targets'.
	begun := time.Now()
	tried := rs.tried[:0]
	var lastErr error
	// A gRPC call's deadline counts from the request's start: queueing,
	// a buffered body and earlier attempts took its time too.
	deadline, hasDeadline := grpcDeadline(r.Header, u.grpcMax)
	for attempt := 1; ; attempt++ {
		var left time.Duration // of the gRPC call's deadline
		if hasDeadline {
			if left = deadline - time.Since(rs.start); left <= 0 {
				lastErr = errGRPCDeadline // no attempt could still answer it
				break
			}
		}
		t := u.pick(outreq, clientIP, tried) // hash balancing sees the header the backend gets
		if t == nil {
			if attempt == 1 {
				s.errorResponse(rs, r, http.StatusServiceUnavailable, "no upstream target available", "every target of upstream "+u.name+" is down or at its connection limit")
				return nil, nil
			}
			break
		}
		if attempt > 1 {
			// Counted once there is a target to retry on: a lone one
			// that failed leaves none.
			u.obs.UpstreamRetry(u.name)
		}
		tried = append(tried, t)
		rs.target = t
		rs.url.Host = t.Addr
		if rt.host == hostUpstream {
			outreq.Host = t.Name
		}
		if wrote != nil {
			wrote.Store(false)
		}
		t.inflight.Add(1)
		ustart := time.Now()
		var tr http.RoundTripper = u.transport
		if len(outreq.Header["Upgrade"]) > 0 {
			tr = u.upgrades
		} else if u.h1 != nil && h1Carries(outreq) {
			tr = u.h1
		}
		var res *http.Response
		var err error
		var ab *attemptBody // the attempt's body through a net/http transport
		hd, ht := u.headerTimeout, rt.headerTimeout
		if ht != 0 {
			hd = max(ht, 0) // the route's
		}
		if hasDeadline {
			if g := grpcHeaderWait(hd, left, u.grpcMax); g != hd {
				hd, ht = g, g // the gRPC call's deadline
			}
			// The target is given what is left of the call's time
			// (Envoy's grpc-timeout rewrite), so that its deadline is
			// the client's, not later by the time spent here. A
			// retry's header is a copy: the transport of an earlier
			// attempt may still be reading the one it was given.
			h := outreq.Header
			if attempt > 1 {
				h = maps.Clone(h)
				outreq.Header = h
			}
			h["Grpc-Timeout"] = []string{encodeGRPCTimeout(left)}
		}
		if h1, ok := tr.(*h1Client); ok {
			res, err = h1.roundTripHead(outreq, rs.passOn, rt.readTimeout, ht)
		} else {
			var elsewhere *Upstream // another target may take a refused request
			if tries, _, _ := rt.retryPolicy(); attempt < tries {
				elsewhere = u
			}
			res, ab, err = u.viaTransport(rs, tr, outreq, body, hd, elsewhere, tried)
			// net/http's transports return the response as soon as it
			// comes, and fail as soon as they see why, while their own
			// goroutine may still be writing the request (its header,
			// its URL): this state is not pooled (putReqState), or the
			// next request would reuse memory they read. h1Client
			// returns only when done.
			rs.outHeld = true
		}
		rs.upDur += time.Since(ustart)
		if err == nil && (res.StatusCode < 100 || res.StatusCode > 599) {
			// RFC 9110 §15: a status is 1xx to 5xx. The parsers take
			// any three digits, and WriteHeader panics below 100: a
			// malformed response, as a broken status line is.
			res.Body.Close()
			res, err = nil, fmt.Errorf("malformed response: status %d", res.StatusCode)
		}
		if err == nil {
			if n := responseFields(res); n > u.maxFields {
				// Bounded in bytes already (MaxResponseHeaderBytes); a
				// head of thousands of tiny fields is still refused, as
				// a client's would be.
				res.Body.Close()
				res, err = nil, fmt.Errorf("malformed response: %d header fields, over the upstream's max_response_header_fields (%d)", n, u.maxFields)
			}
		}
		if err == nil {
			rs.upStatus = res.StatusCode
			return res, t
		}
		t.inflight.Add(-1)
		if ab != nil {
			// The exchange is over for the proxy, whatever the
			// transport still does: its writer may go on reading the
			// body after a response the proxy refused (or an error
			// RoundTrip returned before its writer stopped). Closed
			// now, a read under way counts as touched and none starts,
			// so untouched below is final.
			ab.Close()
		}
		lastErr = err
		var de *dialError
		isDial := errors.As(err, &de)
		if body != nil && body.timedOut.Load() {
			// The client, not the target, stalled (net/http also
			// cancels the request's context then): 408 and close.
			s.bodyTimedOut(rs, r)
			return nil, nil
		}
		if ctx.Err() != nil {
			if body != nil {
				// A read of the client's body may still be under way
				// in the transport's goroutine: ended (and waited for)
				// now, so that its error is known.
				body.handlerDone()
				berr := body.readError()
				if berr == nil && r.ProtoMajor == 2 {
					berr = body.endError()
				}
				if berr != nil && overDeclaredLength(berr) {
					// The client sent more body than it declared:
					// x/net reset its stream (which ended the
					// context), for a malformed request, not a
					// client that went away.
					s.bodyFailed(rs, r, berr)
					return nil, nil
				}
			}
			rs.clientGone = true
			s.p.logger.Debug("client went away", "site", s.name, "uri", r.RequestURI, "error", err)
			return nil, nil
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.errorResponse(rs, r, http.StatusRequestEntityTooLarge, "request body too large", "request body over the route's max_body")
			return nil, nil
		}
		if berr := body.readError(); berr != nil {
			// The client's body was malformed or cut short: the
			// target is not charged and nothing is retried.
			s.bodyFailed(rs, r, berr) // panics (abort) for a cut body
			return nil, nil
		}
		if requestHeadersTooLarge(err) {
			// The client's header is over what the HTTP/2 target takes:
			// not the target's failure (one client would mark every
			// target down), nor one another target would not repeat.
			s.errorResponse(rs, r, http.StatusRequestHeaderFieldsTooLarge, "request header fields too large", "the target "+t.Addr+" of upstream "+u.name+" takes a smaller request header: "+err.Error())
			return nil, nil
		}

		if hasDeadline && isTimeout(err) && time.Since(rs.start) >= deadline {
			// The call's own deadline ended the wait, not a slow
			// target: not charged, nor tried again.
			break
		}
		u.fail(t, err.Error())
		bodyUntouched := body.untouched()
		tries, tryDur, retryAll := rt.retryPolicy()
		retry := bodyUntouched && (isDial || (wrote != nil && !wrote.Load()) || notProcessed(err) || (rt.retryIdem && idempotent(r.Method)) || retryAll)
		if !retry || attempt >= tries || (tryDur > 0 && time.Since(begun) >= tryDur) {
			break
		}
		s.p.logger.Debug("looking for another target", "upstream", u.name, "target", t.Addr, "error", err)
	}
	if isTimeout(lastErr) {
		s.errorResponse(rs, r, http.StatusGatewayTimeout, "upstream timed out", "upstream "+u.name+" timed out: "+errString(lastErr))
		return nil, nil
	}
	s.errorResponse(rs, r, http.StatusBadGateway, "no upstream target answered", "no target of upstream "+u.name+" answered: "+errString(lastErr))
	return nil, nil
}

// overDeclaredLength reports whether err is x/net/http2's end of a request
// body longer than its content-length (RFC 9113 §8.1.1: a malformed
// request, whose stream it resets with PROTOCOL_ERROR). x/net exports no
// such error: its text is matched.
func overDeclaredLength(err error) bool {
	return strings.Contains(err.Error(), "more than declared Content-Length")
}

// requestHeadersTooLarge reports whether err is an HTTP/2 transport's
// refusal to send a request whose header list is over the limit its
// target advertised (SETTINGS_MAX_HEADER_LIST_SIZE). Neither net/http nor
// x/net/http2 exports that error: its text is matched, and
// TestH2TargetHeaderListLimit fails when a release changes it.
func requestHeadersTooLarge(err error) bool {
	return err != nil && strings.Contains(err.Error(), "request header list larger than peer's advertised limit")
}

// retryPolicy returns the tries, total time and non-idempotent retrying
// of rt's requests: the route's own policy, else its upstream's.
func (rt *route) retryPolicy() (tries int, dur time.Duration, all bool) {
	u := rt.up
	if p := rt.retry; p != nil {
		return min(max(intOr(p.Tries, u.tries), 1), maxTries), p.Duration, p.NonIdempotent
	}
	return u.tries, u.tryDur, u.retryAll
}

func errString(err error) string {
	if err == nil {
		return "no target left to try"
	}
	return err.Error()
}

// viaTransport sends outreq with net/http's transport tr; over HTTP/2 a
// refused request is given up at once when elsewhere, the upstream, has
// a target not in tried to take it (triesWatch). It bounds an
// HTTP/2 target's taking of the body (sendWatch; its context, which the
// response's body reads go on using, is ended with the handler through
// rs.send), asks an alpnDialer for an HTTP/1.1 connection for an Upgrade,
// and gives the response back the framing fields http.ReadResponse drops
// (exchangeConn.check), refusing one with both Content-Length and
// Transfer-Encoding.
func (u *Upstream) viaTransport(rs *reqState, tr http.RoundTripper, outreq *http.Request, body *reqBody, headerTimeout time.Duration, elsewhere *Upstream, tried []*Target) (*http.Response, *attemptBody, error) {
	req := outreq
	var sw *sendWatch
	if body != nil && u.writeTimeout > 0 && u.speaksH2 {
		req, sw = watchSend(outreq, u.writeTimeout)
		body.send.Store(sw)
	}
	if u.ownTLS && len(outreq.Header["Upgrade"]) > 0 {
		req = req.WithContext(context.WithValue(req.Context(), http1Only{}, true))
	}
	x := exchangeConn{watch: sw}
	if u.scansHeads {
		req = traceConn(req, &x)
	}
	var hw *headerWatch
	if headerTimeout > 0 {
		req, hw = watchHeader(req, headerTimeout)
	}
	var tw *triesWatch
	if u.speaksH2 && tr == u.transport && len(outreq.Header["Upgrade"]) == 0 {
		req, tw = watchTries(req, u.protocol == upstreamproto.H2C, elsewhere, tried)
	}
	var attempt *attemptBody
	if body != nil {
		if req == outreq {
			req = new(http.Request)
			*req = *outreq
		}
		attempt = &attemptBody{b: body}
		req.Body = attempt
	}
	res, err := tr.RoundTrip(req)
	if tw != nil && err != nil {
		if cause := tw.stop(); cause != nil {
			err = cause
		}
	}
	if hw != nil && hw.stop() {
		// The wait was over first: its cancel made RoundTrip fail, or
		// came just after the head (which is then not passed on).
		if err == nil {
			res.Body.Close()
			res = nil
		}
		err = &headerTimeoutError{headerTimeout}
	}
	if err == nil {
		if err = x.check(res); err != nil {
			res.Body.Close()
			res = nil
		}
	}
	if hw != nil {
		if err != nil {
			hw.end()
		} else {
			if rs.header != nil {
				rs.header.end() // an earlier attempt's, whose response was refused
			}
			rs.header = hw // its context is the response's
		}
	}
	if sw != nil {
		sw.stop()
		if err != nil {
			if sw.stalled.Load() {
				err = errSendTimeout
			}
			sw.end()
		} else {
			rs.send = sw // its context is the response's
		}
	}
	return res, attempt, err
}

// responseFields is the number of field lines of res's head.
func responseFields(res *http.Response) int {
	if h := passOnHead(res); h != nil {
		return h.Len()
	}
	return fieldCount(res.Header)
}

// fieldCount is the number of field lines of h.
func fieldCount(h http.Header) int {
	n := 0
	for _, vv := range h {
		n += len(vv)
	}
	return n
}

// copyResponseHeader copies the backend's response header (minus
// hop-by-hop fields; noSniff) to dst, announces its trailers and applies the route's
// response edits. It returns the announced trailer names. conn is the
// backend's Connection field (responseTrailer).
func copyResponseHeader(dst http.Header, res *http.Response, rt *route, conn []string) (announced []string) {
	removeHopByHop(res.Header)
	for k, vv := range res.Header {
		if k == rt.reqIDHeader {
			continue // the proxy's ID, set in dst, stays the only one
		}
		if old, ok := dst[k]; ok {
			dst[k] = append(old, vv...)
		} else {
			dst[k] = vv
		}
	}
	if n := len(res.Trailer); n > 0 {
		announced = make([]string, 0, n)
		for k := range res.Trailer {
			if responseTrailer(rt, conn, k) {
				announced = append(announced, k)
			}
		}
		if len(announced) > 0 {
			dst["Trailer"] = []string{strings.Join(announced, ", ")}
		}
	}
	if !rt.resOps.empty() {
		rt.resOps.apply(dst)
	}
	noSniff(dst)
	return announced
}

// responseTrailer reports whether a backend's response trailer k goes to
// the client: a valid trailer (validTrailer); not named by the backend's
// Connection field conn (RFC 9110 §7.6.1: an intermediary removes the
// header and trailer fields a connection option names); and none of the
// fields the route's response_headers edit (one removed from the head or
// set in it does not come back as a trailer, as request_headers does for
// request trailers).
func responseTrailer(rt *route, conn []string, k string) bool {
	if !validTrailer(k) || rt.resOps.names(k) || sameFieldName(k, rt.reqIDHeader) {
		return false
	}
	for _, f := range conn {
		for opt := range strings.SplitSeq(f, ",") {
			if strings.EqualFold(strings.TrimSpace(opt), k) {
				return false
			}
		}
	}
	return true
}

// noSniff marks a response header without Content-Type (the backend gave
// none, or the route removed it) so that neither server sniffs one from
// the body: a nil value tells both not to, and sends nothing. An upload
// served untyped with "nosniff" would otherwise reach the browser as
// text/html.
func noSniff(h http.Header) {
	if _, typed := h["Content-Type"]; !typed {
		h["Content-Type"] = nil
	}
}

// handleResponse copies the backend's response to the client.
func (s *site) handleResponse(rs *reqState, r *http.Request, rt *route, t *Target, res *http.Response, upType string) {
	u := rt.up
	if res.StatusCode == http.StatusSwitchingProtocols {
		s.handleUpgrade(rs, r, rt, t, res, upType)
		return
	}
	if len(u.passive.UnhealthyStatus) > 0 && u.unhealthyStatus(res.StatusCode) {
		u.fail(t, "status "+res.Status)
	}
	dst := rs.w.Header()
	var (
		announced []string
		conn      []string // the backend's Connection field (none on the pass-on path)
		gz        *gzipBody
	)
	fi := flushInterval(res, rt)
	// A response the route compresses varies with Accept-Encoding, and
	// its header is edited: not passed on as it came.
	// Not for HTTP/1.0 clients, as nginx's gzip_http_version 1.1: the
	// caches of that time ignore Vary and would give the encoding to
	// clients that never asked for it.
	// A HEAD gets the fields its GET would (RFC 9110 §9.3.2): the
	// encoding's, without a body to encode (the target's Content-Length,
	// the identity's, goes: the encoding's is not known).
	varies := rt.compress != nil && r.ProtoAtLeast(1, 1) && rt.compress.eligible(r, res)
	headEncoded := false
	if varies && acceptsGzip(r.Header) {
		if r.Method == http.MethodHead {
			headEncoded = true
		} else {
			var perConn *atomic.Int32
			if rs.ci != nil {
				perConn = &rs.ci.compressing
			}
			gz, _ = newGzipBody(rt.compress.level, fi != 0, perConn) // nil when too many are: uncompressed
		}
	}
	// A 304 carries the Vary its 200 would (notModifiedVaries), and one
	// that revalidates the encoding its ETag (revalidatesEncoding).
	vary304 := rt.compress != nil && res.StatusCode == http.StatusNotModified && r.ProtoAtLeast(1, 1) && rt.compress.notModifiedVaries(res)
	encoded304 := vary304 && revalidatesEncoding(r, res)
	if h := passOnHead(res); h == nil || varies || vary304 || !rs.w.writeFields(res.StatusCode, res.ContentLength, h) {
		if h != nil {
			h.Fill(res)
		}
		conn = res.Header["Connection"]
		announced = copyResponseHeader(dst, res, rt, conn)
		if len(announced) > 0 && r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.Method != http.MethodHead {
			// An HTTP/2 target may send a length and trailers (RFC 9113
			// §8.1); over HTTP/1.1 trailers only follow a chunked body
			// (RFC 9112 §7.1.2). With the length the writer would drop
			// them: a gRPC call's status among them.
			delete(dst, "Content-Length")
		}
		if varies {
			addVary(dst)
		}
		if gz != nil || headEncoded {
			encodeHeader(dst)
		}
		if vary304 {
			addVary(dst)
		}
		if encoded304 {
			weakenETag(dst)
		}
		rs.w.WriteHeader(res.StatusCode)
	}
	if fi < 0 && res.ContentLength != 0 || len(announced) > 0 {
		// Streams: the client gets the headers now, not with the first
		// data. Not a response known to be empty: over HTTP/2 its
		// headers then go with END_STREAM when the handler returns, as
		// the backend sent them. A gRPC Trailers-Only response (its
		// grpc-status in the only HEADERS frame) must stay one: flushed
		// early, its stream would end on an empty DATA frame, which a
		// gRPC client takes as an end without trailers (INTERNAL), not
		// the backend's status.
		rs.w.Flush()
	}
	body := res.Body
	readTimeout := u.readTimeout
	if rt.readTimeout != 0 {
		readTimeout = rt.readTimeout // the route's own (negative: none)
	}
	if _, own := body.(*h1Body); !own && readTimeout > 0 && body != http.NoBody {
		body = watchBody(body, readTimeout) // h1Body has its own
	}
	size := res.ContentLength
	if gz != nil {
		gz.src, body, size = body, gz, -1
	}
	err := copyBody(&rs.w, body, fi, size, r.ProtoMajor == 2)
	// Over HTTP/2 Close waits for the Transport to stop writing the
	// request, which it ends by closing the attempt's body: a write
	// blocked on a client that still holds its half of the stream open
	// (a gRPC call the target answered or failed before the client was
	// done) is cut then (attemptBody.Close).
	body.Close()
	if err != nil {
		if errors.Is(err, errClientWrite) || r.Context().Err() != nil {
			rs.clientGone = true
			return
		}
		if !rs.grpcEnd.IsZero() && !time.Now().Before(rs.grpcEnd) {
			// The call's deadline ended the exchange: not the
			// target's failure.
			s.grpcDeadlinePassed(rs, r, t, err)
			return
		}
		if rs.body != nil && rs.body.timedOut.Load() {
			// A full-duplex exchange cut because the client's body
			// stalled: not the target's failure.
			panic(http.ErrAbortHandler)
		}
		if berr := rs.body.readError(); berr != nil {
			// Cut because the client's body broke (malformed or cut
			// short) while the target was answering: not the target's
			// failure either. The status is out (logged as sent): the
			// response ends broken.
			s.p.logger.Debug("client's request body failed during the response", "site", s.name, "uri", r.RequestURI, "error", berr)
			panic(http.ErrAbortHandler)
		}
		// A body that stalled past read_timeout is not counted against
		// the target, as nginx's max_fails does not count it: a quiet
		// stream (a gRPC watch, an event stream between events) is no
		// sign of a failing target, and a few of them at once took it out
		// of rotation. A body that broke off is.
		stalled := isTimeout(err) || errors.As(err, new(*readTimeoutError))
		if !stalled {
			u.fail(t, "body: "+err.Error())
		}
		if rs.w.discard() {
			// None of the response had left the write buffer: the
			// client gets a whole 502 (504 when the target stalled past
			// its read timeout), not a connection closed on
			// nothing, which it could not tell from a server that never
			// answered (and might send the request again).
			if stalled {
				s.errorResponse(rs, r, http.StatusGatewayTimeout, "upstream timed out", "the body from target "+t.Addr+" of upstream "+u.name+" stalled: "+err.Error())
				return
			}
			s.errorResponse(rs, r, http.StatusBadGateway, "upstream response broken", "the body from target "+t.Addr+" of upstream "+u.name+" broke off: "+err.Error())
			return
		}
		s.p.logger.Warn("upstream body copy failed", "site", s.name, "upstream", u.name, "target", t.Addr, "uri", r.RequestURI, "error", err)
		panic(http.ErrAbortHandler) // the client must see a broken response, not a short one
	}
	if len(res.Trailer) > 0 {
		if n := fieldCount(res.Trailer); n > u.maxFields {
			// Bounded as a head is (max_response_header_fields): the
			// response ends broken rather than pass them on.
			u.fail(t, fmt.Sprintf("%d trailer fields, over max_response_header_fields (%d)", n, u.maxFields))
			s.p.logger.Warn("upstream trailer refused", "site", s.name, "upstream", u.name, "target", t.Addr, "uri", r.RequestURI, "fields", n)
			panic(http.ErrAbortHandler)
		}
		rs.w.Flush()
		for k, vv := range res.Trailer {
			if !responseTrailer(rt, conn, k) {
				continue
			}
			if !slices.Contains(announced, k) {
				k = http.TrailerPrefix + k
			}
			dst[k] = vv
		}
	}
}
