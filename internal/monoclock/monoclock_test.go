package monoclock

import (
	"testing"
	"time"
)

func TestNowAndOf(t *testing.T) {
	a := Now()
	if a <= 0 {
		t.Fatalf("Now() = %d, want > 0", a)
	}
	t0 := time.Now()
	time.Sleep(2 * time.Millisecond)
	b := Now()
	if b-a < int64(2*time.Millisecond) {
		t.Errorf("Now advanced %v over a 2 ms sleep", time.Duration(b-a))
	}
	if o := Of(t0); o < a || o > b {
		t.Errorf("Of(time.Now()) = %d, not between %d and %d", o, a, b)
	}
	if d := Of(t0.Add(time.Hour)) - Of(t0); d != int64(time.Hour) {
		t.Errorf("Of keeps durations: got %v", time.Duration(d))
	}
	// A wall-clock-only time (a deadline parsed or rounded) maps too.
	if d := Of(t0.Round(0).Add(time.Minute)) - Of(t0); d < int64(time.Minute-time.Second) || d > int64(time.Minute+time.Second) {
		t.Errorf("Of of a wall-clock time off by %v", time.Duration(d)-time.Minute)
	}
}

// TestOfFarFuture: an instant further away than a Duration reaches (a
// "never" deadline) maps to the latest instant, not past the earliest.
func TestOfFarFuture(t *testing.T) {
	now := Now()
	for _, at := range []time.Time{time.Now().Add(1<<63 - 1), time.Unix(1<<62, 0)} {
		if o := Of(at); o <= now {
			t.Errorf("Of(%v) = %d, not after Now() = %d", at, o, now)
		}
	}
	if o := Of(time.Time{}); o >= now {
		t.Errorf("Of(zero time) = %d, not before Now() = %d", o, now)
	}
}
