// Package metrics exports gmproxy's Prometheus metrics: handshake latency and
// outcomes per protocol and cipher, per-cipher throughput, connections,
// session caches and tickets, private-key operations (queue wait separated
// from execution), HTTP requests and upstreams, configuration reloads,
// certificate expiry and build information. A *Metrics implements the
// observer interfaces of package frontdoor and package proxy, and serves the
// admin endpoint (/metrics, /healthz, /readyz, optional /debug/pprof/).
//
// Every label takes values from a bounded set (see labels.go): client
// addresses, paths and SNI values are never labels.
//
// # Metrics
//
//	gmproxy_handshake_duration_seconds        histogram {listener, protocol, version, cipher, resumed, client_auth}
//	gmproxy_handshakes_total                  counter   {listener, protocol, version, cipher, resumed, result}
//	gmproxy_handshakes_in_progress            gauge     {listener}
//	gmproxy_site_handshakes_total             counter   {site, protocol, result}
//	gmproxy_client_cert_failures_total        counter   {protocol, reason}
//	gmproxy_tls_bytes_total                   counter   {protocol, cipher, direction}
//	gmproxy_tls_records_total                 counter   {protocol, cipher, direction} (tlcp and tls13sm only)
//	gmproxy_connections_accepted_total        counter   {listener}
//	gmproxy_connections_active                gauge     {listener}
//	gmproxy_connections_closed_total          counter   {listener}
//	gmproxy_connections_refused_total         counter   {listener, reason}
//	gmproxy_connections_cut_total             counter   {listener} (open when a shutdown's, or a removed listener's, grace period ended, closed by gmproxy; a removed listener's kept until the next reload)
//	gmproxy_connection_duration_seconds       histogram {listener, protocol}
//	gmproxy_session_cache_hits_total          counter   {protocol}
//	gmproxy_session_cache_misses_total        counter   {protocol}
//	gmproxy_session_cache_size                gauge     {protocol}
//	gmproxy_session_cache_evictions_total     counter   {protocol}
//	gmproxy_session_tickets_issued_total      counter   {protocol}
//	gmproxy_session_tickets_accepted_total    counter   {protocol}
//	gmproxy_session_tickets_rejected_total    counter   {protocol, reason}
//	gmproxy_session_store_operations_total    counter   {op, result}
//	gmproxy_session_store_duration_seconds    histogram {op}
//	gmproxy_key_operations_total              counter   {op, protocol, result, location}
//	gmproxy_key_operation_queue_seconds       histogram {op, protocol, location}
//	gmproxy_key_operation_duration_seconds    histogram {op, protocol, location}
//	gmproxy_key_operation_queue_length        gauge
//	gmproxy_http_requests_total               counter   {site, route, method, code}
//	gmproxy_http_request_duration_seconds     histogram {site, route}
//	gmproxy_http_requests_in_flight           gauge     {site}
//	gmproxy_http_bytes_total                  counter   {site, direction}
//	gmproxy_http_rate_limited_total           counter   {site, route}
//	gmproxy_upstream_response_seconds         histogram {upstream} (time to the response headers)
//	gmproxy_upstream_connect_seconds          histogram {upstream} (TCP connect plus TLS/TLCP handshake)
//	gmproxy_upstream_responses_total          counter   {upstream, code}
//	gmproxy_upstream_target_healthy           gauge     {upstream, target}
//	gmproxy_upstream_retries_total            counter   {upstream}
//	gmproxy_upstream_resolve_failures_total   counter   {upstream} (lookups of target names that failed)
//	gmproxy_stream_bytes_total                counter   {site, upstream, direction}
//	gmproxy_stream_sessions_active            gauge     {site, upstream} (TCP stream sessions and tunnels open)
//	gmproxy_config_reloads_total              counter   {result}
//	gmproxy_config_last_reload_success_timestamp_seconds gauge
//	gmproxy_config_last_reload_successful     gauge
//	gmproxy_cert_not_after_timestamp_seconds  gauge     {site, role}
//	gmproxy_ocsp_next_update_timestamp_seconds gauge    {site} (tls only: absent when no response is stapled)
//	gmproxy_ocsp_cert_status                  gauge     {site} (tls only: 0 good, 1 revoked, 2 unknown; absent when no response is held)
//	gmproxy_upstream_cert_not_after_timestamp_seconds   gauge {upstream, role}
//	gmproxy_key_server_cert_not_after_timestamp_seconds gauge {key_server, role}
//	gmproxy_build_info                        gauge     {version, goversion, gmsm}
//	gmproxy_shared_table_fallbacks_total      counter   {table, reason} (workers: counted alone, not in the shared table)
//
// plus the go_* and process_* collectors. protocol is tlcp, tls13sm or tls;
// version is the negotiated protocol version (NTLSv1.1, TLSv1.3-SM,
// TLSv1.2, TLSv1.3; none before one was chosen);
// direction is rx (from clients) or tx (to clients); code is 1xx..5xx; bytes
// are plaintext application bytes, reported when a connection closes.
// location is local (a key in gmproxy's memory) or remote (a key server);
// for remote keys the queue is the wait for one of the engine's remote
// slots and the duration is the whole round trip to the key server. The
// reason of a rejected ticket is one of frontdoor.TicketRejectReasons
// (disabled, undecryptable, malformed, expired, identity_mismatch,
// suite_mismatch, client_auth_required, client_cert_invalid, client_cert_expired, psk_mode,
// age_mismatch, bad_binder), "none" when the protocol gave no reason, or
// "other". The session store metrics count the calls to the shared store
// (sessions.store): op is get (a session-ID lookup that missed the
// in-process cache), set (a new session written), delete, or ticket_keys
// (a refresh of the fleet ticket keys); result is hit, miss, ok, error,
// timeout, or skipped (not asked: the circuit breaker is open). The reason of a client-certificate failure is one of
// frontdoor.ClientCertReasons (no_cert, unknown_ca, expired, bad_signature,
// key_usage, revoked, crl_expired, no_crl, chain_too_long, other). Site roles are sign, enc (TLCP), tls13sm, tls and
// client_ca (the earliest expiry among the site's client CAs); upstream
// roles are client (TLS and TLS 1.3-SM client certificate), client_sign,
// client_enc (TLCP) and ca; key-server roles are client and ca.
//
// Counters whose label sets are known from the configuration (refusals,
// ticket rejections, session-cache lookups, retries, upstream responses,
// client-certificate failures) are exported at 0 from the start, and
// Retain deletes the series of listeners, sites, routes, upstreams and
// targets that a reload removed.
package metrics

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/rateshare"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/proxy"
)

// Namespace prefixes every gmproxy metric name.
const Namespace = "gmproxy"

// HandshakeBuckets are the handshake duration histogram buckets: 100 µs
// doubling up to about 13 s (18 buckets).
var HandshakeBuckets = prometheus.ExponentialBuckets(100e-6, 2, 18)

// KeyOpBuckets are the private-key operation buckets: 10 µs doubling up to
// about 1.3 s (18 buckets).
var KeyOpBuckets = prometheus.ExponentialBuckets(10e-6, 2, 18)

// ConnectBuckets are the upstream connect buckets: 20 µs (a connect on
// loopback) doubling up to about 10.5 s (20 buckets), past the default
// connect timeout (5 s) and a handshake's on top: a target that times out
// lands in a bucket of its own, not in +Inf with every connect over 1.3 s.
var ConnectBuckets = prometheus.ExponentialBuckets(20e-6, 2, 20)

// ConnBuckets are the connection lifetime buckets: 10 ms quadrupling up to
// about 12 hours (16 buckets).
var ConnBuckets = prometheus.ExponentialBuckets(10e-3, 4, 16)

// RequestBuckets are the HTTP request and upstream response time buckets:
// 1 ms doubling up to about 65 s (17 buckets).
var RequestBuckets = prometheus.ExponentialBuckets(1e-3, 2, 17)

// Metrics holds gmproxy's collectors. It is safe for concurrent use.
type Metrics struct {
	cache    reqCache // request observers resolved once per site and route
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer
	ready    atomic.Bool

	listeners, sites, routes, upstreams, targets, refusals, keyServers *admitter

	// cutMu orders ConnsCut and Retain's changes of connCut: the series
	// of a listener a reload removed is kept, with the cuts its drain
	// counts, until the next Retain deletes it (cutKept), and a cut
	// counted after that moves no series.
	cutMu   sync.Mutex
	cutKept map[string]bool

	// movedRoutes are the (site, route) labels whose series Retain
	// deleted while the route stayed another site's (dropMovedRoutes).
	routesMu    sync.Mutex
	movedRoutes map[routeKey]bool

	// healthMu orders a health report (the target admitted, its series
	// set) before or after a removed address's check that no other
	// upstream's series has it (UpstreamTargetRemoved).
	healthMu sync.Mutex

	listenerCache  childCache[string, listenerChildren]
	handshakeCache childCache[handshakeKey, handshakeChildren]
	bytesCache     childCache[bytesKey, bytesChildren]
	keyOpCache     childCache[keyOpKey, keyOpChildren]
	sessionCache   childCache[string, sessionChildren]
	cacheSizeCache childCache[string, cacheSizeChildren]
	// connDurationCache is keyed by listener, whose series Retain deletes.
	connDurationCache childCache[connDurationKey, prometheus.Observer]

	// Handshakes and connections.
	handshakeDuration    *prometheus.HistogramVec
	handshakes           *prometheus.CounterVec
	handshakesInProgress *prometheus.GaugeVec
	siteHandshakes       *prometheus.CounterVec
	clientCertFailures   *prometheus.CounterVec
	connDuration         *prometheus.HistogramVec
	tlsBytes             *prometheus.CounterVec
	tlsRecords           *prometheus.CounterVec
	connAccepted         *prometheus.CounterVec
	connActive           *prometheus.GaugeVec
	connClosed           *prometheus.CounterVec
	connRefused          *prometheus.CounterVec
	connCut              *prometheus.CounterVec

	// Sessions and tickets.
	sessionHits      *prometheus.CounterVec
	sessionMisses    *prometheus.CounterVec
	sessionSize      *prometheus.GaugeVec
	sessionEvictions *prometheus.CounterVec
	ticketsIssued    *prometheus.CounterVec
	ticketsAccepted  *prometheus.CounterVec
	ticketsRejected  *prometheus.CounterVec
	storeOps         *prometheus.CounterVec
	storeDuration    *prometheus.HistogramVec
	evictMu          sync.Mutex
	lastEvictions    map[string]uint64

	// Private-key operations.
	keyOps        *prometheus.CounterVec
	keyOpQueue    *prometheus.HistogramVec
	keyOpDuration *prometheus.HistogramVec
	keyQueueLen   prometheus.GaugeFunc
	keyQueueFn    atomic.Pointer[func() int]

	// The workers' shared tables.
	sharedFallbacks []prometheus.CounterFunc

	// HTTP and upstreams.
	requests         *prometheus.CounterVec
	requestDuration  *prometheus.HistogramVec
	requestsInFlight *prometheus.GaugeVec
	upstreamDuration *prometheus.HistogramVec
	upstreamConnect  *prometheus.HistogramVec
	upstreamStatus   *prometheus.CounterVec
	upstreamHealthy  *prometheus.GaugeVec
	upstreamRetries  *prometheus.CounterVec
	resolveFailures  *prometheus.CounterVec
	streamBytes      *prometheus.CounterVec
	streamActive     *prometheus.GaugeVec
	httpBytes        *prometheus.CounterVec
	rateLimited      *prometheus.CounterVec

	// Configuration, certificates, build.
	reloads           *prometheus.CounterVec
	lastReloadSuccess prometheus.Gauge
	lastReloadOK      prometheus.Gauge
	certNotAfter      *prometheus.GaugeVec
	ocspNextUpdate    *prometheus.GaugeVec
	ocspStatus        *prometheus.GaugeVec
	upstreamCerts     *prometheus.GaugeVec
	keyServerCerts    *prometheus.GaugeVec
	buildInfo         *prometheus.GaugeVec
}

// Interface checks.
var (
	_ frontdoor.Observer        = (*Metrics)(nil)
	_ keyoffload.Observer       = (*Metrics)(nil)
	_ frontdoor.SessionObserver = (*Metrics)(nil)

	_ keyoffload.LocationObserver    = (*Metrics)(nil)
	_ frontdoor.TicketReasonObserver = (*Metrics)(nil)
	_ sessionstore.Observer          = (*Metrics)(nil)
	_ frontdoor.ConnDurationObserver = (*Metrics)(nil)
	_ proxy.Observer                 = (*Metrics)(nil)
	_ proxy.UpstreamConnectObserver  = (*Metrics)(nil)
	_ proxy.StreamObserver           = (*Metrics)(nil)
)

// New creates gmproxy's collectors and registers them, with the Go runtime
// and process collectors, on reg. A nil reg means a new private registry
// (the usual case; use Gatherer to read it). When reg is not also a
// prometheus.Gatherer, the admin handler serves prometheus.DefaultGatherer.
// Go and process collectors already present on reg are left in place.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		g = prometheus.DefaultGatherer
	}
	m := &Metrics{
		reg:           reg,
		gatherer:      g,
		listeners:     newAdmitter(maxListeners),
		sites:         newAdmitter(MaxSites),
		routes:        newAdmitter(MaxRoutes),
		upstreams:     newAdmitter(MaxUpstreams),
		targets:       newAdmitter(maxTargets),
		refusals:      newAdmitter(maxRefusals),
		keyServers:    newAdmitter(MaxUpstreams),
		lastEvictions: make(map[string]uint64),
		movedRoutes:   make(map[routeKey]bool),
	}
	m.build()
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

// MustNew is New that panics on a registration error (for main and tests).
func MustNew(reg prometheus.Registerer) *Metrics {
	m, err := New(reg)
	if err != nil {
		panic(err)
	}
	return m
}

// Gatherer returns the gatherer the admin handler serves.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

func (m *Metrics) build() {
	counter := func(sub, name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: sub, Name: name, Help: help}, labels)
	}
	gauge := func(sub, name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: sub, Name: name, Help: help}, labels)
	}
	histogram := func(sub, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: sub, Name: name, Help: help, Buckets: buckets}, labels)
	}

	m.handshakeDuration = histogram("", "handshake_duration_seconds",
		"Duration of successful handshakes, from the first byte read to the handshake's completion.",
		HandshakeBuckets, "listener", "protocol", "version", "cipher", "resumed", "client_auth")
	m.handshakes = counter("", "handshakes_total",
		"Handshakes finished, by result: success or a failure reason (timeout, bad_certificate, no_shared_cipher, protocol_error, peer_alert, eof, unknown_protocol, refused, internal_error).",
		"listener", "protocol", "version", "cipher", "resumed", "result")
	m.handshakesInProgress = gauge("", "handshakes_in_progress", "Handshakes started and not yet finished.", "listener")
	m.siteHandshakes = counter("", "site_handshakes_total", "Handshakes per site (the site chosen by SNI), by result success or failure.", "site", "protocol", "result")
	m.clientCertFailures = counter("", "client_cert_failures_total", "Handshakes refused over the client certificate, by reason (no_cert, unknown_ca, expired, bad_signature, key_usage, revoked, crl_expired, no_crl, chain_too_long, other).", "protocol", "reason")
	m.connDuration = histogram("", "connection_duration_seconds", "Lifetime of established connections, from accept to close.", ConnBuckets, "listener", "protocol")
	m.tlsBytes = counter("", "tls_bytes_total", "Plaintext application bytes moved through the record layer.", "protocol", "cipher", "direction")
	m.tlsRecords = counter("", "tls_records_total", "Application data records moved through the record layer.", "protocol", "cipher", "direction")
	m.connAccepted = counter("", "connections_accepted_total", "TCP connections accepted.", "listener")
	m.connActive = gauge("", "connections_active", "TCP connections accepted and not yet closed.", "listener")
	m.connClosed = counter("", "connections_closed_total", "Accepted TCP connections closed.", "listener")
	m.connRefused = counter("", "connections_refused_total", "Connections refused by limits.", "listener", "reason")
	m.connCut = counter("", "connections_cut_total", "Connections still open when a graceful shutdown's grace period ended (or a second signal ended it early), or that of a listener a reload removed, closed by gmproxy. The series of a listener a reload removed stays, counting the cuts of its drain, until the next reload.", "listener")

	m.sessionHits = counter("session", "cache_hits_total", "Session resumption lookups that found a session.", "protocol")
	m.sessionMisses = counter("session", "cache_misses_total", "Session resumption lookups that found no session.", "protocol")
	m.sessionSize = gauge("session", "cache_size", "Sessions held in the server session cache.", "protocol")
	m.sessionEvictions = counter("session", "cache_evictions_total", "Sessions evicted from the server session cache.", "protocol")
	m.ticketsIssued = counter("session", "tickets_issued_total", "Session tickets issued.", "protocol")
	m.ticketsAccepted = counter("session", "tickets_accepted_total", "Session tickets accepted for resumption.", "protocol")
	m.ticketsRejected = counter("session", "tickets_rejected_total", "Session tickets offered by clients and not used, by reason (see frontdoor.TicketRejectReasons: undecryptable for an unknown or retired ticket key, expired, …).", "protocol", "reason")

	m.storeOps = counter("session", "store_operations_total", "Calls to the shared session store, by op (get, set, delete, ticket_keys) and result (hit, miss, ok, error, timeout, skipped while the circuit breaker is open).", "op", "result")
	m.storeDuration = histogram("session", "store_duration_seconds", "Round trips to the shared session store (calls that were not skipped).", KeyOpBuckets, "op")

	m.keyOps = counter("", "key_operations_total", "Private-key operations (sign, decrypt, key_agreement), by result ok or error (refused with the queue full, or dropped when their handshake gave up while they waited, included) and key location local or remote (key server).", "op", "protocol", "result", "location")
	m.keyOpQueue = histogram("", "key_operation_queue_seconds", "Time private-key operations waited for an offload worker (remote keys: for a remote slot).", KeyOpBuckets, "op", "protocol", "location")
	m.keyOpDuration = histogram("", "key_operation_duration_seconds", "Execution time of private-key operations, queue wait excluded (remote keys: the round trip to the key server).", KeyOpBuckets, "op", "protocol", "location")
	m.keyQueueLen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "key_operation_queue_length",
		Help: "Private-key operations waiting for an offload worker (0 without an engine)."}, func() float64 {
		if f := m.keyQueueFn.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})

	m.requests = counter("http", "requests_total", "HTTP requests finished, by status class.", "site", "route", "method", "code")
	m.requestDuration = histogram("http", "request_duration_seconds", "HTTP request duration, from request headers read to response finished.", RequestBuckets, "site", "route")
	m.requestsInFlight = gauge("http", "requests_in_flight", "HTTP requests being served.", "site")
	m.httpBytes = counter("http", "bytes_total", "HTTP body bytes, direction rx (request) or tx (response).", "site", "direction")
	m.rateLimited = counter("http", "rate_limited_total", "HTTP requests a route's rate_limit answered 429 (also counted in requests_total).", "site", "route")
	m.upstreamDuration = histogram("upstream", "response_seconds", "Upstream response time: time to the response headers (first byte), connect included.", RequestBuckets, "upstream")
	m.upstreamConnect = histogram("upstream", "connect_seconds", "Time to open a new upstream connection: TCP connect plus the TLS or TLCP handshake; failed attempts included.", ConnectBuckets, "upstream")
	m.upstreamStatus = counter("upstream", "responses_total", "Responses received from upstream targets, by status class (errors gmproxy answered itself are not counted).", "upstream", "code")
	m.upstreamHealthy = gauge("upstream", "target_healthy", "1 when the upstream target passes health checks, else 0.", "upstream", "target")
	m.upstreamRetries = counter("upstream", "retries_total", "Requests retried on another upstream target.", "upstream")
	m.resolveFailures = counter("upstream", "resolve_failures_total", "Lookups of upstream target host names that failed (the addresses in force are kept).", "upstream")
	m.streamBytes = counter("stream", "bytes_total", "Bytes moved by TCP stream mode and tunnels, direction rx (from client) or tx (to client).", "site", "upstream", "direction")
	m.streamActive = gauge("stream", "sessions_active", "TCP stream sessions and tunnels (WebSocket and other Upgrades, HTTP/2 extended CONNECT) open.", "site", "upstream")

	m.reloads = counter("config", "reloads_total", "Configuration reloads, by result success or failure.", "result")
	m.lastReloadSuccess = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "config", Name: "last_reload_success_timestamp_seconds", Help: "Unix time of the last successful configuration load."})
	m.lastReloadOK = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "config", Name: "last_reload_successful", Help: "1 when the last configuration reload succeeded, else 0."})
	m.ocspNextUpdate = gauge("", "ocsp_next_update_timestamp_seconds", "nextUpdate of the OCSP response stapled to a site's ordinary TLS certificate, as Unix time; absent while none is stapled.", "site")
	m.ocspStatus = gauge("", "ocsp_cert_status", "Certificate status of the current OCSP response held for a site's ordinary TLS certificate (RFC 6960 certStatus): 0 good, 1 revoked (stapled), 2 unknown (not stapled); absent while none is held.", "site")
	m.certNotAfter = gauge("", "cert_not_after_timestamp_seconds", "NotAfter of the certificates in use, as Unix time, per site and role (sign, enc, tls13sm, tls, client_ca: the earliest of the site's client CAs).", "site", "role")
	m.upstreamCerts = gauge("", "upstream_cert_not_after_timestamp_seconds", "NotAfter of the client certificates gmproxy presents to upstreams and of the CAs it verifies them with, as Unix time (role client, client_sign, client_enc, ca).", "upstream", "role")
	m.keyServerCerts = gauge("", "key_server_cert_not_after_timestamp_seconds", "NotAfter of the certificates used to reach key servers, as Unix time (role client, ca).", "key_server", "role")
	m.buildInfo = gauge("", "build_info", "Always 1; labels carry the gmproxy, Go and gmsm versions.", "version", "goversion", "gmsm")
	for _, f := range sharedFallbackCounts {
		m.sharedFallbacks = append(m.sharedFallbacks, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "shared_table", Name: "fallbacks_total",
			Help:        "With workers: connections (table clients, reason no_room: the per-client limits' table had no slot for their client, full or contended) and requests (table rates, reason busy: a rate_limit bucket stayed locked) counted by one worker alone, where a limit applies per worker (nginx logs such a zone as full).",
			ConstLabels: prometheus.Labels{"table": f.table, "reason": f.reason},
		}, func() float64 { return float64(f.count()) }))
	}
}

// sharedFallbackCounts are the counts of gmproxy_shared_table_fallbacks_total.
var sharedFallbackCounts = []struct {
	table, reason string
	count         func() uint64
}{
	{"clients", "no_room", clientshare.NoRooms},
	{"rates", "busy", rateshare.Busies},
}

func (m *Metrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{
		m.handshakeDuration, m.handshakes, m.handshakesInProgress, m.siteHandshakes, m.clientCertFailures,
		m.tlsBytes, m.tlsRecords, m.connAccepted, m.connActive, m.connClosed, m.connRefused, m.connCut, m.connDuration,
		m.sessionHits, m.sessionMisses, m.sessionSize, m.sessionEvictions,
		m.ticketsIssued, m.ticketsAccepted, m.ticketsRejected, m.storeOps, m.storeDuration,
		m.keyOps, m.keyOpQueue, m.keyOpDuration, m.keyQueueLen,
		m.requests, m.requestDuration, m.requestsInFlight, m.httpBytes, m.rateLimited,
		m.upstreamDuration, m.upstreamConnect, m.upstreamStatus, m.upstreamHealthy, m.upstreamRetries, m.resolveFailures, m.streamBytes, m.streamActive,
		m.reloads, m.lastReloadSuccess, m.lastReloadOK, m.certNotAfter, m.ocspNextUpdate, m.ocspStatus, m.upstreamCerts, m.keyServerCerts, m.buildInfo,
	}
	for _, c := range m.sharedFallbacks {
		cs = append(cs, c)
	}
	return cs
}

// ---- frontdoor.Observer ----

// ConnAccepted implements frontdoor.Observer.
func (m *Metrics) ConnAccepted(listener string) {
	l := m.listener(listener)
	l.accepted.Inc()
	l.active.Inc()
}

// ConnRefused implements frontdoor.Observer.
func (m *Metrics) ConnRefused(listener, why string) {
	m.connRefused.WithLabelValues(m.listeners.label(listener), m.refusals.label(why)).Inc()
}

// ConnsCut counts n connections of listener that a shutdown, or a reload
// that removed listener, closed when its grace period ended
// (daemon.CutObserver). The cuts of a listener the last reload removed
// count in its kept series (Retain); those of one an earlier reload
// removed, whose series is gone, in none: a counter series that vanished
// and came back would be taken for a new one by rate().
func (m *Metrics) ConnsCut(listener string, n int) {
	m.cutMu.Lock()
	defer m.cutMu.Unlock()
	if m.cutKept[listener] {
		m.connCut.WithLabelValues(listener).Add(float64(n))
		return
	}
	if m.listeners.isRetired(listener) {
		return
	}
	m.connCut.WithLabelValues(m.listeners.label(listener)).Add(float64(n))
}

// ConnClosed implements frontdoor.Observer.
func (m *Metrics) ConnClosed(listener string) {
	l := m.listener(listener)
	l.closed.Inc()
	l.active.Dec()
}

// HandshakeStarted implements frontdoor.Observer.
func (m *Metrics) HandshakeStarted(listener string) {
	m.listener(listener).inProgress.Inc()
}

// HandshakeDone implements frontdoor.Observer. Successful handshakes are
// observed in the duration histogram; every handshake is counted with its
// result.
func (m *Metrics) HandshakeDone(ev frontdoor.HandshakeEvent) {
	st := ev.State
	result := "success"
	if ev.Err != nil || ev.Reason != "" {
		result = ev.Reason
		if result == "" || result == "success" {
			result = frontdoor.ReasonInternal
		}
	}
	key := handshakeKey{listener: st.Listener, family: st.Family, version: st.Protocol, cipher: st.Cipher, site: st.Site,
		result: result, resumed: st.Resumed, clientAuth: st.ClientAuth && result == "success"}
	c := m.handshakeCache.get(key, func() handshakeChildren {
		listener := m.listeners.label(st.Listener)
		protocol, version, cipher, resumed := protocolLabel(st.Family), fixed(versions, st.Protocol), cipherLabel(st.Cipher), boolLabel(st.Resumed)
		res := fixed(handshakeResults, result)
		// inProgress is the listener's own gauge, which HandshakeStarted
		// raised (and which Retain keeps cached for a removed listener).
		hc := handshakeChildren{
			count:      m.handshakes.WithLabelValues(listener, protocol, version, cipher, resumed, res),
			inProgress: m.listener(st.Listener).inProgress,
		}
		siteResult := "failure"
		if res == "success" {
			siteResult = res
			hc.duration = m.handshakeDuration.WithLabelValues(listener, protocol, version, cipher, resumed, boolLabel(st.ClientAuth))
		}
		if st.Site != "" {
			hc.site = m.siteHandshakes.WithLabelValues(m.sites.label(st.Site), protocol, siteResult)
		}
		return hc
	})
	c.inProgress.Dec()
	c.count.Inc()
	if c.site != nil {
		c.site.Inc()
	}
	if c.duration != nil {
		c.duration.Observe(st.HandshakeDuration.Seconds())
	}
	if ev.ClientCert != "" {
		m.clientCertFailures.WithLabelValues(protocolLabel(st.Family), fixed(clientCertReasons, ev.ClientCert)).Inc()
	}
}

// ConnDone implements frontdoor.ConnDurationObserver.
func (m *Metrics) ConnDone(listener, family string, d time.Duration) {
	m.connDurationFor(listener, family).Observe(d.Seconds())
}

// Bytes implements frontdoor.Observer.
func (m *Metrics) Bytes(family, cipher string, rx, tx, rxRecords, txRecords uint64) {
	if rx|tx|rxRecords|txRecords == 0 {
		return
	}
	c := m.bytesFor(family, cipher)
	c.rx.Add(float64(rx))
	c.tx.Add(float64(tx))
	if c.rxRecords != nil {
		c.rxRecords.Add(float64(rxRecords))
		c.txRecords.Add(float64(txRecords))
	}
}

// ---- keyoffload.Observer ----

// KeyOp implements keyoffload.Observer (a local key).
func (m *Metrics) KeyOp(op, family string, queueWait, exec time.Duration, err error) {
	m.KeyOpAt(op, family, keyoffload.Local, queueWait, exec, err)
}

// KeyOpAt implements keyoffload.LocationObserver.
func (m *Metrics) KeyOpAt(op, family, location string, queueWait, exec time.Duration, err error) {
	c := m.keyOp(op, family, location)
	if err != nil {
		c.failed.Inc()
	} else {
		c.ok.Inc()
	}
	c.queue.Observe(queueWait.Seconds())
	c.duration.Observe(exec.Seconds())
}

// ObserveKeyQueue makes gmproxy_key_operation_queue_length read queueLen
// at each scrape (for example keyoffload.Engine.QueueLen); nil resets it to 0.
func (m *Metrics) ObserveKeyQueue(queueLen func() int) {
	if queueLen == nil {
		m.keyQueueFn.Store(nil)
		return
	}
	m.keyQueueFn.Store(&queueLen)
}

// ---- frontdoor.SessionObserver ----

// SessionLookup implements frontdoor.SessionObserver.
func (m *Metrics) SessionLookup(family string, hit bool) {
	if c := m.sessions(family); hit {
		c.hits.Inc()
	} else {
		c.misses.Inc()
	}
}

// SessionCacheSize implements frontdoor.SessionObserver. evictions is the
// family's cumulative eviction count (over every cache a reload made); the
// counter moves by its increase. A smaller value is a report that raced
// with a later one and arrived after it (the caches report outside their
// locks): it is counted already, and moves nothing.
func (m *Metrics) SessionCacheSize(family string, size int, evictions uint64) {
	p, c := protocolLabel(family), m.cacheSize(family)
	c.size.Set(float64(size))
	m.evictMu.Lock()
	var delta uint64
	if last := m.lastEvictions[p]; evictions > last {
		delta = evictions - last
		m.lastEvictions[p] = evictions
	}
	m.evictMu.Unlock()
	if delta > 0 {
		c.evictions.Add(float64(delta))
	}
}

// TicketIssued implements frontdoor.SessionObserver.
func (m *Metrics) TicketIssued(family string) {
	m.sessions(family).ticketsIssued.Inc()
}

// TicketAccepted implements frontdoor.SessionObserver.
func (m *Metrics) TicketAccepted(family string) {
	m.sessions(family).ticketsAccepted.Inc()
}

// TicketRejected implements frontdoor.SessionObserver (no reason known:
// reason="none").
func (m *Metrics) TicketRejected(family string) {
	m.TicketRejectedReason(family, "")
}

// TicketRejectedReason implements frontdoor.TicketReasonObserver.
func (m *Metrics) TicketRejectedReason(family, reason string) {
	m.ticketsRejected.WithLabelValues(protocolLabel(family), fixed(ticketRejectReasons, reason)).Inc()
}

// StoreOp implements sessionstore.Observer.
func (m *Metrics) StoreOp(op, result string, d time.Duration) {
	op, result = fixed(storeOps, op), fixed(storeResults, result)
	m.storeOps.WithLabelValues(op, result).Inc()
	if result != sessionstore.ResultSkipped {
		m.storeDuration.WithLabelValues(op).Observe(d.Seconds())
	}
}

// ---- proxy.Observer ----

// RequestStarted implements proxy.Observer.
func (m *Metrics) RequestStarted(site string) {
	m.inFlight(site).Inc()
}

// RequestDone implements proxy.Observer.
func (m *Metrics) RequestDone(ev proxy.RequestEvent) {
	o := m.routeObserver(ev.Site, ev.Route)
	o.inFlight.Dec()
	m.count(o, ev.Method, ev.Status)
	o.duration.Observe(ev.Duration.Seconds())
	if ev.BytesIn > 0 {
		o.rx.Add(float64(ev.BytesIn))
	}
	if ev.BytesOut > 0 {
		o.tx.Add(float64(ev.BytesOut))
	}
	if ev.RateLimited {
		m.rateLimited.WithLabelValues(o.site, o.route).Inc()
	}
	if ev.Upstream != "" && ev.Target != "" {
		// A target was asked: a request the proxy answered before any
		// (rate_limit, max_body, no target up) took no upstream time.
		u := m.upstreamObserver(ev.Upstream)
		u.duration.Observe(ev.UpstreamDuration.Seconds())
		if ev.UpstreamStatus != 0 {
			m.countStatus(u, ev.UpstreamStatus)
		}
	}
}

// UpstreamConnect implements proxy.UpstreamConnectObserver.
func (m *Metrics) UpstreamConnect(upstream string, d time.Duration, _ error) {
	m.upstreamConnect.WithLabelValues(m.upstreams.label(upstream)).Observe(d.Seconds())
}

// UpstreamHealth implements proxy.Observer.
func (m *Metrics) UpstreamHealth(upstream, target string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	m.upstreamHealthy.WithLabelValues(m.upstreams.label(upstream), m.targets.label(target)).Set(v)
}

// UpstreamResolveFailed implements proxy.UpstreamResolveObserver.
func (m *Metrics) UpstreamResolveFailed(upstream string) {
	m.resolveFailures.WithLabelValues(m.upstreams.label(upstream)).Inc()
}

// UpstreamTargetRemoved implements proxy.UpstreamResolveObserver: the
// health series of an address its name no longer resolves to goes, and
// the address no longer counts against the target label's cap unless
// another upstream still reports it (two upstreams naming the same host):
// forgotten, its place could go to a new address, and the other
// upstream's reports would then be "other" beside its stale series.
func (m *Metrics) UpstreamTargetRemoved(upstream, target string) {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	m.upstreamHealthy.DeleteLabelValues(m.upstreams.label(upstream), target)
	for _, l := range seriesLabels(m.upstreamHealthy) {
		if l["target"] == target {
			return
		}
	}
	m.targets.forget(target)
}

// UpstreamRetry implements proxy.Observer.
func (m *Metrics) UpstreamRetry(upstream string) {
	m.upstreamRetries.WithLabelValues(m.upstreams.label(upstream)).Inc()
}

// StreamBytes implements proxy.Observer.
func (m *Metrics) StreamBytes(site, upstream string, in, out int64) {
	s, u := m.sites.label(site), m.upstreams.label(upstream)
	if in > 0 {
		m.streamBytes.WithLabelValues(s, u, "rx").Add(float64(in))
	}
	if out > 0 {
		m.streamBytes.WithLabelValues(s, u, "tx").Add(float64(out))
	}
}

// StreamOpened implements proxy.StreamObserver. The session is counted
// in the series resolved now and taken out of the same one when it ends:
// a session of a site or upstream that a reload removed (Retain deleted
// its series) ends in the deleted series, and brings no series back at
// -1.
func (m *Metrics) StreamOpened(site, upstream string) (closed func()) {
	g := m.streamActive.WithLabelValues(m.sites.label(site), m.upstreams.label(upstream))
	g.Inc()
	return g.Dec
}

// ---- called by the daemon ----

// ConfigReloaded records a configuration load or reload attempt. at is the
// time of the attempt (a zero at means now).
func (m *Metrics) ConfigReloaded(ok bool, at time.Time) {
	if at.IsZero() {
		at = time.Now()
	}
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.lastReloadSuccess.Set(float64(at.UnixNano()) / 1e9)
		m.lastReloadOK.Set(1)
		return
	}
	m.reloads.WithLabelValues("failure").Inc()
	m.lastReloadOK.Set(0)
}

// SetCertNotAfter records the expiry of a certificate in use. role is one of
// sign, enc (the TLCP double certificates), tls13sm or tls.
func (m *Metrics) SetCertNotAfter(site, role string, notAfter time.Time) {
	m.certNotAfter.WithLabelValues(m.sites.label(site), fixed(certRoles, role)).Set(float64(notAfter.Unix()))
}

// SetOCSPNextUpdate records the nextUpdate of the OCSP response a site
// staples; a zero time (no response stapled, or one without nextUpdate)
// deletes the series.
func (m *Metrics) SetOCSPNextUpdate(site string, nextUpdate time.Time) {
	s := m.sites.label(site)
	if nextUpdate.IsZero() {
		m.ocspNextUpdate.DeleteLabelValues(s)
		return
	}
	m.ocspNextUpdate.WithLabelValues(s).Set(float64(nextUpdate.Unix()))
}

// SetOCSPStatus records the certificate status (RFC 6960 §4.2.1
// certStatus: 0 good, 1 revoked, 2 unknown) of the current OCSP response
// held for a site; a negative status (none held) deletes the series. A
// revoked response is stapled with its nextUpdate reported: an alert on
// the nextUpdate alone would not see it.
func (m *Metrics) SetOCSPStatus(site string, status int) {
	s := m.sites.label(site)
	if status < 0 {
		m.ocspStatus.DeleteLabelValues(s)
		return
	}
	m.ocspStatus.WithLabelValues(s).Set(float64(status))
}

// SetUpstreamCertNotAfter records the expiry of a certificate gmproxy uses
// towards an upstream; role is client, client_sign, client_enc or ca.
func (m *Metrics) SetUpstreamCertNotAfter(upstream, role string, notAfter time.Time) {
	m.upstreamCerts.WithLabelValues(m.upstreams.label(upstream), fixed(upstreamCertRoles, role)).Set(float64(notAfter.Unix()))
}

// SetKeyServerCertNotAfter records the expiry of a certificate used to reach
// a key server; role is client or ca.
func (m *Metrics) SetKeyServerCertNotAfter(keyServer, role string, notAfter time.Time) {
	m.keyServerCerts.WithLabelValues(m.keyServers.label(keyServer), fixed(keyServerCertRoles, role)).Set(float64(notAfter.Unix()))
}

// ResetCertNotAfter forgets every certificate expiry (sites, upstreams, key
// servers), so that a reload can set the new configuration's certificates
// without leaving removed ones.
func (m *Metrics) ResetCertNotAfter() {
	m.certNotAfter.Reset()
	m.upstreamCerts.Reset()
	m.keyServerCerts.Reset()
}

// ResetUpstreamHealth forgets every upstream target health value (call on
// reload before the new health checkers report).
func (m *Metrics) ResetUpstreamHealth() { m.upstreamHealthy.Reset() }

// SetBuildInfo sets gmproxy_build_info{version, goversion, gmsm} to 1.
func (m *Metrics) SetBuildInfo(version, goVersion, gmsmVersion string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, goVersion, gmsmVersion).Set(1)
}
