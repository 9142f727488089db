package shmstore

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newMapped makes a table for entries sessions with Create and maps it
// with mapFD, as a worker does; both are released when the test ends.
func newMapped(tb testing.TB, entries int) (*os.File, *Store, []byte) {
	tb.Helper()
	f, err := Create(entries)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	mem, err := mapFD(int(f.Fd()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	t, err := open(mem)
	if err != nil {
		tb.Fatal(err)
	}
	return f, &Store{t: t}, mem
}

// TestSharedBetweenProcesses: a table made by Create and inherited by
// another process (as the supervisor hands it to its workers) is one
// table: what the child writes, the parent reads, and the other way.
func TestSharedBetweenProcesses(t *testing.T) {
	if os.Getenv("SHMSTORE_CHILD") == "1" {
		s, err := OpenFD("3")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		v, ok, err := s.Get(ctx, "from-parent")
		if err != nil || !ok || string(v) != "p" {
			t.Fatalf("child: %q %v %v", v, ok, err)
		}
		if err := s.Set(ctx, "from-child", []byte("c"), time.Minute); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The parent maps it on its own (not through OpenFD's per-process
	// cache), as a second worker would.
	f, s, _ := newMapped(t, 1000)
	ctx := context.Background()
	if err := s.Set(ctx, "from-parent", []byte("p"), time.Minute); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedBetweenProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SHMSTORE_CHILD=1")
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if v, ok, err := s.Get(ctx, "from-child"); !ok || err != nil || string(v) != "c" {
		t.Fatalf("the child's entry: %q %v %v", v, ok, err)
	}
}

// TestMapPopulates: a worker's mapping has every page of the table present
// from the start (no handshake waits for a page fault).
func TestMapPopulates(t *testing.T) {
	_, _, mem := newMapped(t, 20480)
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	absent := 0
	for _, v := range vec {
		if v&1 == 0 {
			absent++
		}
	}
	if absent > 0 {
		t.Errorf("%d of %d pages of a new mapping are not resident", absent, len(vec))
	}
}

func TestOpenFDErrors(t *testing.T) {
	if _, err := OpenFD("x"); err == nil {
		t.Error("OpenFD of a non-number succeeded")
	}
	f, err := os.CreateTemp(t.TempDir(), "notatable")
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(Size(64))
	defer f.Close()
	if _, err := mapFD(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFD(strconv.Itoa(int(f.Fd()))); err == nil {
		t.Error("a file of zeros opened as a table")
	}
	if !processAlive(uint32(os.Getpid())) {
		t.Error("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err == nil && processAlive(uint32(cmd.Process.Pid)) {
		t.Error("a process that exited and was reaped is alive")
	}
}

// BenchmarkHandshake is the store's work in one full TLCP handshake and
// one resumption on another worker: a Set of a new session under a random
// 32-byte ID, then a Get of it, in a table of the default size mapped from
// a memory file as a worker maps it. The keys are spread over the whole
// table, as session IDs are, so the figure includes the cost of touching
// memory the process has not touched lately (page faults until every page
// has been mapped, TLB and cache misses).
//
//	go test ./internal/sessionstore/shmstore -run '^$' -bench Handshake
func BenchmarkHandshake(b *testing.B) {
	_, s, _ := newMapped(b, 20480) // conf.DefaultSessionCacheSize
	ctx := context.Background()
	val := make([]byte, 300)
	key := make([]byte, 32)
	var x uint64 = 1
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range key { // xorshift: no allocation, no lock
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			key[i] = byte(x)
		}
		k := string(key)
		if err := s.Set(ctx, k, val, time.Minute); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := s.Get(ctx, k); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
