package h1server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// A client that goes away while its request is being handled should
// cancel the request's context, so that the proxy stops waiting for the
// backend. net/http reads the connection in the background during every
// request for that. Here nothing reads while a handler is short: the
// server's watch loop looks at the busy connections every watchDelay and
// starts a one-byte background read only on a connection whose handler
// has been running that long with its request body read in full (a
// handler still reading the body sees the client go away itself). The
// read ends when the handler returns (a deadline in the past aborts it);
// a byte it got is kept for the next request, an error (EOF, reset)
// cancels the connection's context and ends the connection after the
// response.
const watchDelay = 100 * time.Millisecond

type watcher struct {
	since atomic.Int64 // monoclock ns when the running handler started; 0: none

	mu        sync.Mutex
	cond      sync.Cond // signals the end of a background read; L is &mu
	inHandler bool
	bodyEOF   bool  // the request body was read in full (or there is none)
	wanted    bool  // due while the body was still being read
	reading   bool  // a background read is in flight
	aborting  bool  // the read's deadline was moved to the past
	stopped   bool  // the read returned: no more watching for this request
	err       error // the client went away
}

// begin marks the start of a handler.
func (w *watcher) begin(bodyEOF bool) {
	w.mu.Lock()
	w.inHandler, w.bodyEOF = true, bodyEOF
	w.wanted, w.stopped, w.err = false, false, nil
	w.mu.Unlock()
	w.since.Store(monoclock.Now())
}

// due starts the background read of c once its handler has run for
// watchDelay (called by the server's watch loop).
func (w *watcher) due(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.inHandler || w.reading || w.stopped {
		return
	}
	if !w.bodyEOF {
		w.wanted = true
		return
	}
	w.reading = true
	go w.read(c)
}

// bodyDone is called when the handler read the request body to its end.
func (w *watcher) bodyDone(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bodyEOF = true
	if w.wanted && w.inHandler && !w.reading && !w.stopped {
		w.reading = true
		go w.read(c)
	}
}

func (w *watcher) read(c *conn) {
	n, err := c.rwc.Read(c.r.byteBuf[:])
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > 0 {
		c.r.hasByte = true
		w.stopped = true
	}
	if err != nil && !(w.aborting && isTimeout(err)) {
		w.err = err
		w.stopped = true
		// The context ends before the hook runs: whoever the hook
		// interrupts finds it ended and takes the failure for the client's
		// (the proxy then logs 499 and does not count it against the
		// backend).
		c.cancel()
		c.scope.clientGone()
	}
	w.reading = false
	w.cond.Broadcast()
}

// aLongTimeAgo is a deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// end marks the end of the handler (or a hijack): a background read in
// flight is aborted and waited for.
func (w *watcher) end(c *conn) {
	c.scope.endHandler()
	w.since.Store(0)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inHandler = false
	if !w.reading {
		return
	}
	w.aborting = true
	c.rwc.SetReadDeadline(aLongTimeAgo)
	for w.reading {
		w.cond.Wait()
	}
	w.aborting = false
	c.rwc.SetReadDeadline(time.Time{}) // the caller sets the next phase's own
}

// gone reports whether the background read saw the client go away (only
// after end).
func (w *watcher) gone() bool { return w.err != nil }

func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// watchLoop runs while the server has connections.
func (s *Server) watchLoop() {
	t := time.NewTicker(watchDelay)
	defer t.Stop()
	for range t.C {
		now := monoclock.Now()
		s.mu.Lock()
		if len(s.conns) == 0 {
			s.watching = false
			s.mu.Unlock()
			return
		}
		for c := range s.conns {
			if st := c.watch.since.Load(); st != 0 && now-st >= int64(watchDelay) {
				c.watch.due(c)
			}
		}
		s.mu.Unlock()
	}
}
