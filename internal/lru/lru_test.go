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
