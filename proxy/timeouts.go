package proxy

import (
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/h1server"
	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// Slow clients: body_timeout bounds the wait for each read of a request
// body and send_timeout the wait for each write of a response, like
// nginx's client_body_timeout and send_timeout (the time between two
// successive operations, not the whole transfer). Both work through the
// deadlines of the server's ResponseWriter (internal/h1server and
// x/net/http2 both have them), so any serving path that offers SetReadDeadline and
// SetWriteDeadline gets them. Over HTTP/2 send_timeout is a watch that
// sets a past deadline (opStall), as x/net/http2's deadline is a timer that
// resets the stream even between writes; body_timeout too, whose
// deadline ends the body even between reads.
//
// A deadline is re-armed at most every eighth of the timeout, so the
// allowed silence is between the timeout and 9/8 of it: a client is never
// cut before the configured time, and a fast transfer does not pay a
// deadline update per read or write.

// DefaultBodyTimeout and DefaultSendTimeout are the defaults of
// LimitsConfig.BodyTimeout and SendTimeout; DefaultUpstreamReadTimeout,
// DefaultUpstreamWriteTimeout and DefaultTunnelIdleTimeout those of
// TransportConfig.ReadTimeout, WriteTimeout and TunnelIdleTimeout.
const (
	DefaultBodyTimeout          = 60 * time.Second
	DefaultSendTimeout          = 60 * time.Second
	DefaultUpstreamReadTimeout  = 60 * time.Second
	DefaultUpstreamWriteTimeout = 60 * time.Second
	DefaultTunnelIdleTimeout    = 10 * time.Minute
)

// DefaultRequestBuffer is the default of LimitsConfig.RequestBuffer.
const DefaultRequestBuffer = 64 << 10

type readDeadliner interface{ SetReadDeadline(time.Time) error }

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// deadlineKeeper is a ResponseWriter that tells the write deadline in
// place that a handler set, which stays for the connection's next
// requests (h1server's; zero: none).
type deadlineKeeper interface{ WriteDeadline() time.Time }

// opDeadline re-arms a per-operation deadline through set.
type opDeadline struct {
	d     time.Duration // 0: off
	last  int64         // monoclock ns of the last arming; 0: never
	limit time.Time     // a whole-request bound (read/write_timeout), or zero
}

// due returns the deadline to set now, or false when the current one is
// recent enough.
func (o *opDeadline) due() (time.Time, bool) {
	// One monotonic clock read on every write; the wall clock only
	// when a deadline is set.
	n := monoclock.Now()
	if o.last != 0 && n-o.last < int64(o.d/8) {
		return time.Time{}, false
	}
	o.last = n
	dl := time.Now().Add(o.d + o.d/8)
	if !o.limit.IsZero() && dl.After(o.limit) {
		dl = o.limit
	}
	return dl, true
}

// bodyDeadline bounds the reads of one request body.
type bodyDeadline struct {
	opDeadline
	rw readDeadliner
	// stall bounds the reads over HTTP/2 instead of a deadline armed
	// ahead of them: x/net/http2's read deadline is a timer that ends
	// the body when it fires, whether a read waits or not, so a target
	// that took the body slower than body_timeout (its flow-control
	// window shut while it answered, the Transport waiting to send what
	// it had read) had it cut as if the client had stalled. nil over
	// HTTP/1.1.
	stall *opStall
}

// arm readies the bound for a read about to be made.
func (b *bodyDeadline) arm() {
	if b.stall != nil {
		b.stall.starts()
		return
	}
	if dl, ok := b.due(); ok {
		b.rw.SetReadDeadline(dl)
	}
}

// read tells that the read arm readied is over.
func (b *bodyDeadline) read() {
	if b.stall != nil {
		b.stall.ends()
	}
}

// release puts back the whole-request bound (or none) once the body is
// read: the server's own reads (HTTP/1.1 watches the connection for a
// client that goes away) must not inherit the per-read deadline. Over
// HTTP/2 the watch stops (the whole-request bound is x/net/http2's own).
func (b *bodyDeadline) release() {
	if b.stall != nil {
		b.stall.stop()
		return
	}
	b.rw.SetReadDeadline(b.limit)
}

// bodyDeadline returns the read deadline keeper for the body of r; its
// rw is nil when the body timeout is off or the writer has no read
// deadlines. The whole-request bound counts from when the HTTP/1.1 server
// began reading r's head, as the deadline it set does (read_timeout bounds
// the whole request), else from the handler's start.
func (p *Proxy) bodyDeadline(rs *reqState, r *http.Request, route time.Duration) bodyDeadline {
	l := p.limitsOf(rs.ci)
	d := l.BodyTimeout
	if route != 0 {
		d = route // the route's own timeouts.body (negative: none)
	}
	rd, ok := rs.w.rw.(readDeadliner)
	if d <= 0 || !ok {
		return bodyDeadline{}
	}
	b := bodyDeadline{opDeadline: opDeadline{d: d}, rw: rd}
	if r.ProtoMajor == 2 {
		b.stall = newOpStall(d, func() { rd.SetReadDeadline(aLongTimeAgo) })
		return b
	}
	if t := l.ReadTimeout; t > 0 {
		start, ok := h1server.RequestStart(r.Context())
		if !ok {
			start = rs.start
		}
		b.limit = start.Add(t)
	}
	return b
}

// bodyTimedOut answers a request whose body stalled past the body
// timeout: 408, and the HTTP/1.1 connection closes after it.
func (s *site) bodyTimedOut(rs *reqState, r *http.Request) {
	s.errorResponse(rs, r, http.StatusRequestTimeout, "request body timed out", "no request body data for body_timeout")
}

// bodyFailed answers a request whose body could not be read (err, the
// first read error). A body cut short (the client closed, half-closed or
// reset its connection) is a client gone: the connection ends with no
// response (logged 499), since any status would claim an upload that did
// not arrive. Anything else is a malformed body: 400 (RFC 9112 §7.1),
// and the server closes the connection, whose rest cannot be framed.
func (s *site) bodyFailed(rs *reqState, r *http.Request, err error) {
	var ne net.Error // net.ErrClosed is one too
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		rs.clientGone = true
		s.p.logger.Debug("client went away during its request body", "site", s.name, "uri", r.RequestURI, "error", err)
		panic(http.ErrAbortHandler)
	}
	s.errorResponse(rs, r, http.StatusBadRequest, "malformed request body", "request body: "+err.Error())
}

// sendDeadline bounds the writes of one response.
type sendDeadline struct {
	opDeadline
	ww writeDeadliner
	// stall bounds the writes over HTTP/2 instead of a deadline armed
	// ahead of them: x/net/http2's write deadline is a timer that resets
	// the stream when it fires, whether a write waits or not, so one
	// armed before a quiet spell (a slow upload, a target slow to
	// answer, an event stream or gRPC stream between messages) cut a
	// response that had nothing to send. nil over HTTP/1.1, whose
	// deadline is the connection's and fails only a write.
	stall *opStall
}

// arm readies the bound for a write about to be made.
func (s *sendDeadline) arm() {
	if s.stall != nil {
		s.stall.starts()
		return
	}
	if s.ww == nil {
		return
	}
	if dl, ok := s.due(); ok {
		s.ww.SetWriteDeadline(dl)
	}
}

// wrote tells that the write arm readied is over.
func (s *sendDeadline) wrote() {
	if s.stall != nil {
		s.stall.ends()
	}
}

// handlerEnds stops the watch of an HTTP/2 response (the writer is the
// server's again once the handler returns) and bounds what the server
// still flushes after the handler by a deadline, as over HTTP/1.1.
func (s *sendDeadline) handlerEnds() {
	if s.stall == nil {
		s.arm()
		return
	}
	s.stall.stop()
	if dl, ok := s.due(); ok {
		s.ww.SetWriteDeadline(dl)
	}
}

// opStall bounds the reads of a request body or the writes of a
// response over HTTP/2, where a deadline is a timer that ends the stream's
// body (reads) or resets the stream (writes) when it fires, whether an
// operation waits or not: once an operation has waited d it runs cut,
// which sets a deadline in the past (x/net/http2 fails the operation at
// once). A timer checks every d at most, and only an operation in
// progress counts, never the time between two: a target slow to take a
// body it is sent, a target slow to answer, a stream quiet between
// messages are no client's stall.
type opStall struct {
	d       time.Duration
	cut     func()
	busy    atomic.Bool  // an operation is in progress
	since   atomic.Int64 // monoclock ns: when it began
	started atomic.Bool  // the timer runs

	mu      sync.Mutex
	stopped bool        // under mu: stopped, or cut
	timer   *time.Timer // under mu
}

func newOpStall(d time.Duration, cut func()) *opStall { return &opStall{d: d, cut: cut} }

func (s *opStall) starts() {
	s.since.Store(monoclock.Now())
	s.busy.Store(true)
	if s.started.Load() {
		return
	}
	s.mu.Lock()
	if !s.stopped && s.timer == nil {
		s.timer = time.AfterFunc(s.d, s.check)
	}
	s.started.Store(true)
	s.mu.Unlock()
}

func (s *opStall) ends() { s.busy.Store(false) }

// check runs when an operation may have waited d.
func (s *opStall) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	next := s.d
	if s.busy.Load() {
		took := time.Duration(monoclock.Now() - s.since.Load())
		if took >= s.d {
			s.stopped = true
			s.cut()
			return
		}
		next = s.d - took
	}
	s.timer.Reset(next)
}

// stop ends the watch: cut does not run after it returns (the
// ResponseWriter is the server's again once the handler returns).
func (s *opStall) stop() {
	s.mu.Lock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
}

// initSend prepares the send deadline of a request and arms it, so that
// every write of the response, a 100 Continue included, has it (over
// HTTP/2 an opStall, which only runs while a write waits). A
// deadline a previous response of the connection armed stays in place
// (deadlineKeeper): while it is at least the timeout away it is kept, as
// if armed at that deadline less 9/8 of the timeout, so that a busy
// keep-alive connection sets one deadline every few seconds, not one per
// request. A write_timeout bounds each request on its own and is not
// carried over.
func (p *Proxy) initSend(rs *reqState, r *http.Request) {
	l := p.limitsOf(rs.ci)
	var limit time.Time
	if t := l.WriteTimeout; t > 0 {
		limit = rs.start.Add(t)
	}
	p.startSend(rs, r, l.SendTimeout, limit, true)
}

// routeSend puts a route's own send timeout (negative: none) in place of
// the listener's, which initSend armed before the request was routed (a
// 100 Continue may go before). The route's is armed from now; the
// listener's write_timeout (limit) still bounds the response.
func (p *Proxy) routeSend(rs *reqState, r *http.Request, d time.Duration) {
	sd := &rs.w.send
	limit := sd.limit
	if sd.stall != nil {
		sd.stall.stop()
	} else if sd.ww != nil {
		// initSend's deadline goes; write_timeout's, which it stood
		// for too (the HTTP/1 server's own is the same one), stays.
		sd.ww.SetWriteDeadline(limit)
	}
	*sd = sendDeadline{}
	p.startSend(rs, r, d, limit, false)
}

// startSend arms a send timeout of d (none when d <= 0) for rs's writes,
// bounded by limit (zero: none); keep takes over a deadline a previous
// response of the connection left (see initSend).
func (p *Proxy) startSend(rs *reqState, r *http.Request, d time.Duration, limit time.Time, keep bool) {
	ww, ok := rs.w.rw.(writeDeadliner)
	if d <= 0 || !ok {
		return
	}
	sd := &rs.w.send
	sd.opDeadline = opDeadline{d: d, limit: limit}
	sd.ww = ww
	if r.ProtoMajor == 2 {
		// The stream's own write_timeout deadline is x/net/http2's
		// (http.Server.WriteTimeout).
		var conn net.Conn
		if rs.ci != nil {
			conn = rs.ci.conn
		}
		var st *opStall
		st = newOpStall(d, func() {
			// The stream is reset: its RST_STREAM goes before other
			// frames, and its blocked write returns once it is written.
			ww.SetWriteDeadline(aLongTimeAgo)
			if conn == nil {
				return
			}
			// When the connection itself takes nothing (a client that
			// stopped reading with a small TCP window), the frame being
			// written blocks and the reset never goes: the write is still
			// blocked one more send_timeout later, and the connection is
			// cut, as nginx closes one whose send_timeout passed.
			since := st.since.Load()
			time.AfterFunc(d, func() {
				if st.busy.Load() && st.since.Load() == since {
					conn.SetWriteDeadline(aLongTimeAgo)
				}
			})
		})
		sd.stall = st
		return
	}
	if k, ok := ww.(deadlineKeeper); ok && keep && sd.limit.IsZero() {
		// Kept only when no further away than this timeout allows (a
		// reload may have shortened it).
		if dl := k.WriteDeadline(); !dl.IsZero() && dl.Sub(rs.start) <= d+d/8 {
			sd.last = monoclock.Of(dl) - int64(d+d/8)
		}
	}
	sd.arm()
}

// readTimeoutError ends a response body whose target sent nothing for the
// upstream's read timeout.
type readTimeoutError struct{ d time.Duration }

func (e *readTimeoutError) Error() string {
	return "no response body data from the target for " + e.d.String() + " (read_timeout)"
}

func (e *readTimeoutError) Timeout() bool { return true }

// watchedBody bounds the wait for each read of a response body that
// http.Transport delivered (h1Client's bodies use the connection's read
// deadline instead): a timer, moved at most every eighth of the timeout,
// closes the body when a Read has waited for the timeout, which fails
// it. Only a wait in Read counts: when the timer fires between reads (the
// proxy was writing to a slow client, which send_timeout bounds), it is
// set again, so that a slow client does not make a target that answers
// at once look silent (charged, then marked down). net/http's bodies may
// be closed while a Read is blocked (HTTP/1.1: the Transport closes the
// connection; HTTP/2: the stream is reset).
type watchedBody struct {
	rc      io.ReadCloser
	d       time.Duration
	last    atomic.Int64 // monoclock ns of the last timer move
	t       *time.Timer
	expired atomic.Bool
	reading atomic.Bool // a Read is in progress
	// closed stops the timer's function from arming it again: Close's
	// Stop does not reach a function already running, which would
	// otherwise keep the body, and its timer, for good. (A function that
	// passed the check as Close came arms it once more; that firing
	// sees closed.)
	closed atomic.Bool
}

func watchBody(rc io.ReadCloser, d time.Duration) *watchedBody {
	b := &watchedBody{rc: rc, d: d}
	b.last.Store(monoclock.Now())
	// Stored before it is armed: expire moves it, and a timeout short
	// enough (read: 1ns) fired before AfterFunc returned.
	b.t = time.AfterFunc(math.MaxInt64, b.expire)
	b.t.Reset(d + d/8)
	return b
}

func (b *watchedBody) expire() {
	if b.closed.Load() {
		return
	}
	if !b.reading.Load() {
		// Between reads: the target is not the one waited for.
		b.t.Reset(b.d + b.d/8)
		return
	}
	if waited := time.Duration(monoclock.Now() - b.last.Load()); waited < b.d {
		// A Read began (and moved the timer) as it fired.
		b.t.Reset(b.d - waited + b.d/8)
		return
	}
	b.expired.Store(true)
	b.rc.Close()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if n := monoclock.Now(); n-b.last.Load() >= int64(b.d/8) {
		b.last.Store(n)
		b.t.Reset(b.d + b.d/8)
	}
	b.reading.Store(true)
	n, err := b.rc.Read(p)
	b.reading.Store(false)
	if err != nil && err != io.EOF && b.expired.Load() {
		err = &readTimeoutError{b.d}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.closed.Store(true)
	b.t.Stop()
	return b.rc.Close()
}
