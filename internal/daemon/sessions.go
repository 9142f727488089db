package daemon

import (
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/lru"
)

// sessionStore is the server-side TLCP session-ID cache: an in-memory LRU
// bounded by count and lifetime that reports lookups, size and evictions to
// a SessionObserver. It implements tlcp.SessionStore; a shared store (for
// several instances) can replace it behind the same interface. A hit means
// the store held a live session for the ID; tlcp may still refuse to resume
// it (another site's identity, another suite, a client-certificate policy).
// Ticket resumption never reaches the store: tlcp reports it through
// Config.OnTicket (ticketObserver).
type sessionStore struct {
	family string
	c      *lru.Cache[string, sessionEntry]
	obs    frontdoor.SessionObserver
	now    func() time.Time
}

type sessionEntry struct {
	state   []byte
	expires time.Time
}

func newSessionStore(family string, size int, lifetime time.Duration, obs frontdoor.SessionObserver) *sessionStore {
	return &sessionStore{family: family, c: lru.New[string, sessionEntry](size, lifetime), obs: obs, now: time.Now}
}

func (s *sessionStore) Get(id string) ([]byte, bool) {
	n := s.c.Len()
	e, ok := s.c.Get(id)
	if ok && !e.expires.IsZero() && !s.now().Before(e.expires) {
		s.c.Delete(id)
		ok = false
	}
	if s.obs != nil {
		s.obs.SessionLookup(s.family, ok)
	}
	if !ok {
		// An expired entry was dropped (here or by the cache's TTL): keep
		// the size gauge in step.
		if s.c.Len() != n {
			s.report()
		}
		return nil, false
	}
	return e.state, true
}

func (s *sessionStore) Put(id string, state []byte, lifetime time.Duration) {
	e := sessionEntry{state: state}
	if lifetime > 0 {
		e.expires = s.now().Add(lifetime)
	}
	s.c.Put(id, e)
	s.report()
}

func (s *sessionStore) Delete(id string) {
	s.c.Delete(id)
	s.report()
}

func (s *sessionStore) report() {
	if s.obs != nil {
		s.obs.SessionCacheSize(s.family, s.c.Len(), s.c.Evictions())
	}
}
