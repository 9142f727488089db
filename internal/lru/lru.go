// Package lru is a small mutex-guarded LRU cache bounded by entry count and
// age, used for server session stores and client session caches.
package lru

import (
	"container/list"
	"sync"
	"time"
)

// Cache maps K to V, holding at most Capacity entries each for at most TTL.
type Cache[K comparable, V any] struct {
	capacity int
	ttl      time.Duration
	now      func() time.Time

	mu        sync.Mutex
	ll        *list.List
	items     map[K]*list.Element
	evictions uint64
}

type entry[K comparable, V any] struct {
	key     K
	val     V
	expires time.Time
}

// New returns a cache. capacity <= 0 means 1; ttl <= 0 means no age limit.
func New[K comparable, V any](capacity int, ttl time.Duration) *Cache[K, V] {
	if capacity <= 0 {
		capacity = 1
	}
	return &Cache[K, V]{capacity: capacity, ttl: ttl, now: time.Now, ll: list.New(), items: make(map[K]*list.Element)}
}

// SetClock replaces the clock (tests).
func (c *Cache[K, V]) SetClock(now func() time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

// Get returns the live value for k and marks it recently used.
func (c *Cache[K, V]) Get(k K) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, found := c.items[k]
	if !found {
		return v, false
	}
	e := el.Value.(*entry[K, V])
	if c.ttl > 0 && !c.now().Before(e.expires) {
		c.ll.Remove(el)
		delete(c.items, k)
		return v, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// Put stores v under k, evicting the least recently used entry when full.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp := time.Time{}
	if c.ttl > 0 {
		now := c.now()
		exp = now.Add(c.ttl)
		// The least recently used entries that have expired go first:
		// a table a burst of keys filled shrinks as they age, not only
		// when each is looked up again.
		for last := c.ll.Back(); last != nil && !now.Before(last.Value.(*entry[K, V]).expires); last = c.ll.Back() {
			c.ll.Remove(last)
			delete(c.items, last.Value.(*entry[K, V]).key)
		}
	}
	if el, ok := c.items[k]; ok {
		e := el.Value.(*entry[K, V])
		e.val, e.expires = v, exp
		c.ll.MoveToFront(el)
		return
	}
	c.items[k] = c.ll.PushFront(&entry[K, V]{key: k, val: v, expires: exp})
	for c.ll.Len() > c.capacity {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*entry[K, V]).key)
		c.evictions++
	}
}

// SetCapacity changes the most entries the cache holds (<= 0 means 1),
// evicting the least recently used beyond it.
func (c *Cache[K, V]) SetCapacity(capacity int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capacity = max(capacity, 1)
	for c.ll.Len() > c.capacity {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*entry[K, V]).key)
		c.evictions++
	}
}

// Capacity returns the most entries the cache holds.
func (c *Cache[K, V]) Capacity() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.capacity
}

// Delete removes k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.ll.Remove(el)
		delete(c.items, k)
	}
}

// Len returns the number of stored entries (some may have expired).
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Evictions returns how many entries were evicted for lack of room.
func (c *Cache[K, V]) Evictions() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evictions
}
