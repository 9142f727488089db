// Package speed is the engine of `gmproxy speed`, an `openssl speed` for the
// SM algorithms as gmproxy uses them: SM2 operations per second, SM3,
// HMAC-SM3 and SM4 modes at the usual buffer sizes, and (registered by the
// command) the record layers of TLCP and TLS 1.3-SM driven through real
// connections.
package speed

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSizes are the buffer sizes of `openssl speed`, plus 16 KiB (a full
// record).
var DefaultSizes = []int{16, 64, 256, 1024, 8192, 16384}

// Alg is one benchmarked algorithm.
type Alg struct {
	// Name is the selection name, e.g. "sm4-gcm", "sm2-sign".
	Name string
	// Group is the family name that selects all its members ("sm2", "sm4",
	// "record"...).
	Group string
	// Ops is true for algorithms measured in operations per second (SM2);
	// otherwise throughput is measured at each buffer size.
	Ops bool
	// Desc is a short description shown by -list.
	Desc string
	// Sizes replaces the default sizes for this algorithm (not sizes the
	// user chose).
	Sizes []int
	// New prepares one worker: it returns the step that processes one buffer
	// of size bytes (or performs one operation) and a cleanup function (may be
	// nil). Setup cost is not measured.
	New func(size int) (step func() error, cleanup func(), err error)
}

// Options control a run.
type Options struct {
	Seconds float64 // per algorithm and size; default 3
	Multi   int     // parallel workers; default 1
	Sizes   []int   // default DefaultSizes
}

// SizeResult is the throughput at one buffer size.
type SizeResult struct {
	Bytes       int     `json:"bytes"`
	Ops         int64   `json:"ops"`
	Seconds     float64 `json:"seconds"`
	BytesPerSec float64 `json:"bytes_per_second"`
}

// Result is the outcome for one algorithm.
type Result struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Unit  string `json:"unit"` // "bytes" or "ops"
	// Ops algorithms.
	Ops       int64   `json:"ops,omitempty"`
	Seconds   float64 `json:"seconds,omitempty"`
	OpsPerSec float64 `json:"ops_per_second,omitempty"`
	SecPerOp  float64 `json:"seconds_per_op,omitempty"`
	// Throughput algorithms.
	Sizes []SizeResult `json:"sizes,omitempty"`
	Error string       `json:"error,omitempty"`
}

// Report is a whole run.
type Report struct {
	Impl    Impl     `json:"implementation"`
	Seconds float64  `json:"seconds"`
	Multi   int      `json:"multi"`
	Results []Result `json:"results"`
	// Notes are remarks such as rows that are not available in this build.
	Notes []string `json:"notes,omitempty"`
}

var (
	regMu    sync.Mutex
	registry []Alg
)

// Register adds algorithms to the registry (the command registers the record
// layer rows this way). Later registrations of a name replace earlier ones.
func Register(algs ...Alg) {
	regMu.Lock()
	defer regMu.Unlock()
outer:
	for _, a := range algs {
		for i := range registry {
			if registry[i].Name == a.Name {
				registry[i] = a
				continue outer
			}
		}
		registry = append(registry, a)
	}
}

// Algs returns the registered algorithms in registration order.
func Algs() []Alg {
	regMu.Lock()
	defer regMu.Unlock()
	return append([]Alg(nil), registry...)
}

// Select resolves names (algorithm names or group names, case-insensitive;
// none or "all" means every algorithm) to algorithms in registration order.
func Select(names []string) ([]Alg, error) {
	all := Algs()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		n = strings.ToLower(n)
		found := false
		for _, a := range all {
			if n == "all" || a.Name == n || a.Group == n {
				want[a.Name] = true
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("speed: unknown algorithm %q (try -list)", n)
		}
	}
	var out []Alg
	for _, a := range all {
		if want[a.Name] {
			out = append(out, a)
		}
	}
	return out, nil
}

// Run measures algs. progress, when not nil, is called before each measurement.
func Run(algs []Alg, opts Options, progress func(name string, size int)) Report {
	if opts.Seconds <= 0 {
		opts.Seconds = 3
	}
	if opts.Multi <= 0 {
		opts.Multi = 1
	}
	defaultSizes := len(opts.Sizes) == 0
	if defaultSizes {
		opts.Sizes = DefaultSizes
	}
	rep := Report{Impl: DetectImpl(), Seconds: opts.Seconds, Multi: opts.Multi}
	dur := time.Duration(opts.Seconds * float64(time.Second))
	for _, a := range algs {
		r := Result{Name: a.Name, Group: a.Group, Unit: "bytes"}
		if a.Ops {
			r.Unit = "ops"
			if progress != nil {
				progress(a.Name, 0)
			}
			ops, secs, err := measure(a, 0, opts.Multi, dur)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Ops, r.Seconds = ops, secs
				if secs > 0 && ops > 0 {
					r.OpsPerSec = float64(ops) / secs
					r.SecPerOp = secs / float64(ops)
				}
			}
			rep.Results = append(rep.Results, r)
			continue
		}
		sizes := opts.Sizes
		if a.Sizes != nil && defaultSizes {
			sizes = a.Sizes
		}
		for _, size := range sizes {
			if progress != nil {
				progress(a.Name, size)
			}
			ops, secs, err := measure(a, size, opts.Multi, dur)
			if err != nil {
				r.Error = err.Error()
				break
			}
			sr := SizeResult{Bytes: size, Ops: ops, Seconds: secs}
			if secs > 0 {
				sr.BytesPerSec = float64(ops) * float64(size) / secs
			}
			r.Sizes = append(r.Sizes, sr)
		}
		rep.Results = append(rep.Results, r)
	}
	return rep
}

// measure runs multi workers of a at size for about d. It returns the total
// operations and the mean wall time of the workers' timed loops, so that
// ops/secs is the aggregate rate.
func measure(a Alg, size, multi int, d time.Duration) (int64, float64, error) {
	type worker struct {
		step    func() error
		cleanup func()
	}
	workers := make([]worker, 0, multi)
	defer func() {
		for _, w := range workers {
			if w.cleanup != nil {
				w.cleanup()
			}
		}
	}()
	for i := 0; i < multi; i++ {
		step, cleanup, err := a.New(size)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: setup: %w", a.Name, err)
		}
		workers = append(workers, worker{step, cleanup})
	}
	var (
		stop    atomic.Bool
		total   atomic.Int64
		wg      sync.WaitGroup
		errMu   sync.Mutex
		firstEr error
		start   = make(chan struct{})
		elapsed = make([]time.Duration, multi)
	)
	for i, w := range workers {
		wg.Add(1)
		go func(i int, step func() error) {
			defer wg.Done()
			<-start
			t0 := time.Now()
			var n int64
			for { // at least one operation per worker, even on a starved machine
				if err := step(); err != nil {
					errMu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					errMu.Unlock()
					stop.Store(true)
					break
				}
				n++
				if stop.Load() {
					break
				}
			}
			elapsed[i] = time.Since(t0)
			total.Add(n)
		}(i, w.step)
	}
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	close(start)
	wg.Wait()
	timer.Stop()
	if firstEr != nil {
		return 0, 0, fmt.Errorf("%s: %w", a.Name, firstEr)
	}
	var sum time.Duration
	for _, e := range elapsed {
		sum += e
	}
	mean := sum.Seconds() / float64(multi)
	if total.Load() == 0 {
		return 0, mean, errors.New(a.Name + ": no operation completed")
	}
	return total.Load(), mean, nil
}

// Groups returns the group names in registration order.
func Groups() []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range Algs() {
		if !seen[a.Group] {
			seen[a.Group] = true
			out = append(out, a.Group)
		}
	}
	return out
}

// sortedSizes returns the union of the sizes of the throughput results.
func sortedSizes(rs []Result) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range rs {
		for _, s := range r.Sizes {
			if !seen[s.Bytes] {
				seen[s.Bytes] = true
				out = append(out, s.Bytes)
			}
		}
	}
	sort.Ints(out)
	return out
}
