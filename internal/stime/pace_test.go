package stime

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestWaiter: a waiter sleeps at least the time asked, in one step or in
// several (longer than maxWaitStep), and returns false for an ended
// context; on Linux it is the timerfd waiter.
func TestWaiter(t *testing.T) {
	w := newWaiter()
	defer w.close()
	if _, fd := w.(*fdWaiter); runtime.GOOS == "linux" && !fd {
		t.Fatalf("Linux waiter is %T, not the timerfd one", w)
	}
	ctx := context.Background()
	for _, d := range []time.Duration{300 * time.Microsecond, 2 * time.Millisecond, maxWaitStep + 5*time.Millisecond} {
		t0 := time.Now()
		if !w.wait(ctx, d) {
			t.Fatalf("wait(%v) = false", d)
		}
		if got := time.Since(t0); got < d {
			t.Fatalf("wait(%v) returned after %v", d, got)
		}
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if w.wait(ended, time.Millisecond) {
		t.Fatal("wait with an ended context = true")
	}
	// A context that ends during a long wait ends it at the next step.
	soon, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	if w.wait(soon, 10*time.Second) {
		t.Fatal("a 10 s wait outlived its context")
	}
	if !(timerWaiter{}).wait(ctx, time.Millisecond) || (timerWaiter{}).wait(ended, time.Hour) {
		t.Fatal("timer waiter")
	}
}
