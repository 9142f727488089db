package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/handshake"
)

// HTTPLimits are the HTTP server settings of one listener.
type HTTPLimits struct {
	MaxHeaderBytes       int
	ReadHeaderTimeout    time.Duration
	ReadTimeout          time.Duration
	WriteTimeout         time.Duration
	IdleTimeout          time.Duration
	MaxConcurrentStreams uint32
}

// ConnHandler takes over a connection instead of HTTP (TCP stream sites).
// It returns false when the connection is not for it.
type ConnHandler func(c *handshake.Conn) bool

// listener is one listening socket with its handshake server and the HTTP
// servers that run on its established connections: HTTP/1.1 through
// net/http (fed by a channel listener), h2 through x/net/http2 ServeConn.
type listener struct {
	addr string
	log  *slog.Logger
	ln   net.Listener
	hs   *handshake.Server

	handler atomic.Pointer[http.Handler]
	stream  atomic.Pointer[ConnHandler]
	gen     atomic.Pointer[serveRef] // the generation's ServeConn, when it has one

	h1    *http.Server
	h2    *http2.Server
	conns *chanListener
	h2wg  sync.WaitGroup
	h2mu  sync.Mutex
	h2c   map[net.Conn]struct{} // h2 connections being served
	done  chan struct{}         // closed when Serve returned
}

func newListener(ln net.Listener, hcfg *handshake.ListenerConfig, obs handshake.Observer, lim HTTPLimits, log *slog.Logger) *listener {
	l := &listener{addr: ln.Addr().String(), ln: ln, log: log, done: make(chan struct{}), h2c: map[net.Conn]struct{}{}}
	l.conns = newChanListener(ln.Addr())
	l.h1 = &http.Server{
		Handler:           http.HandlerFunc(l.serveHTTP),
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ReadHeaderTimeout: durOr(lim.ReadHeaderTimeout, 30*time.Second),
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       durOr(lim.IdleTimeout, 2*time.Minute),
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	l.h2 = &http2.Server{MaxConcurrentStreams: lim.MaxConcurrentStreams, IdleTimeout: l.h1.IdleTimeout}
	// Registers h2 graceful shutdown (GOAWAY) with h1.Shutdown.
	if err := http2.ConfigureServer(l.h1, l.h2); err != nil {
		log.Error("configuring http2", "err", err)
	}
	l.hs = handshake.NewServer(hcfg, obs, l.dispatch)
	return l
}

func durOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (l *listener) setHandler(h http.Handler, stream ConnHandler, ref *serveRef) {
	l.gen.Store(ref)
	if h == nil {
		h = http.NotFoundHandler()
	}
	l.handler.Store(&h)
	if stream != nil {
		l.stream.Store(&stream)
	} else {
		l.stream.Store(nil)
	}
}

// start serves until the listener is closed.
func (l *listener) start() {
	go l.h1.Serve(l.conns)
	go func() {
		defer close(l.done)
		if err := l.hs.Serve(l.ln); err != nil && !errors.Is(err, net.ErrClosed) {
			l.log.Error("accept loop ended", "listener", l.addr, "err", err)
		}
	}()
}

// serveRef is one generation as seen by the listeners. HTTP/1.1 and h2
// connections are served by the listener's own long-lived servers; each
// request is given to the generation current when it arrives and counted
// in flight, so that retiring a generation (after a reload) waits for its
// requests and never drops a connection. TCP stream connections go to the
// generation's ServeConn for their whole life.
type serveRef struct {
	handler  http.Handler
	serve    func(net.Conn) error
	blocking func(handshake.ConnState) bool

	mu       sync.RWMutex
	retired  bool
	inflight sync.WaitGroup
}

// retire stops new requests from reaching the generation.
func (r *serveRef) retire() {
	r.mu.Lock()
	r.retired = true
	r.mu.Unlock()
}

// wait waits for the generation's in-flight requests, or ctx.
func (r *serveRef) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *listener) serveHTTP(w http.ResponseWriter, r *http.Request) {
	for {
		ref := l.gen.Load()
		if ref == nil || ref.handler == nil {
			break
		}
		ref.mu.RLock()
		if ref.retired {
			ref.mu.RUnlock()
			if l.gen.Load() == ref {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			continue // a reload is in progress: use the new generation
		}
		ref.inflight.Add(1)
		ref.mu.RUnlock()
		defer ref.inflight.Done()
		ref.handler.ServeHTTP(w, r)
		return
	}
	h := l.handler.Load()
	if h == nil {
		http.Error(w, "no handler", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// dispatch receives each established connection.
func (l *listener) dispatch(c *handshake.Conn) {
	if ref := l.gen.Load(); ref != nil && ref.serve != nil && ref.blocking != nil && ref.blocking(c.ConnState()) {
		ref.serve(c)
		return
	}
	if sp := l.stream.Load(); sp != nil && (*sp)(c) {
		return
	}
	if c.ConnState().ALPN == "h2" {
		l.h2wg.Add(1)
		defer l.h2wg.Done()
		l.h2mu.Lock()
		l.h2c[c] = struct{}{}
		l.h2mu.Unlock()
		defer func() {
			l.h2mu.Lock()
			delete(l.h2c, c)
			l.h2mu.Unlock()
		}()
		l.h2.ServeConn(c, &http2.ServeConnOpts{
			Context:    connContext(context.Background(), c),
			BaseConfig: l.h1,
			Handler:    http.HandlerFunc(l.serveHTTP),
		})
		c.Close()
		return
	}
	if !l.conns.push(c) {
		c.Close()
	}
}

// shutdown stops accepting, lets in-flight requests finish within ctx, then
// closes everything.
func (l *listener) shutdown(ctx context.Context) error {
	l.hs.StopAccepting()
	<-l.done
	l.hs.WaitHandshakes(ctx)
	err := l.h1.Shutdown(ctx) // also GOAWAYs the h2 connections
	h2done := make(chan struct{})
	go func() { l.h2wg.Wait(); close(h2done) }()
	select {
	case <-h2done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		l.close()
	}
	return err
}

// close closes at once, h2 connections included.
func (l *listener) close() {
	l.hs.Close()
	l.h1.Close()
	l.h2mu.Lock()
	for c := range l.h2c {
		c.Close()
	}
	l.h2mu.Unlock()
}

// chanListener is a net.Listener whose connections are pushed by dispatch.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
