package proxy

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// sendWatch ends an exchange over HTTP/2 on net/http's Transport whose
// target stops taking the request body (write_timeout). There the body
// waits for the stream's flow-control window, not in a write a deadline
// could bound (sendTimed bounds the writes of HTTP/1.1 connections): a
// target that grants no window held the exchange, with no answer to the
// client, for as long as the client waited.
//
// The Transport reads the body between its writes, so once it has read
// some and is not in a read, it is sending (or waiting to send): when
// that lasts d, the watch cancels the attempt's context with
// errSendTimeout. The watch starts at the first read of the body (a dial,
// a handshake, a wait for 100 Continue are not the target's stall); a
// read in progress is the client's to finish (body_timeout). It ends once
// the request is written (WroteRequest) or the attempt returns; the
// context, which the response body's reads go on using, only when the
// handler ends (end).
type sendWatch struct {
	d       time.Duration
	cancel  context.CancelCauseFunc
	reading atomic.Bool
	last    atomic.Int64 // monoclock ns: when the last read of the body returned
	stalled atomic.Bool  // the watch cancelled the attempt
	started atomic.Bool  // the first read of the body came

	mu      sync.Mutex
	stopped bool        // under mu
	timer   *time.Timer // under mu; nil until the first read
}

// errSendTimeout is why a sendWatch cancelled an attempt: a timeout
// (504).
var errSendTimeout error = sendTimeoutError{}

type sendTimeoutError struct{}

func (sendTimeoutError) Error() string {
	return "proxy: the target took no more of the request body for write_timeout"
}
func (sendTimeoutError) Timeout() bool   { return true }
func (sendTimeoutError) Temporary() bool { return true } // a net.Error, as isTimeout wants

// watchSend returns req under a context the watch cancels, and the
// watch, started.
func watchSend(req *http.Request, d time.Duration) (*http.Request, *sendWatch) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &sendWatch{d: d, cancel: cancel}
	w.last.Store(monoclock.Now())
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { w.stop() },
	})
	return req.WithContext(ctx), w
}

// readStarts and readEnds bracket a read of the body; the first starts
// the watch.
func (w *sendWatch) readStarts() {
	w.reading.Store(true)
	if w.started.Load() {
		return
	}
	w.mu.Lock()
	if !w.stopped && w.timer == nil {
		w.timer = time.AfterFunc(w.d, w.check)
	}
	w.started.Store(true)
	w.mu.Unlock()
}
func (w *sendWatch) readEnds() {
	w.last.Store(monoclock.Now())
	w.reading.Store(false)
}

// check runs when d may have passed without a read of the body.
func (w *sendWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	// On the monotonic clock: a step of the wall clock is no time the
	// target took.
	idle := time.Duration(monoclock.Now() - w.last.Load())
	switch {
	case w.reading.Load():
		w.timer.Reset(w.d)
	case idle < w.d:
		w.timer.Reset(w.d - idle)
	default:
		w.stopped = true
		w.stalled.Store(true)
		w.cancel(errSendTimeout)
	}
}

// stop ends the watch (the request is written, or the attempt is over).
func (w *sendWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// end ends the watch and releases its context: the exchange is over.
func (w *sendWatch) end() {
	w.stop()
	w.cancel(nil)
}
