package main

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	late := make([]time.Duration, 0, 1000)
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		late = append(late, time.Duration(i)*time.Microsecond)
	}
	s := summarize(400*time.Microsecond, late)
	want := summary{SleepUS: 400, N: 1000, P50: 500, P99: 990, P999: 999, Max: 1000}
	if s != want {
		t.Fatalf("summarize = %+v, want %+v", s, want)
	}
	if z := summarize(time.Millisecond, nil); z.N != 0 || z.P99 != 0 || z.Max != 0 {
		t.Fatalf("empty: %+v", z)
	}
	one := summarize(time.Millisecond, []time.Duration{3 * time.Microsecond})
	if one.P50 != 3 || one.P999 != 3 || one.Max != 3 {
		t.Fatalf("one sample: %+v", one)
	}
}

// TestMeasure: every sleep lasts at least its length, so no lateness is
// negative, and the quantiles are ordered.
func TestMeasure(t *testing.T) {
	late, err := measure(50, 200*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(late) != 50 {
		t.Fatalf("%d sleeps, want 50", len(late))
	}
	for _, l := range late {
		if l < 0 {
			t.Fatalf("a 200µs sleep ended %v early", -l)
		}
	}
	s := summarize(200*time.Microsecond, late)
	if !(s.P50 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Fatalf("quantiles out of order: %+v", s)
	}
}
