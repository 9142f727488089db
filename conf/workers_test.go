package conf

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// TestWorkersPortZeroRefused: under more than one worker a listener on
// port 0 gave each worker a port the kernel chose for it alone, which no
// client can be told of; it is refused at its address with the fix. One
// worker, or workers left unset (gmproxy run decides), keep it.
func TestWorkersPortZeroRefused(t *testing.T) {
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		head    string
		refused bool
	}{{"workers: 2\n", true}, {"workers: 1\n", false}, {"", false}} {
		text := tc.head + strings.Replace(string(data), "0.0.0.0:443", "127.0.0.1:0", 1)
		_, err := Parse(path, []byte(text))
		var probs Problems
		errors.As(err, &probs)
		got := ""
		for _, p := range probs {
			if p.Severity == SeverityError {
				got += p.String() + "\n"
			}
		}
		want := strings.Contains(got, "listeners[0].address") && strings.Contains(got, "port 0 under workers 2") && strings.Contains(got, "set workers: 1")
		if want != tc.refused || (!tc.refused && got != "") {
			t.Errorf("%q with a listener on port 0: errors %q, want refused %v", tc.head, got, tc.refused)
		}
	}
}
