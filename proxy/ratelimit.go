package proxy

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/internal/rateshare"
)

// RateLimitConfig bounds how fast one client address may send requests to
// a route, as nginx's limit_req with burst and nodelay: a client may send
// 1 + Burst requests at once, then one per Interval; a request beyond that is
// answered 429 with Retry-After, before anything else is done for it.
type RateLimitConfig struct {
	// Interval is the time between requests the rate allows (1s / rate).
	Interval time.Duration
	// Burst is the number of requests a client may send beyond the rate
	// (nginx's burst): 1 + Burst at once after a pause; default 0.
	Burst int
	// Zone, when not "", names an allowance shared by the routes (of any
	// site) that name it: one limiter for them all, which must all give
	// it the same Interval and Burst.
	Zone string
}

// maxRateClients bounds the client addresses a route's limiter remembers;
// past it the least recently seen is forgotten (its next request finds a
// full allowance: a client can only gain from being forgotten).
const maxRateClients = 65536

// maxClientEntries bounds the client addresses the process remembers in
// all its routes' tables together (rate limits and basic_auth failures;
// about 190 bytes each): a configuration of many limited routes shares
// it, each table getting an equal part (sizeClientTables), so that
// clients from many addresses (an IPv6 attacker's /64s) grow the memory
// by no more than this, whatever the number of routes. Every table keeps
// at least minTableClients.
const (
	maxClientEntries = 1 << 18
	minTableClients  = 256
)

// sizeClientTables gives each of the rate-limit and basic_auth failure
// tables of p's routes its part of maxClientEntries. A table kept from
// the previous generation is resized with the others, once p is in force
// (New, or Activate: not by a refused reload): a reload that adds
// limited routes shrinks it (its least recently seen clients forgotten,
// which can only give them their allowance back).
func (p *Proxy) sizeClientTables() {
	n := len(p.rates) + len(p.auths)
	if n == 0 {
		return
	}
	per := min(max(maxClientEntries/n, minTableClients), maxRateClients)
	for _, l := range p.rates {
		l.tat.SetCapacity(per)
	}
	for _, a := range p.auths {
		a.failures.tat.SetCapacity(per)
	}
}

// rateLimiter is a route's RateLimitConfig per client key (frontdoor's: an
// IPv4 address, an IPv6 /64): the generic cell rate algorithm, one
// theoretical arrival time per client, in the workers' shared table when
// there is one (rateshare), else (or when its bucket is busy) in this
// process.
type rateLimiter struct {
	interval  int64 // ns between requests
	tolerance int64 // ns a client may run ahead: burst × interval
	mu        sync.Mutex
	tat       *lru.Cache[netip.Addr, int64] // on monoclock's scale
	now       func() int64

	shared *rateshare.View // nil: none
	scope  uint64          // rateshare.Scope of the route's scope and rate
}

// rateLimiter returns the limiter of the route of scope with c: the
// previous generation's when it had one for the same route and rate (a
// reload keeps the counts), else a new one.
func (p *Proxy) rateLimiter(scope string, c RateLimitConfig) (*rateLimiter, error) {
	if c.Zone != "" {
		if z, ok := p.zones[c.Zone]; ok && (z.Interval != c.Interval || z.Burst != c.Burst) {
			return nil, fmt.Errorf("rate_limit zone %q: interval %v, burst %d, where another route gave it %v, %d", c.Zone, c.Interval, c.Burst, z.Interval, z.Burst)
		}
		if p.zones == nil {
			p.zones = map[string]RateLimitConfig{}
		}
		p.zones[c.Zone] = c
		scope = "\x00zone\x00" + c.Zone // no route's scope starts so
	}
	id := scope + "\x00" + strconv.FormatInt(int64(c.Interval), 10) + "/" + strconv.Itoa(c.Burst)
	if l := p.rates[id]; l != nil {
		return l, nil // another route of the zone
	}
	l := p.prevRates[id]
	if l == nil {
		l = newRateLimiter(c)
		if p.sharedRates != nil {
			l.shared, l.scope = p.sharedRates, rateshare.Scope(id)
		}
	}
	if p.rates == nil {
		p.rates = map[string]*rateLimiter{}
	}
	p.rates[id] = l
	return l, nil
}

func newRateLimiter(c RateLimitConfig) *rateLimiter {
	burst := max(c.Burst, 0)
	// An entry older than (1 + burst) × interval says what a missing
	// one does (its client has its whole allowance back): it may go.
	ttl := time.Duration(burst+1) * c.Interval
	return &rateLimiter{
		interval:  int64(c.Interval),
		tolerance: int64(burst) * int64(c.Interval),
		tat:       lru.New[netip.Addr, int64](maxRateClients, ttl),
		now:       monoclock.Now,
	}
}

// allow takes one request of client from its allowance; when none is
// left it returns false and how long until one is.
func (l *rateLimiter) allow(client netip.Addr) (bool, time.Duration) {
	if l.shared != nil {
		switch v, wait := l.shared.Allow(l.shared.Key(l.scope, client), rateshare.Now(), l.interval, l.tolerance); v {
		case rateshare.Allowed:
			return true, 0
		case rateshare.Limited:
			return false, time.Duration(wait)
		}
		// Busy: counted here alone.
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	tat, wait := l.arrival(client, now)
	if wait > 0 {
		return false, time.Duration(wait)
	}
	l.tat.Put(client, tat+l.interval)
	return true, 0
}

// arrival returns client's theoretical arrival time (now when it has its
// whole allowance) and the ns until it may send another request (≤ 0:
// it may now). l.mu held.
func (l *rateLimiter) arrival(client netip.Addr, now int64) (tat, wait int64) {
	tat, ok := l.tat.Get(client)
	if !ok || tat < now {
		tat = now
	}
	return tat, tat - now - l.tolerance
}

// rateLimited answers 429 (with Retry-After) and reports true when r's
// client has used up its allowance on rt. The client is the address
// X-Real-IP names (realClient), counted by frontdoor's client key.
func (s *site) rateLimited(rs *reqState, r *http.Request, rt *route) bool {
	a, err := netip.ParseAddr(s.p.realClient(r))
	if err != nil {
		return false // not an IP client (a Unix socket): nothing to count by
	}
	key := frontdoor.ClientKeyOf(a)
	ok, wait := rt.rate.allow(key)
	if ok {
		return false
	}
	rs.rateLimited = true
	secs := (wait + time.Second - 1) / time.Second // RFC 9110 §10.2.3: whole seconds
	s.errorResponseWith(rs, r, http.StatusTooManyRequests, "Retry-After", strconv.FormatInt(int64(secs), 10),
		"too many requests from this address", "client "+key.String()+" is over route "+rt.name+"'s rate_limit")
	return true
}
