package rateshare

import (
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSharedMappings: two mappings of one table (as the workers' and the
// supervisor's) count one allowance, and Now is the machine's monotonic
// clock.
func TestSharedMappings(t *testing.T) {
	f, err := Create()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := Map(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenFD(strconv.Itoa(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	va, vb := view(t, a, 0), view(t, b, 1)
	k := va.Key(Scope("s"), client)
	now := Now()
	if got, _ := va.Allow(k, now, int64(time.Hour), 0); got != Allowed {
		t.Fatalf("first request: %v", got)
	}
	if got, _ := vb.Allow(k, now, int64(time.Hour), 0); got != Limited {
		t.Fatalf("the second request, through the other mapping: %v, want Limited", got)
	}
	if err := f.Truncate(Size / 2); err == nil {
		t.Error("the table's file could be shrunk")
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	if d := Now() - ts.Nano(); d < 0 || d > int64(time.Second) {
		t.Errorf("Now is %v from CLOCK_MONOTONIC", time.Duration(d))
	}
	if _, err := OpenFD("x"); err == nil {
		t.Error("OpenFD took a name that is no descriptor")
	}
}
