package conf

import (
	"runtime"
	"testing"
)

// TestWorkerCount: unset and auto are the CPUs Go computes on (GOMAXPROCS,
// which follows the CPU affinity and a container's CPU limit), capped at
// MaxWorkers; a number is itself.
func TestWorkerCount(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for _, tc := range []struct {
		workers string
		want    int
	}{{"", 3}, {WorkersAuto, 3}, {"1", 1}, {"2", 2}, {"256", 256}} {
		c := &Config{Workers: tc.workers}
		if got := c.WorkerCount(); got != tc.want {
			t.Errorf("workers %q with GOMAXPROCS 3: %d, want %d", tc.workers, got, tc.want)
		}
	}
	runtime.GOMAXPROCS(MaxWorkers + 10)
	if got := (&Config{}).WorkerCount(); got != MaxWorkers {
		t.Errorf("unset workers with GOMAXPROCS %d: %d, want %d", MaxWorkers+10, got, MaxWorkers)
	}
}
