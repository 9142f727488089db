package h1server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestOnClientGone: the hook a handler sets runs when its client goes
// away (with the context's cancellation) and Stop then reports it ran.
func TestOnClientGone(t *testing.T) {
	ran := make(chan struct{}, 1)
	result := make(chan bool, 1)
	entered := make(chan struct{})
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := OnClientGone(r.Context(), func() { ran <- struct{}{} })
		if !ok {
			t.Error("OnClientGone refused the request's own context")
		}
		close(entered)
		select {
		case <-r.Context().Done():
		case <-time.After(testpeer.WaitLimit):
		}
		// The hook runs with the cancellation just seen: 10 s (testwait),
		// not WaitLimit, which a mutant that never runs it would cost.
		select {
		case <-ran:
			result <- g.Stop()
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Error("the hook did not run when the client went away")
			result <- true
		}
	}))
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	testpeer.Recv(t, entered, "request")
	c.Close()
	if testpeer.Recv(t, result, "handler end") {
		t.Error("Stop after the hook ran reported it stopped it")
	}
}

// TestOnClientGoneStopsAndEnds: Stop before the client goes stops the
// hook (once); a hook left set ends with its handler, so the client going
// away during the next request does not run it; only the request's own
// context is accepted.
func TestOnClientGoneStopsAndEnds(t *testing.T) {
	stale := make(chan struct{}, 1)
	var kept ClientGone
	entered := make(chan struct{}, 1)
	released := make(chan bool, 1)
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		switch r.URL.Path {
		case "/stop":
			g, ok := OnClientGone(ctx, func() { t.Error("a stopped hook ran") })
			first, second := g.Stop(), g.Stop()
			if !ok || !first || second {
				t.Errorf("set %v, first Stop %v, second Stop %v; want true, true, false", ok, first, second)
			}
			// Replaced: the first hook's Stop reports false.
			a, _ := OnClientGone(ctx, func() {})
			b, _ := OnClientGone(ctx, func() {})
			if a.Stop() || !b.Stop() {
				t.Error("a replaced hook still stops, or its replacement does not")
			}
			for _, other := range []context.Context{
				context.WithValue(ctx, otherKey{}, 1),
				context.Background(),
			} {
				if _, ok := OnClientGone(other, func() {}); ok {
					t.Errorf("OnClientGone accepted %v", other)
				}
			}
			cctx, cancel := context.WithCancel(ctx)
			if _, ok := OnClientGone(cctx, func() {}); ok {
				t.Error("OnClientGone accepted a context with a cancellation of its own")
			}
			cancel()
		case "/leave":
			kept, _ = OnClientGone(ctx, func() { stale <- struct{}{} })
		case "/wait":
			entered <- struct{}{}
			<-ctx.Done()
			// The watcher cancels the context before it runs the hook (so
			// that a hook's interruption is seen as the client's), so wait
			// until it has taken the hook, if any: a stale hook has fired
			// by then and its Stop reports false.
			s := ctx.Value(scopeKey{}).(*connScope)
			for deadline := time.Now().Add(testwait.Bound(5 * time.Second)); ; time.Sleep(time.Millisecond) {
				s.mu.Lock()
				gone := s.gone
				s.mu.Unlock()
				if gone || time.Now().After(deadline) {
					break
				}
			}
			released <- kept.Stop()
		}
		io.WriteString(w, "ok")
	}))
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /stop HTTP/1.1\r\nHost: a\r\n\r\nGET /leave HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponses(t, br, "GET", "GET")
	io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n")
	testpeer.Recv(t, entered, "third request")
	c.Close()
	if !testpeer.Recv(t, released, "handler end") {
		t.Error("a hook that ended with its handler without running did not stop with true")
	}
	select {
	case <-stale:
		t.Error("the hook of an earlier request ran when the client left during a later one")
	case <-time.After(2 * watchDelay):
	}
}

// TestOnClientGoneAfterEnd: a hook set once the client is known gone runs
// at once.
func TestOnClientGoneAfterEnd(t *testing.T) {
	type outcome struct{ set, ran, stopped bool }
	result := make(chan outcome, 1)
	entered := make(chan struct{})
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		ran := make(chan struct{}, 1)
		g, ok := OnClientGone(r.Context(), func() { ran <- struct{}{} })
		o := outcome{set: ok}
		select {
		case <-ran:
			o.ran = true
		case <-time.After(testpeer.WaitLimit):
		}
		o.stopped = g.Stop()
		result <- o
	}))
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	testpeer.Recv(t, entered, "request")
	c.Close()
	o := testpeer.Recv(t, result, "handler end")
	if !o.set || !o.ran || o.stopped {
		t.Errorf("hook set on an ended context: set %v, ran %v, Stop stopped it %v; want true, true, false", o.set, o.ran, o.stopped)
	}
}

// TestOnClientGoneConnContextCanEnd: with a ConnContext whose context
// can end by itself, hooks are refused (the caller watches the context).
func TestOnClientGoneConnContextCanEnd(t *testing.T) {
	refused := make(chan bool, 1)
	s := &Server{ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		return ctx
	}}
	_, addr := testServer(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := OnClientGone(r.Context(), func() {})
		refused <- !ok
	}))
	exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if !testpeer.Recv(t, refused, "handler") {
		t.Error("OnClientGone accepted a request whose connection context can end by itself")
	}
}

// otherKey derives a context that is not the request's own.
type otherKey struct{}
