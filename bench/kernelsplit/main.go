// Command kernelsplit splits a server's CPU time per operation by where the
// kernel spent it, and its user-space time by part (crypto, TLS library,
// server code, runtime), from the call-graph samples of `perf record -g`.
//
// /proc gives a process's kernel time as one figure (stime). To see whether
// two servers that make similar system calls pay the kernel alike, and for
// what, bench/edge.sh (BENCH_PERF=1) records the server's threads with
// `perf record -e cpu-clock -g -p PIDS` during a bounded s_time run and pipes
// `perf script -F comm,ip,sym,dso` into this command with the number of
// operations the run made. It prints one JSON object:
//
//   - user_us and kernel_us: sampled time per operation in user space and in
//     the kernel (sampling adds its own overhead; compare servers measured
//     the same way, not these figures with /proc's);
//   - syscalls: kernel time per operation by system call (the frame under
//     the kernel's syscall entry, e.g. write, read, close, accept4), plus
//     "entry and exit" for the entry's own work and "interrupts" for kernel
//     samples outside any system call;
//   - user_parts: user time per operation by what the sampled function is
//     part of: sm2, sm3, sm4 (the SM crypto, elliptic-curve and big-number
//     arithmetic under sm2), tls (the rest of the TLS/TLCP library), http
//     (the server's own code: connections, HTTP, proxy; for Go the standard
//     library outside crypto too), runtime (Go's runtime; glibc's allocator
//     and memory functions), stubs (system-call stubs and the vDSO), other;
//     userparts.go has the rules;
//   - wakeups_us: the part of the kernel time spent waking another task
//     (try_to_wake_up and the socket and epoll callbacks that call it). On
//     loopback the writer's kernel delivers the data to the receiver and
//     wakes it, so a server pays for its peers' wake-ups.
//
// Usage:
//
//	perf script -i perf.data -F comm,ip,sym,dso | go run ./bench/kernelsplit -ops N -hz 2999
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// A sample is one call-graph sample: its frames from the leaf outwards.
type sample struct {
	comm   string
	frames []frame
}

type frame struct {
	sym    string
	dso    string // the object's path, "[kernel.kallsyms]" or "[vdso]"
	kernel bool
}

// Split is the time per operation, in microseconds.
type Split struct {
	Ops       float64            `json:"ops"`
	Samples   int                `json:"samples"`
	UserUS    float64            `json:"user_us"`
	KernelUS  float64            `json:"kernel_us"`
	WakeupsUS float64            `json:"wakeups_us"`
	Syscalls  map[string]float64 `json:"syscalls"`
	// UserParts is the user-space time by what the sampled function is
	// part of (userparts.go), every part in the order of UserParts, so that
	// a report takes its columns from here.
	UserParts []PartTime `json:"user_parts"`
}

// PartTime is the user-space time per operation of one part.
type PartTime struct {
	Part string  `json:"part"`
	US   float64 `json:"us"`
}

// readSamples parses perf script's output: a sample starts with an
// unindented header line (the command name); its frames follow, indented,
// as "ADDRESS SYMBOL+OFFSET (DSO)"; a blank line ends it.
func readSamples(r io.Reader, each func(sample)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur *sample
	flush := func() {
		if cur != nil {
			each(*cur)
			cur = nil
		}
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] != ' ' && line[0] != '\t':
			flush()
			cur = &sample{comm: strings.Fields(line)[0]}
		case cur != nil:
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			sym, _, _ := strings.Cut(f[1], "+")
			dso := ""
			if i := strings.LastIndex(line, " ("); i >= 0 && strings.HasSuffix(line, ")") {
				dso = line[i+2 : len(line)-1]
			}
			cur.frames = append(cur.frames, frame{sym: sym, dso: dso, kernel: dso == "[kernel.kallsyms]"})
		}
	}
	flush()
	return sc.Err()
}

// syscallName is the system call a kernel stack is in: the frame called by
// the syscall entry (do_syscall_64, through the x64_sys_call dispatcher),
// with the kernel's prefixes removed. A frame there that is no system
// call's handler (the entry's own work: enabling interrupts, the exit to
// user mode) counts as "entry and exit"; a stack without the syscall entry
// (timer and other interrupts, page faults taken in user space) as
// "interrupts".
func syscallName(frames []frame) string {
	for i, f := range frames {
		if f.sym != "do_syscall_64" {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			s := frames[j].sym
			if s == "x64_sys_call" {
				continue
			}
			for _, p := range []string{"__x64_sys_", "__se_sys_", "__do_sys_", "ksys_", "__sys_", "do_"} {
				if strings.HasPrefix(s, p) {
					return strings.TrimPrefix(s, p)
				}
			}
			return entryExit
		}
		return entryExit
	}
	return "interrupts"
}

const entryExit = "entry and exit"

// wakeupFrames are the kernel functions that wake another task; a sample
// under any of them counts as a wake-up.
var wakeupFrames = map[string]bool{
	"try_to_wake_up": true, "sock_def_readable": true, "sock_def_wakeup": true,
	"sk_stream_write_space": true, "ep_poll_callback": true, "__wake_up": true,
	"__wake_up_common": true, "__wake_up_sync_key": true, "wake_up_q": true,
}

// split reads perf script's samples of the commands whose name starts with
// comm (all when empty) and returns the time per operation.
func split(r io.Reader, comm string, ops, hz float64) (Split, error) {
	s := Split{Ops: ops, Syscalls: map[string]float64{}}
	var user, kernel, wake int
	calls, parts := map[string]int{}, map[string]int{}
	err := readSamples(r, func(x sample) {
		if len(x.frames) == 0 || !strings.HasPrefix(x.comm, comm) {
			return
		}
		s.Samples++
		if !x.frames[0].kernel {
			user++
			parts[userPart(x.frames[0])]++
			return
		}
		kernel++
		calls[syscallName(x.frames)]++
		for _, f := range x.frames {
			if f.kernel && wakeupFrames[f.sym] {
				wake++
				break
			}
		}
	})
	if err != nil {
		return s, err
	}
	us := func(n int) float64 {
		if ops <= 0 || hz <= 0 {
			return 0
		}
		return float64(n) / hz / ops * 1e6
	}
	s.UserUS, s.KernelUS, s.WakeupsUS = us(user), us(kernel), us(wake)
	for name, n := range calls {
		s.Syscalls[name] = us(n)
	}
	for _, name := range UserParts {
		s.UserParts = append(s.UserParts, PartTime{Part: name, US: us(parts[name])})
	}
	return s, nil
}

func main() {
	ops := flag.Float64("ops", 0, "operations the recorded run made (required)")
	hz := flag.Float64("hz", 2999, "the sampling frequency given to perf record -F")
	comm := flag.String("comm", "", "count only the samples of commands whose name starts with this (for perf record -C)")
	top := flag.Int("top", 10, "system calls kept (the rest are summed as \"rest\")")
	flag.Parse()
	if *ops <= 0 {
		fmt.Fprintln(os.Stderr, "kernelsplit: -ops N is required (the operations of the recorded run)")
		os.Exit(2)
	}
	s, err := split(os.Stdin, *comm, *ops, *hz)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kernelsplit:", err)
		os.Exit(1)
	}
	s.Syscalls = keepTop(s.Syscalls, *top)
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		fmt.Fprintln(os.Stderr, "kernelsplit:", err)
		os.Exit(1)
	}
}

// keepTop keeps the n largest entries and sums the others as "rest".
func keepTop(m map[string]float64, n int) map[string]float64 {
	if len(m) <= n {
		return m
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]] > m[names[j]] })
	out := map[string]float64{}
	for i, k := range names {
		if i < n {
			out[k] = m[k]
		} else {
			out["rest"] += m[k]
		}
	}
	return out
}
