package keyserver

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Defaults of the Server's limits.
const (
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultMaxConns         = 1024
	// A connection counts as a handshake until its client is identified.
	DefaultMaxHandshakes        = 256
	DefaultMaxHandshakesPerAddr = 32
	DefaultAuditInterval        = time.Minute
	writeTimeout                = 10 * time.Second
)

// Refusal reasons reported to Observer.Refused.
const (
	RefusedLimit     = "limit"        // MaxConns reached
	RefusedHandshake = "handshake"    // TLS handshake or greeting failed or timed out
	RefusedVersion   = "version"      // the peer speaks another protocol version
	RefusedIdentity  = "identity"     // the peer's certificate is in no allow-list entry
	RefusedClient    = "client_limit" // the client has its Limits.MaxConns open
	// MaxHandshakes or MaxHandshakesPerAddr reached.
	RefusedHandshakeLimit = "handshake_limit"
	// An identified client's stream broke the framing (request ID 0, a
	// frame length out of range): the connection is refused as a whole.
	RefusedMalformed = "malformed"
)

// RefusedReasons lists the refusal reasons (a bounded label set).
var RefusedReasons = []string{RefusedLimit, RefusedHandshake, RefusedVersion, RefusedIdentity, RefusedClient, RefusedHandshakeLimit, RefusedMalformed}

// UnknownKey is the key name the audit log and the Observer give a
// request for a key ID the server does not hold, or refused before its
// key was read. No served key may have it (package conf refuses it), so
// that these requests never mix with a key's own.
const UnknownKey = "unknown"

// Observer receives the server's events (package metrics implements it).
// Methods are called concurrently and must not block.
type Observer interface {
	// Operation reports a finished operation of client on key (key is
	// UnknownKey for a key ID the server does not hold) with its result (a
	// Code name) and the time it ran, or a refused request (0 time): op
	// is also "ping" for a refused ping and "unknown" for an operation
	// the protocol does not have.
	Operation(client, key, op, result string, d time.Duration)
	// InFlight reports a change of client's operations in progress.
	InFlight(client string, delta int)
	// Conns reports a connection opened (+1) or closed (-1).
	Conns(delta int)
	// Refused reports a connection refused before any operation, or
	// closed for its framing (RefusedMalformed).
	Refused(reason string)
}

// Server answers key-server requests.
type Server struct {
	// Logger receives refused connections (warn), the audit lines (info)
	// and failed connections (debug). nil: none.
	Logger *slog.Logger
	// Observer receives the metrics events (nil: none).
	Observer Observer
	// The timeouts and bounds below are set before Serve;
	// SetServerLimits changes them while it serves.

	// IdleTimeout closes a connection with no request for this long
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the TLS handshake and the greeting of a new
	// connection (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxConns bounds open connections; beyond it new ones are closed at
	// once (default DefaultMaxConns).
	MaxConns int
	// MaxHandshakes bounds the connections not yet identified (TLS
	// handshake and greeting in progress, HandshakeTimeout at most each),
	// counted within MaxConns: peers that never present an allowed
	// certificate hold no more than this many of MaxConns, and the rest
	// stay for the clients. Beyond it new connections are closed at once
	// (default DefaultMaxHandshakes; at most MaxConns).
	MaxHandshakes int
	// MaxHandshakesPerAddr bounds the handshakes from one remote IP
	// address, so that one host cannot take all of MaxHandshakes (default
	// DefaultMaxHandshakesPerAddr). Unix-socket peers have no address and
	// only MaxHandshakes applies.
	MaxHandshakesPerAddr int
	// AuditInterval is the period of the audit lines (default
	// DefaultAuditInterval).
	AuditInterval time.Duration

	policy atomic.Pointer[policy]
	smu    sync.Mutex
	states map[stateKey]*clientState

	audit audit
	// runHook, when set (tests), runs before each admitted operation.
	runHook func(op Op, payload []byte)
	// startHook, when set (tests), runs when the goroutine of an accepted
	// connection starts.
	startHook func()
	// greetedHook, when set (tests), runs when a connection's client is
	// identified, before the connection is counted as the client's.
	greetedHook func()
	// now and sleep, when set (tests), replace time.Now and time.Sleep in
	// the pacing of pings.
	now   func() time.Time
	sleep func(time.Duration)

	cmu       sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	// handshakes counts the connections not yet identified, byAddr those
	// per remote IP address.
	handshakes int
	byAddr     map[netip.Addr]int
	closing    bool
	refusals   refusalLog
	done       chan struct{} // closed by Shutdown
	wg         sync.WaitGroup
}

// ServerLimits are the server's timeouts and connection bounds (the
// Server fields of the same names; zero: the default).
type ServerLimits struct {
	IdleTimeout, HandshakeTimeout                 time.Duration
	MaxConns, MaxHandshakes, MaxHandshakesPerAddr int
}

// SetServerLimits replaces the server's timeouts and connection bounds
// while it serves (a reload): connections are admitted under the new
// bounds from now on, and those accepted from now on get the new
// timeouts (a connection takes them when it is accepted, not when its
// goroutine first runs); open connections over a lowered MaxConns stay
// open.
func (s *Server) SetServerLimits(l ServerLimits) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.IdleTimeout, s.HandshakeTimeout = l.IdleTimeout, l.HandshakeTimeout
	s.MaxConns, s.MaxHandshakes, s.MaxHandshakesPerAddr = l.MaxConns, l.MaxHandshakes, l.MaxHandshakesPerAddr
}

// connTimeouts are the timeouts of a connection: those in force when it
// was accepted.
type connTimeouts struct{ handshake, idle time.Duration }

// SetPolicy replaces the served keys and the allowed clients (a reload);
// operations in progress finish under the policy they started with.
// Clients keep their rate-limit and in-flight state across calls.
func (s *Server) SetPolicy(p *Policy) error {
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.states == nil {
		s.states = map[stateKey]*clientState{}
	}
	cp, err := compilePolicy(p, s.states)
	if err != nil {
		return err
	}
	s.policy.Store(cp)
	if r, ok := s.Observer.(NameRetainer); ok {
		r.Retain(s.Names())
	}
	return nil
}

// NameRetainer is an Observer that learns the client and key names of
// every policy SetPolicy applies, so that it can forget those of removed
// clients and keys (the metrics' series).
type NameRetainer interface {
	Retain(clients, keys []string)
}

// Names returns the client names (the Unix-socket grant's included) and
// the key names of the running policy.
func (s *Server) Names() (clients, keys []string) {
	p := s.policy.Load()
	if p == nil {
		return nil, nil
	}
	for _, c := range p.clients {
		clients = append(clients, c.Name)
	}
	if p.local != nil {
		clients = append(clients, p.local.Name)
	}
	for _, k := range p.keys {
		keys = append(keys, k.Name)
	}
	return clients, keys
}

// Len returns the number of keys served.
func (s *Server) Len() int {
	if p := s.policy.Load(); p != nil {
		return len(p.keys)
	}
	return 0
}

// Serve accepts connections on ln until it is closed (or Shutdown). ln
// yields *tls.Conn (tls.NewListener; the server runs their handshakes
// with HandshakeTimeout and identifies clients by their certificates) or
// plain connections (Unix sockets: the Policy's Local client).
func (s *Server) Serve(ln net.Listener) error {
	if !s.addListener(ln) {
		ln.Close()
		return nil
	}
	defer func() {
		s.cmu.Lock()
		delete(s.listeners, ln)
		s.cmu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Like net/http: back off on resource exhaustion (EMFILE,
				// ENFILE, ENOBUFS: a flood of connections) rather than
				// stop serving every edge for good.
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
		addr := remoteIP(c)
		tracked, to := s.track(c, addr)
		switch tracked {
		case trackClosing:
			c.Close()
			continue
		case trackFull:
			c.Close()
			s.refused(RefusedLimit, c, "too many connections (max_connections)")
			continue
		case trackHandshakes:
			c.Close()
			s.refused(RefusedHandshakeLimit, c, "too many connections in their handshake (max_handshakes)")
			continue
		case trackAddr:
			c.Close()
			s.refused(RefusedHandshakeLimit, c, "too many connections in their handshake from this address (max_handshakes_per_address)")
			continue
		}
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			if s.startHook != nil {
				s.startHook()
			}
			s.serveConn(c, to, func() { s.identified(addr) })
		}()
	}
}

// isTemporary reports whether err says so (the accept errors of resource
// exhaustion do).
func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (s *Server) addListener(ln net.Listener) bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.closing {
		return false
	}
	if s.listeners == nil {
		s.listeners = map[net.Listener]struct{}{}
		s.done = make(chan struct{})
		go s.audit.run(s)
	}
	s.listeners[ln] = struct{}{}
	return true
}

const (
	trackOK = iota
	trackClosing
	trackFull
	trackHandshakes
	trackAddr
)

// remoteIP is the IP address of c's peer; the zero Addr when it has none
// (a Unix socket).
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// track admits c, from addr, as a connection in its handshake, and
// returns its timeouts: those in force as it is admitted, under the lock
// SetServerLimits takes, so that a connection admitted before a change
// keeps the old ones however late its goroutine runs.
func (s *Server) track(c net.Conn, addr netip.Addr) (int, connTimeouts) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.closing {
		return trackClosing, connTimeouts{}
	}
	maxConns := orDefault(s.MaxConns, DefaultMaxConns)
	if len(s.conns) >= maxConns {
		return trackFull, connTimeouts{}
	}
	if s.handshakes >= min(orDefault(s.MaxHandshakes, DefaultMaxHandshakes), maxConns) {
		return trackHandshakes, connTimeouts{}
	}
	if addr.IsValid() && s.byAddr[addr] >= orDefault(s.MaxHandshakesPerAddr, DefaultMaxHandshakesPerAddr) {
		return trackAddr, connTimeouts{}
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
		s.byAddr = map[netip.Addr]int{}
	}
	s.handshakes++
	if addr.IsValid() {
		s.byAddr[addr]++
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	if s.Observer != nil {
		s.Observer.Conns(1)
	}
	return trackOK, connTimeouts{orDefault(s.HandshakeTimeout, DefaultHandshakeTimeout), orDefault(s.IdleTimeout, DefaultIdleTimeout)}
}

// identified ends the handshake of a connection from addr (identified,
// refused or failed).
func (s *Server) identified(addr netip.Addr) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.handshakes--
	if addr.IsValid() {
		if s.byAddr[addr]--; s.byAddr[addr] <= 0 {
			delete(s.byAddr, addr)
		}
	}
}

func (s *Server) untrack(c net.Conn) {
	s.cmu.Lock()
	delete(s.conns, c)
	s.cmu.Unlock()
	if s.Observer != nil {
		s.Observer.Conns(-1)
	}
}

func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Shutdown stops accepting and reading requests, lets the operations in
// progress answer and closes every connection; when ctx ends first, the
// remaining connections are closed at once and ctx's error is returned.
// The counts not yet audited are logged.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cmu.Lock()
	s.stopAccepting()
	for c := range s.conns {
		// Wakes the connection's read: it stops taking requests.
		c.SetReadDeadline(time.Unix(1, 0))
	}
	s.cmu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.closeConns()
		<-done
		err = ctx.Err()
	}
	s.audit.flush(s)
	return err
}

// Close closes the listeners and every connection at once, as a crash
// would (tests of the clients' failover use it).
func (s *Server) Close() {
	s.cmu.Lock()
	s.stopAccepting()
	s.cmu.Unlock()
	s.closeConns()
	s.wg.Wait()
}

// stopAccepting marks the server closing and closes its listeners; s.cmu
// is held.
func (s *Server) stopAccepting() {
	if !s.closing {
		s.closing = true
		if s.done != nil {
			close(s.done)
		}
	}
	for ln := range s.listeners {
		ln.Close()
	}
}

func (s *Server) closeConns() {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *Server) isClosing() bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.closing
}

func (s *Server) refused(reason string, c net.Conn, detail string) {
	if s.Observer != nil {
		s.Observer.Refused(reason)
	}
	if s.Logger == nil {
		return
	}
	lvl := slog.LevelWarn
	if reason == RefusedHandshake {
		lvl = slog.LevelDebug // scanners and health checks of load balancers
	}
	if !s.Logger.Enabled(context.Background(), lvl) {
		return
	}
	if suppressed, ok := s.refusals.allow(reason, time.Now()); ok {
		s.Logger.Log(context.Background(), lvl, "key server connection refused", "reason", reason, "remote", c.RemoteAddr().String(), "detail", detail, "suppressed", suppressed)
	}
}

// refusalLog keeps the log of refused connections to one line per reason
// a second: a flood of connections is not also a flood of log lines (the
// lines not written are counted in the next one, and all are in the
// metrics).
type refusalLog struct {
	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

// allow reports whether a line for reason may be written at now, with the
// number of lines held back since the last one.
func (l *refusalLog) allow(reason string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.held = map[string]time.Time{}, map[string]int{}
	}
	if now.Sub(l.last[reason]) < time.Second {
		l.held[reason]++
		return 0, false
	}
	n := l.held[reason]
	l.last[reason], l.held[reason] = now, 0
	return n, true
}

// greet runs the TLS handshake and the greeting within hsTimeout and
// returns the connection's client with the policy that named it and
// its verified certificate chain as sent (nil on a Unix socket), or nil
// after refusing it.
func (s *Server) greet(c net.Conn, br *bufio.Reader, hsTimeout time.Duration) (*clientPolicy, *policy, []*x509.Certificate, time.Time) {
	deadline := time.Now().Add(hsTimeout)
	c.SetDeadline(deadline)
	var cert *x509.Certificate
	var chain []*x509.Certificate
	var notAfter time.Time
	if tc, ok := c.(*tls.Conn); ok {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.refused(RefusedHandshake, c, err.Error())
			return nil, nil, nil, time.Time{}
		}
		// The identity is taken from a certificate the TLS layer verified
		// only: a tls.Config that asks for a certificate without verifying
		// it (RequireAnyClientCert) must not let any self-made one in.
		st := tc.ConnectionState()
		if len(st.PeerCertificates) == 0 || len(st.VerifiedChains) == 0 {
			s.refused(RefusedIdentity, c, "no verified client certificate")
			return nil, nil, nil, time.Time{}
		}
		chain = st.PeerCertificates
		cert = chain[0]
		notAfter = chainsEnd(st.VerifiedChains)
	}
	v, _, err := readHello(br)
	switch {
	case errors.Is(err, errV1):
		s.refused(RefusedVersion, c, "protocol version 1 client")
		c.Write(appendV1Error(nil, fmt.Sprintf("key server protocol version %d: this client speaks version 1; upgrade gmproxy to the key server's release", Version)))
		return nil, nil, nil, time.Time{}
	case err != nil:
		s.refused(RefusedHandshake, c, "greeting: "+err.Error())
		return nil, nil, nil, time.Time{}
	}
	if v != Version {
		s.refused(RefusedVersion, c, fmt.Sprintf("client speaks protocol version %d, server %d", v, Version))
		c.Write(appendHello(nil, Version))
		return nil, nil, nil, time.Time{}
	}
	if _, err := c.Write(appendHello(nil, Version)); err != nil {
		s.refused(RefusedHandshake, c, "greeting: "+err.Error())
		return nil, nil, nil, time.Time{}
	}
	p := s.policy.Load()
	var cp *clientPolicy
	if p != nil {
		cp = p.identify(cert)
	}
	if cp != nil && cert != nil && !p.verifies(chain) {
		// The TLS layer verified the chain against the client CAs of
		// the policy its handshake began under; a reload since may have
		// distrusted that CA.
		cp = nil
	}
	if cp == nil {
		who := "a connection without TLS"
		if cert != nil {
			who = peerName(cert)
		}
		s.refused(RefusedIdentity, c, who)
		w := newFrameWriter(c, writeTimeout)
		w.write(0, byte(CodeForbidden), []byte("client identity not in the key server's allow-list"), nil)
		return nil, nil, nil, time.Time{}
	}
	c.SetDeadline(time.Time{})
	return cp, p, chain, notAfter
}

// chainsEnd returns when the longest-lasting of the verified chains stops
// being valid: when the first of its certificates, a CA's included,
// expires.
func chainsEnd(chains [][]*x509.Certificate) time.Time {
	var end time.Time
	for _, chain := range chains {
		e := chain[0].NotAfter
		for _, c := range chain[1:] {
			if c.NotAfter.Before(e) {
				e = c.NotAfter
			}
		}
		if e.After(end) {
			end = e
		}
	}
	return end
}

// serveConn serves c with its timeouts to; identified is called once
// the greeting ends.
func (s *Server) serveConn(c net.Conn, to connTimeouts, identified func()) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	cp, pol, chain, notAfter := s.greet(c, br, to.handshake)
	identified()
	if cp == nil {
		return
	}
	var cert *x509.Certificate
	if len(chain) > 0 {
		cert = chain[0]
	}
	client := cp.Name
	fr := &frameReader{br: br}
	w := newFrameWriter(c, writeTimeout)
	// Counted on the state the greeting found: a reload keeps a client's
	// state (policy.client), and the count goes back where it was taken.
	held := cp.state
	if s.greetedHook != nil {
		s.greetedHook()
	}
	if !held.addConn(c) {
		s.refused(RefusedClient, c, client)
		w.write(0, byte(CodeBusy), []byte("client has its max_connections open"), nil)
		return
	}
	defer func() {
		if why := held.doneConn(c); why != "" && s.Logger != nil {
			s.Logger.Info("key server connection closed by a reload: "+why, "client", client, "remote", c.RemoteAddr().String())
		}
	}()
	var ops sync.WaitGroup
	defer ops.Wait()
	var pings pingPacer
	for {
		c.SetReadDeadline(time.Now().Add(to.idle))
		// Checked after the deadline is set: Shutdown and a shed (which
		// set the deadline in the past after their mark) are not missed.
		if s.isClosing() || held.isShed(c) {
			return
		}
		id, typ, body, err := fr.next()
		if err != nil {
			if errors.Is(err, errFrameLength) {
				// The stream is lost: refused as a whole (ID 0), so that
				// the peer learns why its connection ends; counted and
				// logged as the client's, like the other refusals.
				s.refused(RefusedMalformed, c, "client "+client+": "+err.Error())
				w.write(0, byte(CodeMalformed), []byte(err.Error()), nil)
			} else if s.Logger != nil && !isEOF(err) {
				s.Logger.Debug("key server connection closed", "client", client, "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		if id == 0 {
			// IDs start at 1: a confused peer, whose answers could not
			// be told from a refusal of the connection.
			s.refused(RefusedMalformed, c, "client "+client+": request ID 0")
			w.write(0, byte(CodeMalformed), []byte("request ID 0"), nil)
			return
		}
		// The policy may have changed since the greeting: the connection's
		// certificate is matched against the current allow-list as a new
		// connection's would be (a reload that gives it another, narrower
		// grant or none applies to it too), and verified against the new
		// ClientCAs; a connection without TLS takes the current Local
		// grant (a TLS client never does: identify).
		why := ""
		if p := s.policy.Load(); p != pol {
			pol = p
			if cert != nil && !p.verifies(chain) {
				cp, why = nil, "client certificate no longer chains to the key server's client CAs"
			} else {
				cp = p.identify(cert)
			}
			if cp != nil {
				client = cp.Name
				if cp.state != held {
					// The connection counts against its new grant's
					// max_connections (a quarantine's tighter one),
					// no longer against the old one's.
					if !cp.state.addConn(c) {
						s.refused(RefusedClient, c, client)
						w.write(id, byte(CodeBusy), []byte("client has its max_connections open"), nil)
						return
					}
					held.doneConn(c)
					held = cp.state
				}
			}
		}
		switch {
		case why != "":
		case cp == nil:
			why = "client removed from the allow-list"
		case cert != nil && time.Now().After(notAfter):
			// Verified at the handshake; a connection does not outlive
			// its chain, the CAs' certificates included.
			why = "client certificate or one of its CAs expired"
		}
		if why != "" {
			s.finish(client, request{op: Op(typ), keyName: UnknownKey, code: CodeForbidden}, 0)
			if s.Logger != nil {
				s.Logger.Warn("key server request refused: connection closed", "client", client, "remote", c.RemoteAddr().String(), "reason", why)
			}
			w.write(id, byte(CodeForbidden), []byte(why), nil)
			return
		}
		// An answer that cannot be written (the client stopped reading
		// for writeTimeout) ends the connection, as an operation's does:
		// reading on would serve a client that pings for ever.
		r := s.admit(pol, cp, Op(typ), body)
		if r.code != CodeOK {
			s.finish(client, r, 0)
			if w.write(id, byte(r.code), []byte(r.detail), nil) != nil {
				return
			}
			continue
		}
		if r.op == OpPing {
			if d := pings.wait(s.clock()); d > 0 {
				s.pause(d)
			}
			if w.write(id, byte(CodeOK), nil, nil) != nil {
				return
			}
			continue
		}
		ops.Add(1)
		// The name the operation was admitted under: a reload may
		// identify the connection anew while it runs.
		client := client
		if s.Observer != nil {
			s.Observer.InFlight(client, 1)
		}
		state := cp.state
		go func() {
			defer ops.Done()
			if s.runHook != nil {
				s.runHook(r.op, r.payload)
			}
			start := time.Now()
			out, err := r.run()
			switch {
			case errors.Is(err, errMalformedKA):
				r.code, r.detail = CodeMalformed, err.Error()
			case errors.Is(err, errNotHandshake), errors.Is(err, errNotTLCPAgreement):
				r.code, r.detail = CodeNotHandshake, err.Error()
			case err != nil:
				r.code, r.detail = CodeFailed, err.Error()
			}
			s.finish(client, r, time.Since(start))
			if r.code != CodeOK {
				out = []byte(r.detail)
			}
			// The operation holds its in-flight slot until its answer is
			// written: a client that does not read its answers has at
			// most MaxInFlight of them waiting (then it is refused busy),
			// not one per request it sends. An answer that cannot be
			// written ends the connection.
			werr := w.write(id, byte(r.code), out, nil)
			state.release()
			if s.Observer != nil {
				s.Observer.InFlight(client, -1)
			}
			if werr != nil {
				c.Close()
			}
		}()
	}
}

// Pings are not charged to the client's rate (a throttled client's health
// checks still pass, and they take nothing from its operations), but each
// connection gets pingRate a second of them, and pingBurst at once: a
// client that floods pings waits for their answers, the connection's
// reader paused, rather than have the server answer as fast as it sends
// and take the CPU the other clients' operations need. A client's health
// check sends one per connection each health_check_interval (2s by
// default); an interval of 1/pingRate or more is never paced.
const (
	pingRate  = 100
	pingBurst = 100
)

// pingPacer is a connection's token bucket of pings.
type pingPacer struct {
	tokens float64
	last   time.Time
}

// wait takes a ping's token at now and returns how long to wait before
// answering it: 0 within the bucket, else until the token is earned.
func (p *pingPacer) wait(now time.Time) time.Duration {
	if p.last.IsZero() {
		p.tokens = pingBurst
	} else {
		p.tokens = min(pingBurst, p.tokens+now.Sub(p.last).Seconds()*pingRate)
	}
	p.last = now
	if p.tokens--; p.tokens >= 0 {
		return 0
	}
	return time.Duration(-p.tokens / pingRate * float64(time.Second))
}

func (s *Server) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *Server) pause(d time.Duration) {
	if s.sleep != nil {
		s.sleep(d)
		return
	}
	time.Sleep(d)
}

func isEOF(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || (errors.As(err, &ne) && ne.Timeout())
}

// request is an admitted (or refused) request.
type request struct {
	op      Op
	key     *servedKey
	keyName string
	payload []byte
	code    Code
	detail  string
}

// admit parses a request and applies the policy: the client's rate (every
// request but a ping), known operation and key, the client's allow-list,
// the key's role, then its in-flight bound.
func (s *Server) admit(p *policy, cp *clientPolicy, op Op, body []byte) request {
	r := request{op: op, keyName: UnknownKey}
	refuse := func(c Code, detail string) request { r.code, r.detail = c, detail; return r }
	known := true
	switch op {
	case OpPing:
		if len(body) != 0 {
			return refuse(CodeMalformed, "ping has no body")
		}
		return r
	case OpSign, OpDecrypt, OpKeyAgreement:
	default:
		// Audited and counted as operation "unknown" (Op.String): the
		// label set stays bounded.
		known = false
	}
	if c := cp.state.rate(time.Now()); c != CodeOK {
		return refuse(c, "this client exceeds its rate")
	}
	if !known {
		return refuse(CodeUnknownOp, fmt.Sprintf("operation %d", op))
	}
	if len(body) < 32 {
		return refuse(CodeMalformed, "short request")
	}
	var id [32]byte
	copy(id[:], body)
	r.payload = body[32:]
	r.key = p.keys[id]
	if r.key == nil {
		return refuse(CodeUnknownKey, "no key with this ID")
	}
	r.keyName = r.key.Name
	// The answers name neither the key nor the client: the audit log and
	// the metrics do, for the key server's operator.
	if !cp.allow[r.key] {
		return refuse(CodeForbidden, "this client may not use this key")
	}
	if !r.key.Roles.allows(op) {
		return refuse(CodeWrongRole, "the key's roles are "+r.key.Roles.String()+", not "+op.String())
	}
	if c := cp.state.enter(); c != CodeOK {
		return refuse(c, "this client has its max_in_flight operations in progress")
	}
	return r
}

// errNotPreMaster is the failure of every decryption that does not yield
// a TLCP pre-master secret.
var errNotPreMaster = errors.New("decrypt: not an SM2 ciphertext of a TLCP pre-master secret")

// isPreMaster reports whether pt is a TLCP pre-master secret (GM/T 0024
// ECC ClientKeyExchange): client_version 1.1 || 46 random bytes. It is
// all gmproxy decrypts; the decrypt role answers nothing else, so that
// an edge allowed the encryption key cannot read other data encrypted to
// it (digital envelopes of other systems that use the same certificate).
// A TLCP server treats a plaintext of another length or version as a
// failed decryption anyway (random pre-master).
func isPreMaster(pt []byte) bool {
	return len(pt) == 48 && pt[0] == 1 && pt[1] == 1
}

// run performs an admitted operation.
func (r *request) run() ([]byte, error) {
	k := r.key.Private
	switch r.op {
	case OpSign:
		// The payload is the message: signed only when it is a handshake
		// message, with the ID its protocol prescribes (signed.go).
		opts, err := handshakeSignOpts(r.payload)
		if err != nil {
			return nil, err
		}
		return r.key.signer.Sign(rand.Reader, r.payload, opts)
	case OpDecrypt:
		pt, err := k.Decrypt(nil, r.payload, nil)
		if err != nil || !isPreMaster(pt) {
			// One answer for both: it does not tell a client that its
			// ciphertext of something else was valid.
			clear(pt)
			return nil, errNotPreMaster
		}
		return pt, nil
	default:
		a, err := parseKeyAgreement(r.payload)
		if err != nil {
			return nil, err
		}
		if !a.isTLCPServer() {
			return nil, errNotTLCPAgreement
		}
		return smkey.LocalKeyAgreement{Key: k}.SM2KeyAgree(context.Background(), a.eph, a.peerStatic, a.peerEph, a.responder, a.keyLen, a.uid, a.peerUID)
	}
}

// finish reports an operation, or a refused request, to the observer
// and the audit: every refusal is (a refused ping, an unknown operation
// too), answered pings are not.
func (s *Server) finish(client string, r request, d time.Duration) {
	if r.op == OpPing && r.code == CodeOK {
		return
	}
	if s.Observer != nil {
		s.Observer.Operation(client, r.keyName, r.op.String(), r.code.String(), d)
	}
	s.audit.count(client, r.keyName, r.op, r.code)
}
