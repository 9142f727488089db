package frontdoor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/authority"
	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/logesc"
)

// TLCPInTLSPolicy says what a listener does with a TLS-record ClientHello
// that offers TLCP suites but nothing the site can answer in TLS (the
// 360-browser pattern, protocol-notes §10.2).
type TLCPInTLSPolicy string

const (
	// TLCPInTLSReject sends a handshake_failure alert so that the browser
	// retries with a real TLCP hello. Default.
	TLCPInTLSReject TLCPInTLSPolicy = family.TLCPInTLSReject
	// TLCPInTLSAnswer answers the hello in TLCP (Site.TLCPInTLS).
	TLCPInTLSAnswer TLCPInTLSPolicy = family.TLCPInTLSAnswer
)

// Defaults for ListenerConfig.
const (
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultMaxHandshakes     = 1024
	DefaultMaxHandshakeBytes = 16 << 20
)

// ListenerConfig is the per-listener handshake policy. A Server's config can
// be replaced at any time (reload); each handshake uses the config current
// when its connection was accepted.
type ListenerConfig struct {
	// Name labels the listener in events (default: its address).
	Name string
	// TLCP, TLS13SM and TLS enable each protocol on this listener.
	TLCP, TLS13SM, TLS bool
	// TLCPInTLS is the 360-browser policy (default reject).
	TLCPInTLS TLCPInTLSPolicy
	// HandshakeTimeout bounds the time from accept to the end of the
	// handshake (default 10 s).
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds handshakes in progress (default 1024); excess
	// connections are closed at once.
	MaxHandshakes int
	// MaxConns bounds open connections (0: unlimited); excess connections
	// are closed at once.
	MaxConns int
	// MaxHandshakesPerClient and MaxConnsPerClient bound the handshakes in
	// progress and the open connections of one client address (ClientKey:
	// the address after PROXY protocol, IPv6 by /64); 0: unlimited. Excess
	// connections are closed at once.
	MaxHandshakesPerClient, MaxConnsPerClient int
	// TrustedProxies are the HTTP proxies in front whose X-Forwarded-For
	// the proxy reads (trusted_proxies). A connection from one carries
	// the requests of many clients, which the proxy limits each by the
	// address that header names: the per-client limits do not apply to
	// it (MaxHandshakes and MaxConns do).
	TrustedProxies []netip.Prefix
	// SharedClients, when set, counts the per-client limits with the other
	// worker processes (a worker's view of their shared table), so that
	// they bound a client over all workers; nil: this process alone.
	SharedClients *clientshare.View
	// MaxHandshakeBytes bounds the bytes of first flights buffered by the
	// handshakes in progress together (default 16 MiB); a hello that would
	// cross it is closed.
	MaxHandshakeBytes int64
	// RedirectHTTP answers a plain-HTTP request on the TLS port with a 308
	// redirect to https://host/path instead of closing it.
	RedirectHTTP bool
	// Sites selects the site by SNI.
	Sites *Sites
	// Logger receives debug lines for failed handshakes (nil: none).
	Logger *slog.Logger
}

// EnableFamilies turns on the protocol families named in names (the
// family package's names) and off the others. It fails on a name that
// this package does not implement.
func (c *ListenerConfig) EnableFamilies(names []string) error {
	c.TLCP, c.TLS13SM, c.TLS = false, false, false
	for _, n := range names {
		switch n {
		case family.TLCP:
			c.TLCP = true
		case family.TLS13SM:
			c.TLS13SM = true
		case family.TLS:
			c.TLS = true
		default:
			return fmt.Errorf("unknown protocol family %q (want one of %s)", n, strings.Join(family.Names(), ", "))
		}
	}
	return nil
}

// trustedProxy reports whether ip is in c.TrustedProxies, read as the
// proxy reads a peer's address (IPv4-mapped as IPv4, without its zone).
func (c *ListenerConfig) trustedProxy(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range c.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (c *ListenerConfig) timeout() time.Duration {
	if c.HandshakeTimeout > 0 {
		return c.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

func (c *ListenerConfig) maxHandshakes() int64 {
	if c.MaxHandshakes > 0 {
		return int64(c.MaxHandshakes)
	}
	return DefaultMaxHandshakes
}

func (c *ListenerConfig) maxHandshakeBytes() int64 {
	if c.MaxHandshakeBytes > 0 {
		return c.MaxHandshakeBytes
	}
	return DefaultMaxHandshakeBytes
}

// Server accepts connections on one or more net.Listeners, sniffs and
// handshakes them, and hands each established *Conn to the handler in its
// own goroutine. The handler owns the Conn and must close it; it calls
// Conn.Settled once it has counted the connection for its own shutdown
// (see WaitHandshakes).
type Server struct {
	cfg     atomic.Pointer[ListenerConfig]
	obs     Observer
	handler func(*Conn)

	conns          atomic.Int64
	handshaking    atomic.Int64
	handshakeBytes atomic.Int64 // first-flight buffers held by pending handshakes
	clients        clientTable

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	raw       map[net.Conn]struct{} // connections still handshaking
	// est are the established connections not yet closed, for
	// CloseEstablished.
	est    map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	// Idle connection goroutines (workers.go).
	work        chan connJob // unbuffered: taken only by a waiting goroutine
	stop        chan struct{}
	stopped     bool // stop is closed; guarded by mu
	idleWorkers atomic.Int32
}

// NewServer returns a Server; obs may be nil.
func NewServer(cfg *ListenerConfig, obs Observer, handler func(*Conn)) *Server {
	if obs == nil {
		obs = NopObserver{}
	}
	s := &Server{obs: obs, handler: handler, listeners: map[net.Listener]struct{}{}, raw: map[net.Conn]struct{}{}, est: map[*Conn]struct{}{},
		work: make(chan connJob), stop: make(chan struct{})}
	s.cfg.Store(cfg)
	return s
}

// SetConfig replaces the listener config for new connections.
func (s *Server) SetConfig(cfg *ListenerConfig) { s.cfg.Store(cfg) }

// Config returns the current listener config.
func (s *Server) Config() *ListenerConfig { return s.cfg.Load() }

// Conns returns the number of open connections (handshaking or established).
func (s *Server) Conns() int64 { return s.conns.Load() }

// Handshaking returns the number of handshake slots taken (handshakes in
// progress).
func (s *Server) Handshaking() int64 { return s.handshaking.Load() }

// HandshakeBytes returns the bytes of first flights held by the handshakes
// in progress.
func (s *Server) HandshakeBytes() int64 { return s.handshakeBytes.Load() }

// Clients returns the number of client addresses with a connection counted
// by the per-client limits in this process's own table (not those counted
// in the workers' shared one: ListenerConfig.SharedClients).
func (s *Server) Clients() int { return s.clients.len() }

// Serve accepts on ln until it is closed or Close is called.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		raw, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return net.ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Like net/http: back off on resource exhaustion (EMFILE…).
				if backoff == 0 {
					backoff = 5 * time.Millisecond
				} else if backoff *= 2; backoff > time.Second {
					backoff = time.Second
				}
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accept(raw)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// accept applies the limits and starts the handshake goroutine. The
// per-client limits are applied here when the client address is known, and
// after the PROXY protocol header otherwise (serveConn).
func (s *Server) accept(raw net.Conn) {
	cfg := s.cfg.Load()
	name := cfg.Name
	s.obs.ConnAccepted(name)
	n := s.conns.Add(1)
	if cfg.MaxConns > 0 && n > int64(cfg.MaxConns) {
		s.refuse(raw, name, RefuseMaxConnections)
		return
	}
	var cl *client
	if _, lazy := raw.(peerHeader); !lazy {
		var why string
		if cl, why = s.clients.admit(cfg, raw.RemoteAddr()); why != "" {
			s.refuse(raw, name, why)
			return
		}
	}
	if h := s.handshaking.Add(1); h > cfg.maxHandshakes() {
		s.handshaking.Add(-1)
		s.clients.release(cl, true, true)
		s.refuse(raw, name, RefuseMaxHandshakes)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.handshaking.Add(-1)
		s.clients.release(cl, true, true)
		s.refuse(raw, name, RefuseShutdown)
		return
	}
	s.raw[raw] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.start(connJob{cfg, raw, cl})
}

// refuse closes a connection refused by a limit and counts it.
func (s *Server) refuse(raw net.Conn, name, why string) {
	s.obs.ConnRefused(name, why)
	// Refused fast: no alert, no read; the kernel resets if data is pending.
	if tc, ok := raw.(interface{ SetLinger(int) error }); ok {
		tc.SetLinger(0)
	}
	raw.Close()
	s.conns.Add(-1)
	s.obs.ConnClosed(name)
}

// serveConn runs one connection's handshake in its own goroutine, holding a
// handshake slot (and cl's share of its client's limits) until it ends.
func (s *Server) serveConn(cfg *ListenerConfig, raw net.Conn, cl *client) {
	start := time.Now()
	var why string
	if ph, lazy := raw.(peerHeader); lazy {
		// The client address is in the PROXY header: read it under the
		// handshake deadline, then apply the per-client limits.
		raw.SetDeadline(start.Add(cfg.timeout()))
		if err := ph.ReadPeerHeader(); err != nil {
			why = RefuseProxyProtocol
			if cfg.Logger != nil {
				cfg.Logger.Debug("connection refused", "listener", cfg.Name, "reason", why, "err", err)
			}
		} else {
			cl, why = s.clients.admit(cfg, raw.RemoteAddr())
		}
	}
	var c *Conn
	var err error
	if why == "" {
		c, err = s.handshake(nil, cfg, raw, start) //lint:ignore SA1012 nil selects handshake's allocation-free deadline context
	}
	s.handshaking.Add(-1)
	s.clients.release(cl, true, false)
	s.mu.Lock()
	delete(s.raw, raw)
	s.mu.Unlock()
	switch {
	case why != "":
		s.wg.Done()
		s.refuse(raw, cfg.Name, why)
		return
	case err != nil:
		s.wg.Done()
		raw.Close()
		s.clients.release(cl, false, true)
		s.conns.Add(-1)
		s.obs.ConnClosed(cfg.Name)
		return
	}
	c.srv, c.cl = s, cl
	s.mu.Lock()
	s.est[c] = struct{}{}
	s.mu.Unlock()
	c.unsettled.Store(true) // s.wg's count passes to c (Settled)
	s.handler(c)
	c.Settled()
}

// Handshake sniffs raw, selects the site and runs the chosen handshake under
// cfg's deadline. It reports HandshakeStarted/HandshakeDone but not
// ConnAccepted/ConnClosed; on success the returned Conn's Close calls
// ConnClosed when raw came through Serve.
func (s *Server) Handshake(ctx context.Context, cfg *ListenerConfig, raw net.Conn) (*Conn, error) {
	return s.handshake(ctx, cfg, raw, time.Now())
}

// handshake is Handshake for a connection accepted at start: the deadline
// counts from there. A nil ctx (Serve's connections) means a
// deadlineContext: nothing but the deadline ends the handshake.
func (s *Server) handshake(ctx context.Context, cfg *ListenerConfig, raw net.Conn, start time.Time) (*Conn, error) {
	deadline := start.Add(cfg.timeout())
	if ctx == nil {
		dc := &deadlineContext{deadline: deadline}
		defer dc.stop()
		ctx = dc
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	// A PROXY-protocol connection reads its header on first use under this
	// deadline (or its own shorter timeout) and restores it.
	raw.SetDeadline(deadline)
	_ = raw.RemoteAddr()
	s.obs.HandshakeStarted(cfg.Name)
	scratch := &handshakeScratch{budget: byteBudget{used: &s.handshakeBytes, max: cfg.maxHandshakeBytes()}}
	budget := &scratch.budget
	defer budget.release()

	st := ConnState{Listener: cfg.Name, HandshakeStart: start}
	fail := func(err error) (*Conn, error) {
		st.HandshakeDuration = time.Since(start)
		reason := Classify(err)
		s.obs.HandshakeDone(HandshakeEvent{State: st, Err: err, Reason: reason, ClientCert: ClientCertReason(err)})
		if cfg.Logger != nil {
			// The SNI is the client's bytes (any but NUL, hello.go):
			// escaped as the access log escapes it, so no C1 control
			// or bidirectional override reaches an operator's terminal
			// (slog's JSON handler passes them through).
			cfg.Logger.Debug("handshake failed", "listener", cfg.Name, "remote", raw.RemoteAddr().String(),
				"family", st.Family, "sni", logesc.String(st.SNI), "reason", reason, "err", err)
		}
		return nil, err
	}

	sn, err := sniffInto(&scratch.sn, raw, budget)
	if err != nil {
		if sn.kind == KindTLS || sn.kind == KindTLCP {
			st.Family = familyOf(sn.kind)
			if desc, ok := sniffAlert(err); ok {
				raw.Write(alertRecord(alertVersion(sn.kind), desc))
			}
		}
		if errors.Is(err, errHandshakeBytes) {
			s.obs.ConnRefused(cfg.Name, RefuseMaxHandshakeBytes)
			return fail(Reasoned(ReasonRefused, fmt.Errorf("handshake: reading first flight: %w", err)))
		}
		return fail(fmt.Errorf("handshake: reading first flight: %w", err))
	}
	scratch.rc = replayConn{Conn: raw, buf: sn.buf}
	rc := &scratch.rc
	var hs Handshaker
	var site *Site
	switch sn.kind {
	case KindHTTP:
		if cfg.RedirectHTTP {
			redirectHTTP(rc)
		}
		return fail(Reasoned(ReasonUnknownProto, errors.New("handshake: plain HTTP on a TLS port")))
	case KindTLCP:
		st.Family = FamilyTLCP
		st.SNI = sn.hello.ServerName
		site = cfg.Sites.Lookup(st.SNI)
		if !cfg.TLCP || site == nil || site.TLCP == nil {
			raw.Write(alertRecord(alertVersion(KindTLCP), alertHandshakeFailure))
			return fail(Reasoned(ReasonNoSharedCipher, errors.New("handshake: TLCP not served here")))
		}
		hs = site.TLCP
	case KindTLS:
		h := sn.hello
		st.SNI = h.ServerName
		site = cfg.Sites.Lookup(st.SNI)
		if site == nil {
			raw.Write(alertRecord(alertVersion(KindTLS), alertHandshakeFailure))
			return fail(Reasoned(ReasonNoSharedCipher, errors.New("handshake: no site")))
		}
		tlsOK := cfg.TLS && site.TLS != nil && !h.OffersOnlyGMSuites()
		switch {
		case cfg.TLS13SM && site.TLS13SM != nil && h.OffersTLS13SM() && (!site.TLS13SMStrict || h.OffersTLS13SMStrict()) &&
			!(tlsOK && h.refusesSM2Signatures()):
			st.Family, hs = FamilyTLS13SM, site.TLS13SM
		case !tlsOK && h.OffersTLCPSuites() && cfg.TLCP:
			// 360-browser pattern (protocol-notes §10.2, §10.3 rule 4).
			if cfg.TLCPInTLS == TLCPInTLSAnswer && site.TLCPInTLS != nil {
				st.Family, hs = FamilyTLCP, site.TLCPInTLS
				break
			}
			st.Family = FamilyTLCP
			raw.Write(alertRecord(alertVersion(KindTLS), alertHandshakeFailure))
			return fail(Reasoned(ReasonNoSharedCipher, errors.New("handshake: TLS hello with TLCP suites refused so the client falls back to TLCP")))
		case tlsOK:
			st.Family, hs = FamilyTLS, site.TLS
		default:
			st.Family = FamilyTLS
			raw.Write(alertRecord(alertVersion(KindTLS), alertHandshakeFailure))
			return fail(Reasoned(ReasonNoSharedCipher, errors.New("handshake: no protocol of this listener matches the hello")))
		}
	default:
		return fail(Reasoned(ReasonUnknownProto, fmt.Errorf("handshake: unrecognised first bytes (%s)", sn.kind)))
	}
	st.Site, st.ClientAuthPolicy = site.Name, site.ClientAuthPolicy

	est, err := runHandshake(ctx, hs, rc, sn.hello, cfg)
	// rc lives as long as the connection: let the first flight go.
	scratch.sn = sniffed{}
	if err != nil {
		return fail(err)
	}
	raw.SetDeadline(time.Time{})
	est.Conn.SetDeadline(time.Time{})
	ps := est.State
	ps.Listener, ps.Site, ps.ClientAuthPolicy, ps.HandshakeStart = st.Listener, st.Site, st.ClientAuthPolicy, start
	if ps.Family == "" {
		ps.Family = st.Family
	}
	if ps.SNI == "" {
		ps.SNI = st.SNI
	}
	if site.VerifyClient != nil {
		// The protocol package took the certificate unverified: the
		// site's check says whether it authenticates, on resumed
		// handshakes too (their certificates are the session's).
		ps.ClientAuth, ps.ClientVerifyError = false, ""
		if len(ps.PeerCertificates) > 0 && ps.PeerCertificates[0] != nil {
			if why := site.VerifyClient(ps.Family, ps.PeerCertificates); why != "" {
				ps.ClientVerifyError = why
			} else {
				ps.ClientAuth = true
			}
		}
	}
	ps.HandshakeDuration = time.Since(start)
	s.obs.HandshakeDone(HandshakeEvent{State: ps})
	// srv (what Close gives back: the count, the client's share) is set
	// by Serve, which took them; a Handshake caller's Conn has none.
	c := &Conn{Conn: est.Conn, state: ps, stats: est.Stats, obs: s.obs, listener: cfg.Name, start: start}
	if est.Stats == nil {
		c.rec, _ = est.Conn.(recordStats)
	}
	return c, nil
}

// runHandshake runs hs on rc. A panic in it (a defect of a protocol
// stack, met on one connection's input) fails that handshake, logged with
// its stack, instead of ending the process and every other connection
// with it, as net/http recovers a panic in crypto/tls's handshake.
func runHandshake(ctx context.Context, hs Handshaker, rc net.Conn, hello *ClientHello, cfg *ListenerConfig) (est *Established, err error) {
	defer func() {
		if p := recover(); p != nil {
			est, err = nil, fmt.Errorf("handshake: panic: %v", p)
			if cfg.Logger != nil {
				cfg.Logger.Error("handshake panicked: a defect, please report it; the connection is closed", "listener", cfg.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
		}
	}()
	return hs.Handshake(ctx, rc, hello)
}

// handshakeScratch is one allocation for what a handshake needs beside
// the protocol's own state: the byte budget of its first flight, the
// sniffer, and the connection that replays the sniffed bytes (which the
// protocol connection keeps reading from).
type handshakeScratch struct {
	budget byteBudget
	sn     sniffed
	rc     replayConn
}

func familyOf(k Kind) string {
	if k == KindTLCP {
		return FamilyTLCP
	}
	return FamilyTLS
}

// redirectHTTP answers one plain HTTP request with a 308 to https.
func redirectHTTP(c net.Conn) {
	req, err := http.ReadRequest(bufio.NewReaderSize(&limitedReader{c, 8 << 10}, 4096))
	if err != nil {
		return
	}
	host := req.Host
	if !authority.Valid(host) {
		// "good.example@evil.example" would send the client to
		// evil.example (the userinfo of the Location it makes), and
		// "a.example:1:1", lists and quotes to who knows where: the
		// request is malformed (RFC 9112 §3.2), as the proxy answers it.
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	loc := "https://" + host + req.URL.RequestURI()
	fmt.Fprintf(c, "HTTP/1.1 308 Permanent Redirect\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", loc)
}

type limitedReader struct {
	c net.Conn
	n int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("request head too large")
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.c.Read(p)
	l.n -= n
	return n, err
}

// Close stops accepting, closes every listener and every connection still
// handshaking. Established connections belong to their handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.stopWorkers()
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.raw {
		c.Close()
	}
	s.mu.Unlock()
	return nil
}

// StopAccepting closes the listeners but lets handshakes in progress finish
// (graceful shutdown).
func (s *Server) StopAccepting() {
	s.mu.Lock()
	s.closed = true
	s.stopWorkers()
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
}

// WaitConns waits until every connection accepted has closed, or for ctx.
// It polls (as a drain does, backing off to 500 ms): it serves a listener
// being removed, not a handshake.
func (s *Server) WaitConns(ctx context.Context) error {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	for wait := time.Millisecond; s.conns.Load() > 0; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			wait = min(2*wait, 500*time.Millisecond)
			t.Reset(wait)
		}
	}
	return nil
}

// CloseEstablished closes every established connection still open, also
// those the handler took over for good (a TCP stream, a hijacked
// WebSocket or CONNECT tunnel), which no HTTP server tracks any longer.
func (s *Server) CloseEstablished() {
	s.mu.Lock()
	cs := make([]*Conn, 0, len(s.est))
	for c := range s.est {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// WaitHandshakes waits for handshakes in progress to end, and for the
// handlers of the connections whose handshake ended to take them
// (Conn.Settled), or for ctx.
func (s *Server) WaitHandshakes(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
