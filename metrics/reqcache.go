package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCachedRoutes bounds the per-route observer cache; names beyond it
// (possible only when many reloads bring ever new names) take the label
// lookup path.
const maxCachedRoutes = 4096

// routeObs are the request metrics of one (site, route), resolved once so
// that a request costs no label hashing or vector lookups. Retain deletes
// the series of a removed site, route or upstream but leaves its observers
// here, so that the requests the old generation still drains land in the
// deleted children, unseen, and bring no series back; it evicts them when
// a configuration names the site, route or upstream again.
type routeObs struct {
	inFlight prometheus.Gauge
	duration prometheus.Observer
	rx, tx   prometheus.Counter
	site     string // labels, for the lazily resolved counters
	route    string
	// requests by method (httpMethodOrder, spelled exactly) and status
	// class (1xx..5xx, then other); other spellings take the lookup path.
	requests [len(httpMethodOrder)][6]atomic.Pointer[prometheus.Counter]
}

type routeKey struct{ site, route string }

// reqCache holds the resolved observers.
type reqCache struct {
	sites  sync.Map // site name -> prometheus.Gauge (requests in flight)
	routes sync.Map // routeKey -> *routeObs
	ups    sync.Map // upstream name -> *upObs
	n      atomic.Int64
}

// evict drops the observers of the sites, routes and upstreams stale
// reports (kind is "site", "route" or "upstream").
func (c *reqCache) evict(stale func(kind, name string) bool) {
	drop := func(m *sync.Map, k any) {
		if _, ok := m.LoadAndDelete(k); ok {
			c.n.Add(-1)
		}
	}
	c.sites.Range(func(k, _ any) bool {
		if stale("site", k.(string)) {
			drop(&c.sites, k)
		}
		return true
	})
	c.routes.Range(func(k, _ any) bool {
		if rk := k.(routeKey); stale("site", rk.site) || stale("route", rk.route) {
			drop(&c.routes, k)
		}
		return true
	})
	c.ups.Range(func(k, _ any) bool {
		if stale("upstream", k.(string)) {
			drop(&c.ups, k)
		}
		return true
	})
}

// evictRoutes drops the observers of the (site, route) pairs back reports.
func (c *reqCache) evictRoutes(back func(site, route string) bool) {
	c.routes.Range(func(k, _ any) bool {
		if rk := k.(routeKey); back(rk.site, rk.route) {
			if _, ok := c.routes.LoadAndDelete(k); ok {
				c.n.Add(-1)
			}
		}
		return true
	})
}

func (c *reqCache) admit() bool {
	if c.n.Load() >= maxCachedRoutes {
		return false
	}
	c.n.Add(1)
	return true
}

// cached returns the value stored under key, resolving and storing it
// on first use (while the cache has room).
func cached[T any](c *reqCache, m *sync.Map, key string, resolve func() T) T {
	if v, ok := m.Load(key); ok {
		return v.(T)
	}
	v := resolve()
	if c.admit() {
		m.Store(key, v)
	}
	return v
}

// inFlight returns the in-flight gauge of a site.
func (m *Metrics) inFlight(site string) prometheus.Gauge {
	return cached(&m.cache, &m.cache.sites, site, func() prometheus.Gauge {
		return m.requestsInFlight.WithLabelValues(m.sites.label(site))
	})
}

// routeObserver returns the observers of (site, route).
func (m *Metrics) routeObserver(site, route string) *routeObs {
	k := routeKey{site, route}
	if o, ok := m.cache.routes.Load(k); ok {
		return o.(*routeObs)
	}
	s, r := m.sites.label(site), m.routes.label(route)
	o := &routeObs{
		inFlight: m.inFlight(site),
		duration: m.requestDuration.WithLabelValues(s, r),
		rx:       m.httpBytes.WithLabelValues(s, "rx"),
		tx:       m.httpBytes.WithLabelValues(s, "tx"),
		site:     s,
		route:    r,
	}
	if m.cache.admit() {
		if prev, loaded := m.cache.routes.LoadOrStore(k, o); loaded {
			return prev.(*routeObs)
		}
	}
	return o
}

// count increments requests_total for a method and status.
func (m *Metrics) count(o *routeObs, method string, status int) {
	mi := -1
	for i, v := range httpMethodOrder {
		if v == method {
			mi = i
			break
		}
	}
	if mi < 0 {
		m.requests.WithLabelValues(o.site, o.route, methodLabel(method), codeClass(status)).Inc()
		return
	}
	slot := &o.requests[mi][classIndex(status)]
	if c := slot.Load(); c != nil {
		(*c).Inc()
		return
	}
	c := m.requests.WithLabelValues(o.site, o.route, method, codeClass(status))
	c.Inc()
	slot.Store(&c)
}

// upObs are the per-request metrics of one upstream.
type upObs struct {
	label    string
	duration prometheus.Observer
	// status by class (1xx..5xx, then other)
	status [6]atomic.Pointer[prometheus.Counter]
}

// upstreamObserver returns the observers of an upstream.
func (m *Metrics) upstreamObserver(name string) *upObs {
	return cached(&m.cache, &m.cache.ups, name, func() *upObs {
		l := m.upstreams.label(name)
		return &upObs{label: l, duration: m.upstreamDuration.WithLabelValues(l)}
	})
}

// countStatus increments the upstream's response counter of a status.
func (m *Metrics) countStatus(u *upObs, status int) {
	slot := &u.status[classIndex(status)]
	if c := slot.Load(); c != nil {
		(*c).Inc()
		return
	}
	c := m.upstreamStatus.WithLabelValues(u.label, codeClass(status))
	c.Inc()
	slot.Store(&c)
}

// classIndex maps a status to 0..4 for 1xx..5xx and 5 for anything else
// (codeClass's "other").
func classIndex(status int) int {
	if status < 100 || status > 599 {
		return 5
	}
	return status/100 - 1
}
