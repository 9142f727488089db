package shmstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// twoWorkers returns two Stores over one table in ordinary memory, as two
// worker processes (other process IDs) would map it.
func twoWorkers(t *testing.T) (a, b *Store) {
	t.Helper()
	mem := make([]byte, Size(64))
	format(mem, 64, 42)
	ta, err := open(mem)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := open(mem)
	ta.pid, tb.pid = 4_000_001, 4_000_002
	return &Store{t: ta}, &Store{t: tb}
}

func TestRing(t *testing.T) {
	a, b := twoWorkers(t)
	ctx := context.Background()
	if err := a.Publish(ctx, "p:tlcp:ended", []byte("one")); err != nil {
		t.Fatal(err)
	}
	a.Publish(ctx, "p:other", []byte("elsewhere"))
	b.Publish(ctx, "p:tlcp:ended", []byte("two"))
	msgs, last, lost := b.t.read("p:tlcp:ended", 0)
	if lost || last != 3 || len(msgs) != 2 || string(msgs[0]) != "one" || string(msgs[1]) != "two" {
		t.Fatalf("read = %q, last %d, lost %v; want one, two from 3 messages", msgs, last, lost)
	}
	if msgs, last, lost := b.t.read("p:tlcp:ended", last); msgs != nil || last != 3 || lost {
		t.Fatalf("a second read = %q %d %v, want nothing new", msgs, last, lost)
	}

	// A reader more than a ring behind has lost messages; it still gets
	// those the ring holds.
	for i := range ringSlots + 5 {
		a.Publish(ctx, "p:tlcp:ended", fmt.Appendf(nil, "m%d", i))
	}
	msgs, last, lost = b.t.read("p:tlcp:ended", 3)
	if !lost || last != 3+ringSlots+5 || len(msgs) != ringSlots || string(msgs[len(msgs)-1]) != fmt.Sprintf("m%d", ringSlots+4) {
		t.Fatalf("a reader behind by more than the ring: %d messages, last %d, lost %v", len(msgs), last, lost)
	}

	// An entry that does not hold the message it should (its writer died
	// while writing it, or it was damaged) counts as lost.
	a.Publish(ctx, "p:tlcp:ended", []byte("x"))
	a.t.entrySeq(last + 1).Store(0)
	if msgs, _, lost := b.t.read("p:tlcp:ended", last); !lost || len(msgs) != 0 {
		t.Fatalf("a damaged entry: %q, lost %v", msgs, lost)
	}

	// A damaged length is not read past its entry.
	last += 1
	a.Publish(ctx, "p:tlcp:ended", []byte("y"))
	binary.LittleEndian.PutUint16(a.t.mem[ringOff+int((last+1)%ringSlots)*ringEntry+16:], 0xffff)
	if msgs, _, lost := b.t.read("p:tlcp:ended", last); !lost || len(msgs) != 0 {
		t.Fatalf("a damaged length: %d messages, lost %v", len(msgs), lost)
	}

	if err := a.Publish(ctx, "c", make([]byte, RingMax+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Publish of %d bytes: %v, want ErrTooLarge", RingMax+1, err)
	}
	if err := a.Publish(ctx, "c", make([]byte, 104)); err != nil {
		t.Fatalf("a sealed session ID's size (104 bytes) does not fit: %v", err)
	}
}

// TestDamagedRingCount: a count near 2^64 (any worker can write the
// header) costs a bounded read that reports the loss; it neither spins nor
// keeps the ring locked, and publishing goes on.
func TestDamagedRingCount(t *testing.T) {
	a, b := twoWorkers(t)
	ctx := context.Background()
	a.Publish(ctx, "p:tlcp:ended", []byte("x"))
	a.t.ringCount().Store(math.MaxUint64)
	done := make(chan struct{})
	var lost bool
	go func() {
		defer close(done)
		_, _, lost = b.t.read("p:tlcp:ended", 1)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a read of a damaged ring count did not return")
	}
	if !lost {
		t.Fatal("a damaged ring count did not count as lost messages")
	}
	if err := a.Publish(ctx, "p:tlcp:ended", []byte("y")); err != nil {
		t.Fatalf("Publish after the damaged count was read: %v", err)
	}
}

// TestSubscribe: a worker hears the other's messages on its channel within
// a few polls, lost is called when it fell a ring behind, and stop ends it.
func TestSubscribe(t *testing.T) {
	a, b := twoWorkers(t)
	ctx := context.Background()
	got := make(chan string, 64)
	var lost atomic.Int32
	stop := b.Subscribe("p:tlcp:ended", func(m []byte) { got <- string(m) }, func() { lost.Add(1) })
	a.Publish(ctx, "p:tlcp:ended", []byte("hello"))
	select {
	case m := <-got:
		if m != "hello" {
			t.Fatalf("heard %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message was not heard")
	}
	// A burst larger than the ring between two polls.
	a.t.lock(ctx, ringLockOff) // hold the publishers and the reader
	n := a.t.ringCount().Load()
	a.t.ringCount().Store(n + 2*ringSlots)
	a.t.unlock(ringLockOff)
	deadline := time.Now().Add(5 * time.Second)
	for lost.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("lost was not called after a burst larger than the ring")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	a.Publish(ctx, "p:tlcp:ended", []byte("after stop"))
	time.Sleep(3 * pollEvery)
	select {
	case m := <-got:
		t.Fatalf("heard %q after stop", m)
	default:
	}
	if Failed(errors.New("x")).Subscribe("c", nil, nil) == nil {
		t.Fatal("a failed store's Subscribe returned no stop")
	}
}

// FuzzDamagedRing: whatever the ring holds (a worker killed in the middle
// of a publish, another version, any worker writing the shared page), a
// read neither panics nor spins: it returns at most a ring of messages of
// at most RingMax bytes each and moves on to the count it read. A message
// published after it is then read, or reported lost, never missed
// unseen.
func FuzzDamagedRing(f *testing.F) {
	f.Add([]byte{}, uint64(0), uint64(0))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, uint64(1), uint64(0))
	f.Add([]byte{0xff}, uint64(math.MaxUint64), uint64(1))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0}, uint64(ringSlots+2), uint64(1))
	f.Add([]byte{0}, uint64(3), uint64(7))
	f.Fuzz(func(t *testing.T, junk []byte, count, seen uint64) {
		a, b := twoWorkers(t)
		if len(junk) > 0 {
			for i := ringOff; i < headerSize; i++ {
				a.t.mem[i] = junk[(i-ringOff)%len(junk)]
			}
		}
		a.t.ringCount().Store(count)
		check := func(msgs [][]byte) {
			t.Helper()
			if len(msgs) > ringSlots {
				t.Fatalf("%d messages from a ring of %d", len(msgs), ringSlots)
			}
			for _, m := range msgs {
				if len(m) > RingMax {
					t.Fatalf("a message of %d bytes", len(m))
				}
			}
		}
		msgs, last, lost := b.t.read("p:tlcp:ended", seen)
		check(msgs)
		if last != count || (count < seen && (!lost || msgs != nil)) {
			t.Fatalf("read from %d of count %d: %d messages, last %d, lost %v", seen, count, len(msgs), last, lost)
		}
		if err := a.Publish(context.Background(), "p:tlcp:ended", []byte("m")); err != nil {
			t.Fatalf("Publish over a damaged ring: %v", err)
		}
		msgs, _, lost = b.t.read("p:tlcp:ended", last)
		check(msgs)
		if !lost && (len(msgs) != 1 || string(msgs[0]) != "m") {
			t.Fatalf("after Publish: %q, lost %v; want the message", msgs, lost)
		}
	})
}
