// Command wakeup measures how late this machine wakes a thread that sleeps:
// the floor under the latency tail of any server measured on it.
//
// A handshake over loopback wakes the server and the client several times
// (each waits for the other's flight). When a CPU has nothing to run, the
// kernel halts it; on a virtual machine without guest halt-polling the
// halt leaves the guest, and the wake-up waits for the host to run the
// virtual CPU again. That delay is the machine's, not the server's: it
// lands in every server's p99 alike. bench/edge.sh (BENCH_LATENCY=1) runs
// this command on the server's and the client's CPUs before its latency
// runs, so that the report shows it beside the handshake p99.
//
// The thread sleeps -n times for -sleep with nanosleep(2) on a locked OS
// thread (Go's timers would add the poller's millisecond rounding), and
// the command prints one JSON object with the lateness quantiles in µs:
// how much longer than -sleep each sleep took.
//
// Usage:
//
//	taskset -c 0 go run ./bench/wakeup [-n 5000] [-sleep 400us]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
)

// summary is the printed result; durations are in µs.
type summary struct {
	SleepUS float64 `json:"sleep_us"`
	N       int     `json:"n"`
	P50     float64 `json:"p50_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p999_us"`
	Max     float64 `json:"max_us"`
}

// summarize sorts late in place and returns its quantiles (nearest rank).
func summarize(sleep time.Duration, late []time.Duration) summary {
	slices.Sort(late)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	q := func(p float64) float64 {
		if len(late) == 0 {
			return 0
		}
		i := int(p*float64(len(late))+0.999999) - 1
		return us(late[max(0, min(i, len(late)-1))])
	}
	s := summary{SleepUS: us(sleep), N: len(late), P50: q(0.50), P99: q(0.99), P999: q(0.999)}
	if len(late) > 0 {
		s.Max = us(late[len(late)-1])
	}
	return s
}

// measure sleeps n times for d on one OS thread and returns each sleep's
// lateness.
func measure(n int, d time.Duration) ([]time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	late := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := sleep(d); err != nil {
			return nil, err
		}
		late = append(late, time.Since(t0)-d)
	}
	return late, nil
}

func main() {
	n := flag.Int("n", 5000, "sleeps")
	d := flag.Duration("sleep", 400*time.Microsecond, "length of one sleep")
	flag.Parse()
	if *n < 1 || *n > 1_000_000 || *d <= 0 || *d > time.Second {
		fmt.Fprintln(os.Stderr, "wakeup: -n must be 1..1000000 and -sleep 1ns..1s")
		os.Exit(2)
	}
	late, err := measure(*n, *d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakeup:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(summarize(*d, late))
}
