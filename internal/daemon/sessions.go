package daemon

import (
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/sessioncache"
)

// sessionStore is the server-side TLCP session-ID cache: an in-memory LRU
// bounded by count, bytes and lifetime (sessioncache: memory the garbage
// collector does not scan) that reports lookups, size and evictions to a
// SessionObserver. It implements tlcp.SessionStore; a shared store (for
// several instances) can replace it behind the same interface. A hit means
// the store held a live session for the ID; tlcp may still refuse to resume
// it (another site's identity, another suite, a client-certificate policy).
// Ticket resumption never reaches the store: tlcp reports it through
// Config.OnTicket (ticketObserver).
type sessionStore struct {
	family string
	c      *sessioncache.Cache
	obs    frontdoor.SessionObserver
	// evicted counts the evictions of every store of the family (one per
	// sessions.cache_size and lifetime a reload made, and a reload back
	// makes an earlier one serve again): the observer is told that sum,
	// which only grows, not this cache's own count. seen is the part of
	// this cache's count already added to it.
	evicted *atomic.Uint64
	seen    atomic.Uint64
}

// newSessionStore makes a store whose evictions add to evicted (nil: its
// own count alone).
func newSessionStore(family string, size int, lifetime time.Duration, obs frontdoor.SessionObserver, evicted *atomic.Uint64) *sessionStore {
	if evicted == nil {
		evicted = new(atomic.Uint64)
	}
	return &sessionStore{family: family, c: sessioncache.New(size, lifetime), obs: obs, evicted: evicted}
}

func (s *sessionStore) Get(id string) ([]byte, bool) {
	state, ok := s.c.Get(id)
	if s.obs != nil {
		s.obs.SessionLookup(s.family, ok)
		if !ok {
			// The lookup may have dropped an expired entry: keep the
			// size gauge in step.
			s.report()
		}
	}
	return state, ok
}

func (s *sessionStore) Put(id string, state []byte, lifetime time.Duration) {
	s.c.Put(id, state, lifetime)
	s.report()
}

func (s *sessionStore) Delete(id string) {
	s.c.Delete(id)
	s.report()
}

// Clear forgets every session (the shared store's subscription was broken:
// sessions ended on other instances meanwhile went unheard).
func (s *sessionStore) Clear() {
	s.c.Clear()
	s.report()
}

func (s *sessionStore) report() {
	if s.obs == nil {
		return
	}
	n, evictions := s.c.Stats()
	for {
		prev := s.seen.Load()
		if evictions <= prev {
			break // counted (a concurrent report got a later count)
		}
		if s.seen.CompareAndSwap(prev, evictions) {
			s.evicted.Add(evictions - prev)
			break
		}
	}
	s.obs.SessionCacheSize(s.family, n, s.evicted.Load())
}
