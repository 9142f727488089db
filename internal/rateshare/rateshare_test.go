package rateshare

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// testTable is a table in this process's memory, as the workers' mapping
// holds it.
func testTable(t *testing.T) *Table {
	t.Helper()
	return seededTable(t, [16]byte{1, 2, 3})
}

// seededTable is a table with the hash key seed, in memory aligned as a
// mapping is (8 bytes at least).
func seededTable(t testing.TB, seed [16]byte) *Table {
	t.Helper()
	words := make([]uint64, Size/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), Size)
	format(mem, seed)
	tab, err := open(mem)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func view(t *testing.T, tab *Table, w int) *View {
	t.Helper()
	v, err := tab.Worker(w)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var client = netip.MustParseAddr("192.0.2.7")

// TestAllowGCRA: 1 + burst requests at once, then one per interval; a
// limited request is told how long until the next is allowed.
func TestAllowGCRA(t *testing.T) {
	v := view(t, testTable(t), 0)
	k := v.Key(Scope("site\x00/api"), client)
	const sec = int64(time.Second)
	now := int64(1000 * sec)
	for i := range 3 {
		if got, _ := v.Allow(k, now, sec, 2*sec); got != Allowed {
			t.Fatalf("request %d of a burst of 2: %v, want Allowed", i+1, got)
		}
	}
	got, wait := v.Allow(k, now, sec, 2*sec)
	if got != Limited || wait != sec {
		t.Fatalf("request 4 at once: %v, wait %v; want Limited for 1s", got, time.Duration(wait))
	}
	if got, _ := v.Allow(k, now+sec, sec, 2*sec); got != Allowed {
		t.Fatalf("a request an interval later: %v, want Allowed", got)
	}
	if got, _ := v.Allow(k, now+sec, sec, 2*sec); got != Limited {
		t.Fatalf("the next at the same time: %v, want Limited", got)
	}
	// Another route, another client: allowances of their own.
	if got, _ := v.Allow(v.Key(Scope("site\x00/other"), client), now, sec, 0); got != Allowed {
		t.Errorf("another route's first request: %v", got)
	}
	if got, _ := v.Allow(v.Key(Scope("site\x00/api"), netip.MustParseAddr("192.0.2.8")), now, sec, 0); got != Allowed {
		t.Errorf("another client's first request: %v", got)
	}
	// Long after, the whole burst is back.
	for i := range 3 {
		if got, _ := v.Allow(k, now+100*sec, sec, 2*sec); got != Allowed {
			t.Fatalf("request %d of a burst after a pause: %v", i+1, got)
		}
	}
}

// TestWorkersShareAllowance: the workers' views count one allowance per
// client, also when they ask at once: exactly 1 + burst requests pass.
func TestWorkersShareAllowance(t *testing.T) {
	tab := testTable(t)
	const sec = int64(time.Second)
	now := int64(5 * sec)
	v0, v1 := view(t, tab, 0), view(t, tab, 1)
	k := v0.Key(Scope("s"), client)
	if k1 := v1.Key(Scope("s"), client); k1 != k {
		t.Fatalf("two workers key one client apart: %+v, %+v", k, k1)
	}
	passed := 0
	for i := range 6 {
		v := v0
		if i%2 == 1 {
			v = v1
		}
		if got, _ := v.Allow(k, now, sec, 2*sec); got == Allowed {
			passed++
		}
	}
	if passed != 3 {
		t.Fatalf("two workers passed %d requests of a burst of 2, want 3", passed)
	}

	const workers, each, burst = 8, 200, 99
	var n atomic.Int64
	var wg sync.WaitGroup
	k = v0.Key(Scope("concurrent"), client)
	for w := range workers {
		v := view(t, tab, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				got, _ := v.Allow(k, now, sec, burst*sec)
				for got == Busy {
					// A holder descheduled (eight goroutines on few
					// processors, the race detector): the caller
					// counts alone then; here it asks again.
					got, _ = v.Allow(k, now, sec, burst*sec)
				}
				if got == Allowed {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n.Load() != burst+1 {
		t.Fatalf("%d workers at once passed %d requests, want 1 + burst = %d", workers, n.Load(), burst+1)
	}
}

// sameBucket returns n keys of scope that share one bucket.
func sameBucket(t *testing.T, v *View, scope uint64, n int) ([]Key, []netip.Addr) {
	t.Helper()
	byBucket := map[int][]int{}
	var keys []Key
	var addrs []netip.Addr
	for i := 0; i < 1<<22; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		k := v.Key(scope, a)
		keys, addrs = append(keys, k), append(addrs, a)
		byBucket[k.bucket] = append(byBucket[k.bucket], len(keys)-1)
		if idx := byBucket[k.bucket]; len(idx) == n {
			var ks []Key
			var as []netip.Addr
			for _, j := range idx {
				ks, as = append(ks, keys[j]), append(as, addrs[j])
			}
			return ks, as
		}
	}
	t.Fatal("no bucket filled")
	return nil, nil
}

// TestFullBucketForgetsEarliest: a key whose bucket is full takes the
// slot with the earliest time (the client nearest its whole allowance);
// the other clients stay counted.
func TestFullBucketForgetsEarliest(t *testing.T) {
	v := view(t, testTable(t), 0)
	scope := Scope("full")
	keys, _ := sameBucket(t, v, scope, SlotsPerBucket+1)
	const hour = int64(time.Hour)
	base := int64(10 * hour)
	// One request each, the third key's first (its time the earliest).
	order := []int{2, 0, 1, 3, 4, 5, 6, 7}
	for i, j := range order {
		if got, _ := v.Allow(keys[j], base+int64(i), hour, 0); got != Allowed {
			t.Fatalf("key %d's first request: %v", j, got)
		}
	}
	if got, _ := v.Allow(keys[SlotsPerBucket], base+10, hour, 0); got != Allowed {
		t.Fatalf("the ninth key's first request: %v", got)
	}
	for j := range SlotsPerBucket {
		got, _ := v.Allow(keys[j], base+20, hour, 0)
		if j == 2 && got != Allowed {
			t.Errorf("the key with the earliest time was kept (%v); another's was forgotten", got)
		}
		if j != 2 && got != Limited {
			t.Errorf("key %d, not the earliest, was forgotten: its second request within the hour %v", j, got)
		}
	}
}

// TestPassedSlotTaken: a slot whose time has passed goes to a new key
// before one still counting, with a free slot left or not.
func TestPassedSlotTaken(t *testing.T) {
	v := view(t, testTable(t), 0)
	keys, _ := sameBucket(t, v, Scope("passed"), SlotsPerBucket+1)
	const sec = int64(time.Second)
	// Slot times: key 0's passes at 1s; the others' at 1h.
	v.Allow(keys[0], 0, sec, 0)
	for j := 1; j < SlotsPerBucket; j++ {
		v.Allow(keys[j], 0, int64(time.Hour), 0)
	}
	v.Allow(keys[SlotsPerBucket], 2*sec, sec, 0)
	for j := 1; j < SlotsPerBucket; j++ {
		if got, _ := v.Allow(keys[j], 3*sec, int64(time.Hour), 0); got != Limited {
			t.Errorf("key %d, still counting, lost its slot to a new key beside a passed one: %v", j, got)
		}
	}
}

// TestBusyBucket: a bucket whose lock another worker holds answers Busy
// within the lock's bound (the caller counts alone); the supervisor's
// ClearWorker of that worker, dead, releases it, and no other worker's.
func TestBusyBucket(t *testing.T) {
	tab := testTable(t)
	v := view(t, tab, 0)
	k := v.Key(Scope("busy"), client)
	tab.lock(k.bucket).Store(3 + 1) // worker 3 died holding it
	before := Busies()
	if got, _ := v.Allow(k, 1, 1, 0); got != Busy {
		t.Fatalf("a locked bucket answered %v, want Busy", got)
	}
	if n := Busies() - before; n != 1 {
		t.Errorf("Busies grew by %d for one Busy verdict, want 1 (the metric of requests counted alone)", n)
	}
	tab.ClearWorker(2)
	if got, _ := v.Allow(k, 1, 1, 0); got != Busy {
		t.Fatalf("clearing worker 2 released worker 3's lock: %v", got)
	}
	tab.ClearWorker(3)
	if got, _ := v.Allow(k, 1, 1, 0); got != Allowed {
		t.Fatalf("after clearing the dead worker: %v, want Allowed", got)
	}
	if tab.lock(k.bucket).Load() != 0 {
		t.Fatal("Allow left its bucket locked")
	}
}

// TestOpenChecksLayout: a table of another size or version is refused.
func TestOpenChecksLayout(t *testing.T) {
	tab := testTable(t)
	if _, err := open(tab.mem[:Size-8]); err == nil {
		t.Error("a short table opened")
	}
	mem := append([]byte(nil), tab.mem...)
	mem[0] ^= 1
	if _, err := open(mem); err == nil {
		t.Error("a table with another magic opened")
	}
	if _, err := tab.Worker(maxWorkers); err == nil {
		t.Error("a worker index past the bound accepted")
	}
}

// BenchmarkKeyAllow: what a request to a route with rate_limit costs in
// a worker: its key and its count.
func BenchmarkKeyAllow(b *testing.B) {
	v, _ := seededTable(b, [16]byte{1}).Worker(0)
	scope := Scope("site\x00/login\x001")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		v.Allow(v.Key(scope, a), int64(i), int64(time.Second), 0)
	}
}

// TestKeySeeded: the keys depend on the table's secret seed, so that a
// client cannot work out an address whose tag is another's.
func TestKeySeeded(t *testing.T) {
	a := view(t, testTable(t), 0)
	b := view(t, seededTable(t, [16]byte{9, 9, 9}), 0)
	if ka, kb := a.Key(Scope("s"), client), b.Key(Scope("s"), client); ka == kb {
		t.Fatalf("two tables of different seeds key a client alike: %+v", ka)
	}
}

// TestRoomForCounts: the table keeps its documented Counts counts at
// once: with that many clients each inside its limit (one request of an
// hour's allowance), at most one in a thousand is forgotten (its next
// request passes, its client has its whole burst again). A table of only
// Counts slots, in buckets of SlotsPerBucket, forgets one in five of
// them: clients crowd some buckets while others stay half empty.
func TestRoomForCounts(t *testing.T) {
	v := view(t, testTable(t), 0)
	scope, hour := Scope("room"), int64(time.Hour)
	addr := func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 5: byte(i >> 16), 6: byte(i >> 8), 7: byte(i)})
	}
	for i := range Counts {
		if got, _ := v.Allow(v.Key(scope, addr(i)), 1, hour, 0); got != Allowed {
			t.Fatalf("client %d's first request: %v", i, got)
		}
	}
	forgotten := 0
	for i := range Counts {
		if got, _ := v.Allow(v.Key(scope, addr(i)), 2, hour, 0); got == Allowed {
			forgotten++
		}
	}
	if forgotten > Counts/1000 {
		t.Errorf("%d of %d clients inside their limits forgotten", forgotten, Counts)
	}
}

// TestLockOutwaitsADescheduledHolder: a bucket whose lock another worker
// holds for longer than a short spin (a holder descheduled by the kernel
// in the middle of its count, for a time slice of a few milliseconds) is
// waited for, not answered Busy: a Busy request is counted in its worker
// alone, where its client has its whole burst again.
func TestLockOutwaitsADescheduledHolder(t *testing.T) {
	tab := testTable(t)
	v := view(t, tab, 0)
	k := v.Key(Scope("slow"), client)
	lk := tab.lock(k.bucket)
	lk.Store(3 + 1) // worker 3 is in the middle of a count
	// It goes on after 5000 attempts here: about a millisecond, well
	// within the wait's bound.
	spinHook = func(try int) {
		if try == 5000 {
			lk.Store(0)
		}
	}
	t.Cleanup(func() { spinHook = nil })
	if got, _ := v.Allow(k, 1, 1, 0); got != Allowed {
		t.Fatalf("a lock held for 5000 attempts answered %v, want Allowed", got)
	}
}
