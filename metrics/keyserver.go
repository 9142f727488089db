package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gmproxy/gmproxy/keyserver"
)

// KeyServer holds the metrics of gmproxy keyserver, served on its
// metrics_address:
//
//	gmproxy_keyserver_operations_total           counter   {client, key, op, result}
//	gmproxy_keyserver_operation_duration_seconds histogram {op}
//	gmproxy_keyserver_operations_in_flight       gauge     {client}
//	gmproxy_keyserver_connections_active         gauge
//	gmproxy_keyserver_connections_refused_total  counter   {reason}
//
// plus the go_* and process_* collectors. client and key are the names of
// the key server's configuration (at most 256 each, then "other"); key is
// "unknown" (keyserver.UnknownKey, which conf refuses as a key's name)
// for a key ID the server does not hold; op is sign, decrypt,
// key_agreement or other (a refused ping, an unknown operation); result
// is ok or an error code name (keyserver.Results); the duration covers
// the operation itself, not refused requests; reason is one of
// keyserver.RefusedReasons. A reload that removes a client or a key
// deletes its series (Retain).
type KeyServer struct {
	gatherer      prometheus.Gatherer
	clients, keys *admitter
	// names are the client and key names of the running policy (Retain);
	// nil before the first. The events of a name no policy has any more
	// (an operation of a removed client still finishing) are not
	// exported: a series deleted by Retain would come back for good.
	names atomic.Pointer[keyServerNames]
	// mu orders the in-flight gauge's updates with Retain's deletions.
	mu sync.Mutex
	// ready is what /readyz answers (SetReady).
	ready atomic.Bool

	ops      *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	conns    prometheus.Gauge
	refused  *prometheus.CounterVec
}

var (
	_ keyserver.Observer     = (*KeyServer)(nil)
	_ keyserver.NameRetainer = (*KeyServer)(nil)
)

// keyServerNames are the names of one key-server policy.
type keyServerNames struct{ clients, keys map[string]bool }

var (
	keyServerResults = set(keyserver.Results()...)
	keyServerRefused = set(keyserver.RefusedReasons...)
)

// NewKeyServer creates the key server's collectors on a private registry.
func NewKeyServer() (*KeyServer, error) {
	reg := prometheus.NewRegistry()
	m := &KeyServer{
		gatherer: reg,
		clients:  newAdmitter(MaxSites),
		keys:     newAdmitter(MaxSites),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "keyserver", Name: "operations_total",
			Help: "Key operations answered, by client, key, operation and result."}, []string{"client", "key", "op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "keyserver", Name: "operation_duration_seconds",
			Help: "Time to run an admitted key operation.", Buckets: KeyOpBuckets}, []string{"op"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "keyserver", Name: "operations_in_flight",
			Help: "Key operations in progress, by client."}, []string{"client"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "keyserver", Name: "connections_active",
			Help: "Open client connections."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "keyserver", Name: "connections_refused_total",
			Help: "Connections refused before any operation, or closed for their framing (malformed), by reason."}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.ops, m.duration, m.inFlight, m.conns, m.refused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Gatherer returns the registry (tests).
func (m *KeyServer) Gatherer() prometheus.Gatherer { return m.gatherer }

// SetReady sets what /readyz answers: the key server sets it once it
// serves its listener and clears it when it begins to shut down, so that a
// load balancer or an orchestrator's probe stops sending it clients first.
func (m *KeyServer) SetReady(ready bool) { m.ready.Store(ready) }

// Handler serves GET /metrics, and GET /healthz and /readyz as the admin
// listener of gmproxy run does.
func (m *KeyServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4}))
	handleProbes(mux, m.ready.Load)
	return mux
}

// Operation implements keyserver.Observer.
func (m *KeyServer) Operation(client, key, op, result string, d time.Duration) {
	op, result = fixed(keyOps, op), fixed(keyServerResults, result)
	if result == "ok" || d > 0 {
		m.duration.WithLabelValues(op).Observe(d.Seconds())
	}
	if n := m.names.Load(); n != nil && (!n.clients[client] || key != keyserver.UnknownKey && !n.keys[key]) {
		return // a removed client's or key's: its series are gone
	}
	if key != keyserver.UnknownKey {
		key = m.keys.label(key)
	}
	m.ops.WithLabelValues(m.clients.label(client), key, op, result).Inc()
}

// InFlight implements keyserver.Observer.
func (m *KeyServer) InFlight(client string, delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.names.Load(); n != nil && !n.clients[client] {
		return // a removed client's: its gauge is gone
	}
	m.inFlight.WithLabelValues(m.clients.label(client)).Add(float64(delta))
}

// Retain implements keyserver.NameRetainer: the series of clients and
// keys the running policy no longer names are deleted (their label places
// freed for new names), so that a key server reloaded many times exports
// only what it serves. A removed client's in-flight gauge is deleted even
// with operations still running: they end uncounted.
func (m *KeyServer) Retain(clients, keys []string) {
	n := &keyServerNames{clients: set(clients...), keys: set(keys...)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names.Store(n)
	goneClients, _, _ := m.clients.retain(n.clients)
	for _, c := range goneClients {
		m.ops.DeletePartialMatch(prometheus.Labels{"client": c})
		m.inFlight.DeleteLabelValues(c)
	}
	goneKeys, _, _ := m.keys.retain(n.keys)
	for _, k := range goneKeys {
		m.ops.DeletePartialMatch(prometheus.Labels{"key": k})
	}
}

// Conns implements keyserver.Observer.
func (m *KeyServer) Conns(delta int) { m.conns.Add(float64(delta)) }

// Refused implements keyserver.Observer.
func (m *KeyServer) Refused(reason string) {
	m.refused.WithLabelValues(fixed(keyServerRefused, reason)).Inc()
}
