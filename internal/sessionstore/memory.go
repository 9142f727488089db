package sessionstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessioncache"
)

// Memory is a Store in this process's memory: what one process's workers
// would share, and the store of tests. Expired entries are dropped when
// read; a Memory made by NewMemory does not bound its size, one made by
// NewBoundedMemory holds at most its limit of entries and a byte budget.
type Memory struct {
	now    func() time.Time
	limit  int // 0: unbounded
	budget int // bytes of keys and values, with limit
	swept  time.Time

	mu    sync.Mutex
	m     map[string]memEntry
	bytes int // of the keys and values in m
}

type memEntry struct {
	val     []byte
	expires time.Time
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{now: time.Now, m: map[string]memEntry{}} }

// NewBoundedMemory returns an empty Memory store that holds at most limit
// entries, and at most sessioncache.BudgetPerSession bytes of keys and
// values per entry of limit (as the in-process cache bounds its sessions'
// bytes; at least room for two of the largest sessions): a store of
// sessions with long client certificate chains holds fewer of them, not
// more memory than its limit was planned for. A write into a full store
// first drops the expired entries, then (when none were) arbitrary ones;
// a key and value over the whole budget are refused (ErrTooLarge).
func NewBoundedMemory(limit int) *Memory {
	m := NewMemory()
	m.limit = max(limit, 1)
	m.budget = max(m.limit*sessioncache.BudgetPerSession, 2*sessioncache.MaxState)
	return m
}

// errOverBudget refuses a write over a bounded Memory's whole budget.
var errOverBudget = fmt.Errorf("sessionstore: entry over the memory store's byte budget: %w", ErrTooLarge)

// SetClock replaces the clock (tests).
func (s *Memory) SetClock(now func() time.Time) {
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

// Len returns the number of entries held (expired ones included).
func (s *Memory) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// getLocked returns the live value under key.
func (s *Memory) getLocked(key string) ([]byte, bool) {
	e, ok := s.m[key]
	if !ok {
		return nil, false
	}
	if !e.expires.IsZero() && !s.now().Before(e.expires) {
		s.deleteLocked(key)
		return nil, false
	}
	return slices.Clone(e.val), true
}

// deleteLocked removes key, keeping the byte count.
func (s *Memory) deleteLocked(key string) {
	if e, ok := s.m[key]; ok {
		s.bytes -= len(key) + len(e.val)
		delete(s.m, key)
	}
}

func (s *Memory) setLocked(key string, val []byte, ttl time.Duration) error {
	size := len(key) + len(val)
	if s.limit > 0 {
		if size > s.budget {
			return errOverBudget
		}
		s.deleteLocked(key)
		for len(s.m) > 0 && (len(s.m) >= s.limit || s.bytes+size > s.budget) {
			s.makeRoomLocked()
		}
	}
	e := memEntry{val: slices.Clone(val)}
	if ttl > 0 {
		e.expires = s.now().Add(ttl)
	}
	s.deleteLocked(key)
	s.m[key] = e
	s.bytes += size
	return nil
}

// makeRoomLocked drops the expired entries (at most once a second: the
// sweep reads every entry), or one arbitrary entry when that freed none.
func (s *Memory) makeRoomLocked() {
	now := s.now()
	n := len(s.m)
	if now.Sub(s.swept) >= time.Second {
		s.swept = now
		for k, e := range s.m {
			if !e.expires.IsZero() && !now.Before(e.expires) {
				s.deleteLocked(k)
			}
		}
	}
	if len(s.m) < n {
		return
	}
	for k := range s.m {
		s.deleteLocked(k)
		return
	}
}

// Get implements Store.
func (s *Memory) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.getLocked(key)
	return v, ok, nil
}

// Set implements Store.
func (s *Memory) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setLocked(key, val, ttl)
}

// AddOrGet implements Store.
func (s *Memory) AddOrGet(ctx context.Context, key string, val []byte, ttl time.Duration) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.getLocked(key); ok {
		return v, nil
	}
	if err := s.setLocked(key, val, ttl); err != nil {
		return nil, err
	}
	return slices.Clone(val), nil
}

// GetMany implements Store.
func (s *Memory) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i], _ = s.getLocked(k)
	}
	return out, nil
}

// Delete implements Store.
func (s *Memory) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteLocked(key)
	return nil
}

// Close implements Store.
func (s *Memory) Close() error { return nil }
