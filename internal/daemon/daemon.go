// Package daemon is gmproxy's runtime: it turns a configuration into
// listeners (frontdoor.Server per address), serves HTTP/1.1 and h2 on the
// established connections through the proxy, reloads a new configuration
// without dropping connections, and shuts down gracefully. It runs
// in-process so that tests drive it exactly as `gmproxy run` does.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/rawsock"
	"github.com/gmproxy/gmproxy/proxy"
)

// ListenerSpec is one listener of a generation.
type ListenerSpec struct {
	Address   string
	Handshake *frontdoor.ListenerConfig
	Handler   http.Handler
	Stream    ConnHandler // nil: HTTP only
	HTTP      HTTPLimits
	// ProxyProtocol, when set, accepts PROXY v1/v2 headers from these
	// trusted sources. A reload applies it to connections accepted after
	// the reload.
	ProxyProtocol []string
	// ProxyProtocolTimeout bounds reading a PROXY header.
	ProxyProtocolTimeout time.Duration
	// ProxyProtocolRequired closes a trusted source's connection that
	// does not start with a PROXY header.
	ProxyProtocolRequired bool
	// DeferAccept is the listening socket's TCP_DEFER_ACCEPT
	// (rawsock.SetDeferAccept; 0: off). A reload sets it again.
	DeferAccept time.Duration
}

// Generation is one fully built configuration: everything a reload swaps.
type Generation struct {
	Listeners []ListenerSpec
	// ShutdownGrace bounds graceful shutdown (default 30 s).
	ShutdownGrace time.Duration
	// Handler, when set, serves the HTTP requests of every listener (the
	// proxy); ListenerSpec.Handler is then unused. Like every handler the
	// daemon serves, it keeps neither r.Header nor its value slices after
	// it returns: the HTTP/1 server reuses them (h1server.ReuseHeader).
	Handler http.Handler
	// ServeConn serves the connections for which Blocking is true (TCP
	// stream sites) for their whole life.
	ServeConn func(net.Conn) error
	Blocking  func(frontdoor.ConnState) bool
	// Refuse closes a connection for which Blocking is true that
	// arrived once the generation stopped taking them (shutdown), so
	// that it is logged (proxy.Proxy.RefuseConn). Nil: it is closed.
	Refuse func(net.Conn)
	// Shutdown retires the generation gracefully once its in-flight
	// requests are done (after a reload, or at shutdown): streams finish
	// until ctx ends, then health checks stop. May be nil.
	Shutdown func(ctx context.Context) error
	// Close releases the generation's resources at once; may be nil.
	Close func()
	// Proxy is the generation's reverse proxy (nil in handler-only tests).
	Proxy *proxy.Proxy
	// Info is logged after a successful start or reload.
	Info []any
	// Installed, when set, is called once the generation serves (a
	// start, a Reload or a Commit), not for one refused: what the build
	// prepared in state shared with the running generation is applied
	// here.
	Installed func()
}

// ListenTCP opens a TCP listening socket whose accepted connections get no
// TCP keep-alive probes. Go's default enables them with four setsockopt
// calls per accepted connection; gmproxy closes idle connections itself
// (HTTP idle_timeout, TCP stream idle_timeout), so they would only cost
// system calls on every connection.
func ListenTCP(addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	return rawsock.Listener{Listener: ln}, nil
}

// Builder builds a generation; Reload calls it again.
type Builder func() (*Generation, error)

// Options for New.
type Options struct {
	Logger   *slog.Logger
	Observer frontdoor.Observer
	// Listen opens a listening socket; default ListenTCP.
	Listen func(addr string) (net.Listener, error)
}

// Daemon is a running gmproxy.
type Daemon struct {
	opts  Options
	log   *slog.Logger
	build Builder

	mu        sync.Mutex
	gen       *Generation
	listeners map[string]*listener
	// draining are the listeners a reload removed, still draining within
	// that generation's grace period; each maps to a channel closed when
	// it is done. Close cuts them, Shutdown bounds them by its own ctx.
	draining map[*listener]chan struct{}
	ref      *serveRef
	stopped  bool
	// pending is the generation Prepare made ready, until Commit
	// installs it or Abort (or another Prepare) drops it.
	pending  *staged
	retiring sync.WaitGroup
	// retired are the generations retiring: still serving what was in
	// flight at their reload, and writing its access-log lines, so
	// ReopenLogs reopens their logs too.
	retired map[*Generation]struct{}
	// stopCtx bounds the retirement of old generations: they drain without
	// a deadline (a reload never cuts requests, tunnels or streams) until
	// shutdown's grace period ends or Close is called.
	stopCtx    context.Context
	stopCancel context.CancelFunc
	// cut is how many connections the shutdown closed when its grace
	// period ended (or Close cut it short); cutCounted once counted.
	cut        int64
	cutCounted bool
}

// CutObserver is optionally implemented by an Observer that counts the
// connections a shutdown closes when its grace period ends (or a second
// signal's Close ends it early), and those a listener a reload removed
// closes when its own grace period ends: n of listener's connections were
// still open then.
type CutObserver interface {
	ConnsCut(listener string, n int)
}

// New builds the first generation and starts its listeners.
func New(build Builder, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observer == nil {
		opts.Observer = frontdoor.NopObserver{}
	}
	if opts.Listen == nil {
		opts.Listen = ListenTCP
	}
	d := &Daemon{opts: opts, log: opts.Logger, build: build, listeners: map[string]*listener{}, draining: map[*listener]chan struct{}{}}
	d.stopCtx, d.stopCancel = context.WithCancel(context.Background())
	gen, err := build()
	if err != nil {
		return nil, err
	}
	if err := d.apply(gen); err != nil {
		d.closeAll()
		if gen.Close != nil {
			gen.Close()
		}
		return nil, err
	}
	d.log.Info("gmproxy started", append([]any{"listeners", d.Addrs()}, gen.Info...)...)
	return d, nil
}

// Addrs returns the bound addresses of the listeners, by configured address.
func (d *Daemon) Addrs() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]string, len(d.listeners))
	for k, l := range d.listeners {
		m[k] = l.addr
	}
	return m
}

// Addr returns the bound address of the listener configured as addr.
func (d *Daemon) Addr(addr string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.listeners[addr]; l != nil {
		return l.addr
	}
	return ""
}

// staged is a generation whose PROXY protocol settings were checked and
// whose new listening sockets are open: installing it cannot fail.
type staged struct {
	gen    *Generation
	pps    map[string]*proxy.ProxyProtocolListener
	opened map[string]net.Listener
}

// drop closes what stage opened and the generation.
func (st *staged) drop() {
	for _, o := range st.opened {
		o.Close()
	}
	if st.gen.Close != nil {
		st.gen.Close()
	}
}

// stage checks gen's PROXY protocol settings and opens the sockets of its
// new addresses, so that a failure changes nothing (d.mu held).
func (d *Daemon) stage(gen *Generation) (*staged, error) {
	if d.stopped {
		return nil, errors.New("daemon: stopped")
	}
	st := &staged{gen: gen, pps: map[string]*proxy.ProxyProtocolListener{}, opened: map[string]net.Listener{}}
	for _, ls := range gen.Listeners {
		if ls.ProxyProtocol == nil {
			continue
		}
		pp, err := proxy.NewProxyProtocolListener(nil, ls.ProxyProtocol, ls.ProxyProtocolTimeout, ls.ProxyProtocolRequired)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", ls.Address, err)
		}
		st.pps[ls.Address] = pp
	}
	for _, ls := range gen.Listeners {
		if _, ok := d.listeners[ls.Address]; ok {
			continue
		}
		ln, err := d.opts.Listen(ls.Address)
		if err != nil {
			for _, o := range st.opened {
				o.Close()
			}
			if holder := d.samePort(ls.Address); holder != "" && errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("listen %s: %w: the running listener %s holds that port; a reload opens new listeners before it closes old ones, so a port cannot move to another way of writing its address (another IP, a host name, \":port\") by reload: keep %s, or restart gmproxy", ls.Address, err, holder, holder)
			}
			return nil, fmt.Errorf("listen %s: %w", ls.Address, err)
		}
		st.opened[ls.Address] = ln
	}
	return st, nil
}

// samePort returns the address, as configured, of a running listener
// bound to the port of addr whose bind may be what took addr, or "". Two
// distinct IP addresses given literally share a port number without
// conflict: the socket holding addr is then someone else's, and blaming
// the listener would send the operator the wrong way. (A host name may
// resolve to the listener's IP: it is not ruled out.)
func (d *Daemon) samePort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	ip := net.ParseIP(host)
	for a, l := range d.listeners {
		h, p, err := net.SplitHostPort(l.ln.Addr().String())
		if err != nil || p != port {
			continue
		}
		if bound := net.ParseIP(h); ip != nil && bound != nil && !ip.IsUnspecified() && !bound.IsUnspecified() && !ip.Equal(bound) {
			continue
		}
		return a
	}
	return ""
}

// apply installs gen: existing addresses get the new config, new addresses
// start listening, removed addresses drain in the background.
func (d *Daemon) apply(gen *Generation) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropPending()
	st, err := d.stage(gen)
	if err != nil {
		return err
	}
	d.install(st)
	return nil
}

// install serves a staged generation in place of the running one (d.mu
// held).
func (d *Daemon) install(st *staged) {
	gen, pps, opened := st.gen, st.pps, st.opened
	// Socket options, on new and kept sockets alike (a reload may change
	// them); a refusal is logged, not fatal: the option only saves work.
	for _, ls := range gen.Listeners {
		ln := opened[ls.Address]
		if l, ok := d.listeners[ls.Address]; ok {
			ln = l.ln.Listener
		}
		if err := rawsock.SetDeferAccept(ln, ls.DeferAccept); err != nil {
			d.log.Warn("listener option not applied", "listener", ls.Address, "option", "defer_accept", "err", err)
		}
	}
	ref := gen.serveRef()
	keep := map[string]bool{}
	for _, ls := range gen.Listeners {
		keep[ls.Address] = true
		if l, ok := d.listeners[ls.Address]; ok {
			// New connections get the new settings; established ones
			// keep the HTTP servers (and limits) they started with.
			l.setHandler(ls.Handler, ls.Stream, ref)
			l.setProxyProtocol(pps[ls.Address])
			l.setHTTP(ls.HTTP)
			l.hs.SetConfig(ls.Handshake)
			continue
		}
		l := newListener(opened[ls.Address], ls.Handshake, d.opts.Observer, ls.HTTP, d.log)
		l.setProxyProtocol(pps[ls.Address])
		l.setHandler(ls.Handler, ls.Stream, ref)
		d.listeners[ls.Address] = l
		l.start()
	}
	for addr, l := range d.listeners {
		if !keep[addr] {
			delete(d.listeners, addr)
			grace := gen.ShutdownGrace
			done := make(chan struct{})
			d.draining[l] = done
			go func() {
				defer close(done)
				tctx, cancel := context.WithTimeout(context.Background(), durOr(grace, 30*time.Second))
				defer cancel()
				// The connections still open when the grace period
				// ends are counted (gmproxy_connections_cut_total) before
				// anything closes them, as a shutdown's: the drains
				// below wait on ctx, done only once they are.
				ctx := &countedCut{Context: tctx, done: make(chan struct{})}
				stop := context.AfterFunc(tctx, func() {
					d.mu.Lock()
					d.countListenerCut(l)
					d.mu.Unlock()
					close(ctx.done)
				})
				defer stop() // before cancel: a drained listener cuts none
				l.shutdown(ctx)
				// The connections the HTTP servers let go of (TCP
				// streams, hijacked WebSocket and CONNECT tunnels)
				// follow the same rule on a listener the
				// configuration no longer has: the grace period,
				// then cut. (On a listener kept, a reload cuts
				// none: their generation retires without a
				// deadline.)
				if l.hs.WaitConns(ctx) != nil {
					l.hs.CloseEstablished()
				}
				d.mu.Lock()
				delete(d.draining, l)
				d.mu.Unlock()
			}()
		}
	}
	if old, oldRef := d.gen, d.ref; old != nil {
		// Retire the previous generation: no new request reaches it; its
		// in-flight requests, tunnels and streams finish in their own time.
		if oldRef != nil {
			oldRef.retire()
		}
		if old.Proxy != nil {
			old.Proxy.Retire(gen.Proxy)
		}
		// The generations still draining follow gen's checks too, each
		// straight, not through the ones retired since: a chain would
		// keep every generation a reload retired while the oldest
		// drains (a WebSocket: hours), and be walked on each pick.
		for g := range d.retired {
			if g.Proxy != nil {
				g.Proxy.Retire(gen.Proxy)
			}
		}
		if d.retired == nil {
			d.retired = make(map[*Generation]struct{})
		}
		d.retired[old] = struct{}{}
		d.retiring.Add(1)
		go func() {
			defer d.retiring.Done()
			d.retireCtx(d.stopCtx, old, oldRef)
			d.mu.Lock()
			delete(d.retired, old)
			d.mu.Unlock()
		}()
	}
	d.gen, d.ref = gen, ref
	if gen.Installed != nil {
		gen.Installed()
	}
}

// serveRef is the generation as the listeners see it; nil when it
// serves nothing of its own.
func (gen *Generation) serveRef() *serveRef {
	if gen.Handler == nil && gen.ServeConn == nil {
		return nil
	}
	return &serveRef{handler: gen.Handler, serve: gen.ServeConn, blocking: gen.Blocking, refuse: gen.Refuse}
}

// retireCtx shuts a retired generation down once its in-flight requests
// are done (or ctx ends), then releases it.
func (d *Daemon) retireCtx(ctx context.Context, g *Generation, ref *serveRef) error {
	var err error
	if ref != nil {
		err = ref.wait(ctx)
	}
	if g.Shutdown != nil {
		err = errors.Join(err, g.Shutdown(ctx))
	}
	if g.Close != nil {
		g.Close()
	}
	if err != nil && ref != nil {
		// What Close cut ends at once and writes its access-log line
		// then; the process exits when shutdown returns, and would
		// lose the lines of exactly the requests and streams it cut.
		cctx, cancel := context.WithTimeout(context.Background(), cutWait)
		ref.wait(cctx)
		cancel()
	}
	return err
}

// cutWait bounds how long a generation whose drain ran out of time waits,
// once its connections are closed, for the requests and streams cut to
// end (a handler blocked on something the cut does not reach must not
// hold the exit up).
const cutWait = 2 * time.Second

// Reload builds a new generation and swaps it in. On error the running
// generation stays and the error is returned (and logged).
func (d *Daemon) Reload() error {
	gen, err := d.build()
	if err != nil {
		var probs conf.Problems
		if errors.As(err, &probs) {
			// One line per problem (file:line:column), like `gmproxy check`.
			d.log.Error("reload refused: configuration invalid, keeping the running one",
				"errors", probs.Count(conf.SeverityError), "warnings", probs.Count(conf.SeverityWarning))
			for _, p := range probs {
				d.log.Error("configuration", "problem", p.String())
			}
			return err
		}
		d.log.Error("reload refused: configuration invalid, keeping the running one", "err", err)
		return err
	}
	if err := d.apply(gen); err != nil {
		if gen.Close != nil {
			gen.Close()
		}
		d.log.Error("reload failed, keeping the running configuration", "err", err)
		return err
	}
	d.log.Info("configuration reloaded", append([]any{"listeners", d.Addrs()}, gen.Info...)...)
	return nil
}

// Prepare is the first half of a reload that several processes make
// together (the workers of gmproxy run): it builds a new generation and
// opens its new listeners, without serving it; Commit then serves it, or
// Abort drops it. What can fail fails here, so that either every process
// commits or every one aborts. A generation already pending is dropped.
func (d *Daemon) Prepare() error {
	gen, err := d.build()
	if err != nil {
		d.log.Error("reload refused: configuration invalid, keeping the running one", "err", err)
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropPending() // first: it may hold the sockets of new addresses
	st, err := d.stage(gen)
	if err != nil {
		if gen.Close != nil {
			gen.Close()
		}
		d.log.Error("reload failed, keeping the running configuration", "err", err)
		return err
	}
	d.pending = st
	return nil
}

// dropPending drops a generation Prepare staged (d.mu held): a new
// Prepare replaces it, and a Reload, which stages against the listeners
// it changes, makes it stale.
func (d *Daemon) dropPending() {
	if d.pending != nil {
		d.pending.drop()
		d.pending = nil
	}
}

// Commit serves the generation Prepare made ready.
func (d *Daemon) Commit() error {
	d.mu.Lock()
	st := d.pending
	d.pending = nil
	switch {
	case st == nil:
		d.mu.Unlock()
		return errors.New("daemon: no reload prepared")
	case d.stopped:
		d.mu.Unlock()
		st.drop()
		return errors.New("daemon: stopped")
	}
	d.install(st)
	d.mu.Unlock()
	d.log.Info("configuration reloaded", append([]any{"listeners", d.Addrs()}, st.gen.Info...)...)
	return nil
}

// Abort drops the generation Prepare made ready, if any.
func (d *Daemon) Abort() {
	d.mu.Lock()
	st := d.pending
	d.pending = nil
	d.mu.Unlock()
	if st != nil {
		st.drop()
	}
}

// Shutdown stops accepting, waits for in-flight requests up to ctx (or the
// generation's grace period when ctx has no deadline), then closes
// everything. It returns nil when every connection drained in time.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return nil
	}
	d.stopped = true
	if d.pending != nil {
		d.pending.drop()
		d.pending = nil
	}
	ls := make([]*listener, 0, len(d.listeners))
	for _, l := range d.listeners {
		ls = append(ls, l)
	}
	draining := maps.Clone(d.draining)
	grace := 30 * time.Second
	if d.gen != nil && d.gen.ShutdownGrace > 0 {
		grace = d.gen.ShutdownGrace
	}
	d.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, grace)
		defer cancel()
	}
	// The connections still open when the grace period ends are
	// counted before anything closes them (every drain below waits on
	// ctx for that).
	ctx = &countedCut{Context: ctx, done: make(chan struct{})}
	context.AfterFunc(ctx.(*countedCut).Context, func() {
		d.countCut()
		close(ctx.(*countedCut).done)
	})
	d.log.Info("shutting down: no new connections, draining in-flight requests", "grace", grace)
	var wg sync.WaitGroup
	errs := make([]error, len(ls))
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.shutdown(ctx)
		}()
	}
	wg.Wait()
	// Listeners removed by a reload get no longer than the others.
	for l, done := range draining {
		select {
		case <-done:
		case <-ctx.Done():
			l.close()
			errs = append(errs, fmt.Errorf("listener %s removed by a reload: %w", l.addr, ctx.Err()))
		}
	}
	d.mu.Lock()
	gen, ref := d.gen, d.ref
	d.gen, d.ref = nil, nil
	if gen != nil {
		// Among the retired while it drains (its tunnels and streams
		// outlive the listeners'), for ReopenLogs to reach its log.
		if d.retired == nil {
			d.retired = make(map[*Generation]struct{})
		}
		d.retired[gen] = struct{}{}
	}
	d.mu.Unlock()
	if ref != nil {
		ref.retire()
	}
	if gen != nil {
		errs = append(errs, d.retireCtx(ctx, gen, ref))
		d.mu.Lock()
		delete(d.retired, gen)
		d.mu.Unlock()
	}
	// Generations retired by earlier reloads get the same grace period.
	stop := context.AfterFunc(ctx, d.stopCancel)
	d.retiring.Wait()
	if !stop() {
		errs = append(errs, errors.New("requests of a previous configuration were still running"))
	}
	d.stopCancel()
	err := errors.Join(errs...)
	if err != nil {
		d.mu.Lock()
		cut := d.cut
		d.mu.Unlock()
		d.log.Warn("shutdown grace period over; remaining connections closed", "connections_cut", cut, "err", err)
	} else {
		d.log.Info("shutdown complete: all connections drained")
	}
	return err
}

// Close closes everything at once.
func (d *Daemon) Close() {
	d.mu.Lock()
	d.stopped = true
	if d.pending != nil {
		d.pending.drop()
		d.pending = nil
	}
	d.mu.Unlock()
	d.countCut()
	d.stopCancel()
	d.closeAll()
	d.closeGenerations()
}

// countedCut is a shutdown's ctx, done only once countCut has counted
// what its end cuts: the drains that close connections when ctx ends
// wait on it, so none is closed before it is counted.
type countedCut struct {
	context.Context
	done chan struct{}
}

func (c *countedCut) Done() <-chan struct{} { return c.done }

func (c *countedCut) Err() error {
	select {
	case <-c.done:
		return c.Context.Err()
	default:
		return nil
	}
}

// countCut counts, once, the connections still open on every listener
// (those a reload removed and still draining too) when a shutdown is about
// to close them, into d.cut and the CutObserver. A connection that ends by
// itself at that very moment is counted: it outlived the grace period.
func (d *Daemon) countCut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cutCounted {
		return
	}
	d.cutCounted = true
	for _, l := range d.listeners {
		d.countListenerCut(l)
	}
	for l := range d.draining {
		d.countListenerCut(l)
	}
}

// countListenerCut counts, once per listener, l's connections still open
// when they are about to be closed into the CutObserver, and into d.cut
// for a shutdown's log: by a shutdown, or by the end of the grace period
// of a listener a reload removed (whichever comes first; the other finds
// it counted). d.mu is held.
func (d *Daemon) countListenerCut(l *listener) {
	if l.cutCounted {
		return
	}
	l.cutCounted = true
	n := l.hs.Conns()
	if n <= 0 {
		return
	}
	if d.cutCounted {
		d.cut += n
	}
	if obs, ok := d.opts.Observer.(CutObserver); ok {
		obs.ConnsCut(l.hs.Config().Name, int(n))
	}
}

// closeAll closes the listeners, also those a reload removed that are
// still draining.
func (d *Daemon) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.listeners {
		l.close()
	}
	for l := range d.draining {
		l.close()
	}
}

func (d *Daemon) closeGenerations() {
	d.mu.Lock()
	gen, ref := d.gen, d.ref
	d.gen, d.ref = nil, nil
	d.mu.Unlock()
	if ref != nil {
		ref.retire()
	}
	if gen != nil && gen.Close != nil {
		gen.Close()
		if ref != nil {
			// As retireCtx: the lines of what Close cut.
			ctx, cancel := context.WithTimeout(context.Background(), cutWait)
			ref.wait(ctx)
			cancel()
		}
	}
}

// ReopenLogs reopens the access logs (SIGUSR1) of the running generation,
// of the retired ones still draining, which log what they serve, and of
// the one Prepare made ready, which opened its log already and logs all
// once committed (the supervisor of workers passes a rotation on between
// Prepare and Commit).
func (d *Daemon) ReopenLogs() error {
	d.mu.Lock()
	gens := make([]*Generation, 0, 2+len(d.retired))
	if d.gen != nil {
		gens = append(gens, d.gen)
	}
	if d.pending != nil {
		gens = append(gens, d.pending.gen)
	}
	for g := range d.retired {
		gens = append(gens, g)
	}
	d.mu.Unlock()
	var err error
	for _, g := range gens {
		if g.Proxy != nil {
			err = errors.Join(err, g.Proxy.ReopenLogs())
		}
	}
	return err
}
