package sysmon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cycles is how many times the child goes idle and then makes a system
// call; it bounds the test's loop.
const cycles = 500

// TestSettingKeepsMonitorAsleep runs this test binary as a child, once
// with the runtime's default (schedtrace=0) and once with Setting, and
// counts the child's voluntary context switches (all threads, from /proc)
// over the same exchange: the parent pauses and sends a byte, the child (one P)
// waits for it in the netpoller with no timer pending, makes one system
// call through the scheduler's system-call state, and answers. By default
// each call wakes the monitor from its deep sleep; with Setting it does
// not, so the child must switch far less. This counts events, it does not
// time anything.
func TestSettingKeepsMonitorAsleep(t *testing.T) {
	if os.Getenv("GMPROXY_SYSMON_CHILD") == "1" {
		child()
		return
	}
	if testing.Short() {
		t.Skip("starts two child processes")
	}
	// A machine busy with other work adds switches to either count (a
	// thread preempted while it waits for the CPU): a pair of runs that
	// fails is measured again, three times at most; a Setting that does
	// not work fails all three.
	var failure string
	for range 3 {
		def := switches(t, "schedtrace=0")
		set := switches(t, Setting)
		t.Logf("voluntary context switches for %d idle-then-syscall cycles: default %d, with %s %d", cycles, def, Setting, set)
		// By default the main thread waits in epoll and the monitor is
		// woken and sleeps again once or twice in every cycle.
		switch {
		case def < 2*cycles:
			failure = fmt.Sprintf("default: %d switches for %d cycles, fewer than two per cycle: the exchange does not wake the monitor", def, cycles)
		case set*2 > def:
			failure = fmt.Sprintf("with %s: %d switches, default %d: want at most half the default", Setting, set, def)
		default:
			return
		}
	}
	t.Fatal(failure)
}

// switches runs the child with godebug in GODEBUG and returns its count.
func switches(t *testing.T, godebug string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSettingKeepsMonitorAsleep$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GMPROXY_SYSMON_CHILD=1", "GOMAXPROCS=1", "GODEBUG="+godebug)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	out := bufio.NewReader(outPipe)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	b := []byte{0}
	for range cycles {
		time.Sleep(200 * time.Microsecond) // the child idles meanwhile
		if _, err := in.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(out, b); err != nil {
			t.Fatal(err)
		}
	}
	in.Close()
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("child's count: %q, %v", line, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child's count %q: %v", line, err)
	}
	return n
}

// child answers each byte on stdin after one system call through the
// scheduler's system-call state, and at end of input prints how many
// voluntary context switches its threads made during the exchange.
func child() {
	runtime.GOMAXPROCS(1)
	// stdin is a pipe; non-blocking, its reads wait in the netpoller.
	if err := syscall.SetNonblock(0, true); err != nil {
		panic(err)
	}
	in := os.NewFile(0, "stdin")
	time.Sleep(50 * time.Millisecond) // let start-up settle
	before := voluntarySwitches()
	os.Stdout.WriteString("ready\n")
	b := []byte{0}
	for range cycles {
		if _, err := in.Read(b); err != nil {
			break
		}
		syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0)
		os.Stdout.Write(b)
	}
	fmt.Println(voluntarySwitches() - before)
}

// voluntarySwitches sums voluntary_ctxt_switches over the process's
// threads.
func voluntarySwitches() int {
	tasks, _ := os.ReadDir("/proc/self/task")
	total := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				total += n
			}
		}
	}
	return total
}
