package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/rateshare"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/keyserver"
	"github.com/gmproxy/gmproxy/proxy"
)

// Env is what outlives one configuration generation: observers, the
// private-key engine, session caches and ticket keys (so that reloads keep
// resumption working).
type Env struct {
	Logger   *slog.Logger
	Observer frontdoor.Observer
	KeyOps   keyoffload.Observer
	Sessions frontdoor.SessionObserver
	// ProxyObserver receives request events (a proxy.Observer); nil for none.
	ProxyObserver any
	// AccessLog, when set, is where the proxy writes its access log
	// (replaces conf's access_log.path; tests).
	AccessLog any
	// OpenStore, when set, opens the shared session store of
	// sessions.store instead of the backend its type names (tests; a
	// worker mode sharing one machine's store).
	OpenStore func(*conf.SessionStore) sessionstore.Store
	// SharedClients, in a worker, counts every listener's per-client
	// limits with the other workers (nil: this process alone).
	SharedClients *clientshare.View
	// SharedRates, in a worker, counts the routes' rate_limit with the
	// other workers (nil: this process alone).
	SharedRates *rateshare.View
	// OCSP, when set, is told of the nextUpdate of the OCSP responses the
	// sites staple, and of their certificate status.
	OCSP OCSPObserver

	// ocspMu orders what OCSP is told (taken before mu): a fetcher's
	// report, from its check that its generation is in force to the
	// observer's change, is made wholly before an install's, or after it
	// (and then dropped, its fetcher retired), never in between, where it
	// would overwrite what the install set or bring back the series of a
	// site the reload removed.
	ocspMu sync.Mutex
	// ocspReportHook, when set, is called by a fetcher's report between
	// its check and the observer's change (tests).
	ocspReportHook func()

	mu sync.Mutex
	// engine is the private-key engine of the serving generation; the
	// others in engines (retired by a reload that changed
	// offload.workers or offload.queue, or built for a reload not yet
	// served) serve the handshakes of their generations until those are
	// over.
	engine  *engine
	engines map[*engine]struct{}
	rotator *ticket.Rotator
	// rotation is the interval rotator was made for; keys is what new
	// builds use: rotator, plus the keys of a rotator replaced by a reload
	// that changed sessions.ticket_rotation.
	rotation time.Duration
	// lifetime is the sessions.lifetime rotator keeps keys for.
	lifetime time.Duration
	keys     ticket.Source
	// stores holds the session stores and upstream client session caches
	// of the generations, by what they depend on (size, lifetime,
	// upstream and identity): a reload that keeps those keeps the
	// sessions. builds numbers the builds (Build); an entry no build
	// since the installed one asked for is dropped at its installation.
	stores map[string]*storeEntry
	builds uint64
	// evicted counts, per protocol family, the evictions of all its
	// session stores (sessionStore.evicted).
	evicted map[string]*atomic.Uint64
	// keyClients are the clients of the key servers of the serving
	// generation, by name; allKeyClients holds those and the ones of
	// retired or not yet served generations (keyservers.go).
	keyClients    map[string]*keyClient
	allKeyClients map[*keyClient]struct{}
	// fleet is the shared session store and fleet ticket keys (fleet.go).
	fleet fleetState
	// proxy is the proxy of the serving generation, set when it is
	// installed: the next build's targets inherit its health state, and
	// its routes its rate_limit counts. A build not (yet) served, a
	// pending Prepare or a refused reload, is not one to inherit from:
	// another build replacing it would start from its fresh counts.
	proxy *proxy.Proxy
	// ocsp are the running OCSP fetchers, by ocspKey (ocsp.go).
	ocsp map[string]*ocspFetcher
	// ocspInForce are the fetchers of the installed generation, by
	// site name: the only ones whose reports reach OCSP.
	ocspInForce map[string]*ocspFetcher
	// ocspExpiry are the timers that report the end of the installed
	// generation's ocsp_file responses at their nextUpdate.
	ocspExpiry []*time.Timer
	// ocspRetry, when set, is the fetchers' MinRetry and MaxRetry
	// (tests).
	ocspRetry time.Duration
}

// engine is one private-key engine with the number of generations using it.
type engine struct {
	o    *keyoffload.Engine
	cfg  conf.Offload
	refs int
}

// Offload returns the private-key engine for cfg: the current one when it
// has the same size, else a new one that becomes current.
func (e *Env) Offload(cfg conf.Offload) *keyoffload.Engine {
	e.mu.Lock()
	eng := e.engineLocked(cfg)
	e.mu.Unlock()
	e.useEngine(eng)
	return eng.o
}

// engineLocked returns the current engine when it has cfg's size, else a
// new one, current once its generation serves (useEngine).
func (e *Env) engineLocked(cfg conf.Offload) *engine {
	if e.engine != nil && e.engine.cfg == cfg {
		return e.engine
	}
	eng := &engine{cfg: cfg, o: keyoffload.New(keyoffload.Config{Workers: cfg.Workers, Queue: cfg.Queue}, e.KeyOps)}
	if e.engines == nil {
		e.engines = map[*engine]struct{}{}
	}
	e.engines[eng] = struct{}{}
	return eng
}

// useEngine makes eng, the engine of a generation that now serves, the
// current one; the one it replaces stops once no generation uses it.
func (e *Env) useEngine(eng *engine) {
	e.mu.Lock()
	old := e.engine
	e.engine = eng
	stop := old != nil && old != eng && old.refs <= 0
	if stop {
		delete(e.engines, old)
	}
	e.mu.Unlock()
	if stop {
		old.o.Close()
	}
}

// acquireEngine returns the engine for cfg, counted as used by one more
// generation until releaseEngine.
func (e *Env) acquireEngine(cfg conf.Offload) *engine {
	e.mu.Lock()
	defer e.mu.Unlock()
	eng := e.engineLocked(cfg)
	eng.refs++
	return eng
}

// releaseEngine drops a generation's use of eng after delay (the longest
// handshake deadline of the generation: a handshake accepted under it may
// still need the engine that long). An engine not current (retired, or
// built for a refused reload) with no user left runs its queued
// operations and stops.
func (e *Env) releaseEngine(eng *engine, delay time.Duration) {
	time.AfterFunc(delay, func() {
		e.mu.Lock()
		eng.refs--
		stop := eng.refs <= 0 && eng != e.engine
		if stop {
			delete(e.engines, eng)
		}
		e.mu.Unlock()
		if stop {
			eng.o.Close()
		}
	})
}

// CurrentOffload returns the engine new handshakes use (nil before the
// first build).
func (e *Env) CurrentOffload() *keyoffload.Engine {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.engine == nil {
		return nil
	}
	return e.engine.o
}

// storeEntry is one of Env.stores: the value, and the last build that
// asked for it.
type storeEntry struct {
	v     any
	build uint64
}

// beginBuild numbers a new build.
func (e *Env) beginBuild() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.builds++
	return e.builds
}

// store returns the value kept under key for build, creating it with mk.
func (e *Env) store(build uint64, key string, mk func() any) any {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stores == nil {
		e.stores = map[string]*storeEntry{}
	}
	se := e.stores[key]
	if se == nil {
		se = &storeEntry{v: mk()}
		e.stores[key] = se
	}
	se.build = max(se.build, build)
	return se.v
}

// pruneStores drops the stores that neither build, which now serves, nor
// a later one asked for: a reload that changed sessions.cache_size or
// lifetime, or an upstream's client certificate, leaves the old store to
// the generations still draining, which release it when they end, instead
// of keeping it, and its sessions, for the life of the process.
func (e *Env) pruneStores(build uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, se := range e.stores {
		if se.build < build {
			delete(e.stores, k)
		}
	}
}

// evictions returns the eviction count shared by the session stores of
// family.
func (e *Env) evictions(family string) *atomic.Uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.evicted == nil {
		e.evicted = map[string]*atomic.Uint64{}
	}
	c := e.evicted[family]
	if c == nil {
		c = new(atomic.Uint64)
		e.evicted[family] = c
	}
	return c
}

// TicketKeys returns the ticket key source for cfg: the keys conf read from
// sessions.ticket_key_file (resolved against the config file's folder and
// re-read on every reload), else the daemon's in-memory rotator (kept
// across reloads; a changed sessions.ticket_rotation starts a new one whose
// predecessor's keys still open tickets).
func (e *Env) TicketKeys(cfg *conf.Config) (ticket.Source, error) {
	fl := e.buildFleet(cfg)
	src, use, err := e.ticketKeys(cfg, fl)
	if err != nil {
		e.dropFleet(fl)
		return nil, err
	}
	use()
	e.useFleet(fl)
	return src, nil
}

// ticketKeys is TicketKeys without changing what the running generation
// uses: the in-memory rotator's new retention, or the new rotator of a
// changed interval, is made the Env's by use, called once the generation
// serves (a refused reload leaves the running keys' retention as it was).
// fl is the build's fleet (buildFleet), whose keys sessions.ticket_keys
// uses.
func (e *Env) ticketKeys(cfg *conf.Config, fl fleetState) (src ticket.Source, use func(), err error) {
	none := func() {}
	if cfg.Sessions.TicketKeyFile != "" {
		if len(cfg.TicketKeys) == 0 {
			return nil, nil, fmt.Errorf("sessions.ticket_key_file %s: no keys were loaded", cfg.Sessions.TicketKeyFile)
		}
		return ticket.Static(cfg.TicketKeys), none, nil
	}
	if cfg.Sessions.TicketKeys != nil {
		return fl.keys, none, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rot, life := durOr(cfg.Sessions.TicketRotation, time.Hour), cfg.Sessions.Lifetime
	// A key encrypts for one interval, and its last ticket stays valid
	// for the session lifetime after that: it is kept that long and no
	// longer (RFC 5077 §5.5, §5.6).
	keep := rot + life
	switch {
	case e.rotator == nil:
		// The first build: nothing runs yet.
		e.rotator = ticket.NewRotator(rot, keep)
		e.keys = e.rotator
		e.rotation, e.lifetime = rot, life
		return e.keys, none, nil
	case rot != e.rotation:
		// A new interval: a new rotator encrypts; the old keys keep
		// opening the tickets they sealed while those are valid, which
		// from now on the new lifetime judges: a longer one keeps their
		// tickets valid longer.
		oldKeep := e.rotation + max(e.lifetime, life)
		if prev, ok := e.keys.(*rotatedKeys); ok {
			oldKeep = max(oldKeep, prev.keep)
		}
		r := ticket.NewRotator(rot, keep)
		keys := &rotatedKeys{cur: r, old: e.keys.TicketKeys(), keep: oldKeep}
		return keys, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.rotator, e.keys = r, keys
			e.rotation, e.lifetime = rot, life
		}, nil
	default:
		r := e.rotator
		return e.keys, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.rotator == r {
				r.SetLifetime(keep)
				e.lifetime = life
			}
		}, nil
	}
}

// rotatedKeys is a rotator plus the keys of the one it replaced, which
// still open tickets until they are keep old.
type rotatedKeys struct {
	cur  *ticket.Rotator
	old  []ticket.Key
	keep time.Duration
}

func (r *rotatedKeys) TicketKeys() []ticket.Key {
	keys := r.cur.TicketKeys()
	now := time.Now()
	out := make([]ticket.Key, 0, len(keys)+len(r.old))
	out = append(out, keys...)
	for _, k := range r.old {
		if now.Sub(k.Created) < r.keep {
			out = append(out, k)
		}
	}
	return out
}

// Close stops every private-key engine, the key clients and the fleet:
// the shared store closes after its last attempt at the deletions it has
// not taken (finalStoreFlush at most).
func (e *Env) Close() {
	e.mu.Lock()
	engines := e.engines
	e.engine, e.engines = nil, nil
	for _, of := range e.ocsp {
		of.stop()
	}
	e.stopOCSPExpiry()
	e.mu.Unlock()
	for eng := range engines {
		eng.o.Close()
	}
	e.closeKeyClients()
	e.closeFleet()
}

// siteBuild is what the protocol hooks get for one site.
type siteBuild struct {
	env   *Env
	build uint64 // Env.beginBuild's number, for Env.store
	off   *keyoffload.Engine
	cfg   *conf.Config
	site  *conf.Site
	alpn  []string
	keys  map[string]*keyserver.Client // key server clients by name
	// tickets are the generation's ticket keys (Env.ticketKeys).
	tickets ticket.Source
	// fleet is the generation's shared store and fleet keys.
	fleet fleetState
	// ocsp collects the generation's OCSP fetchers (Env.acquireOCSP).
	ocsp *[]*ocspFetcher
}

// Hooks filled in by the protocol and proxy integration files.
var (
	// buildTLCP returns the TLCP handshaker of a site, and the one that
	// answers TLS-record hellos in TLCP (360 pattern).
	buildTLCP func(b *siteBuild) (hs, inTLS frontdoor.Handshaker, err error)
	// buildTLS13SM returns the TLS 1.3-SM handshaker of a site.
	buildTLS13SM func(b *siteBuild) (frontdoor.Handshaker, error)
)

// Build turns a validated configuration into a generation.
func Build(cfg *conf.Config, env *Env) (*Generation, error) {
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	build := env.beginBuild()
	eng := env.acquireEngine(cfg.Offload)
	kcs := env.acquireKeyClients(cfg)
	keys := keyClientMap(kcs)
	fl := env.buildFleet(cfg)
	var installed atomic.Bool
	var fetchers []*ocspFetcher
	release := func() {
		env.releaseOCSP(fetchers)
		if !installed.Load() {
			env.dropFleet(fl) // a refused reload: the running fleet stays
		}
		delay := maxHandshakeTimeout(cfg) + time.Second
		env.releaseEngine(eng, delay)
		if len(kcs) > 0 {
			time.AfterFunc(delay, func() { env.releaseKeyClients(kcs) })
		}
	}
	tickets, useTickets, err := env.ticketKeys(cfg, fl)
	if err != nil {
		release()
		return nil, err
	}
	sites, err := buildSites(env, build, eng.o, keys, tickets, fl, cfg, &fetchers)
	if err != nil {
		release()
		return nil, err
	}
	px, err := buildProxy(env, build, cfg)
	if err != nil {
		release()
		return nil, err
	}
	gen := &Generation{ShutdownGrace: cfg.ShutdownGrace, Installed: func() {
		// Made current only now: a refused reload leaves the running
		// generation's ticket key retention, shared session store and
		// fleet keys, engine and key server clients current, and what
		// it built stops when released.
		installed.Store(true)
		useTickets()
		env.useFleet(fl)
		env.useEngine(eng)
		env.useKeyClients(kcs)
		env.pruneStores(build)
		env.reportOCSP(cfg, fetchers)
		env.mu.Lock()
		env.proxy = px
		env.mu.Unlock()
		px.Activate()
	}}
	gen.serveWith(px, cfg)
	var errs []error
	for i := range cfg.Listeners {
		spec, err := listenerSpec(env, cfg, &cfg.Listeners[i], sites)
		if err != nil {
			errs = append(errs, err)
		}
		gen.Listeners = append(gen.Listeners, spec)
	}
	stopProbes := probeRemoteKeys(env.Logger, cfg, keys)
	var closeOnce sync.Once
	gen.Close = func() {
		closeOnce.Do(func() {
			stopProbes()
			px.Close()
			release()
		})
	}
	if len(errs) > 0 {
		gen.Close()
		return nil, errors.Join(errs...)
	}
	gen.Info = generationInfo(cfg)
	return gen, nil
}

// buildSites builds the handshake site of every configured site, by name.
func buildSites(env *Env, build uint64, off *keyoffload.Engine, keys map[string]*keyserver.Client, tickets ticket.Source, fl fleetState, cfg *conf.Config, ocsp *[]*ocspFetcher) (map[string]*frontdoor.Site, error) {
	var errs []error
	sites := map[string]*frontdoor.Site{}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		hs, err := buildSite(env, build, off, keys, tickets, fl, cfg, s, ocsp)
		if err != nil {
			errs = append(errs, fmt.Errorf("site %s: %w", s.Name, err))
			continue
		}
		sites[s.Name] = hs
	}
	return sites, errors.Join(errs...)
}

// buildProxy builds the generation's proxy, taking over the serving
// generation's target health and rate_limit counts (env.proxy, which the
// generation's Installed replaces).
func buildProxy(env *Env, build uint64, cfg *conf.Config) (*proxy.Proxy, error) {
	pc := proxyConfig(cfg)
	if err := wireUpstreamDialers(env, build, cfg, &pc); err != nil {
		return nil, err
	}
	var pobs proxy.Observer
	if o, ok := env.ProxyObserver.(proxy.Observer); ok {
		pobs = o
	}
	env.mu.Lock()
	pc.Previous = env.proxy
	env.mu.Unlock()
	pc.SharedRates = env.SharedRates
	pc.Standby = true // Activate once installed: a refused reload reports nothing
	px, err := proxy.New(pc, pobs, env.Logger)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	return px, nil
}

// serveWith makes px serve the generation's connections; connections of
// stream sites block (they are not HTTP).
func (gen *Generation) serveWith(px *proxy.Proxy, cfg *conf.Config) {
	streams := map[string]bool{}
	for _, s := range cfg.Sites {
		if s.Stream != nil {
			streams[s.Name] = true
		}
	}
	gen.Handler = px
	gen.ServeConn = px.ServeConn
	gen.Refuse = px.RefuseConn
	gen.Blocking = func(st frontdoor.ConnState) bool { return streams[st.Site] }
	gen.Shutdown = px.Shutdown
	gen.Proxy = px
}

// listenerSpec is listener l's socket, handshake and HTTP settings, with
// the sites it serves (all when it names none).
func listenerSpec(env *Env, cfg *conf.Config, l *conf.Listener, sites map[string]*frontdoor.Site) (ListenerSpec, error) {
	var list []*frontdoor.Site
	for _, s := range cfg.Sites {
		if len(l.Sites) == 0 || slices.Contains(l.Sites, s.Name) {
			list = append(list, sites[s.Name])
		}
	}
	var def *frontdoor.Site
	if l.DefaultSite != "" {
		def = sites[l.DefaultSite]
	}
	hcfg := &frontdoor.ListenerConfig{
		Name:                   l.Address,
		TLCPInTLS:              frontdoor.TLCPInTLSPolicy(l.TLCPSuitesInTLSHello),
		HandshakeTimeout:       l.HandshakeTimeout,
		MaxConnsPerClient:      l.MaxConnectionsPerClient,
		MaxHandshakesPerClient: l.MaxHandshakesPerClient,
		SharedClients:          env.SharedClients,
		MaxHandshakeBytes:      handshakeBytes(l),
		RedirectHTTP:           l.PlainHTTP == "redirect",
		Sites:                  frontdoor.NewSites(list, def),
		Logger:                 env.Logger,
	}
	var err error
	if e := hcfg.EnableFamilies(l.Protocols); e != nil {
		err = fmt.Errorf("listener %s: %w", l.Address, e)
	}
	// The proxy limits each client of a trusted proxy by the address its
	// X-Forwarded-For names; the handshake server exempts the proxy's own.
	nets, e := proxy.TrustedNets(cfg.TrustedProxies)
	hcfg.TrustedProxies, err = nets, errors.Join(err, e)
	hcfg.MaxHandshakes, hcfg.MaxConns = handshakeLimits(l)
	var pp []string
	if l.ProxyProtocol.Enabled {
		pp = append([]string{}, l.ProxyProtocol.Trusted...)
	}
	return ListenerSpec{
		ProxyProtocol:         pp,
		ProxyProtocolTimeout:  l.HandshakeTimeout,
		ProxyProtocolRequired: l.ProxyProtocol.Enabled && l.ProxyProtocol.Required,
		Address:               l.Address,
		DeferAccept:           l.DeferAccept,
		Handshake:             hcfg,
		HTTP: HTTPLimits{
			MaxHeaderBytes:       int(l.HTTP.MaxHeaderBytes),
			ReadHeaderTimeout:    l.HTTP.ReadHeaderTimeout,
			ReadTimeout:          l.HTTP.ReadTimeout,
			WriteTimeout:         l.HTTP.WriteTimeout,
			IdleTimeout:          l.HTTP.IdleTimeout,
			MaxConcurrentStreams: uint32(l.HTTP.MaxConcurrentStreams),
			BodyTimeout:          offIfZero(l.HTTP.BodyTimeout),
			SendTimeout:          offIfZero(l.HTTP.SendTimeout),
			HTTP2MaxResetRate:    l.HTTP.HTTP2MaxResetRate,
			MaxRequestsPerClient: l.HTTP.MaxRequestsPerClient,
			RequestBuffer:        offIfZeroSize(l.HTTP.RequestBuffer),
		},
	}, err
}

// generationInfo is what the log says of a generation.
func generationInfo(cfg *conf.Config) []any {
	info := []any{"sites", len(cfg.Sites), "upstreams", len(cfg.Upstreams)}
	if len(cfg.KeyServers) > 0 {
		info = append(info, "key_servers", len(cfg.KeyServers))
	}
	if cfg.File != "" {
		info = append(info, "config", cfg.File)
	}
	return info
}

// maxHandshakeTimeout is the longest handshake deadline of cfg's listeners.
func maxHandshakeTimeout(cfg *conf.Config) time.Duration {
	if len(cfg.Listeners) == 0 {
		return frontdoor.DefaultHandshakeTimeout
	}
	var d time.Duration
	for _, l := range cfg.Listeners {
		d = max(d, durOr(l.HandshakeTimeout, frontdoor.DefaultHandshakeTimeout))
	}
	return d
}

// handshakeLimits maps a listener's max_handshakes and max_connections
// onto the handshake server's limits: 0 means unlimited in the config.
func handshakeLimits(l *conf.Listener) (maxHandshakes, maxConns int) {
	maxHandshakes, maxConns = l.MaxHandshakes, l.MaxConnections
	if maxHandshakes == 0 {
		maxHandshakes = 1 << 30 // the handshake server's own 0 means its default
	}
	return maxHandshakes, maxConns // 0 is unlimited for the handshake server
}

// handshakeBytes maps a listener's max_handshake_bytes onto the handshake
// server's MaxHandshakeBytes: 0 means unlimited in the config (the server's
// own 0 means its default).
func handshakeBytes(l *conf.Listener) int64 {
	if l.MaxHandshakeBytes == 0 {
		return 1 << 62
	}
	return int64(l.MaxHandshakeBytes)
}

func buildSite(env *Env, build uint64, off *keyoffload.Engine, keys map[string]*keyserver.Client, tickets ticket.Source, fl fleetState, cfg *conf.Config, s *conf.Site, ocsp *[]*ocspFetcher) (*frontdoor.Site, error) {
	m := &s.Material
	alpn := s.ALPN
	if alpn == nil && s.Stream == nil {
		alpn = []string{"h2", "http/1.1"}
	}
	b := &siteBuild{env: env, build: build, off: off, cfg: cfg, site: s, alpn: alpn, keys: keys, tickets: tickets, fleet: fl, ocsp: ocsp}
	hs := &frontdoor.Site{Name: s.Name, ServerNames: s.ServerNames, ClientAuthPolicy: clientAuthPolicy(s), VerifyClient: clientVerifier(s)}
	if m.TLCPSign != nil && m.TLCPEnc != nil {
		if buildTLCP == nil {
			env.Logger.Warn("TLCP is configured but this build has no TLCP engine", "site", s.Name)
		} else {
			var err error
			if hs.TLCP, hs.TLCPInTLS, err = buildTLCP(b); err != nil {
				return nil, fmt.Errorf("tlcp: %w", err)
			}
		}
	}
	if m.TLS13SM != nil {
		if buildTLS13SM == nil {
			env.Logger.Warn("TLS 1.3-SM is configured but this build has no TLS 1.3-SM engine", "site", s.Name)
		} else {
			var err error
			if hs.TLS13SM, err = buildTLS13SM(b); err != nil {
				return nil, fmt.Errorf("tls13sm: %w", err)
			}
		}
		hs.TLS13SMStrict = s.TLS13SM != nil && s.TLS13SM.Strict
	}
	if m.TLS != nil {
		cert := m.TLS.TLSCertificate()
		// ECDSA/RSA signatures (and RSA decryption) go through the same
		// bounded engine as the SM2 operations, with the handshake's
		// context (crypto/tls calls Sign and Decrypt, which have none):
		// an operation queued for a handshake past its deadline is
		// dropped, not computed.
		key := off.Wrap(m.TLS.Key, frontdoor.FamilyTLS)
		// The OCSP response is read, never fetched, here: a handshake
		// does not wait for a responder.
		ocspStaple := b.siteStaple(s)
		tc := &tls.Config{
			GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
				c := cert
				c.PrivateKey = smkey.WithContext(hi.Context(), key)
				c.OCSPStaple = ocspStaple()
				return &c, nil
			},
			MinVersion: m.TLSMinVersion,
			NextProtos: alpn,
		}
		if tc.MinVersion == 0 {
			tc.MinVersion = tls.VersionTLS12
		}
		switch s.ClientAuth.Mode {
		case conf.ClientAuthRequest:
			tc.ClientAuth = tls.VerifyClientCertIfGiven
		case conf.ClientAuthRequire:
			tc.ClientAuth = tls.RequireAndVerifyClientCert
		case conf.ClientAuthOptionalNoCA:
			// crypto/tls checks the client's CertificateVerify only;
			// frontdoor verifies the certificate (clientVerifier).
			tc.ClientAuth = tls.RequestClientCert
		}
		tc.ClientCAs, _ = conf.X509Pool(m.ClientCAs)
		if tc.ClientAuth != tls.NoClientCert {
			tc.VerifyPeerCertificate = clientKeyMaySign
			if crls, depth := m.ClientCRLs, s.ClientAuth.VerifyDepth; crls != nil || depth != nil {
				// VerifyConnection, not VerifyPeerCertificate: crypto/tls
				// calls it on resumed handshakes too, with the session's
				// chains, so a CRL gone stale since does not let them pass.
				tc.VerifyConnection = func(cs tls.ConnectionState) error {
					if err := checkDepth(cs.VerifiedChains, depth); err != nil || crls == nil {
						return err
					}
					return crls.CheckX509Chains(cs.VerifiedChains, time.Now())
				}
			}
		}
		if !cfg.Sessions.Tickets {
			tc.SessionTicketsDisabled = true
		} else if tickets != nil {
			sealTLSSessions(tc, tickets, tlsSessionBinding(s.Name, cert.Certificate[0], hs.ClientAuthPolicy), b.sessionLifetime(), time.Now)
		}
		hs.TLS = frontdoor.TLSHandshaker(tc)
	}
	return hs, nil
}

// clientKeyMaySign refuses a verified client certificate whose keyUsage,
// when it has one, leaves out digitalSignature: the client proves its
// identity by signing the handshake (CertificateVerify), which RFC 8446
// §4.4.2.2 and RFC 5246 §7.4.6 allow only a key its certificate lets sign.
// crypto/x509 checks extKeyUsage but never keyUsage; OpenSSL (nginx)
// refuses such a client, as the tlcp and tls13sm packages do.
func clientKeyMaySign(_ [][]byte, chains [][]*x509.Certificate) error {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return nil // no certificate (client_auth request)
	}
	leaf := chains[0][0]
	if leaf.KeyUsage != 0 && leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return x509.CertificateInvalidError{Cert: leaf, Reason: x509.IncompatibleUsage, Detail: "keyUsage without digitalSignature"}
	}
	return nil
}

// KeyQueueLen returns the private-key operations waiting for a worker, over
// every offload engine still in use (a reload may leave an old one draining).
func (e *Env) KeyQueueLen() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for eng := range e.engines {
		n += eng.o.QueueLen()
	}
	if e.engine != nil {
		if _, counted := e.engines[e.engine]; !counted {
			n += e.engine.o.QueueLen()
		}
	}
	return n
}
