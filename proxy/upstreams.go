package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/proxy/balance"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// maxTries bounds RetryConfig.Tries.
const maxTries = balance.MaxTries

// Upstream is a named pool of targets with its balancing policy, health
// state, transport and retry budget.
type Upstream struct {
	name     string
	protocol string
	// set is the targets in force: fixed, unless a target given by
	// name resolves to other addresses (refresh).
	set       atomic.Pointer[targetSet]
	policy    selectionPolicy
	transport *http.Transport
	// upgrades carries Upgrade requests (WebSocket) when transport speaks
	// only h2c, which has no Upgrade; otherwise it is transport.
	upgrades *http.Transport
	// h1 carries requests without body or Upgrade when the upstream
	// speaks HTTP/1.1 only (http, tlcp, tls13sm); nil otherwise.
	h1     *h1Client
	scheme string
	// dial opens a raw (possibly encrypted) connection for TCP stream mode.
	dial        DialFunc
	dialTimeout time.Duration // connect + handshake
	hsTimeout   time.Duration // handshake
	readTimeout time.Duration // between two reads of a response body; 0: none
	// headerTimeout bounds the wait for a response head (the transport
	// path's, headerWatch; h1Client has its own); 0: none.
	headerTimeout time.Duration
	// writeTimeout: the longest a target may take no more of a request; 0: none
	writeTimeout time.Duration
	maxFields    int // field lines of a response head
	// scansHeads: the Transport's HTTP/1.1 connections may keep the
	// Connection fields of their heads (scanConn; every protocol but h2c).
	scansHeads bool
	// speaksH2: the Transport may speak HTTP/2 to the targets (h2c, h2,
	// tls by ALPN), where a request body waits for flow control
	// (sendWatch) rather than in a write (sendTimed), and the
	// Transport's own tries of a refused request are bounded (triesWatch).
	speaksH2 bool
	// ownTLS: alpnDialer makes the Transport's TLS connections (tls, h2).
	ownTLS     bool
	tunnelIdle time.Duration // a tunnel without data either way; 0: none
	grpcMax    time.Duration // the longest head wait a gRPC call's grpc-timeout sets; 0: not honoured

	passive  PassiveHealthConfig
	active   ActiveHealthConfig
	tries    int
	tryDur   time.Duration
	retryAll bool // RetryConfig.NonIdempotent
	maxConn  int64
	// specs are the targets as configured, which refresh resolves
	// again; named says one of them is a host name.
	specs  []TargetConfig
	named  bool
	lookup LookupFunc
	// resolveEvery is how often refresh resolves the names again.
	resolveEvery time.Duration
	// draining holds the targets refresh removed while they had
	// requests in flight, whose connections go back to the Transport's
	// pool when those end (dropIdle); only refresh's goroutine uses it.
	draining []drainingTarget

	obs    Observer
	logger *slog.Logger
	// quiet keeps the targets' health from the observer while the proxy
	// is not the one in force (Config.Standby until Activate, and after
	// Retire). reportMu orders the reports of a change with those of
	// Activate.
	quiet    atomic.Bool
	reportMu sync.Mutex

	rrMu sync.Mutex // guards Target.cw for smooth weighted round robin
	seq  atomic.Uint64

	stopHealth     chan struct{}
	stopHealthOnce sync.Once // Close and Shutdown may both close u, at once
	healthWG       sync.WaitGroup
	// stopProbes ends the active checks: at close, or when a reload
	// retires the upstream (Proxy.Retire), whose targets then follow the
	// newer generation's checks (Target.next).
	stopProbes     chan struct{}
	stopProbesOnce sync.Once
}

// Target is one backend address of an upstream.
type Target struct {
	// Addr is the address dialled: the target's, or one its name
	// resolved to.
	Addr string
	// Name is the target's address as configured: Addr, or the host
	// name and port Addr was resolved from, which is the Host of
	// requests that send the target's (and the server name of TLS).
	Name string
	// label names the target in health reports: Addr, or Name/Addr.
	label  string
	Weight int
	Backup bool

	up       *Upstream
	hashSeed uint64
	cw       int // current weight for smooth weighted round robin

	// inflight counts the requests, tunnels and streams the target is
	// serving. A reload's target with the same address shares the
	// counter (inheritHealth): what the old generation still has in
	// flight on it counts for least_conn and max_conns_per_target.
	inflight *atomic.Int64
	// downUntil is when a passive cool-down ends (monoclock ns; 0 when
	// passively healthy): cool-downs and failure windows are durations,
	// which a step of the wall clock must neither stretch nor end.
	downUntil atomic.Int64
	activeDn  atomic.Bool // active checks say down
	reported  atomic.Bool // last reported state: true = down
	// gone: a new resolution of the target's name dropped its address;
	// what it still serves reports no more health.
	gone atomic.Bool
	// next is the target with the same address in the generation that
	// retired this one's (Proxy.Retire); its active checks stand for the
	// ones this generation stopped.
	next atomic.Pointer[Target]

	failMu sync.Mutex
	fails  []int64 // ring of failure times (monoclock ns), len MaxFails
	failN  int
	// coolEnd reports the end of the passive cool-down
	// (reportCoolDownEnd); under failMu.
	coolEnd *time.Timer

	// active check counters, only touched by the checker goroutine
	okRun, failRun int
}

func newUpstream(uc *UpstreamConfig, obs Observer, logger *slog.Logger) (*Upstream, error) {
	if uc.Name == "" {
		return nil, fmt.Errorf("upstream without name")
	}
	if len(uc.Targets) == 0 {
		return nil, fmt.Errorf("upstream %q: no targets", uc.Name)
	}
	u := &Upstream{
		name:       uc.Name,
		protocol:   uc.Protocol,
		passive:    uc.HealthCheck.Passive,
		active:     uc.HealthCheck.Active,
		tries:      intOr(uc.Retries.Tries, 3),
		tryDur:     uc.Retries.Duration,
		retryAll:   uc.Retries.NonIdempotent,
		maxConn:    int64(uc.Transport.MaxConnsPerTarget),
		obs:        obs,
		logger:     logger.With("upstream", uc.Name),
		stopHealth: make(chan struct{}),
		stopProbes: make(chan struct{}),
	}
	u.tries = min(max(u.tries, 1), maxTries)
	switch u.active.Type {
	case "", ActiveHTTP:
	case ActiveGRPC:
		// gRPC runs over HTTP/2 only: a target of any other protocol
		// could never pass, and the checks would take every one out.
		if uc.Protocol != upstreamproto.H2C && uc.Protocol != upstreamproto.H2 {
			return nil, fmt.Errorf("upstream %q: a gRPC health check needs protocol %q or %q, not %q", uc.Name, upstreamproto.H2C, upstreamproto.H2, uc.Protocol)
		}
		u.active.Path = grpcHealthPath
	default:
		return nil, fmt.Errorf("upstream %q: unknown active health check type %q (want %q or %q)", uc.Name, u.active.Type, ActiveHTTP, ActiveGRPC)
	}
	if a := u.active; a.Path != "" && (a.Interval < 0 || a.Timeout < 0) {
		// time.NewTicker panics on the first (in the checker's
		// goroutine); the second fails every probe at once.
		return nil, fmt.Errorf("upstream %q: active health check interval %v and timeout %v must not be negative", uc.Name, a.Interval, a.Timeout)
	}
	if u.passive.MaxFails == 0 {
		u.passive.MaxFails = 1
	}
	if u.passive.MaxFails > balance.MaxFails {
		u.passive.MaxFails = balance.MaxFails
	}
	u.passive.FailWindow = durOr(u.passive.FailWindow, 10*time.Second)
	u.passive.Cooldown = durOr(u.passive.Cooldown, 10*time.Second)
	u.lookup = uc.LookupNetIP
	if u.lookup == nil {
		u.lookup = defaultLookup
	}
	u.resolveEvery = durOr(uc.ResolveInterval, DefaultResolveInterval)
	for i, tc := range uc.Targets {
		if _, _, err := net.SplitHostPort(tc.Address); err != nil {
			return nil, fmt.Errorf("upstream %q: target %d %q: %w", uc.Name, i, tc.Address, err)
		}
		if tc.Weight < 0 || tc.Weight > balance.MaxWeight {
			return nil, fmt.Errorf("upstream %q: target %q: weight %d out of 0..%d", uc.Name, tc.Address, tc.Weight, balance.MaxWeight)
		}
	}
	u.named = hasNames(uc.Targets)
	u.specs = slices.Clone(uc.Targets)
	ts := u.resolve(context.Background(), nil)
	if ts.nPrimary == 0 {
		return nil, fmt.Errorf("upstream %q: only backup targets", uc.Name)
	}
	u.set.Store(ts)
	var err error
	if u.policy, err = newSelectionPolicy(uc); err != nil {
		return nil, fmt.Errorf("upstream %q: %w", uc.Name, err)
	}
	u.hsTimeout = durOr(uc.Transport.HandshakeTimeout, 10*time.Second)
	u.dialTimeout = durOr(uc.Transport.ConnectTimeout, 5*time.Second) + u.hsTimeout
	u.readTimeout = max(durOr(uc.Transport.ReadTimeout, DefaultUpstreamReadTimeout), 0)
	u.writeTimeout = max(durOr(uc.Transport.WriteTimeout, DefaultUpstreamWriteTimeout), 0)
	u.maxFields = max(intOr(uc.Transport.MaxResponseHeaderFields, DefaultMaxResponseHeaderFields), 1)
	u.tunnelIdle = max(durOr(uc.Transport.TunnelIdleTimeout, DefaultTunnelIdleTimeout), 0)
	u.grpcMax = max(durOr(uc.Transport.GRPCTimeoutMax, DefaultGRPCTimeoutMax), 0)
	var connected func(time.Duration, error)
	if co, ok := obs.(UpstreamConnectObserver); ok {
		name := uc.Name
		connected = func(d time.Duration, err error) { co.UpstreamConnect(name, d, err) }
	}
	if u.transport, u.scheme, u.dial, err = newTransport(uc, connected); err != nil {
		return nil, fmt.Errorf("upstream %q: %w", uc.Name, err)
	}
	if u.named {
		u.transport.DialContext = u.byName(u.transport.DialContext)
		u.transport.DialTLSContext = u.byName(u.transport.DialTLSContext)
		u.dial = u.byName(u.dial)
	}
	u.upgrades = u.transport
	u.scansHeads = uc.Protocol != upstreamproto.H2C
	u.speaksH2 = !scansHeads(uc.Protocol)
	u.ownTLS = (uc.Protocol == upstreamproto.TLS || uc.Protocol == upstreamproto.H2) && uc.DialTLSContext == nil
	switch uc.Protocol {
	case "", upstreamproto.HTTP, upstreamproto.TLCP, upstreamproto.TLS13SM:
		// A cap on connections per target is the Transport's
		// (MaxConnsPerHost, idle and busy): with one, every request goes
		// through it, since a second pool beside it would keep
		// connections of its own past the cap.
		if uc.Transport.MaxConnsPerTarget <= 0 {
			u.h1 = newH1Client(u.transport, u.dial, u.readTimeout, u.writeTimeout)
			if u.named {
				u.h1.gone = u.removedAddr
			}
		}
	}
	// The transport's exchanges are bounded by a headerWatch, with the
	// route's wait or this one: a transport has one for all (h1Client
	// took it above).
	u.headerTimeout = max(u.transport.ResponseHeaderTimeout, 0)
	u.transport.ResponseHeaderTimeout = 0
	if uc.Protocol == upstreamproto.H2C {
		u.upgrades = u.transport.Clone()
		u.upgrades.Protocols = new(http.Protocols)
		u.upgrades.Protocols.SetHTTP1(true)
	}
	return u, nil
}

// Name returns the upstream's name.
func (u *Upstream) Name() string { return u.name }

// Targets returns the upstream's targets, primaries first.
func (u *Upstream) Targets() []*Target { return u.set.Load().all }

// Healthy reports whether the target is eligible (active and passive
// checks both say up). It also notices the end of a passive cool-down.
func (t *Target) Healthy() bool {
	if t.activeDown() {
		return false
	}
	if d := t.downUntil.Load(); d != 0 {
		if monoclock.Now() < d {
			return false
		}
		if t.downUntil.CompareAndSwap(d, 0) {
			t.up.reportState(t, "passive cool-down over")
		}
	}
	return true
}

// activeDown reports whether the active checks say t is down: the checks
// of the generation in force when a reload retired t's (next).
func (t *Target) activeDown() bool {
	for n := t.next.Load(); n != nil; n = n.next.Load() {
		t = n
	}
	return t.activeDn.Load()
}

// available is Healthy plus the per-target connection cap.
func (t *Target) available() bool {
	if !t.Healthy() {
		return false
	}
	return t.up.maxConn <= 0 || t.inflight.Load() < t.up.maxConn
}

// InFlight returns the number of requests being served by the target.
func (t *Target) InFlight() int64 { return t.inflight.Load() }

// reportState logs and reports a change of the target's combined state.
func (u *Upstream) reportState(t *Target, why string) {
	down := t.activeDn.Load() || t.downUntil.Load() > monoclock.Now()
	if t.reported.Load() == down {
		return
	}
	u.reportMu.Lock()
	defer u.reportMu.Unlock()
	if t.reported.Swap(down) == down {
		return
	}
	if down {
		u.logger.Warn("upstream target down", "target", t.label, "reason", why)
	} else {
		u.logger.Info("upstream target up", "target", t.label, "reason", why)
	}
	if !u.quiet.Load() && !t.gone.Load() {
		u.obs.UpstreamHealth(u.name, t.label, !down)
	}
}

// setQuiet starts or stops the health reports of u's targets; started,
// they report every target's current state.
func (u *Upstream) setQuiet(quiet bool) {
	u.reportMu.Lock()
	defer u.reportMu.Unlock()
	if u.quiet.Swap(quiet) == quiet || quiet {
		return
	}
	for _, t := range u.Targets() {
		u.obs.UpstreamHealth(u.name, t.label, !t.reported.Load())
	}
}

// fail records a passive failure and marks the target down for the
// cool-down when MaxFails failures fall within FailWindow.
func (u *Upstream) fail(t *Target, why string) {
	if u.passive.MaxFails < 0 || len(t.fails) == 0 {
		return
	}
	now := monoclock.Now()
	t.failMu.Lock()
	t.fails[t.failN%len(t.fails)] = now
	t.failN++
	n := 0
	for _, f := range t.fails {
		if f != 0 && now-f <= int64(u.passive.FailWindow) {
			n++
		}
	}
	trip := n >= len(t.fails)
	if trip {
		clear(t.fails)
	}
	t.failMu.Unlock()
	if trip {
		t.downUntil.Store(now + int64(u.passive.Cooldown))
		u.reportState(t, "passive: "+strconv.Itoa(len(t.fails))+" failure(s) within "+u.passive.FailWindow.String()+", last: "+why)
		u.reportCoolDownEnd(t, u.passive.Cooldown)
	}
}

// reportCoolDownEnd reports the end of t's cool-down, after d, when it
// comes, not at the next request (a health gauge would otherwise stay at
// 0), unless this generation is gone by then. One timer per target, moved
// by each trip: while every target is down each request still fails on
// one (soonestBack), and a timer per trip, kept for the cool-down, would
// grow with the request rate.
func (u *Upstream) reportCoolDownEnd(t *Target, d time.Duration) {
	t.failMu.Lock()
	defer t.failMu.Unlock()
	if t.coolEnd != nil {
		t.coolEnd.Reset(d) // runs it again if it ran already
		return
	}
	t.coolEnd = time.AfterFunc(d, func() {
		select {
		case <-u.stopHealth:
		default:
			t.Healthy()
		}
	})
}

// passedProbe ends a passive cool-down early: an active probe that
// started after the target was taken out succeeded.
func (u *Upstream) passedProbe(t *Target, started time.Time) {
	d := t.downUntil.Load()
	if d == 0 || monoclock.Of(started) < d-int64(u.passive.Cooldown) {
		return
	}
	if t.downUntil.CompareAndSwap(d, 0) {
		u.reportState(t, "active probe passed during the passive cool-down")
	}
}

func (u *Upstream) unhealthyStatus(code int) bool {
	for _, c := range u.passive.UnhealthyStatus {
		if c == code {
			return true
		}
	}
	return false
}

// pick selects a target not in tried: primaries first, backups only when
// no primary is available, then (soonestBack) one passively down.
func (u *Upstream) pick(r *http.Request, clientIP string, tried []*Target) *Target {
	ts := u.set.Load()
	if t := u.policy.selectTarget(u, ts.all[:ts.nPrimary], r, clientIP, tried); t != nil {
		return t
	}
	if ts.nPrimary < len(ts.all) {
		if t := u.policy.selectTarget(u, ts.all[ts.nPrimary:], r, clientIP, tried); t != nil {
			return t
		}
	}
	return u.soonestBack(tried)
}

// soonestBack returns, when no target is available, the one taken out by
// passive checks whose cool-down ends first (within its connection cap,
// not in tried), or nil: rather than refuse every request for a whole
// cool-down (a lone target that restarted, or targets that failed
// requests a client made them fail), the proxy tries one, as nginx never
// takes its only server out and Envoy's panic threshold spreads traffic
// when too few are healthy. Targets an active check says are down are
// not tried.
func (u *Upstream) soonestBack(tried []*Target) *Target {
	var best *Target
	var bestUntil int64
	for _, t := range u.Targets() {
		until := t.downUntil.Load()
		if until == 0 || t.activeDown() || excluded(t, tried) || (u.maxConn > 0 && t.inflight.Load() >= u.maxConn) {
			continue
		}
		if best == nil || until < bestUntil {
			best, bestUntil = t, until
		}
	}
	return best
}

func (u *Upstream) close() {
	u.endProbes()
	u.stopHealthOnce.Do(func() { close(u.stopHealth) })
	u.healthWG.Wait()
	u.closeIdleConns()
}

// endProbes stops the active checks (once).
func (u *Upstream) endProbes() {
	u.stopProbesOnce.Do(func() { close(u.stopProbes) })
}

// retire stops u's active checks for good: its targets follow those of
// the same address in next, the upstream of the same name in the
// generation that took over (nil when the reload removed it). Targets
// next lacks keep the state last seen.
func (u *Upstream) retire(next *Upstream) {
	u.endProbes()
	if next == nil {
		return
	}
	now := make(map[string]*Target, len(next.Targets()))
	for _, t := range next.Targets() {
		now[t.Addr] = t
	}
	for _, t := range u.Targets() {
		if n := now[t.Addr]; n != nil && n != t {
			t.next.Store(n)
		}
	}
}

// closeIdleConns closes every pooled backend connection.
func (u *Upstream) closeIdleConns() {
	u.transport.CloseIdleConnections()
	u.upgrades.CloseIdleConnections()
	if u.h1 != nil {
		u.h1.CloseIdleConnections()
	}
}

// otherAvailable reports whether a target of u not in tried is
// available (healthy, under its connection cap).
func (u *Upstream) otherAvailable(tried []*Target) bool {
	for _, t := range u.Targets() {
		if !excluded(t, tried) && t.available() {
			return true
		}
	}
	return false
}

func excluded(t *Target, tried []*Target) bool {
	for _, x := range tried {
		if x == t {
			return true
		}
	}
	return false
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
