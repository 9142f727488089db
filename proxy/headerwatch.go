package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// headerWatch bounds the wait for a response head through a net/http
// transport (an HTTP/2 target's, or an HTTP/1.1 one's under max_conns):
// from the request's end on the wire (WroteRequest), as the transport's
// own ResponseHeaderTimeout does, until RoundTrip returns. The transport's
// own is one value for all its requests; a route may have its own
// (timeouts.response_header), so the transports have none and this
// watch bounds every exchange they make (h1Client bounds its own with a
// read deadline).
//
// It cancels the request's context when the wait is over; that context,
// which the response body's reads go on using, is released only when
// the handler ends (end).
type headerWatch struct {
	d      time.Duration
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	stopped bool        // under mu: the head came, or the attempt is over
	fired   bool        // under mu: the wait was over first
	timer   *time.Timer // under mu; nil until the request is written
	writes  int         // under mu: the request's writes so far (whose wait timer runs)
}

// headerTimeoutError is why a headerWatch cancelled an attempt: a
// timeout (504, and the target counts a failure).
type headerTimeoutError struct{ d time.Duration }

func (e *headerTimeoutError) Error() string {
	return fmt.Sprintf("proxy: no response head from the target within response_header (%v) of the request's end", e.d)
}
func (e *headerTimeoutError) Timeout() bool   { return true }
func (e *headerTimeoutError) Temporary() bool { return true } // a net.Error, as isTimeout wants

// watchHeader returns req under a context the watch cancels d after the
// request is written, and the watch.
func watchHeader(req *http.Request, d time.Duration) (*http.Request, *headerWatch) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &headerWatch{d: d, cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { w.start(i.Err) },
	})
	return req.WithContext(ctx), w
}

// start starts the wait: the request is written (err nil). A transport
// may write a request more than once in one RoundTrip: HTTP/1.1 sends it
// again on a fresh connection when a pooled one turns out closed before
// any answer, HTTP/2 when the target refused the stream (RFC 9113 §8.7).
// Each write starts a wait of its own, as the transports' own
// ResponseHeaderTimeout did per connection: the first one's, or a
// failed write's, would count the redial (and under max_conns the wait
// for a free connection) as the target's silence.
func (w *headerWatch) start(err error) {
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.writes++
	n := w.writes
	w.timer = time.AfterFunc(w.d, func() { w.fire(n) })
}

// fire ends the wait that the request's n-th write started, unless a
// later write started another.
func (w *headerWatch) fire(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || n != w.writes {
		return
	}
	w.stopped, w.fired = true, true
	w.cancel(&headerTimeoutError{w.d})
}

// stop ends the wait (RoundTrip returned) and reports whether it was over
// first: the attempt then failed for it, whatever RoundTrip returned.
func (w *headerWatch) stop() (fired bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return w.fired
}

// end ends the watch and releases its context: the exchange is over.
func (w *headerWatch) end() {
	w.stop()
	w.cancel(nil)
}
