package lru

import (
	"testing"
	"time"
)

func TestCapacityAndRecency(t *testing.T) {
	c := New[string, int](2, 0)
	c.Put("a", 1)
	c.Put("b", 2)
	if _, ok := c.Get("a"); !ok { // a becomes most recent
		t.Fatal("a missing")
	}
	c.Put("c", 3) // evicts b
	if _, ok := c.Get("b"); ok {
		t.Fatal("b should have been evicted")
	}
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("a = %v, %v", v, ok)
	}
	if c.Len() != 2 || c.Evictions() != 1 {
		t.Fatalf("len %d evictions %d", c.Len(), c.Evictions())
	}
	c.Put("a", 10)
	if v, _ := c.Get("a"); v != 10 {
		t.Fatalf("update lost: %d", v)
	}
	c.Delete("a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("deleted entry still present")
	}
}

func TestTTL(t *testing.T) {
	now := time.Unix(0, 0)
	c := New[int, string](10, time.Minute)
	c.SetClock(func() time.Time { return now })
	c.Put(1, "x")
	now = now.Add(59 * time.Second)
	if _, ok := c.Get(1); !ok {
		t.Fatal("entry expired early")
	}
	now = now.Add(time.Second)
	if _, ok := c.Get(1); ok {
		t.Fatal("entry outlived its TTL")
	}
	if c.Len() != 0 {
		t.Fatal("expired entry not removed on access")
	}
}

// TestExpiredPrunedOnPut: a Put drops the least recently used entries
// that have expired, without their being looked up; they are not counted
// as evictions.
func TestExpiredPrunedOnPut(t *testing.T) {
	now := time.Unix(0, 0)
	c := New[int, string](10, time.Minute)
	c.SetClock(func() time.Time { return now })
	for i := range 5 {
		c.Put(i, "x")
	}
	now = now.Add(30 * time.Second)
	c.Put(5, "y")
	now = now.Add(30 * time.Second) // 0..4 expired, 5 not
	c.Put(6, "z")
	if c.Len() != 2 || c.Evictions() != 0 {
		t.Fatalf("len %d, evictions %d; want the 5 expired entries gone (2 left), none evicted", c.Len(), c.Evictions())
	}
	if _, ok := c.Get(5); !ok {
		t.Fatal("a live entry was pruned")
	}
}

// TestSetCapacity: lowering the capacity evicts the least recently used
// beyond it; raising it lets the cache grow again.
func TestSetCapacity(t *testing.T) {
	c := New[int, int](4, 0)
	for i := range 4 {
		c.Put(i, i)
	}
	c.Get(0)
	c.SetCapacity(2)
	if c.Len() != 2 || c.Capacity() != 2 || c.Evictions() != 2 {
		t.Fatalf("len %d, capacity %d, evictions %d", c.Len(), c.Capacity(), c.Evictions())
	}
	if _, ok := c.Get(0); !ok {
		t.Fatal("the most recently used entry was evicted")
	}
	if _, ok := c.Get(1); ok {
		t.Fatal("the least recently used entry was kept")
	}
	c.SetCapacity(3)
	c.Put(7, 7)
	if c.Len() != 3 {
		t.Fatalf("len %d after raising the capacity to 3", c.Len())
	}
}
