package metrics

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// ConfigNames are the configuration-derived label values of one
// configuration (see Retain).
type ConfigNames struct {
	Listeners []string // listener names (their addresses unless named)
	Sites     []string
	Routes    []string // route labels (proxy.RouteLabel)
	// Upstreams maps every upstream name to its targets' addresses.
	Upstreams  map[string][]string
	KeyServers []string
	// SiteRoutes maps each site to its route labels, when known: a route
	// label that another site keeps (route1, route2... name the unnamed
	// routes of every site by their place) is no longer the site's own
	// once the site has it no more.
	SiteRoutes map[string][]string
	// SiteUpstreams maps each site to the upstreams its stream sessions
	// and tunnels name (its stream's upstream, its routes'), when known:
	// an upstream that other sites still use is no longer the site's once
	// the site uses it no more.
	SiteUpstreams map[string][]string
}

// KeepRoute reports whether the series of route label route in site
// follow configuration n: n does not say the site's routes, the site is
// not n's (Keep drops it), or the site has the route; series labelled
// other or none are kept (their names are not known).
func (n ConfigNames) KeepRoute(site, route string) bool {
	routes, ok := n.SiteRoutes[site]
	return !ok || site == Other || site == None || route == Other || route == None || slices.Contains(routes, route)
}

// KeepStream reports whether the stream series of site and upstream
// follow configuration n: n does not say the site's upstreams, the site
// is not n's (Keep drops it), or the site uses the upstream; series
// labelled other or none are kept (their names are not known).
func (n ConfigNames) KeepStream(site, upstream string) bool {
	ups, ok := n.SiteUpstreams[site]
	return !ok || site == Other || site == None || upstream == Other || upstream == None || slices.Contains(ups, upstream)
}

// Keep returns what Retain keeps of the series for configuration n: a
// series whose listener, site, route, upstream, target or key_server label
// has a value n does not name (other than Other and None) is dropped. A
// process that sums other processes' series (the supervisor of workers)
// drops what it kept of theirs by it.
func (n ConfigNames) Keep() func(label, value string) bool {
	var upstreams, targets []string
	for u, ts := range n.Upstreams {
		upstreams = append(upstreams, u)
		targets = append(targets, ts...)
	}
	sets := map[string]map[string]bool{
		"listener": set(n.Listeners...), "site": set(n.Sites...), "route": set(n.Routes...),
		"upstream": set(upstreams...), "target": set(targets...), "key_server": set(n.KeyServers...),
	}
	return func(label, value string) bool {
		s, named := sets[label]
		if label == "target" {
			value = configuredTarget(value)
		}
		return !named || value == Other || value == None || s[value]
	}
}

// Retain makes the exported series follow a new configuration: series
// whose listener, site, route, upstream, target or key_server label names
// something the configuration no longer has are deleted (and the name no
// longer counts against its label cap), as is a target's health under an
// upstream that no longer has it and a site's requests of a route it no
// longer has (SiteRoutes), as are a site's stream series of an upstream it
// no longer uses (SiteUpstreams), and the counters whose label sets
// the configuration makes known start at 0, so that rates and alerts see
// 0 instead of no data. The connections and requests of a removed name
// that the old generation still drains move no series (the removed
// listener's connections_active does not come back at -1); a name that a
// later configuration brings back reports into new series. Call it after
// every successful load or reload.
func (m *Metrics) Retain(n ConfigNames) {
	var targets []string
	for _, ts := range n.Upstreams {
		targets = append(targets, ts...)
	}
	upstreams := make([]string, 0, len(n.Upstreams))
	for u := range n.Upstreams {
		upstreams = append(upstreams, u)
	}
	// The caches of resolved series keep the deleted children of a
	// removed name, so that the connections and requests the old
	// generation drains move no series (a gauge would come back at -1);
	// they are evicted when a configuration names it again.
	back := map[string]func(string) bool{}
	drop := func(a *admitter, keep []string, label string, vecs ...deleter) (gone []string) {
		gone, again, all := a.retain(set(keep...))
		for _, g := range gone {
			for _, v := range vecs {
				v.DeletePartialMatch(prometheus.Labels{label: g})
			}
		}
		back[label] = func(v string) bool { return all || again[v] }
		return gone
	}
	// The cut connections of a listener removed are counted when its
	// grace period ends, after this: its series is kept for them until
	// the next Retain (connections_cut_total's help says so), not
	// deleted now and brought back by the count.
	m.cutMu.Lock()
	keepListeners := set(n.Listeners...)
	for l := range m.cutKept {
		if !keepListeners[l] {
			m.connCut.DeleteLabelValues(l)
		}
	}
	m.cutKept = set(drop(m.listeners, n.Listeners, "listener", m.handshakeDuration, m.handshakes, m.handshakesInProgress,
		m.connAccepted, m.connActive, m.connClosed, m.connRefused, m.connDuration)...)
	m.cutMu.Unlock()
	drop(m.sites, n.Sites, "site", m.siteHandshakes, m.requests, m.requestDuration, m.requestsInFlight,
		m.httpBytes, m.streamBytes, m.streamActive, m.certNotAfter, m.rateLimited, m.ocspNextUpdate, m.ocspStatus)
	drop(m.routes, n.Routes, "route", m.requests, m.requestDuration, m.rateLimited)
	drop(m.upstreams, upstreams, "upstream", m.upstreamDuration, m.upstreamConnect, m.upstreamStatus,
		m.upstreamHealthy, m.upstreamRetries, m.resolveFailures, m.streamBytes, m.streamActive, m.upstreamCerts)
	drop(m.targets, append(targets, m.targets.resolvedOf(set(targets...))...), "target", m.upstreamHealthy)
	m.dropMovedTargets(n.Upstreams)
	movedBack := m.dropMovedRoutes(n)
	m.dropMovedStreams(n)
	drop(m.keyServers, n.KeyServers, "key_server", m.keyServerCerts)
	m.listenerCache.evict(back["listener"])
	m.handshakeCache.evict(func(k handshakeKey) bool { return back["listener"](k.listener) || back["site"](k.site) })
	m.connDurationCache.evict(func(k connDurationKey) bool { return back["listener"](k.listener) })
	m.cache.evict(func(kind, name string) bool { return back[kind](name) })
	m.cache.evictRoutes(movedBack)

	for _, p := range []string{frontdoor.FamilyTLCP, frontdoor.FamilyTLS13SM} {
		m.sessionHits.WithLabelValues(p)
		m.sessionMisses.WithLabelValues(p)
		m.ticketsIssued.WithLabelValues(p)
		m.ticketsAccepted.WithLabelValues(p)
		for r := range ticketRejectReasons {
			m.ticketsRejected.WithLabelValues(p, r)
		}
	}
	for p := range protocols {
		for _, r := range frontdoor.ClientCertReasons {
			m.clientCertFailures.WithLabelValues(p, r)
		}
	}
	for _, l := range n.Listeners {
		l = m.listeners.label(l)
		m.connCut.WithLabelValues(l)
		for _, r := range frontdoor.RefuseReasons {
			m.connRefused.WithLabelValues(l, m.refusals.label(r))
		}
	}
	for _, u := range upstreams {
		u = m.upstreams.label(u)
		m.upstreamRetries.WithLabelValues(u)
		for _, c := range []string{"1xx", "2xx", "3xx", "4xx", "5xx"} {
			m.upstreamStatus.WithLabelValues(u, c)
		}
	}
}

// dropMovedTargets deletes the health of each target an upstream of ups
// no longer has. Retain keeps a target's label while any upstream has it,
// so a target taken out of one upstream but still in another would keep
// its last value under the first for good (a 0 holds a "target down"
// alert). Series labelled other or none are left: their names are not
// known.
func (m *Metrics) dropMovedTargets(ups map[string][]string) {
	var stale []prometheus.Labels
	for _, l := range seriesLabels(m.upstreamHealthy) {
		u, t := l["upstream"], l["target"]
		if u == Other || u == None || t == Other || t == None {
			continue
		}
		if ts, ok := ups[u]; ok && !slices.Contains(ts, configuredTarget(t)) {
			stale = append(stale, l)
		}
	}
	for _, l := range stale {
		m.upstreamHealthy.Delete(l)
	}
}

// dropMovedRoutes deletes the request series of each route label a site
// of n no longer has while another site keeps it (Retain keeps a label
// while any site has it), and returns which resolved request observers
// must be resolved again: those of a site's route that n gives it back
// after an earlier configuration took it away (their series were
// deleted, and requests landing in them would be counted unseen).
func (m *Metrics) dropMovedRoutes(n ConfigNames) (back func(site, route string) bool) {
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	var stale []prometheus.Labels
	for _, l := range seriesLabels(m.requestDuration) {
		if !n.KeepRoute(l["site"], l["route"]) {
			stale = append(stale, prometheus.Labels{"site": l["site"], "route": l["route"]})
		}
	}
	for _, l := range stale {
		m.movedRoutes[routeKey{l["site"], l["route"]}] = true
		for _, v := range []deleter{m.requests, m.requestDuration, m.rateLimited} {
			v.DeletePartialMatch(l)
		}
	}
	again := map[routeKey]bool{}
	for k := range m.movedRoutes {
		if _, ok := n.SiteRoutes[k.site]; ok && n.KeepRoute(k.site, k.route) {
			again[k] = true
			delete(m.movedRoutes, k)
		}
	}
	if len(m.movedRoutes) > maxRetired {
		clear(m.movedRoutes) // their observers stay, as a removed name's
	}
	return func(site, route string) bool { return again[routeKey{site, route}] }
}

// dropMovedStreams deletes the stream series of each upstream a site of n
// no longer uses while another site keeps it (Retain keeps an upstream's
// label while any upstream of that name is configured), so that a stream
// site moved to another upstream does not show its last sessions and
// bytes under the old one for good. The series are not cached: a session
// open at the reload ends in the deleted series, unseen, and one of the
// pair a later configuration gives back counts in a new one.
func (m *Metrics) dropMovedStreams(n ConfigNames) {
	var stale []prometheus.Labels
	for _, c := range []prometheus.Collector{m.streamBytes, m.streamActive} {
		for _, l := range seriesLabels(c) {
			if !n.KeepStream(l["site"], l["upstream"]) {
				stale = append(stale, prometheus.Labels{"site": l["site"], "upstream": l["upstream"]})
			}
		}
	}
	for _, l := range stale {
		m.streamBytes.DeletePartialMatch(l)
		m.streamActive.DeletePartialMatch(l)
	}
}

// seriesLabels returns the labels of every series c holds.
func seriesLabels(c prometheus.Collector) []prometheus.Labels {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var all []prometheus.Labels
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) != nil {
			continue
		}
		l := prometheus.Labels{}
		for _, lp := range d.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		all = append(all, l)
	}
	return all
}

// configuredTarget is the target as configured of the health series
// label v: a target given by host name reports one series per address
// it resolved to, labelled name/address (proxy: Target.label), which a
// configuration naming the name keeps.
func configuredTarget(v string) string {
	name, _, _ := strings.Cut(v, "/")
	return name
}

// resolvedOf returns the admitted labels of addresses resolved from the
// names in configured.
func (a *admitter) resolvedOf(configured map[string]bool) []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []string
	for v := range a.seen {
		if n := configuredTarget(v); n != v && configured[n] {
			out = append(out, v)
		}
	}
	return out
}

// deleter is the part of the *Vec types Retain uses.
type deleter interface {
	DeletePartialMatch(prometheus.Labels) int
}
