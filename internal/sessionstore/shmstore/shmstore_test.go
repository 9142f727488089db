package shmstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// memTable is a table in ordinary memory, on a clock the test moves.
func memTable(t testing.TB, entries int) (*Store, *time.Time) {
	t.Helper()
	mem := make([]byte, Size(entries))
	format(mem, entries, 42)
	tb, err := open(mem)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	tb.now = func() time.Time { return now }
	return &Store{t: tb}, &now
}

func TestStore(t *testing.T) {
	s, now := memTable(t, 1024)
	ctx := context.Background()
	if _, ok, err := s.Get(ctx, "a"); ok || err != nil {
		t.Fatalf("empty store: found %v, %v", ok, err)
	}
	if err := s.Set(ctx, "a", []byte("one"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(ctx, "a"); !ok || err != nil || string(v) != "one" {
		t.Fatalf("Get a: %q %v %v", v, ok, err)
	}
	if err := s.Set(ctx, "a", []byte("two"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.Get(ctx, "a"); string(v) != "two" {
		t.Fatalf("after a second Set: %q, want two", v)
	}
	// AddOrGet: the first writer wins.
	if v, err := s.AddOrGet(ctx, "a", []byte("three"), time.Minute); err != nil || string(v) != "two" {
		t.Fatalf("AddOrGet on a live key: %q %v, want two", v, err)
	}
	if v, err := s.AddOrGet(ctx, "b", []byte("bee"), time.Second); err != nil || string(v) != "bee" {
		t.Fatalf("AddOrGet on a new key: %q %v", v, err)
	}
	vs, err := s.GetMany(ctx, []string{"a", "missing", "b"})
	if err != nil || len(vs) != 3 || string(vs[0]) != "two" || vs[1] != nil || string(vs[2]) != "bee" {
		t.Fatalf("GetMany: %q %v", vs, err)
	}
	// Expiry.
	*now = now.Add(2 * time.Second)
	if _, ok, _ := s.Get(ctx, "b"); ok {
		t.Error("b outlived its ttl")
	}
	if v, err := s.AddOrGet(ctx, "b", []byte("new"), time.Minute); err != nil || string(v) != "new" {
		t.Errorf("AddOrGet on an expired key: %q %v, want the new value", v, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, "a"); ok {
		t.Error("a found after Delete")
	}
	// Sizes.
	if err := s.Set(ctx, strings.Repeat("k", MaxKey+1), nil, time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long key: %v, want ErrTooLarge", err)
	}
	if err := s.Set(ctx, "big", make([]byte, MaxValue+1), time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long value: %v, want ErrTooLarge", err)
	}
	full := bytes.Repeat([]byte{7}, MaxValue)
	k := strings.Repeat("k", MaxKey)
	if err := s.Set(ctx, k, full, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Get(ctx, k); !ok || !bytes.Equal(v, full) {
		t.Error("an entry of the largest key and value did not come back whole")
	}
	// A value returned is a copy: changing it changes nothing stored.
	v, _, _ := s.Get(ctx, k)
	v[0] = 0
	if v2, _, _ := s.Get(ctx, k); v2[0] != 7 {
		t.Error("a value returned by Get aliases the table")
	}
	s.Close()
	if _, _, err := s.Get(ctx, k); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	s2, _ := memTable(t, 8)
	if err := s2.Set(ctx2, "a", nil, time.Minute); err == nil {
		t.Error("Set with a cancelled context succeeded")
	}
}

// TestEviction: a full bucket gives up the entry that expires first.
func TestEviction(t *testing.T) {
	s, _ := memTable(t, Ways) // one bucket
	if s.t.nbuckets != 1 {
		t.Fatalf("%d buckets", s.t.nbuckets)
	}
	ctx := context.Background()
	for i := range Ways {
		ttl := time.Duration(10+i) * time.Minute
		if i == 3 {
			ttl = time.Minute // expires first
		}
		s.Set(ctx, fmt.Sprint("k", i), []byte{byte(i)}, ttl)
	}
	s.Set(ctx, "new", []byte("n"), time.Hour)
	for i := range Ways {
		_, ok, _ := s.Get(ctx, fmt.Sprint("k", i))
		if ok == (i == 3) {
			t.Errorf("k%d present: %v", i, ok)
		}
	}
	if _, ok, _ := s.Get(ctx, "new"); !ok {
		t.Error("the new entry is missing")
	}
}

// TestLockHolders: a lock held by a process that died is taken over; one
// held by a live process makes the call fail within lockWait, not hang.
func TestLockHolders(t *testing.T) {
	s, _ := memTable(t, Ways)
	s.t.now = time.Now
	const dead, live = 4_000_001, 4_000_002
	s.t.alive = func(pid uint32) bool { return pid != dead }
	ctx := context.Background()
	b := s.t.bucket(s.t.hash("k"))
	s.t.lockWord(b).Store(dead)
	if err := s.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatalf("Set with the lock of a dead process: %v", err)
	}
	if v, ok, err := s.Get(ctx, "k"); !ok || err != nil || string(v) != "v" {
		t.Fatalf("Get: %q %v %v", v, ok, err)
	}
	s.t.lockWord(b).Store(live)
	start := time.Now()
	if _, _, err := s.Get(ctx, "k"); !errors.Is(err, errBusy) {
		t.Errorf("Get with the lock of a live process: %v, want errBusy", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the wait took %v", d)
	}
	if s.t.lockWord(b).Load() != live {
		t.Error("the lock of a live process was taken over")
	}
}

// TestConcurrent: goroutines writing and reading the same keys never see
// a torn value.
func TestConcurrent(t *testing.T) {
	s, _ := memTable(t, 64)
	s.t.now = time.Now
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprint("k", i%16)
				val := bytes.Repeat([]byte{byte(g*16 + i%16)}, 100+i%700)
				if err := s.Set(ctx, key, val, time.Minute); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				got, ok, err := s.Get(ctx, key)
				if err != nil || !ok || len(got) < 100 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) || int(got[0])%16 != i%16 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %v %v len %d", key, ok, err, len(got)))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, first: %s", len(failures), failures[0])
	}
}

// TestOpenChecksLayout: memory that is not a table is refused.
func TestOpenChecksLayout(t *testing.T) {
	mem := make([]byte, Size(64))
	if _, err := open(mem); err == nil {
		t.Error("zero memory opened")
	}
	format(mem, 64, 1)
	if _, err := open(mem[:headerSize+bucketSize]); err == nil {
		t.Error("memory shorter than its buckets opened")
	}
	binary.LittleEndian.PutUint32(mem[24:], 512)
	if _, err := open(mem); err == nil {
		t.Error("another slot size opened")
	}
}

// FuzzDamagedBucket: whatever a bucket holds (a process killed in the
// middle of a write, another version), the calls neither panic nor return
// more than a slot's value.
func FuzzDamagedBucket(f *testing.F) {
	f.Add([]byte{}, "k")
	f.Add(bytes.Repeat([]byte{0xff}, 64), "k")
	slotBytes := make([]byte, slotHead)
	binary.LittleEndian.PutUint64(slotBytes, 1<<62)
	binary.LittleEndian.PutUint16(slotBytes[16:], 1)
	binary.LittleEndian.PutUint32(slotBytes[20:], MaxValue)
	f.Add(slotBytes, "k")
	f.Fuzz(func(t *testing.T, junk []byte, key string) {
		s, _ := memTable(t, Ways)
		b := s.t.bucket(0)
		for i := range Ways * SlotSize {
			if len(junk) > 0 {
				s.t.mem[b+bucketHeader+i] = junk[i%len(junk)]
			}
		}
		ctx := context.Background()
		if v, _, err := s.Get(ctx, key); err != nil || len(v) > MaxValue {
			t.Fatalf("Get: %d bytes, %v", len(v), err)
		}
		if len(key) <= MaxKey {
			if err := s.Set(ctx, key, []byte("v"), time.Minute); err != nil {
				t.Fatal(err)
			}
			if v, ok, _ := s.Get(ctx, key); !ok || string(v) != "v" {
				t.Fatalf("after Set over junk: %q %v", v, ok)
			}
		}
		s.Delete(ctx, key)
	})
}

// TestStuckLockTakenOver: a lock seen held by the same acquisition of a
// live process for staleHold is taken over. That holder is no gmproxy
// worker in a critical section (a copy of one slot): it is one whose
// worker died holding the lock and whose ID another process was given
// since, and without the takeover its bucket (or the ring) would refuse
// every call for as long as that process lives. A holder that let go and
// took the lock again in between is not stuck.
func TestStuckLockTakenOver(t *testing.T) {
	s, now := memTable(t, Ways)
	const other = 4_000_002
	s.t.alive = func(uint32) bool { return true }
	b := s.t.bucket(s.t.hash("k"))
	set := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		return s.Set(ctx, "k", []byte("v"), time.Minute)
	}
	s.t.lockWord(b).Store(7<<32 | other) // its 7th acquisition
	if err := set(); !errors.Is(err, errBusy) {
		t.Fatalf("Set with the lock just seen held by a live process: %v, want errBusy", err)
	}
	*now = now.Add(staleHold / 2)
	s.t.lockWord(b).Store(8<<32 | other) // let go, and took it again
	if err := set(); !errors.Is(err, errBusy) {
		t.Fatalf("Set with the lock held anew: %v, want errBusy", err)
	}
	*now = now.Add(staleHold / 2)
	if err := set(); !errors.Is(err, errBusy) {
		t.Fatalf("Set with the lock held for half of staleHold: %v, want errBusy", err)
	}
	*now = now.Add(staleHold / 2)
	if err := set(); err != nil {
		t.Fatalf("Set with the lock held by one acquisition for staleHold: %v", err)
	}
	if w := s.t.lockWord(b).Load(); w != 9<<32 {
		t.Errorf("lock word %#x after the call, want free after the 9th acquisition", w)
	}
	if v, ok, err := s.Get(context.Background(), "k"); !ok || err != nil || string(v) != "v" {
		t.Fatalf("Get: %q %v %v", v, ok, err)
	}
}
