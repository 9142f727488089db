package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/asciifold"
	"github.com/gmproxy/gmproxy/internal/h1server"
	"github.com/gmproxy/gmproxy/internal/rateshare"
)

// Proxy is one generation of the reverse proxy: sites, upstream pools with
// their health checkers, the HTTP/1.1 and HTTP/2 servers that run on
// handshaken connections, and the access log. The daemon builds a new
// Proxy on reload, sends new connections to it and shuts the old one down
// gracefully (existing requests and tunnels finish on the old one).
type Proxy struct {
	obs        Observer
	logger     *slog.Logger
	sites      []*site
	siteByName map[string]*site
	// listenerSites: Config.ListenerSites, as sets.
	listenerSites map[string]map[string]bool
	upstreams     map[string]*Upstream
	trustedNets   []netip.Prefix
	accessLog     *AccessLog
	limits        LimitsConfig

	// h1 serves HTTP/1.1 on the connection's goroutine; h2base is the
	// configuration x/net/http2 takes its limits from, and its Shutdown
	// sends GOAWAY to the h2 connections (http2.ConfigureServer).
	h1     *h1server.Server
	h2base *http.Server
	h2     *http2.Server

	// shutting is set when Shutdown begins, before h2base's graceful
	// shutdown (H2LateGoAway).
	shutting atomic.Bool

	// tracked holds the h2 connections, tunnels and TCP streams. Once
	// Shutdown has drained the HTTP/1.1 connections, idle is made and is
	// closed when tracked becomes empty; from then on closed refuses
	// new ones, so nothing starts after Shutdown reported it drained.
	mu      sync.Mutex
	tracked map[io.Closer]struct{}
	idle    chan struct{}
	drained bool // idle is closed
	closed  bool

	// rates are the routes' rate limiters by route scope and rate, for
	// the next generation to keep (prevRates: the previous generation's,
	// while New builds); sharedRates is Config.SharedRates.
	rates       map[string]*rateLimiter
	zones       map[string]RateLimitConfig // the rate_limit zones, by name
	prevRates   map[string]*rateLimiter
	sharedRates *rateshare.View
	// auths are the routes' basic_auth by route scope, for the next
	// generation to keep from (prevAuths while New builds).
	auths, prevAuths map[string]*basicAuth

	// cut ends when Close runs: the dials of TCP streams to their targets
	// (which no tracked connection stands for yet) end with it rather
	// than at their connect timeout, one per target tried.
	cut      context.Context
	cutDials context.CancelFunc
}

// New builds a Proxy from cfg. obs may be nil (no events) and logger nil
// (slog.Default). Every target is reported healthy through
// Observer.UpstreamHealth (health state starts fresh in each generation),
// then active health checks start.
func New(cfg Config, obs Observer, logger *slog.Logger) (*Proxy, error) {
	if obs == nil {
		obs = NopObserver{}
	}
	if logger == nil {
		logger = slog.Default()
	}
	p := &Proxy{
		obs:        obs,
		logger:     logger,
		siteByName: make(map[string]*site),
		upstreams:  make(map[string]*Upstream),
		tracked:    make(map[io.Closer]struct{}),
	}
	p.cut, p.cutDials = context.WithCancel(context.Background())
	nets, err := TrustedNets(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	p.trustedNets = nets
	if err := p.addUpstreams(cfg.Upstreams); err != nil {
		p.closeUpstreams()
		return nil, err
	}
	if len(cfg.Sites) == 0 {
		return nil, errors.New("no sites")
	}
	if len(cfg.ListenerSites) > 0 {
		p.listenerSites = make(map[string]map[string]bool, len(cfg.ListenerSites))
		for l, names := range cfg.ListenerSites {
			set := make(map[string]bool, len(names))
			for _, n := range names {
				set[n] = true
			}
			p.listenerSites[l] = set
		}
	}
	p.sharedRates = cfg.SharedRates
	if cfg.Previous != nil {
		p.prevRates, p.prevAuths = cfg.Previous.rates, cfg.Previous.auths
	}
	err = p.addSites(cfg.Sites)
	p.prevRates, p.prevAuths = nil, nil
	if err != nil {
		p.closeUpstreams()
		return nil, err
	}
	if cfg.AccessLog.Path != "" {
		if cfg.AccessLog.Logger == nil {
			cfg.AccessLog.Logger = p.logger
		}
		al, err := NewAccessLog(cfg.AccessLog)
		if err != nil {
			p.closeUpstreams()
			return nil, err
		}
		p.accessLog = al
	}
	p.limits = cfg.Limits.WithDefaults()
	if err := p.newServers(); err != nil {
		p.closeUpstreams()
		if p.accessLog != nil {
			p.accessLog.Close() // its file and flusher
		}
		return nil, fmt.Errorf("http2: %w", err)
	}
	p.startHealthChecks(cfg.Previous, cfg.Standby)
	if !cfg.Standby {
		p.sizeClientTables()
	}
	return p, nil
}

// addUpstreams builds the upstream pools; the caller closes those built
// when it fails. Those with target names are built at once (each looks
// its names up), as one after another a resolver that does not answer
// held a start or reload for its timeout per name.
func (p *Proxy) addUpstreams(ucs []UpstreamConfig) error {
	built := make([]*Upstream, len(ucs))
	errs := make([]error, len(ucs))
	var wg sync.WaitGroup
	for i := range ucs {
		build := func() { built[i], errs[i] = newUpstream(&ucs[i], p.obs, p.logger) }
		if hasNames(ucs[i].Targets) {
			wg.Go(build)
		} else {
			build()
		}
	}
	wg.Wait()
	for i, u := range built {
		err := errs[i]
		if err == nil && p.upstreams[u.name] != nil {
			err = fmt.Errorf("duplicate upstream %q", u.name)
		}
		if err != nil {
			for _, u := range built[i:] {
				if u != nil {
					u.close()
				}
			}
			return err
		}
		p.upstreams[u.name] = u
	}
	return nil
}

// addSites builds the sites, which refer to the upstreams by name.
func (p *Proxy) addSites(scs []SiteConfig) error {
	for i := range scs {
		s, err := newSite(p, &scs[i])
		if err != nil {
			return err
		}
		if p.siteByName[s.name] != nil {
			return fmt.Errorf("duplicate site %q", s.name)
		}
		p.sites = append(p.sites, s)
		p.siteByName[s.name] = s
	}
	return nil
}

// WithDefaults returns l with the defaults in place of unset limits.
func (l LimitsConfig) WithDefaults() LimitsConfig {
	l.MaxHeaderBytes = intOr(l.MaxHeaderBytes, 64<<10)
	l.ReadHeaderTimeout = durOr(l.ReadHeaderTimeout, 10*time.Second)
	l.IdleTimeout = durOr(l.IdleTimeout, 75*time.Second)
	l.HTTP2MaxResetRate = intOr(l.HTTP2MaxResetRate, DefaultHTTP2MaxResetRate)
	l.BodyTimeout = durOr(l.BodyTimeout, DefaultBodyTimeout)
	l.SendTimeout = durOr(l.SendTimeout, DefaultSendTimeout)
	l.RequestBuffer = intOr(l.RequestBuffer, DefaultRequestBuffer)
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = 250
	}
	if l.MaxRequestsPerClient > 0 && l.ClientRequests == nil {
		l.ClientRequests = new(ClientRequests)
	}
	return l
}

// H2WriteByteTimeout is the http2.Server.WriteByteTimeout for limits l:
// send_timeout (0 when it is off). A stream's write deadline (send_timeout)
// only queues a reset behind the connection's frame write, which waits as
// long as the client does not read its socket; this closes a connection
// that takes no byte for that long, with its streams and their upstream
// exchanges.
func H2WriteByteTimeout(l LimitsConfig) time.Duration {
	return max(l.SendTimeout, 0)
}

// H2MaxReadFrameSize is the largest HTTP/2 frame a client may send
// (SETTINGS_MAX_FRAME_SIZE): the protocol's initial value (RFC 9113
// §6.5.2), which nginx keeps too. x/net/http2 reads each frame into a
// buffer the size of the largest one the connection has read and keeps
// it for the connection's life; at its default of 1 MiB one frame of an
// unknown type (ignored, §4.1) made each idle client connection hold
// 1 MiB. A larger frame is a connection error (FRAME_SIZE_ERROR, §4.2).
const H2MaxReadFrameSize = 16 << 10

// H2LateGoAway returns the http.Server.ConnState hook of base, an h2
// server's BaseConfig bound by http2.ConfigureServer, that sends GOAWAY to
// a connection that starts once shutting reports true. base.Shutdown
// sends GOAWAY only to the connections x/net/http2 has registered when it
// runs; one handed to ServeConn just before (its handshake ended as
// shutdown began) registers after, and was served as usual: no GOAWAY
// until its first requests were done or its idle timeout, and the drain
// waited for it until its context ended. The hook runs once the
// connection is registered (StateActive: its preface was read, and on
// each new stream): calling base.Shutdown again then reaches it (a
// connection's graceful shutdown happens once). shutting must turn true
// before base.Shutdown is first called.
func H2LateGoAway(base *http.Server, shutting func() bool) func(net.Conn, http.ConnState) {
	return func(_ net.Conn, st http.ConnState) {
		if st == http.StateActive && shutting() {
			base.Shutdown(context.Background()) // returns at once: base serves no HTTP/1.1 connection
		}
	}
}

// newServers sets up the HTTP/1.1 and HTTP/2 servers with p.limits.
func (p *Proxy) newServers() error {
	l := p.limits
	p.h1 = &h1server.Server{
		Handler:           p,
		ReuseHeader:       true, // ServeHTTP keeps nothing of r.Header
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnContext:       ConnContext,
		Logger:            p.logger,
	}
	p.h2base = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnContext:       ConnContext,
		ErrorLog:          slog.NewLogLogger(p.logger.Handler(), slog.LevelDebug),
	}
	p.h2base.ConnState = H2LateGoAway(p.h2base, p.shutting.Load)
	p.h2 = &http2.Server{
		MaxConcurrentStreams: l.MaxConcurrentStreams,
		IdleTimeout:          l.IdleTimeout,
		MaxReadFrameSize:     H2MaxReadFrameSize,
		WriteByteTimeout:     H2WriteByteTimeout(l),
	}
	return http2.ConfigureServer(p.h2base, p.h2)
}

// startHealthChecks takes over the health state of the targets of prev
// (the proxy this one replaces, or nil), reports each target's state
// (unless standby: Activate does), and starts the active health checks.
func (p *Proxy) startHealthChecks(prev *Proxy, standby bool) {
	for _, u := range p.upstreams {
		if prev != nil {
			u.inheritHealth(prev.upstreams[u.name])
		}
		u.quiet.Store(true)
		if !standby {
			u.setQuiet(false) // initial state; changes follow
		}
		u.startActiveChecks()
		u.startRefresh()
	}
}

// TrustedNets reads Config.TrustedProxies as the proxy matches peers
// against it, for the handshake server's exemption of these peers from
// the per-client limits (frontdoor.ListenerConfig.TrustedProxies).
func TrustedNets(list []string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for _, s := range list {
		pfx, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("trusted_proxies: %w", err)
		}
		nets = append(nets, pfx)
	}
	return nets, nil
}

// parsePrefix reads an IP or CIDR of trusted_proxies or client_ip. The
// addresses matched against it are unmapped (inPrefixes), so an
// IPv4-mapped one (::ffff:10.0.0.0/104, as a dual-stack socket shows IPv4
// peers) is read as the IPv4 prefix it names: kept IPv6, it would match
// no client at all.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return pfx, err
		}
		if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
		}
		return pfx.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (p *Proxy) closeUpstreams() {
	for _, u := range p.upstreams {
		u.close()
	}
}

// Upstream returns the named upstream pool, or nil.
func (p *Proxy) Upstream(name string) *Upstream { return p.upstreams[name] }

// Handler returns the http.Handler of one site, or nil.
func (p *Proxy) Handler(site string) http.Handler {
	if s := p.siteByName[site]; s != nil {
		return s
	}
	return nil
}

// ServeHTTP dispatches to the site named by the connection's handshake
// state, else the first site whose names match Host, else the first site.
// A request on a connection whose client sent no SNI, or one naming no
// site, goes to the site its Host names when that site could have made
// the connection and neither site checks client certificates (hostSite).
//
// Misdirected requests get 421 (Misdirected Request, RFC 9110
// §15.5.20), after which the client connects again: a request whose Host
// names another configured site than the one the handshake chose, when
// either site has client authentication (the handshake checked, or did
// not ask for, a client certificate under the first site's policy only);
// a request on a connection whose site a reload removed or renamed
// (nothing says which of today's sites, on which listener, the handshake
// was made for), or took off the connection's listener; and one on a
// connection whose site's client authentication a reload changed (its
// certificate, or its lack of one, was checked under the old mode or
// CAs).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.accessLog != nil {
		p.accessLog.hold()
		defer p.accessLog.release()
	}
	s, why := p.siteFor(r)
	if why != "" {
		s.misdirected(w, r, why)
		return
	}
	s.ServeHTTP(w, r)
}

// siteFor returns the site that serves r, and why r must be refused as
// misdirected ("" when it is not).
func (p *Proxy) siteFor(r *http.Request) (*site, string) {
	ci := connInfoFrom(r.Context())
	if ci != nil && ci.state.Site != "" {
		s := p.siteByName[ci.state.Site]
		if s == nil {
			return p.sites[0], "the connection was made for a site a reload removed or renamed"
		}
		if why := p.staleHandshake(s, &ci.state); why != "" {
			return s, why
		}
		return p.hostSite(s, r, ci)
	}
	listener := ""
	if ci != nil {
		listener = ci.state.Listener
	}
	if len(p.sites) > 1 {
		if s := p.siteByHost(reqHost(r, ci), listener); s != nil {
			return s, ""
		}
	}
	return p.sites[0], ""
}

// staleHandshake says why a connection with handshake state st may not
// be served by site s, its site by name ("" when it may): a reload changed
// the site's client authentication after the handshake (its certificate,
// or its lack of one, was checked under the old mode or CAs), or took the
// site off the connection's listener.
func (p *Proxy) staleHandshake(s *site, st *frontdoor.ConnState) string {
	switch {
	case s.clientAuth && s.clientAuthPolicy != st.ClientAuthPolicy:
		return "the site's client authentication changed (a reload) after this connection's handshake"
	case !p.listenerServes(st.Listener, s.name):
		return "the connection's listener no longer serves site " + s.name + " (a reload)"
	}
	return ""
}

// listenerServes reports whether the listener named listener still
// serves site, true when it is not listed (Config.ListenerSites).
func (p *Proxy) listenerServes(listener, site string) bool {
	set, ok := p.listenerSites[listener]
	return !ok || set[site]
}

// siteByHost returns the site of the listener named listener
// (listenerServes) whose name is host, else the first such site one of
// whose wildcard names matches it: an exact name wins over a wildcard
// whatever the order of the sites, as when frontdoor picks a handshake's
// site by SNI among the listener's sites. A site of another listener is
// none: a new connection to this listener with its name would not reach
// it either, so 421 for it would only send the client round again.
func (p *Proxy) siteByHost(host, listener string) *site {
	for _, s := range p.sites {
		if !p.listenerServes(listener, s.name) {
			continue
		}
		for _, n := range s.names {
			if !strings.HasPrefix(n, "*.") && asciifold.Equal(n, host) {
				return s
			}
		}
	}
	for _, s := range p.sites {
		if p.listenerServes(listener, s.name) && s.matchesHost(host) {
			return s
		}
	}
	return nil
}

func (s *site) matchesHost(host string) bool {
	for _, n := range s.names {
		if matchName(n, host) {
			return true
		}
	}
	return false
}

// hostSite returns the site that serves r on a connection made for site
// s, and why r must be refused as misdirected ("" when it is not), when
// r's Host names another site h of the connection's listener. It is
//   - h, when the client's SNI named no site of the listener (none sent,
//     as by TLCP clients built on GmSSL, or an unknown name) and the
//     connection could have been made for h (hostReaches): the client
//     cannot do better on a new connection, and nginx too chooses the
//     server by Host then;
//   - else 421, so that the client opens a connection for h (RFC 9110
//     §15.5.20, RFC 9113 §9.1.2), when either site authenticates clients
//     (the handshake checked, or did not ask for, what the other
//     requires) or when the client's SNI chose s: it can name h in a new
//     handshake, and asking for it here is an HTTP/2 client reusing the
//     connection for another name its certificate covers (RFC 9113
//     §9.1.1, browsers with a wildcard certificate shared by two sites),
//     which s's routes would answer;
//   - else s, as for a Host naming no site.
func (p *Proxy) hostSite(s *site, r *http.Request, ci *connInfo) (*site, string) {
	if len(p.sites) < 2 {
		return s, ""
	}
	l := ci.state.Listener
	h := p.siteByHost(reqHost(r, ci), l)
	if h == nil || h == s {
		return s, ""
	}
	// The SNI as frontdoor read it choosing the site: the TLCP and TLS
	// 1.3-SM stacks report a final dot the client sent.
	var sniSite *site
	if sni := ci.state.SNI; sni != "" {
		sniSite = p.siteByHost(frontdoor.NormalizeName(sni), l)
	}
	if sniSite == nil && p.hostReaches(h, s, ci) {
		return h, ""
	}
	if s.clientAuth || h.clientAuth || sniSite == s {
		return s, "Host names site " + h.name + " on a connection made for site " + s.name
	}
	return s, ""
}

// hostReaches reports whether a request on a connection made for site s
// may be served by site h, which its Host names: h is one of the sites
// of the connection's listener (listed in Config.ListenerSites: a
// handshake there could have been made for it), it has a certificate for
// the connection's protocol family (an SM-only site is not reached over
// an RSA/ECDSA handshake, nor the reverse), it serves HTTP, and neither
// site checks client certificates: the handshake verified none for h, so
// h's requirement would be bypassed, and a certificate verified for s
// says nothing under h's policy.
func (p *Proxy) hostReaches(h, s *site, ci *connInfo) bool {
	set, listed := p.listenerSites[ci.state.Listener]
	return listed && set[h.name] && h.stream == nil && !s.clientAuth && !h.clientAuth &&
		slices.Contains(h.families, ci.state.Family) && h.couldHandshake(ci.state)
}

// couldHandshake reports whether one of site s's own handshakes could
// have ended with st's protocol version and cipher suite
// (SiteConfig.Handshakes): a site of tls min_version 1.3, or of fewer
// suites than the site that made the connection, is not served over one
// it would have refused.
func (s *site) couldHandshake(st frontdoor.ConnState) bool {
	hp, ok := s.handshakes[st.Family]
	if !ok {
		return true
	}
	return (hp.Protocols == nil || slices.Contains(hp.Protocols, st.Protocol)) &&
		(hp.Ciphers == nil || slices.Contains(hp.Ciphers, st.Cipher))
}

// ServeConn serves an established client connection until it closes:
// TCP stream mode when the connection's site is a stream site, HTTP/2
// when ALPN chose "h2", HTTP/1.1 otherwise. It returns when the
// connection is done.
func (p *Proxy) ServeConn(c net.Conn) error {
	var st frontdoor.ConnState
	if sc, ok := c.(frontdoor.StateConn); ok {
		st = sc.ConnState()
	}
	if s := p.streamOf(st); s != nil {
		return s.serve(c)
	}
	if st.ALPN == "h2" {
		return p.ServeHTTP2(c)
	}
	return p.ServeHTTP1(c)
}

// ServeHTTP1 serves c as HTTP/1.1 (keep-alive, Upgrade, limits from
// LimitsConfig) on the caller's goroutine until the connection ends. It
// returns an error, having closed c, once Shutdown or Close was called.
func (p *Proxy) ServeHTTP1(c net.Conn) error {
	return p.h1.ServeConn(c)
}

// ServeHTTP2 serves c with x/net/http2 (ALPN h2 or prior knowledge) and
// blocks until the connection ends.
func (p *Proxy) ServeHTTP2(c net.Conn) error {
	if !p.trackAdd(c) {
		c.Close()
		return net.ErrClosed
	}
	defer p.trackDone(c)
	p.h2.ServeConn(GuardHTTP2(c, &p.limits, p.logger), &http2.ServeConnOpts{
		Context:    ConnContext(context.Background(), c),
		BaseConfig: H2BaseConfig(p.h2base),
		Handler:    p,
	})
	return nil
}

// streamOf returns the stream site of a connection with state st, or nil.
func (p *Proxy) streamOf(st frontdoor.ConnState) *streamSite {
	if s := p.siteByName[st.Site]; s != nil && s.stream != nil {
		return s.stream
	}
	if st.Site == "" && len(p.sites) == 1 && p.sites[0].stream != nil {
		return p.sites[0].stream
	}
	return nil
}

// RefuseConn closes c, a connection its caller does not serve because
// it is shutting down, with the access-log line of a refused session
// (status 503) when c is for a stream site, as streamSite.serve logs the
// sessions it refuses: a client refused at shutdown is in the audit too.
func (p *Proxy) RefuseConn(c net.Conn) {
	var st frontdoor.ConnState
	if sc, ok := c.(frontdoor.StateConn); ok {
		st = sc.ConnState()
	}
	if s := p.streamOf(st); s != nil {
		s.log(c, http.StatusServiceUnavailable, "", 0, 0, time.Now())
	}
	c.Close()
}

// ServeStream splices c to the stream site's upstream (TCP stream mode)
// and blocks until the stream ends.
func (p *Proxy) ServeStream(c net.Conn, site string) error {
	s := p.siteByName[site]
	if s == nil || s.stream == nil {
		c.Close()
		return fmt.Errorf("site %q is not a stream site", site)
	}
	return s.stream.serve(c)
}

// Activate makes p, built with Config.Standby, the proxy in force: it
// reports every target's state, and then the changes. Its rate-limit
// and basic_auth failure tables take their parts of the budget only now:
// those it keeps are the serving proxy's, which a refused reload must
// leave as they were (shrunk, they would forget clients' counts).
func (p *Proxy) Activate() {
	p.sizeClientTables()
	for _, u := range p.upstreams {
		u.setQuiet(false)
	}
}

// Retire tells p that next, a newer proxy, took its place (a reload): p
// still serves what it has in flight, but it no longer reports its
// targets' health to the observer, and its active health checks stop.
// The newer proxy reports the targets in force; p's view of them, or of
// targets the reload removed, would overwrite it (a removed target would
// come back in the metrics, down). For the traffic p still steers (the
// requests of kept-alive connections, retries), its targets follow next's
// active checks of the same upstream and address: probing on for every
// generation still draining (a WebSocket can hold one for hours) would
// multiply the probes with each reload. A proxy still draining at a later
// reload is retired again with the newest: its targets then follow that
// one's straight, not through the proxies retired in between (which
// would stay reachable for as long as p drains).
func (p *Proxy) Retire(next *Proxy) {
	for name, u := range p.upstreams {
		u.setQuiet(true)
		var nu *Upstream
		if next != nil {
			nu = next.upstreams[name]
		}
		u.retire(nu)
	}
}

// ReopenLogs reopens the access log file (SIGUSR1 rotation).
func (p *Proxy) ReopenLogs() error {
	if p.accessLog == nil {
		return nil
	}
	return p.accessLog.Reopen()
}

// AccessLog returns the access log, or nil when it is off.
func (p *Proxy) AccessLog() *AccessLog { return p.accessLog }

// trackAdd registers c (an h2 connection, a tunnel end, a TCP stream end)
// for Shutdown to wait for and Close to cut. It returns false once Close
// ran or Shutdown found nothing left; the caller then closes c.
func (p *Proxy) trackAdd(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.tracked[c] = struct{}{}
	return true
}

func (p *Proxy) trackDone(c io.Closer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tracked, c)
	p.closeIdleLocked()
}

// closeIdleLocked closes idle, and refuses new connections, when Shutdown
// waits and nothing is tracked any more.
func (p *Proxy) closeIdleLocked() {
	if p.idle != nil && !p.drained && len(p.tracked) == 0 {
		p.closed, p.drained = true, true
		close(p.idle)
	}
}

// Shutdown stops taking connections, lets in-flight requests, h2
// connections (sent GOAWAY), tunnels and streams finish until ctx ends,
// then stops health checks and closes the access log. It returns
// ctx.Err() if connections remained (the log then stays open for them);
// call Close to cut them.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.shutting.Store(true)
	p.h2base.Shutdown(ctx) // GOAWAY to the h2 connections (tracked below)
	err := p.h1.Shutdown(ctx)
	p.mu.Lock()
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	p.closeIdleLocked()
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	p.closeUpstreams()
	if p.accessLog != nil {
		if err == nil {
			p.accessLog.Close() // drained: nothing will log any more
		} else {
			p.accessLog.Flush() // tunnels remain; Close closes the log
		}
	}
	return err
}

// Close cuts every connection, tunnel and stream at once.
func (p *Proxy) Close() error {
	p.cutDials()
	p.mu.Lock()
	p.closed = true
	cs := make([]io.Closer, 0, len(p.tracked))
	for c := range p.tracked {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	p.h2base.Close()
	err := p.h1.Close()
	for _, c := range cs {
		c.Close()
	}
	p.closeUpstreams()
	if p.accessLog != nil {
		p.accessLog.Close()
	}
	return err
}
