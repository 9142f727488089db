package sessioncache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/lru"
)

func state(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }

func mustGet(t *testing.T, c *Cache, id string, want []byte) {
	t.Helper()
	got, ok := c.Get(id)
	if !ok {
		t.Fatalf("Get(%q): missing", id)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes %x…, want %d bytes %x…", id, len(got), got[:min(8, len(got))], len(want), want[:min(8, len(want))])
	}
}

func mustMiss(t *testing.T, c *Cache, id string) {
	t.Helper()
	if _, ok := c.Get(id); ok {
		t.Fatalf("Get(%q): present, want missing", id)
	}
}

func TestRecencyAndCapacity(t *testing.T) {
	c := New(2, 0)
	c.Put("a", state(108, 'a'), 0)
	c.Put("b", state(300, 'b'), 0)
	mustGet(t, c, "a", state(108, 'a')) // a becomes the most recent
	c.Put("c", state(1, 'c'), 0)        // evicts b
	mustMiss(t, c, "b")
	mustGet(t, c, "a", state(108, 'a'))
	mustGet(t, c, "c", state(1, 'c'))
	if n, ev := c.Stats(); n != 2 || ev != 1 {
		t.Fatalf("len %d evictions %d, want 2 and 1", n, ev)
	}
	c.Put("a", state(700, 'A'), 0) // replaced, not evicted
	mustGet(t, c, "a", state(700, 'A'))
	if n, ev := c.Stats(); n != 2 || ev != 1 {
		t.Fatalf("after replacing: len %d evictions %d", n, ev)
	}
	c.Delete("a")
	mustMiss(t, c, "a")
	if c.Len() != 1 {
		t.Fatalf("len %d after Delete", c.Len())
	}
	c.Put("", nil, 0) // an empty ID and state are a session like any other
	mustGet(t, c, "", []byte{})
}

func TestLifetime(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(10, time.Hour)
	c.SetClock(func() time.Time { return now })
	c.Put("cache-ttl", state(10, 1), 0)
	c.Put("own", state(10, 2), time.Minute)
	c.Put("longer", state(10, 3), 2*time.Hour) // the cache's ttl still bounds it
	now = now.Add(time.Minute - time.Nanosecond)
	mustGet(t, c, "own", state(10, 2))
	now = now.Add(time.Nanosecond)
	mustMiss(t, c, "own")
	if c.Len() != 2 {
		t.Fatalf("len %d: the expired session was not dropped by its lookup", c.Len())
	}
	now = now.Add(time.Hour - time.Minute - time.Nanosecond)
	mustGet(t, c, "cache-ttl", state(10, 1))
	mustGet(t, c, "longer", state(10, 3))
	now = now.Add(time.Nanosecond)
	mustMiss(t, c, "cache-ttl")
	mustMiss(t, c, "longer")

	forever := New(1, 0)
	forever.SetClock(func() time.Time { return now })
	forever.Put("x", state(5, 5), 0)
	now = now.Add(1000 * time.Hour)
	mustGet(t, forever, "x", state(5, 5))
}

func TestByteBudget(t *testing.T) {
	// 100 sessions: a 100 KiB arena, room for ten 10 KiB states.
	c := New(100, 0)
	big := 10 * 1024
	for i := range 10 {
		c.Put(fmt.Sprint(i), state(big, byte(i)), 0)
	}
	if n, ev := c.Stats(); n != 10 || ev != 0 {
		t.Fatalf("len %d evictions %d, want 10 and 0", n, ev)
	}
	mustGet(t, c, "0", state(big, 0)) // 1 is now the least recent
	c.Put("small", state(100, 's'), 0)
	mustMiss(t, c, "1")
	mustGet(t, c, "0", state(big, 0))
	// 16 KiB: 79 chunks are free, the least recent session gives 80.
	c.Put("max", state(MaxState, 'm'), 0)
	mustGet(t, c, "max", state(MaxState, 'm'))
	mustMiss(t, c, "2")
	mustGet(t, c, "3", state(big, 3))
	if _, ev := c.Stats(); ev != 2 {
		t.Fatalf("evictions %d, want 2", ev)
	}
	if len(c.chunks) > 100*BudgetPerSession/ChunkSize {
		t.Fatalf("arena of %d chunks is over its budget", len(c.chunks))
	}
}

func TestLimits(t *testing.T) {
	c := New(4, 0)
	long := strings.Repeat("i", MaxIDLen+1)
	c.Put(long, state(10, 1), 0)
	mustMiss(t, c, long)
	c.Put(strings.Repeat("i", MaxIDLen), state(10, 1), 0)
	mustGet(t, c, strings.Repeat("i", MaxIDLen), state(10, 1))
	roomy := New(100, 0) // its arena could take the state
	roomy.Put("huge", state(MaxState+1, 2), 0)
	mustMiss(t, roomy, "huge")
	// IDs that share a prefix or differ only in length are distinct.
	c.Put("ab", state(3, 'x'), 0)
	c.Put("ab\x00", state(3, 'y'), 0)
	mustGet(t, c, "ab", state(3, 'x'))
	mustGet(t, c, "ab\x00", state(3, 'y'))
	mustMiss(t, c, "a")
	if n := New(MaxCapacity+1, 0).capacity; n != MaxCapacity {
		t.Errorf("capacity %d, want at most %d", n, MaxCapacity)
	}
}

func TestCopies(t *testing.T) {
	c := New(4, 0)
	in := state(200, 7)
	c.Put("s", in, 0)
	in[0] = 0 // the caller reuses its buffer
	out, _ := c.Get("s")
	out[1] = 0 // the caller changes what it got
	mustGet(t, c, "s", state(200, 7))
}

// TestClear: every session goes, its chunks zeroed and free for new ones;
// the cache works on as before.
func TestClear(t *testing.T) {
	c := New(3, 0)
	c.Put("a", state(2*ChunkSize, 0xAA), 0)
	c.Put("b", state(1, 0xBB), 0)
	c.Clear()
	if n := c.Len(); n != 0 {
		t.Fatalf("Len after Clear = %d", n)
	}
	if _, ok := c.Get("a"); ok {
		t.Fatal("a survived Clear")
	}
	for i := range c.chunks {
		for _, v := range c.chunks[i] {
			if v == 0xAA || v == 0xBB {
				t.Fatalf("chunk %d still holds a cleared state's bytes", i)
			}
		}
	}
	c.Put("c", state(1, 0xCC), 0)
	if v, ok := c.Get("c"); !ok || len(v) != 1 || v[0] != 0xCC {
		t.Fatalf("Get after Clear and Put = %x %v", v, ok)
	}
}

func TestFreedChunksZeroed(t *testing.T) {
	c := New(2, 0)
	secret := state(3*ChunkSize-5, 0xAA)
	c.Put("a", secret, 0)
	c.Put("b", state(ChunkSize, 0xBB), 0)
	c.Delete("a")
	c.Put("c", state(1, 0xCC), 0)
	c.Put("d", state(1, 0xDD), 0) // evicts b
	for i := range c.chunks {
		for _, v := range c.chunks[i] {
			if v == 0xAA || v == 0xBB {
				t.Fatalf("chunk %d still holds a freed state's bytes", i)
			}
		}
	}
}

// TestNoPointers keeps the cache's bulk memory out of the collector's
// scanning: the index's key and value, the slots and the arena's chunks
// hold no pointers.
func TestNoPointers(t *testing.T) {
	c := New(1, 0)
	for _, typ := range []reflect.Type{
		reflect.TypeOf(c.index).Key(), reflect.TypeOf(c.index).Elem(),
		reflect.TypeOf(c.slots).Elem(), reflect.TypeOf(c.chunks).Elem(), reflect.TypeOf(c.link).Elem(),
	} {
		if p := pointerIn(typ); p != "" {
			t.Errorf("%v holds a pointer: %s", typ, p)
		}
	}
}

func pointerIn(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	case reflect.Array:
		return pointerIn(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if p := pointerIn(t.Field(i).Type); p != "" {
				return t.Field(i).Name + ": " + p
			}
		}
		return ""
	}
	return t.String()
}

func TestAllocs(t *testing.T) {
	c := New(64, 0)
	ids := make([]string, 256)
	for i := range ids {
		ids[i] = fmt.Sprintf("%032d", i)
	}
	st := state(108, 1)
	for _, id := range ids { // the arena, slots and index reach their size
		c.Put(id, st, time.Minute)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		c.Put(ids[i%len(ids)], st, time.Minute)
		i++
	}); n != 0 {
		t.Errorf("Put: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		c.Get(ids[len(ids)-1])
	}); n > 1 {
		t.Errorf("Get: %v allocations, want at most 1 (the copy)", n)
	}
}

// model is the cache's specification: an LRU list of sessions, evicting
// from the back until the count and the chunks fit.
type model struct {
	capacity, maxChunks int
	order               []string // most recent first
	states              map[string][]byte
	evictions           uint64
}

func chunksOf(n int) int { return (n + ChunkSize - 1) / ChunkSize }

func (m *model) used() int {
	n := 0
	for _, s := range m.states {
		n += chunksOf(len(s))
	}
	return n
}

func (m *model) touch(id string) {
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
	m.order = slices.Insert(m.order, 0, id)
}

func (m *model) drop(id string) {
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
	delete(m.states, id)
}

func (m *model) put(id string, st []byte) {
	if len(id) > MaxIDLen || len(st) > MaxState {
		return
	}
	m.drop(id)
	for len(m.states) >= m.capacity || m.used()+chunksOf(len(st)) > m.maxChunks {
		m.drop(m.order[len(m.order)-1])
		m.evictions++
	}
	m.states[id] = slices.Clone(st)
	m.touch(id)
}

// runOps applies the operations encoded in ops to a cache and the model and
// compares every result.
func runOps(t *testing.T, capacity int, ops []byte) {
	c := New(capacity, 0)
	m := &model{capacity: c.capacity, maxChunks: c.maxChunks, states: map[string][]byte{}}
	for len(ops) >= 4 {
		op, idb, size := ops[0]%4, ops[1]%16, int(binary.BigEndian.Uint16(ops[2:4]))%(MaxState+200)
		ops = ops[4:]
		id := fmt.Sprintf("id-%d", idb)
		if idb == 15 {
			id = strings.Repeat("x", MaxIDLen+1)
		}
		switch op {
		case 0, 1:
			st := state(size, byte(size)^idb)
			c.Put(id, st, 0)
			m.put(id, st)
		case 2:
			got, ok := c.Get(id)
			want, wok := m.states[id]
			if ok != wok || !bytes.Equal(got, want) {
				t.Fatalf("Get(%q) = %d bytes, %v; the model has %d bytes, %v", id, len(got), ok, len(want), wok)
			}
			if ok {
				m.touch(id)
			}
		case 3:
			c.Delete(id)
			m.drop(id)
		}
		if n, ev := c.Stats(); n != len(m.states) || ev != m.evictions {
			t.Fatalf("len %d evictions %d; the model has %d and %d", n, ev, len(m.states), m.evictions)
		}
		if used := len(c.chunks) - c.freeCount; used != m.used() {
			t.Fatalf("%d chunks in use; the model's states take %d", used, m.used())
		}
	}
}

func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, capacity := range []int{1, 3, 20} {
		ops := make([]byte, 4*3000)
		for i := range ops {
			ops[i] = byte(r.UintN(256))
		}
		// Mostly small states, as sessions without client certificates.
		for i := 2; i < len(ops); i += 4 {
			if r.UintN(4) != 0 {
				ops[i] = 0
			}
		}
		runOps(t, capacity, ops)
	}
}

func FuzzAgainstModel(f *testing.F) {
	f.Add(uint8(2), []byte{0, 1, 0, 108, 2, 1, 0, 0, 0, 2, 0x40, 0, 2, 2, 0, 0, 3, 1, 0, 0})
	f.Add(uint8(1), []byte{0, 1, 0x3f, 0xff, 0, 2, 0x40, 0x01, 2, 1, 0, 0})
	f.Fuzz(func(t *testing.T, capacity uint8, ops []byte) {
		runOps(t, int(capacity%8)+1, ops)
	})
}

// BenchmarkCollector measures a collection with a full cache of the
// default size (20480 sessions of 108 bytes) held by this package and by
// the lru.Cache of entries the daemon used before, and the time of one Put
// that evicts. gc-ns is the wall time of runtime.GC (one P).
func BenchmarkCollector(b *testing.B) {
	const n = 20480
	// id returns the i-th session ID: made per use, so that the benchmark
	// holds no IDs of its own for the collector to mark.
	id := func(i int) string {
		var buf [32]byte
		binary.BigEndian.PutUint64(buf[24:], uint64(i))
		return string(buf[:])
	}
	st := state(108, 1)
	type entry struct {
		state   []byte
		expires time.Time
	}
	gc := func(keep any) float64 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		runtime.GC()
		start := time.Now()
		const cycles = 20
		for range cycles {
			runtime.GC()
		}
		runtime.KeepAlive(keep)
		return float64(time.Since(start).Nanoseconds()) / cycles
	}
	b.Run("sessioncache", func(b *testing.B) {
		c := New(n, time.Hour)
		for i := range n {
			c.Put(id(i), st, 0)
		}
		gcNS := gc(c)
		b.ReportAllocs()
		i := n
		for b.Loop() {
			c.Put(id(i), st, time.Minute)
			i++
		}
		b.ReportMetric(gcNS, "gc-ns")
	})
	b.Run("lru", func(b *testing.B) {
		c := lru.New[string, entry](n, time.Hour)
		for i := range n {
			c.Put(id(i), entry{state: slices.Clone(st), expires: time.Now()})
		}
		gcNS := gc(c)
		b.ReportAllocs()
		i := n
		for b.Loop() {
			// As the daemon did: the key string and the state are the
			// handshake's allocations, the entry and element the cache's.
			c.Put(id(i), entry{state: slices.Clone(st), expires: time.Now().Add(time.Minute)})
			i++
		}
		b.ReportMetric(gcNS, "gc-ns")
	})
	b.Run("empty", func(b *testing.B) {
		gcNS := gc(nil)
		for b.Loop() {
		}
		b.ReportMetric(gcNS, "gc-ns")
	})
}

// TestExpiredNotCountedAsEvicted: a full cache whose least recent
// sessions have expired makes room by dropping them, and that is no
// eviction: the count (gmproxy_session_cache_evictions_total) says that
// live sessions were lost for want of room, and a cache that only ever
// holds a few live sessions must not report it on every new one.
func TestExpiredNotCountedAsEvicted(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(3, time.Minute)
	c.SetClock(func() time.Time { return now })
	c.Put("a", state(10, 1), 0)
	c.Put("b", state(10, 2), 0)
	c.Put("c", state(10, 3), 0)
	now = now.Add(time.Minute)
	c.Put("d", state(10, 4), 0) // a expired: dropped, not evicted
	c.Put("e", state(10, 5), 0) // b likewise
	if n, ev := c.Stats(); n != 3 || ev != 0 {
		t.Fatalf("len %d evictions %d, want 3 and 0", n, ev)
	}
	c.Put("f", state(10, 6), time.Hour) // c likewise; the cache's ttl bounds f
	c.Put("g", state(10, 7), 0)         // d is live: evicted
	mustMiss(t, c, "d")
	mustGet(t, c, "e", state(10, 5))
	if n, ev := c.Stats(); n != 3 || ev != 1 {
		t.Fatalf("len %d evictions %d, want 3 and 1", n, ev)
	}
}
