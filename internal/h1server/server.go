// Package h1server serves HTTP/1.1 (and 1.0) on established connections,
// each on the goroutine that calls ServeConn: requests are read, handled
// and answered there, with no hand-off to another goroutine and no
// per-request background read. A response that fits the write buffer
// (16 KiB) leaves in one Write, status line and header included.
//
// Requests are parsed by net/http's http.ReadRequest; the server adds
// what net/http's own server adds around it (Host checks, header size
// limit, 100-continue, keep-alive rules, timeouts) and closes the
// connection after a request that carried both Content-Length and
// Transfer-Encoding (RFC 9112 §6.1).
package h1server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// Server serves HTTP/1.x on connections handed to ServeConn. Its fields
// must not change once ServeConn was called.
type Server struct {
	Handler http.Handler

	// MaxHeaderBytes bounds the request line and header (default
	// http.DefaultMaxHeaderBytes), each field line counting 32 bytes more
	// (fieldOverhead); a request over it gets 431.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds the reading of a request's header from its
	// first byte (0: ReadTimeout). ReadTimeout bounds the reading of a
	// whole request, body included; WriteTimeout the time from the end of
	// a request's header to the end of its response; IdleTimeout the
	// wait for the next request on a kept-alive connection (0:
	// ReadTimeout). Zero means no limit, as with http.Server.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration

	// ReuseHeader builds the Header map of every plain request in storage
	// that the connection's (and, once the connection is done, the next
	// connection's) following request gets again, emptied: 3 allocations
	// less per request. Set it only when the Handler keeps neither
	// r.Header nor the slices in it after it returns.
	ReuseHeader bool

	// ConnContext returns the context of a connection's requests; it is
	// called once per connection with a background context. The
	// connection's context is cancelled when the connection ends or the
	// client is seen to have gone away during a request.
	ConnContext func(ctx context.Context, c net.Conn) context.Context

	// Logger receives handler panics and invalid responses (nil:
	// slog.Default()).
	Logger *slog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	closed   bool          // Close or Shutdown was called
	drained  chan struct{} // closed when conns is empty after Shutdown
	watching bool          // watchLoop runs
	shutting atomic.Bool
}

// ErrServerClosed is returned by ServeConn after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

// ServeConn serves c until it closes, the client or a handler ends it,
// or the server shuts down. It runs on the caller's goroutine and closes
// c before it returns, unless a handler hijacked it.
func (s *Server) ServeConn(c net.Conn) error { return s.ServeConnCounted(c, nil) }

// ServeConnCounted is ServeConn that calls counted (when not nil) once the
// server counts c, or has refused it, and before it reads from c: a
// Shutdown starting after counted returned finds c among the connections
// it waits for.
func (s *Server) ServeConnCounted(c net.Conn, counted func()) error {
	cc := newConn(s, c)
	ok := s.track(cc)
	if counted != nil {
		counted()
	}
	if !ok {
		c.Close()
		putConn(cc)
		return ErrServerClosed
	}
	cc.serve()
	return nil
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	s.conns[c] = struct{}{}
	if !s.watching {
		s.watching = true
		go s.watchLoop()
	}
	return true
}

// untrack forgets c (closed or hijacked).
func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if len(s.conns) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
	s.mu.Unlock()
}

// Drain makes every response written from now on end its connection
// (Connection: close, and the connection closes after it) while requests
// are still served: the first one of a new connection and the next one of
// an idle connection. Shutdown drains too, and closes idle connections.
// A caller that must wait for something else before Shutdown (handshakes
// that end as shutdown starts) drains first, so that no response in
// between promises a kept-alive connection.
func (s *Server) Drain() { s.shutting.Store(true) }

// Shutdown stops taking connections, closes the idle ones at once and
// lets busy ones finish their request (answered with Connection: close)
// and close. It returns when every connection is closed or hijacked, or
// with ctx's error when ctx ends first (the remaining connections stay
// open; Close cuts them).
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	s.closed = true
	var drained chan struct{}
	if len(s.conns) > 0 {
		if s.drained == nil {
			s.drained = make(chan struct{})
		}
		drained = s.drained
	}
	s.mu.Unlock()
	if drained == nil {
		return nil
	}
	// A connection not yet seen idle is checked again: idle ones close at
	// once, a new one that sent nothing within newConnGrace closes too.
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	for wait := time.Millisecond; ; {
		s.closeIdle()
		select {
		case <-drained:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			wait = min(2*wait, 500*time.Millisecond)
			t.Reset(wait)
		}
	}
}

// newConnGrace is how long Shutdown lets a connection that has not sent
// its first request yet send it.
const newConnGrace = 5 * time.Second

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := monoclock.Now()
	for c := range s.conns {
		switch c.state.Load() {
		case stateIdle:
			c.rwc.Close()
		case stateNew:
			if now-c.started > int64(newConnGrace) {
				c.rwc.Close()
			}
		}
	}
}

// Close closes every connection at once and stops taking new ones.
func (s *Server) Close() error {
	s.shutting.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.rwc.Close()
	}
	return nil
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

func (s *Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout > 0 {
		return s.ReadHeaderTimeout
	}
	return s.ReadTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}
