package lograte

import (
	"sync"
	"testing"
	"time"
)

// TestLimiter: the first line goes through, the ones within Interval of
// it are held back and counted, and the first line after the interval
// goes through with that count.
func TestLimiter(t *testing.T) {
	var clock int64 = 1
	l := &Limiter{Interval: int64(time.Second), now: func() int64 { return clock }}
	if ok, n := l.Allow(); !ok || n != 0 {
		t.Fatalf("first line: %v %d", ok, n)
	}
	for i := 0; i < 5; i++ {
		clock += int64(100 * time.Millisecond)
		if ok, _ := l.Allow(); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	clock += int64(600 * time.Millisecond) // 1.1 s after the first
	if ok, n := l.Allow(); !ok || n != 5 {
		t.Fatalf("after the interval: %v, suppressed %d, want true 5", ok, n)
	}
	if ok, _ := l.Allow(); ok {
		t.Fatal("a second line at once let through")
	}
}

// TestLimiterConcurrent: of many lines at once, one goes through.
func TestLimiterConcurrent(t *testing.T) {
	l := &Limiter{Interval: int64(time.Hour)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	through := 0
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := l.Allow(); ok {
				mu.Lock()
				through++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if through != 1 {
		t.Fatalf("%d lines let through at once, want 1", through)
	}
}
