package metrics

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// Per-connection events resolve the same few label sets again and again;
// hashing label values dominates their cost. childCache keeps the resolved
// children per raw event key. Keys are bounded by the label bounds, and the
// cache stops growing at maxCached entries (later keys take the slow path).
const maxCached = 4096

type childCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *childCache[K, V]) get(k K, build func() V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = build()
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[K]V)
	}
	if len(c.m) < maxCached {
		c.m[k] = v
	}
	c.mu.Unlock()
	return v
}

// listenerChildren are the per-listener connection series.
type listenerChildren struct {
	accepted, closed   prometheus.Counter
	active, inProgress prometheus.Gauge
}

func (m *Metrics) listener(name string) listenerChildren {
	return m.listenerCache.get(name, func() listenerChildren {
		l := m.listeners.label(name)
		return listenerChildren{
			accepted: m.connAccepted.WithLabelValues(l), closed: m.connClosed.WithLabelValues(l),
			active: m.connActive.WithLabelValues(l), inProgress: m.handshakesInProgress.WithLabelValues(l),
		}
	})
}

type handshakeKey struct {
	listener, family, version, cipher, site, result string
	resumed, clientAuth                             bool
}

// handshakeChildren are the series of one handshake outcome; duration is nil
// for failures (only successful handshakes are timed).
type handshakeChildren struct {
	count      prometheus.Counter
	duration   prometheus.Observer
	inProgress prometheus.Gauge
	site       prometheus.Counter // nil before a site was chosen
}

type bytesKey struct{ family, cipher string }

// bytesChildren are created together. Records are nil for ordinary TLS,
// whose record layer (crypto/tls) does not count them.
type bytesChildren struct {
	rx, tx, rxRecords, txRecords prometheus.Counter
}

func (m *Metrics) bytesFor(family, cipher string) bytesChildren {
	return m.bytesCache.get(bytesKey{family, cipher}, func() bytesChildren {
		p, c := protocolLabel(family), cipherLabel(cipher)
		bc := bytesChildren{rx: m.tlsBytes.WithLabelValues(p, c, "rx"), tx: m.tlsBytes.WithLabelValues(p, c, "tx")}
		if family != frontdoor.FamilyTLS {
			bc.rxRecords, bc.txRecords = m.tlsRecords.WithLabelValues(p, c, "rx"), m.tlsRecords.WithLabelValues(p, c, "tx")
		}
		return bc
	})
}

// keyOpKey is a private-key operation's raw labels (op, protocol family,
// key location), as the offload engine reports them.
type keyOpKey struct{ op, family, location string }

// keyOpChildren are the series of one kind of key operation: its count by
// result, its queue wait and its execution time.
type keyOpChildren struct {
	ok, failed      prometheus.Counter
	queue, duration prometheus.Observer
}

func (m *Metrics) keyOp(op, family, location string) keyOpChildren {
	return m.keyOpCache.get(keyOpKey{op, family, location}, func() keyOpChildren {
		o, p, l := fixed(keyOps, op), protocolLabel(family), fixed(keyLocations, location)
		return keyOpChildren{
			ok: m.keyOps.WithLabelValues(o, p, "ok", l), failed: m.keyOps.WithLabelValues(o, p, "error", l),
			queue: m.keyOpQueue.WithLabelValues(o, p, l), duration: m.keyOpDuration.WithLabelValues(o, p, l),
		}
	})
}

// sessionChildren are the session lookup and ticket counters of one
// protocol family (counters, which Retain starts at 0 anyway).
type sessionChildren struct {
	hits, misses, ticketsIssued, ticketsAccepted prometheus.Counter
}

func (m *Metrics) sessions(family string) sessionChildren {
	return m.sessionCache.get(family, func() sessionChildren {
		p := protocolLabel(family)
		return sessionChildren{
			hits: m.sessionHits.WithLabelValues(p), misses: m.sessionMisses.WithLabelValues(p),
			ticketsIssued: m.ticketsIssued.WithLabelValues(p), ticketsAccepted: m.ticketsAccepted.WithLabelValues(p),
		}
	})
}

// cacheSizeChildren are the session cache's size and evictions of one
// protocol family, resolved only by a family that reports its cache size
// (a size gauge at 0 for a family without a cache would be a false figure).
type cacheSizeChildren struct {
	size      prometheus.Gauge
	evictions prometheus.Counter
}

func (m *Metrics) cacheSize(family string) cacheSizeChildren {
	return m.cacheSizeCache.get(family, func() cacheSizeChildren {
		p := protocolLabel(family)
		return cacheSizeChildren{size: m.sessionSize.WithLabelValues(p), evictions: m.sessionEvictions.WithLabelValues(p)}
	})
}

type connDurationKey struct{ listener, family string }

// connDurationFor is the connection-duration histogram of one listener and
// protocol family.
func (m *Metrics) connDurationFor(listener, family string) prometheus.Observer {
	return m.connDurationCache.get(connDurationKey{listener, family}, func() prometheus.Observer {
		return m.connDuration.WithLabelValues(m.listeners.label(listener), protocolLabel(family))
	})
}

// evict drops the entries whose key stale reports (their children were
// deleted, or the key maps to other labels now).
func (c *childCache[K, V]) evict(stale func(K) bool) {
	c.mu.Lock()
	maps.DeleteFunc(c.m, func(k K, _ V) bool { return stale(k) })
	c.mu.Unlock()
}
