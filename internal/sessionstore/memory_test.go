package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessioncache"
)

// TestBoundedMemoryBoundsBytes: the supervisor's socket store (a bounded
// Memory) holds at most BudgetPerSession bytes per entry of its limit, as
// the in-process cache does, not its limit of the largest values: sessions
// of clients that send long certificate chains (up to MaxState each) would
// otherwise take 16 times the memory its size was planned for.
func TestBoundedMemoryBoundsBytes(t *testing.T) {
	const limit = 100
	m := NewBoundedMemory(limit)
	ctx := context.Background()
	big := make([]byte, sessioncache.MaxState)
	for i := range limit {
		if err := m.Set(ctx, fmt.Sprint("k", i), big, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if held, budget := m.Len()*len(big), limit*sessioncache.BudgetPerSession; held > budget {
		t.Fatalf("%d entries of %d bytes held: %d bytes, over the budget of %d", m.Len(), len(big), held, budget)
	}
	if _, found, _ := m.Get(ctx, fmt.Sprint("k", limit-1)); !found {
		t.Fatal("the newest entry was dropped")
	}
	// Small entries still fill the count, the big ones making room.
	for i := range limit {
		m.Set(ctx, fmt.Sprint("s", i), []byte("v"), time.Minute)
	}
	if n := m.Len(); n != limit {
		t.Fatalf("%d entries after small writes, want %d", n, limit)
	}
	// A value over the whole budget is refused, as too large.
	if err := m.Set(ctx, "huge", make([]byte, limit*sessioncache.BudgetPerSession+1), time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a value over the budget: %v, want ErrTooLarge", err)
	}
	if _, err := m.AddOrGet(ctx, "huge", make([]byte, limit*sessioncache.BudgetPerSession+1), time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AddOrGet of a value over the budget: %v, want ErrTooLarge", err)
	}
	if n := m.Len(); n != limit {
		t.Fatalf("%d entries after refusals, want %d", n, limit)
	}
}
