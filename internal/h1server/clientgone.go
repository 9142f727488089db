package h1server

import (
	"context"
	"sync"
	"time"
)

// connScope is the parent of a connection's request context: it carries
// the connection's client-gone hook (OnClientGone). It is allocated per
// connection and never pooled, since the contexts of its requests may
// outlive the connection.
type connScope struct {
	context.Context                 // ConnContext's
	reqCtx          context.Context // the requests' context (conn.ctx)
	canEnd          bool            // ConnContext's context can end by itself: no hooks

	// start is when the server began reading the head of the request
	// being served (RequestStart); written and read on the connection's
	// goroutine, which runs the handler.
	start time.Time

	mu    sync.Mutex
	gen   uint64 // counts the hooks set
	hook  func() // of the running handler; nil: none
	fired bool   // the hook of gen was started
	gone  bool   // the client went away
}

type scopeKey struct{}

func (s *connScope) Value(key any) any {
	if key == (scopeKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// clientGone runs the hook, if any: the client went away (the watcher
// cancels the request context at the same time).
func (s *connScope) clientGone() {
	s.mu.Lock()
	s.gone = true
	f := s.hook
	if f != nil {
		s.hook, s.fired = nil, true
	}
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

// endHandler drops the running handler's hook: it never runs after the
// handler returned.
func (s *connScope) endHandler() {
	s.mu.Lock()
	s.hook = nil
	s.mu.Unlock()
}

// ClientGone is a hook OnClientGone set.
type ClientGone struct {
	s   *connScope
	gen uint64
}

// OnClientGone arranges for f to run when the client of the request
// whose context is ctx is seen to go away while the request's handler
// runs, which is also when ctx is cancelled: what context.AfterFunc(ctx,
// f) does for that request, without an allocation per call. f runs on the
// goroutine that saw the client go, or on its own when ctx has ended
// already; it must not wait for the handler.
//
// ok is false, and nothing is set, when ctx is not the very context of a
// request this package's Server is handling, or when the context
// ConnContext returned can end by itself: the caller watches ctx with
// context.AfterFunc then. A handler has one hook at a time: setting one
// replaces the one before (whose Stop then reports false), and the hook
// ends with the handler.
func OnClientGone(ctx context.Context, f func()) (g ClientGone, ok bool) {
	s, _ := ctx.Value(scopeKey{}).(*connScope)
	if s == nil || s.canEnd || s.reqCtx != ctx {
		return ClientGone{}, false
	}
	s.mu.Lock()
	s.gen++
	g = ClientGone{s: s, gen: s.gen}
	s.hook, s.fired = f, false
	ended := s.gone || ctx.Err() != nil
	if ended {
		s.hook, s.fired = nil, true
	}
	s.mu.Unlock()
	if ended {
		go f()
	}
	return g, true
}

// Stop ends the hook. It reports whether it stopped f from running: false
// when f ran or runs, when the hook was replaced, or when Stop was called
// before. A hook that ended with its handler without running stops with
// true.
func (g ClientGone) Stop() bool {
	s := g.s
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != g.gen || s.fired {
		return false
	}
	s.hook = nil
	s.gen++ // a second Stop reports false, as with context.AfterFunc
	return true
}

// RequestStart returns when the server began reading the head of the
// request whose handler has ctx (its context or one made from it), the
// instant Server.ReadTimeout counts from; false when ctx is not of a
// request this package's Server is handling. Call it from the handler's
// goroutine.
func RequestStart(ctx context.Context) (time.Time, bool) {
	s, _ := ctx.Value(scopeKey{}).(*connScope)
	if s == nil || s.start.IsZero() {
		return time.Time{}, false
	}
	return s.start, true
}
