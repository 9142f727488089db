package testwait

import (
	"testing"
	"time"
)

func TestBound(t *testing.T) {
	for _, c := range []struct {
		scale float64
		d     time.Duration
		want  time.Duration
	}{
		{1, 30 * time.Second, 30 * time.Second},
		{0.3, 30 * time.Second, 9 * time.Second},
		{0.3, 5 * time.Second, Floor},
		{0.3, 2 * time.Second, 2 * time.Second},
	} {
		scale = c.scale
		if got := Bound(c.d); got != c.want {
			t.Errorf("scale %v: Bound(%v) = %v, want %v", c.scale, c.d, got, c.want)
		}
	}
	scale = 1
	for _, s := range []string{"", "x", "0", "-1", "2", "NaN"} {
		if parseScale(s) != 1 {
			t.Errorf("GMPROXY_TEST_WAIT=%q taken as %v, want 1", s, parseScale(s))
		}
	}
}
