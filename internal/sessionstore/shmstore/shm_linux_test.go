package shmstore

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
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
	if absent, all := absentPages(t, mem); absent > 0 {
		t.Errorf("%d of %d pages of a new mapping are not resident", absent, all)
	}
}

// TestTouchPopulates: the fallback for kernels without
// MADV_POPULATE_WRITE makes every page of a lazily mapped table present,
// and leaves its contents as they were.
func TestTouchPopulates(t *testing.T) {
	f, err := Create(20480)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(Size(20480)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if absent, all := absentPages(t, mem); absent < all/2 {
		t.Fatalf("a new lazy mapping already has %d of %d pages", all-absent, all)
	}
	header := append([]byte(nil), mem[:headerSize]...)
	touch(mem)
	if absent, all := absentPages(t, mem); absent > 0 {
		t.Errorf("%d of %d pages are not resident after touch", absent, all)
	}
	if string(mem[:headerSize]) != string(header) {
		t.Error("touch changed the table's header")
	}
	if _, err := open(mem); err != nil {
		t.Errorf("the touched table no longer opens: %v", err)
	}
}

// absentPages counts the pages of mem that mincore reports not resident.
func absentPages(t *testing.T, mem []byte) (absent, all int) {
	t.Helper()
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, v := range vec {
		if v&1 == 0 {
			absent++
		}
	}
	return absent, len(vec)
}

// TestMapAsksForHugePages: the table's mapping carries the huge page
// advice (VmFlags "hg" in /proc/self/smaps) whatever the kernel's
// setting, and where the setting allows it (HugePages), the kernel maps
// the table in 2 MiB pages.
func TestMapAsksForHugePages(t *testing.T) {
	_, _, mem := newMapped(t, 20480)
	flags, pmdKB := smapsOf(t, mem)
	if !slices.Contains(strings.Fields(flags), "hg") {
		t.Errorf("the table's mapping has VmFlags %q: no hg (MADV_HUGEPAGE)", flags)
	}
	if !HugePages() {
		t.Logf("shmem_enabled gives no huge pages here: 4 KiB pages (ShmemPmdMapped %d kB)", pmdKB)
		return
	}
	if pmdKB == 0 {
		t.Errorf("shmem_enabled allows huge pages, but none of the %d MiB table is mapped in them", len(mem)>>20)
	}
}

// smapsOf returns the VmFlags and the ShmemPmdMapped figure (kB) of the
// mapping that starts at mem in /proc/self/smaps.
func smapsOf(t *testing.T, mem []byte) (flags string, pmdKB int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	start := strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&mem[0]))), 16) + "-"
	in, found := false, false
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, start) {
			in, found = true, true
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(line, "ShmemPmdMapped:"); ok {
			pmdKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			return strings.TrimSpace(v), pmdKB
		}
	}
	if !found {
		t.Fatalf("no mapping starting at %s in /proc/self/smaps", start)
	}
	t.Fatal("no VmFlags line in /proc/self/smaps")
	return "", 0
}

func TestHugePagesFrom(t *testing.T) {
	for in, want := range map[string]bool{
		"always within_size advise [never] deny force\n": false,
		"always within_size [advise] never deny force\n": true,
		"always [within_size] advise never deny force\n": true,
		"[always] within_size advise never deny force\n": true,
		"always within_size advise never [deny] force\n": false,
		"always within_size advise never deny [force]\n": true,
		"":            false,
		"garbage [x]": false,
	} {
		if got := hugePagesFrom(in); got != want {
			t.Errorf("hugePagesFrom(%q) = %v, want %v", in, got, want)
		}
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

// TestSizeSealed: the table's file cannot be shrunk or grown by a worker
// holding its descriptor (a shrink would make every other worker's next
// access past the end a SIGBUS), and the seals cannot be lifted.
func TestSizeSealed(t *testing.T) {
	f, s, _ := newMapped(t, 1000)
	size := Size(1000)
	if err := f.Truncate(headerSize); err == nil {
		t.Error("the table's file was shrunk")
	}
	if err := f.Truncate(2 * size); err == nil {
		t.Error("the table's file was grown")
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); err == nil {
		t.Error("a seal could be added")
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != size {
		t.Fatalf("size %v, %v; want %d", fi, err, size)
	}
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(ctx, "k"); !ok || err != nil || string(v) != "v" {
		t.Fatalf("Get: %q %v %v", v, ok, err)
	}
}
