package daemon

import (
	"sync"
	"testing"
	"time"
)

type sessObs struct {
	mu        sync.Mutex
	hits      int
	misses    int
	size      int
	evictions uint64
}

func (o *sessObs) SessionLookup(_ string, hit bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if hit {
		o.hits++
	} else {
		o.misses++
	}
}
func (o *sessObs) SessionCacheSize(_ string, size int, ev uint64) {
	o.mu.Lock()
	o.size, o.evictions = size, ev
	o.mu.Unlock()
}
func (o *sessObs) TicketIssued(string)   {}
func (o *sessObs) TicketAccepted(string) {}
func (o *sessObs) TicketRejected(string) {}

func TestSessionStore(t *testing.T) {
	obs := &sessObs{}
	s := newSessionStore("tlcp", 2, time.Hour, obs, nil)
	now := time.Unix(1000, 0)
	s.c.SetClock(func() time.Time { return now })
	s.Put("a", []byte("A"), time.Minute)
	s.Put("b", []byte("B"), 0)
	if v, ok := s.Get("a"); !ok || string(v) != "A" {
		t.Fatal("a not found")
	}
	s.Put("c", []byte("C"), 0) // evicts b (a was used more recently)
	if _, ok := s.Get("b"); ok {
		t.Error("b survived eviction")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := s.Get("a"); ok {
		t.Error("a outlived its lifetime")
	}
	// The expired a was dropped by the lookup: the size gauge follows.
	if obs.hits != 1 || obs.misses != 2 || obs.size != 1 || obs.evictions != 1 {
		t.Errorf("observed %+v", obs)
	}
	// Clear (the shared store's subscription was broken) forgets all, and
	// the gauge follows.
	s.Put("d", []byte("D"), 0)
	s.Clear()
	if _, ok := s.Get("c"); ok {
		t.Error("c survived Clear")
	}
	if _, ok := s.Get("d"); ok {
		t.Error("d survived Clear")
	}
	if obs.size != 0 {
		t.Errorf("size gauge %d after Clear", obs.size)
	}
}
