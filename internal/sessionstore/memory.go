package sessionstore

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in this process's memory: what one process's workers
// would share, and the store of tests. Expired entries are dropped when
// read; a Memory made by NewMemory does not bound its size, one made by
// NewBoundedMemory holds at most its limit of entries.
type Memory struct {
	now   func() time.Time
	limit int // 0: unbounded
	swept time.Time

	mu sync.Mutex
	m  map[string]memEntry
}

type memEntry struct {
	val     []byte
	expires time.Time
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{now: time.Now, m: map[string]memEntry{}} }

// NewBoundedMemory returns an empty Memory store that holds at most limit
// entries: a write into a full store first drops the expired entries, then
// (when none were) an arbitrary one.
func NewBoundedMemory(limit int) *Memory {
	m := NewMemory()
	m.limit = max(limit, 1)
	return m
}

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
		delete(s.m, key)
		return nil, false
	}
	return slices.Clone(e.val), true
}

func (s *Memory) setLocked(key string, val []byte, ttl time.Duration) {
	if _, ok := s.m[key]; !ok && s.limit > 0 && len(s.m) >= s.limit {
		s.makeRoomLocked()
	}
	e := memEntry{val: slices.Clone(val)}
	if ttl > 0 {
		e.expires = s.now().Add(ttl)
	}
	s.m[key] = e
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
				delete(s.m, k)
			}
		}
	}
	if len(s.m) < n {
		return
	}
	for k := range s.m {
		delete(s.m, k)
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
	s.setLocked(key, val, ttl)
	return nil
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
	s.setLocked(key, val, ttl)
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
	delete(s.m, key)
	return nil
}

// Close implements Store.
func (s *Memory) Close() error { return nil }
