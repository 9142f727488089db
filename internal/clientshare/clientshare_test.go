package clientshare

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// newTable is a table for workers workers in this process's memory (the
// layout and the atomics are the same as in a shared mapping).
func newTable(t *testing.T, workers int) *Table {
	t.Helper()
	mem := make([]byte, Size(workers))
	format(mem, workers, [16]byte{1, 2, 3})
	tb, err := open(mem)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func views(t *testing.T, tb *Table) []*View {
	t.Helper()
	var vs []*View
	for w := 0; w < tb.Workers(); w++ {
		v, err := tb.Worker(w)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

var (
	clientA = netip.MustParseAddr("192.0.2.1")
	clientB = netip.MustParseAddr("2001:db8::")
)

// TestLimitsAcrossWorkers: a client's connections and handshakes are
// bounded by their sum over the workers, whichever worker admits them.
func TestLimitsAcrossWorkers(t *testing.T) {
	vs := views(t, newTable(t, 3))
	var slots []int
	for i := 0; i < 5; i++ {
		s, v := vs[i%3].Admit("l", clientA, 5, 0)
		if v != Admitted {
			t.Fatalf("connection %d: %v", i, v)
		}
		slots = append(slots, s)
	}
	for w, v := range vs {
		if _, got := v.Admit("l", clientA, 5, 0); got != TooManyConns {
			t.Errorf("worker %d admitted a 6th connection: %v", w, got)
		}
	}
	// Other clients, and the same client on another listener, have
	// counts of their own.
	if _, got := vs[0].Admit("l", clientB, 5, 0); got != Admitted {
		t.Errorf("another client: %v", got)
	}
	if _, got := vs[0].Admit("other", clientA, 5, 0); got != Admitted {
		t.Errorf("another listener: %v", got)
	}
	vs[1].Release(slots[1], true, true) // worker 1's connection closes
	if _, got := vs[2].Admit("l", clientA, 5, 0); got != Admitted {
		t.Errorf("after a release: %v", got)
	}

	// Handshakes: a finished handshake frees a handshake, not the
	// connection.
	vs = views(t, newTable(t, 2))
	s0, _ := vs[0].Admit("l", clientA, 3, 2)
	vs[1].Admit("l", clientA, 3, 2)
	if _, got := vs[1].Admit("l", clientA, 3, 2); got != TooManyHandshakes {
		t.Errorf("a 3rd handshake: %v", got)
	}
	vs[0].Release(s0, true, false)
	if _, got := vs[1].Admit("l", clientA, 3, 2); got != Admitted {
		t.Errorf("after a handshake ended: %v", got)
	}
	if _, got := vs[0].Admit("l", clientA, 3, 0); got != TooManyConns {
		t.Errorf("a 4th connection: %v", got)
	}
}

// TestClearWorker: the counts of a worker that died are cleared before
// its replacement starts; the others' stay.
func TestClearWorker(t *testing.T) {
	tb := newTable(t, 2)
	vs := views(t, tb)
	vs[0].Admit("l", clientA, 3, 0)
	vs[1].Admit("l", clientA, 3, 0)
	vs[1].Admit("l", clientA, 3, 0)
	if _, got := vs[0].Admit("l", clientA, 3, 0); got != TooManyConns {
		t.Fatalf("a 4th connection: %v", got)
	}
	tb.ClearWorker(1)
	for i := 0; i < 2; i++ {
		if _, got := vs[0].Admit("l", clientA, 3, 0); got != Admitted {
			t.Fatalf("after worker 1's counts were cleared, connection %d: %v", i, got)
		}
	}
	if _, got := vs[1].Admit("l", clientA, 3, 0); got != TooManyConns {
		t.Errorf("worker 0's 3 connections not counted: %v", got)
	}
}

// TestNoRoom: a client whose slots are all held by other clients is not
// counted here (NoRoom); a slot whose counts fell to zero is taken over.
func TestNoRoom(t *testing.T) {
	tb := newTable(t, 2)
	v := views(t, tb)[0]
	id := tb.key("l", clientA)
	start := int(id>>1) % Slots
	for j := 0; j < probeLen; j++ {
		s := (start + j) % Slots
		tb.id(s).Store((uint64(1000+2*j) | 1) << versionBits)
		tb.counter(s, 1).Store(conn)
	}
	before := NoRooms()
	if _, got := v.Admit("l", clientA, 3, 0); got != NoRoom {
		t.Fatalf("a full window: %v", got)
	}
	if n := NoRooms() - before; n != 1 {
		t.Errorf("NoRooms grew by %d for one NoRoom verdict, want 1 (the metric of clients counted alone)", n)
	}
	last := (start + probeLen - 1) % Slots
	tb.counter(last, 1).Store(0) // that client closed its connection
	s, got := v.Admit("l", clientA, 3, 0)
	if got != Admitted || s != last || tagOf(tb.id(last).Load()) != id {
		t.Fatalf("an idle slot not taken over: %v, slot %d (want %d)", got, s, last)
	}
}

// TestConcurrent: workers admitting and releasing one client at once never
// hold more than the limit together, and leave nothing counted.
func TestConcurrent(t *testing.T) {
	tb := newTable(t, 4)
	vs := views(t, tb)
	const limit = 3
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for _, v := range vs {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000; i++ {
					s, got := v.Admit("l", clientA, limit, 0)
					if got == NoRoom {
						t.Error("NoRoom in an empty table")
						return
					}
					if got != Admitted {
						continue
					}
					n := held.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					held.Add(-1)
					v.Release(s, true, true)
				}
			}()
		}
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Errorf("%d connections held at once, limit %d", m, limit)
	}
	for s := 0; s < Slots; s++ {
		if !tb.idle(s) {
			t.Fatalf("slot %d still counts after every release", s)
		}
	}
}

// TestOpenChecksLayout: a table of another layout is refused.
func TestOpenChecksLayout(t *testing.T) {
	good := make([]byte, Size(2))
	format(good, 2, [16]byte{})
	if _, err := open(good); err != nil {
		t.Fatal(err)
	}
	for name, mem := range map[string][]byte{
		"short":     good[:headerSize-1],
		"truncated": good[:len(good)-8],
		"magic":     append([]byte{0}, good[1:]...),
	} {
		if _, err := open(mem); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	if _, err := (&Table{workers: 2}).Worker(2); err == nil {
		t.Error("worker 2 of 2")
	}
}

// BenchmarkAdmitRelease is one connection's cost in the table: Admit and
// Release of one client among many.
//
//	go test ./internal/clientshare -run '^$' -bench AdmitRelease
func BenchmarkAdmitRelease(b *testing.B) {
	mem := make([]byte, Size(2))
	format(mem, 2, [16]byte{4})
	tb, _ := open(mem)
	v, _ := tb.Worker(0)
	clients := make([]netip.Addr, 1024)
	for i := range clients {
		clients[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, got := v.Admit("127.0.0.1:443", clients[i%len(clients)], 1024, 64)
		if got != Admitted {
			b.Fatal(got)
		}
		v.Release(s, true, true)
	}
}

// sameStart returns n client addresses whose slot windows on listener
// start at the same slot.
func sameStart(t *testing.T, tb *Table, listener string, n int) []netip.Addr {
	t.Helper()
	byStart := map[int][]netip.Addr{}
	for i := range 1 << 22 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		st := int(tb.key(listener, a)>>1) % Slots
		byStart[st] = append(byStart[st], a)
		if len(byStart[st]) == n {
			return byStart[st]
		}
	}
	t.Fatal("no addresses with one start")
	return nil
}

// onceAt runs f the first time Admit reaches point (the hook is removed
// with the test).
func onceAt(t *testing.T, point string, f func()) {
	var done bool
	testHook = func(p string) {
		if p == point && !done {
			done = true
			f()
		}
	}
	t.Cleanup(func() { testHook = nil })
}

// TestReclaimLosesToAnAdmission: a worker reclaiming an idle slot for
// another client, while the slot's own client is admitted between the
// idle check and the claim, does not take the slot over: the admitted
// connection stays counted for its client, whose limit then holds.
func TestReclaimLosesToAnAdmission(t *testing.T) {
	tb := newTable(t, 2)
	vs := views(t, tb)
	cs := sameStart(t, tb, "l", 2)
	x, y := cs[0], cs[1]
	s, got := vs[0].Admit("l", x, 1, 0)
	if got != Admitted {
		t.Fatal(got)
	}
	vs[0].Release(s, true, true) // x's slot is idle, still tagged x
	onceAt(t, "claim", func() {
		// Worker 1 has found x's slot idle and is about to claim it for
		// y: worker 0 admits x there first.
		if _, got := vs[0].Admit("l", x, 1, 0); got != Admitted {
			t.Errorf("x in its own slot: %v", got)
		}
	})
	ys, got := vs[1].Admit("l", y, 1, 0)
	if got != Admitted {
		t.Fatalf("y: %v", got)
	}
	if ys == s {
		t.Error("y took over x's slot with x's connection counted in it")
	}
	if _, got := vs[1].Admit("l", x, 1, 0); got != TooManyConns {
		t.Errorf("x's second connection with a limit of one: %v", got)
	}
}

// TestOneSlotPerClient: two workers claiming slots for one client at the
// same moment (one scanning while a slot before the other's frees up)
// end up counting in one slot, so the limit holds over both.
func TestOneSlotPerClient(t *testing.T) {
	tb := newTable(t, 2)
	vs := views(t, tb)
	cs := sameStart(t, tb, "l", 3)
	z, x, c := cs[0], cs[1], cs[2]
	zs, _ := vs[0].Admit("l", z, 0, 0) // the window's first slot: busy
	xs, _ := vs[0].Admit("l", x, 0, 0) // its second
	vs[0].Release(xs, true, true)      // idle
	onceAt(t, "claim", func() {
		// Worker 1 chose x's idle slot for c; meanwhile z leaves and
		// worker 0 admits c in z's slot, now the first free one.
		vs[0].Release(zs, true, true)
		if _, got := vs[0].Admit("l", c, 1, 0); got != Admitted {
			t.Errorf("c on worker 0: %v", got)
		}
	})
	if _, got := vs[1].Admit("l", c, 1, 0); got != TooManyConns {
		t.Errorf("c's second connection, on worker 1, with a limit of one: %v", got)
	}
	if w := tb.id(xs).Load(); w != 0 && tagOf(w) == tb.key("l", c) {
		t.Error("the second slot claimed for c kept")
	}
}

// FuzzDamagedSlots: whatever the slots around a client's hold (another
// worker's counts, a worker killed mid-update, any writer of the shared
// mapping), Admit returns; it admits only within the limits, summed over
// every worker's word of the slot it chose; it changes no counter but its
// own, and that by one connection and one handshake when it admits and
// not at all when it refuses; and Release gives back exactly what it
// counted.
func FuzzDamagedSlots(f *testing.F) {
	f.Add([]byte{}, []byte{192, 0, 2, 1}, uint8(1), uint8(1))
	f.Add([]byte{0xff}, []byte{192, 0, 2, 1}, uint8(0), uint8(0))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, make([]byte, 16), uint8(2), uint8(0))
	const workers = 2
	mem := make([]byte, Size(workers))
	f.Fuzz(func(t *testing.T, junk, addr []byte, maxConns, maxHandshakes uint8) {
		client, ok := netip.AddrFromSlice(addr)
		if !ok {
			return
		}
		clear(mem)
		format(mem, workers, [16]byte{1, 2, 3})
		tb, err := open(mem)
		if err != nil {
			t.Fatal(err)
		}
		start := int(tb.key("l", client)>>1) % Slots
		if len(junk) > 0 {
			for j := 0; j < probeLen*slotSize(workers); j++ {
				s := (start + j/slotSize(workers)) % Slots
				mem[headerSize+s*slotSize(workers)+j%slotSize(workers)] = junk[j%len(junk)]
			}
		}
		v, _ := tb.Worker(0)
		other := make([]uint64, probeLen)
		for j := range other {
			other[j] = tb.counter((start+j)%Slots, 1).Load()
		}
		own := make([]uint64, probeLen)
		for j := range own {
			own[j] = tb.counter((start+j)%Slots, 0).Load()
		}
		slot, verdict := v.Admit("l", client, int(maxConns), int(maxHandshakes))
		for j := range probeLen {
			s := (start + j) % Slots
			if got := tb.counter(s, 1).Load(); got != other[j] {
				t.Fatalf("slot %d: another worker's word went from %x to %x", s, other[j], got)
			}
			want := own[j]
			if verdict == Admitted && s == slot {
				want += conn + hs
			}
			if got := tb.counter(s, 0).Load(); got != want {
				t.Fatalf("slot %d (%v in %d): own word %x, want %x", s, verdict, slot, got, want)
			}
		}
		if verdict != Admitted {
			return
		}
		if d := (slot - start + Slots) % Slots; d >= probeLen {
			t.Fatalf("admitted in slot %d, %d past the client's first", slot, d)
		}
		var conns, handshakes uint64
		for w := range workers {
			c := tb.counter(slot, w).Load()
			conns += c >> 32
			handshakes += c & 0xffffffff
		}
		if maxConns > 0 && conns > uint64(maxConns) || maxHandshakes > 0 && handshakes > uint64(maxHandshakes) {
			t.Fatalf("admitted with %d connections, %d handshakes (limits %d, %d)", conns, handshakes, maxConns, maxHandshakes)
		}
		v.Release(slot, true, true)
		if got := tb.counter(slot, 0).Load(); got != own[(slot-start+Slots)%Slots] {
			t.Fatalf("Release left %x, want %x", got, own[(slot-start+Slots)%Slots])
		}
	})
}

// TestRoomForClients: the table has room for its documented Clients
// addresses with connections open at once: filled with that many, at most
// one in a thousand falls outside it (NoRoom: counted by each worker
// alone, so with N workers at N times its limits). A table of only
// Clients slots, probed probeLen slots from each address's hash, turns
// clients away from about 40% full, and thousands of them when full.
func TestRoomForClients(t *testing.T) {
	vs := views(t, newTable(t, 2))
	noRoom := 0
	for i := range Clients {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 5: byte(i >> 16), 6: byte(i >> 8), 7: byte(i)})
		if _, got := vs[i%2].Admit("l", a, 1, 1); got == NoRoom {
			noRoom++
		} else if got != Admitted {
			t.Fatalf("client %d's first connection: %v", i, got)
		}
	}
	if noRoom > Clients/1000 {
		t.Errorf("%d of %d clients found no room in the shared table", noRoom, Clients)
	}
}
