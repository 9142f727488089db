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

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/h1server"
	"github.com/gmproxy/gmproxy/proxy"
)

// HTTPLimits are the HTTP server settings of one listener. A reload that
// changes them applies them to new connections; established connections
// keep the limits they started with until they close.
type HTTPLimits struct {
	MaxHeaderBytes       int
	ReadHeaderTimeout    time.Duration
	ReadTimeout          time.Duration
	WriteTimeout         time.Duration
	IdleTimeout          time.Duration
	MaxConcurrentStreams uint32
	// BodyTimeout, SendTimeout and HTTP2MaxResetRate are the proxy's
	// (proxy.LimitsConfig: a negative timeout is off, 0 the default),
	// applied to the requests of this listener's connections.
	BodyTimeout, SendTimeout time.Duration
	HTTP2MaxResetRate        int
	// MaxRequestsPerClient is proxy.LimitsConfig's, counted in the
	// listener's table (which outlives the sets).
	MaxRequestsPerClient int
	// RequestBuffer is proxy.LimitsConfig's (negative: off).
	RequestBuffer int
}

// ConnHandler takes over a connection instead of HTTP (TCP stream sites).
// It returns false when the connection is not for it, and calls c.Settled
// once it has taken it (else shutdown waits for the connection to end
// before it stops the HTTP servers).
type ConnHandler func(c *frontdoor.Conn) bool

// listener is one listening socket with its handshake server and the HTTP
// servers that run on its established connections: HTTP/1.1 through
// h1server, h2 through x/net/http2 ServeConn, both on the goroutine that
// did the handshake.
// The HTTP servers come in sets, one per HTTPLimits: a reload that changes
// the limits starts a new set for new connections while the connections of
// the old set keep their servers until they close.
type listener struct {
	addr string
	log  *slog.Logger
	ln   *ppSwitch
	hs   *frontdoor.Server

	handler atomic.Pointer[http.Handler]
	stream  atomic.Pointer[ConnHandler]
	gen     atomic.Pointer[serveRef] // the generation's ServeConn, when it has one

	http   atomic.Pointer[httpSet] // the set new connections go to
	setsMu sync.Mutex
	sets   map[*httpSet]struct{} // every set with connections (or current)
	closed bool
	done   chan struct{} // closed when Serve returned

	// requests counts the requests in progress of each client over every
	// set (max_requests_per_client).
	requests proxy.ClientRequests

	// cutCounted is set once the connections closed at the end of a
	// grace period are counted (Daemon.countListenerCut; guarded by
	// Daemon.mu).
	cutCounted bool
}

// httpSet is one pair of HTTP servers with the same limits.
type httpSet struct {
	lim HTTPLimits
	// proxyLim is lim as the proxy takes it, defaults applied: every
	// request of the set's connections carries it (proxy.ConnContextLimits).
	proxyLim proxy.LimitsConfig
	h1       *h1server.Server
	// h2base is the configuration x/net/http2 takes its limits from; its
	// Shutdown sends GOAWAY to the h2 connections (http2.ConfigureServer).
	h2base *http.Server
	h2     *http2.Server
	h2wg   sync.WaitGroup

	// stopped is set by stop, before h2base.Shutdown (proxy.H2LateGoAway).
	stopped atomic.Bool

	mu      sync.Mutex
	retired bool
	active  int                   // HTTP/1.1 and h2 connections
	h2c     map[net.Conn]struct{} // h2 connections being served
	onIdle  func()                // called once when retired and idle
}

func newListener(ln net.Listener, hcfg *frontdoor.ListenerConfig, obs frontdoor.Observer, lim HTTPLimits, log *slog.Logger) *listener {
	l := &listener{addr: ln.Addr().String(), ln: &ppSwitch{Listener: ln}, log: log, done: make(chan struct{}), sets: map[*httpSet]struct{}{}}
	s := l.newHTTPSet(lim)
	l.sets[s] = struct{}{}
	l.http.Store(s)
	l.hs = frontdoor.NewServer(hcfg, obs, l.dispatch)
	return l
}

func (l *listener) newHTTPSet(lim HTTPLimits) *httpSet {
	s := &httpSet{lim: lim, h2c: map[net.Conn]struct{}{}}
	s.proxyLim = proxy.LimitsConfig{
		MaxHeaderBytes: lim.MaxHeaderBytes, ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout: lim.ReadTimeout, WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout,
		MaxConcurrentStreams: lim.MaxConcurrentStreams,
		BodyTimeout:          lim.BodyTimeout, SendTimeout: lim.SendTimeout, HTTP2MaxResetRate: lim.HTTP2MaxResetRate,
		MaxRequestsPerClient: lim.MaxRequestsPerClient, ClientRequests: &l.requests,
		RequestBuffer: lim.RequestBuffer,
	}.WithDefaults()
	s.h1 = &h1server.Server{
		Handler:           http.HandlerFunc(l.serveHTTP),
		ReuseHeader:       true, // see Generation.Handler
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ReadHeaderTimeout: durOr(lim.ReadHeaderTimeout, 30*time.Second),
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       durOr(lim.IdleTimeout, 2*time.Minute),
		ConnContext:       s.connContext,
		Logger:            l.log,
	}
	s.h2base = &http.Server{
		Handler:           http.HandlerFunc(l.serveHTTP),
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ReadHeaderTimeout: s.h1.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       s.h1.IdleTimeout,
		ConnContext:       s.connContext,
		ErrorLog:          slog.NewLogLogger(l.log.Handler(), slog.LevelDebug),
	}
	// An h2 connection acquired just before shutdown stops the set may
	// register with x/net/http2 after h2base.Shutdown sent its GOAWAYs.
	s.h2base.ConnState = proxy.H2LateGoAway(s.h2base, s.stopped.Load)
	s.h2 = &http2.Server{MaxConcurrentStreams: lim.MaxConcurrentStreams, IdleTimeout: s.h1.IdleTimeout,
		MaxReadFrameSize: proxy.H2MaxReadFrameSize, WriteByteTimeout: proxy.H2WriteByteTimeout(s.proxyLim)}
	// Registers h2 graceful shutdown (GOAWAY) with h2base.Shutdown.
	if err := http2.ConfigureServer(s.h2base, s.h2); err != nil {
		l.log.Error("configuring http2", "err", err)
	}
	return s
}

// acquire counts a connection in (h2 ones are also tracked for close);
// false when the set is retired.
func (s *httpSet) acquire(c net.Conn, h2 bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired {
		return false
	}
	s.active++
	if h2 {
		s.h2c[c] = struct{}{}
		s.h2wg.Add(1)
	}
	return true
}

func (s *httpSet) releaseH2(c net.Conn) {
	s.mu.Lock()
	delete(s.h2c, c)
	s.mu.Unlock()
	s.h2wg.Done()
	s.release()
}

func (s *httpSet) release() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.checkIdle()
}

// checkIdle calls onIdle once the set is retired and no connection is
// left.
func (s *httpSet) checkIdle() {
	s.mu.Lock()
	f := s.onIdle
	if !s.retired || s.active > 0 || f == nil {
		s.mu.Unlock()
		return
	}
	s.onIdle = nil
	s.mu.Unlock()
	f()
}

// retire sends new connections elsewhere; established ones stay.
func (s *httpSet) retire(onIdle func()) {
	s.mu.Lock()
	s.retired = true
	s.onIdle = onIdle
	s.mu.Unlock()
	s.checkIdle()
}

// stop refuses new connections: the listener is closing. A pending onIdle
// stays.
func (s *httpSet) stop() {
	s.stopped.Store(true)
	s.mu.Lock()
	s.retired = true
	s.mu.Unlock()
}

// setHTTP applies new HTTP limits to new connections.
func (l *listener) setHTTP(lim HTTPLimits) {
	l.setsMu.Lock()
	defer l.setsMu.Unlock()
	old := l.http.Load()
	if l.closed || old.lim == lim {
		return
	}
	s := l.newHTTPSet(lim)
	l.sets[s] = struct{}{}
	l.http.Store(s)
	old.retire(func() {
		l.setsMu.Lock()
		delete(l.sets, old)
		l.setsMu.Unlock()
	})
}

// httpSets returns every set still in use.
func (l *listener) httpSets() []*httpSet {
	l.setsMu.Lock()
	defer l.setsMu.Unlock()
	out := make([]*httpSet, 0, len(l.sets))
	for s := range l.sets {
		out = append(out, s)
	}
	return out
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
// generation's ServeConn for their whole life, counted in flight too.
type serveRef struct {
	handler  http.Handler
	serve    func(net.Conn) error
	blocking func(frontdoor.ConnState) bool
	refuse   func(net.Conn) // may be nil

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

// enter counts a request or a TCP stream in r.inflight; false once r is
// retired.
func (r *serveRef) enter() bool {
	r.mu.RLock()
	ok := !r.retired
	if ok {
		r.inflight.Add(1)
	}
	r.mu.RUnlock()
	return ok
}

// wait waits for the generation's in-flight requests and streams, or ctx.
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
		if !ref.enter() {
			if l.gen.Load() == ref {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			continue // a reload is in progress: use the new generation
		}
		ref.serveInflight(w, r)
		return
	}
	h := l.handler.Load()
	if h == nil {
		http.Error(w, "no handler", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// serveStream serves a TCP stream connection counted in ref.inflight (Add
// done by the caller) for its whole life.
func (ref *serveRef) serveStream(c net.Conn) {
	defer ref.inflight.Done()
	ref.serve(c)
}

// serveInflight serves one request counted in ref.inflight (Add done by the
// caller), releasing it even when the handler panics (http.ErrAbortHandler).
// A separate function keeps the defer out of serveHTTP's loop, where it
// would cost a heap allocation per request.
func (ref *serveRef) serveInflight(w http.ResponseWriter, r *http.Request) {
	defer ref.inflight.Done()
	ref.handler.ServeHTTP(w, r)
}

// dispatch receives each established connection.
func (l *listener) dispatch(c *frontdoor.Conn) {
	// c.Settled: the connection is counted where shutdown finds it (an
	// HTTP set, or, for TCP streams, the generation's in-flight count) and
	// no longer holds up WaitHandshakes.
	for {
		ref := l.gen.Load()
		if ref == nil || ref.serve == nil || ref.blocking == nil || !ref.blocking(c.ConnState()) {
			break
		}
		if !ref.enter() {
			if l.gen.Load() == ref {
				// Shutting down: logged as the sessions served are.
				if ref.refuse != nil {
					ref.refuse(c)
				} else {
					c.Close()
				}
				return
			}
			continue // a reload is in progress: use the new generation
		}
		c.Settled()
		ref.serveStream(c)
		return
	}
	if sp := l.stream.Load(); sp != nil && (*sp)(c) {
		return
	}
	h2 := c.ConnState().ALPN == "h2"
	for range 100 { // a reload retires at most one set at a time
		set := l.http.Load()
		if !set.acquire(c, h2) {
			if l.http.Load() == set {
				break // the listener is closing
			}
			continue
		}
		if h2 {
			c.Settled()
			defer set.releaseH2(c)
			// The proxy's guard bounds the client's stream resets
			// (http2_max_reset_rate: rapid reset floods).
			set.h2.ServeConn(proxy.GuardHTTP2(c, &set.proxyLim, l.log), &http2.ServeConnOpts{
				Context:    set.connContext(context.Background(), c),
				BaseConfig: proxy.H2BaseConfig(set.h2base),
				Handler:    http.HandlerFunc(l.serveHTTP),
			})
			c.Close()
			return
		}
		set.h1.ServeConnCounted(c, c.Settled) // closes c
		set.release()
		return
	}
	c.Close()
}

// shutdown stops accepting, lets in-flight requests finish within ctx, then
// closes everything.
func (l *listener) shutdown(ctx context.Context) error {
	// Responses from here on close their connections, also those of the
	// handshakes WaitHandshakes waits for.
	for _, s := range l.httpSets() {
		s.h1.Drain()
	}
	l.hs.StopAccepting()
	<-l.done
	l.hs.WaitHandshakes(ctx)
	l.setsMu.Lock()
	l.closed = true
	l.setsMu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range l.httpSets() {
		// A handshake that outlived WaitHandshakes (ctx ended) finds the
		// set stopped: no h2 connection is added while h2wg is waited on.
		s.stop()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.h2base.Shutdown(ctx) // GOAWAY to the h2 connections
			err := s.h1.Shutdown(ctx)
			h2done := make(chan struct{})
			go func() { s.h2wg.Wait(); close(h2done) }()
			select {
			case <-h2done:
			case <-ctx.Done():
				err = ctx.Err()
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		l.close()
	}
	return err
}

// close closes at once, h2 connections included.
func (l *listener) close() {
	l.hs.Close()
	l.setsMu.Lock()
	l.closed = true
	l.setsMu.Unlock()
	for _, s := range l.httpSets() {
		s.stop()
		s.h2base.Close()
		s.h1.Close()
		s.mu.Lock()
		for c := range s.h2c {
			c.Close()
		}
		s.mu.Unlock()
	}
}

// setProxyProtocol applies PROXY protocol settings to new connections (nil:
// off).
func (l *listener) setProxyProtocol(pp *proxy.ProxyProtocolListener) { l.ln.pp.Store(pp) }

// ppSwitch is the listening socket with the PROXY protocol settings of the
// current generation: each accepted connection is wrapped (or not) by the
// settings current when it is accepted.
type ppSwitch struct {
	net.Listener
	pp atomic.Pointer[proxy.ProxyProtocolListener]
}

func (l *ppSwitch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pp := l.pp.Load()
	if pp == nil {
		return c, nil
	}
	one := *pp
	one.Listener = oneConn{l.Listener, c}
	return one.Accept()
}

// oneConn is a listener whose Accept returns one connection already
// accepted (to reuse proxy.ProxyProtocolListener's Accept per connection).
type oneConn struct {
	net.Listener
	c net.Conn
}

func (o oneConn) Accept() (net.Conn, error) { return o.c, nil }
