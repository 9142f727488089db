package sessionstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestReplacedFleetKeysOpenTheirTickets: a reload that changes the
// rotation builds a new key set whose epochs are numbered anew; the
// tickets the old set sealed keep opening with the keys it hands over
// (Retiring), never encrypt, and stop opening when they could no longer
// be valid.
func TestReplacedFleetKeysOpenTheirTickets(t *testing.T) {
	mem := NewMemory()
	now := time.Unix(1_800_000_000, 0).Truncate(24 * time.Hour).Add(50 * time.Minute)
	mem.SetClock(func() time.Time { return now })
	old := newTestFleet(t, mem, 9, &now)
	if err := old.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	tk, err := ticket.Seal(nil, old, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	prev, until := old.Retiring()
	if want := now.Add(time.Hour + 5*time.Minute); until.Before(want) {
		t.Fatalf("the old keys are handed over until %v, before the last ticket expires (%v)", until, want)
	}
	for _, downFirst := range []bool{false, true} {
		st := &flakyStore{Memory: mem, down: downFirst}
		nf := NewFleetKeys(NewShared(st, time.Second, nil), FleetKeysConfig{
			Prefix: "p:", Rotation: 24 * time.Hour, Lifetime: 5 * time.Minute, Wrap: ticket.Static{testKey(t, 9)},
			Previous: prev, PreviousUntil: until,
		})
		nf.SetClock(func() time.Time { return now })
		if err := nf.Refresh(context.Background()); (err != nil) != downFirst {
			t.Fatalf("refresh (store down %v): %v", downFirst, err)
		}
		if _, ok, _ := ticket.Open(nf, ticket.TLCP, tk); !ok {
			t.Fatalf("store down %v: a ticket sealed before the reload does not open after it", downFirst)
		}
		if nf.TicketKeys()[0].Name == prev[0].Name {
			t.Fatalf("store down %v: the replaced set's key still encrypts", downFirst)
		}
	}
	nf := NewFleetKeys(NewShared(mem, time.Second, nil), FleetKeysConfig{
		Prefix: "p:", Rotation: 24 * time.Hour, Lifetime: 5 * time.Minute, Wrap: ticket.Static{testKey(t, 9)},
		Previous: prev, PreviousUntil: until,
	})
	nf.SetClock(func() time.Time { return now })
	if err := nf.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := now
	now = until.Add(-time.Second)
	if _, ok, _ := ticket.Open(nf, ticket.TLCP, tk); !ok {
		t.Fatal("the old keys stopped opening tickets before they were handed over for")
	}
	now = until.Add(time.Second)
	if nf.epochOf(now) != nf.epochOf(start) {
		t.Fatal("test setup: the check after expiry must be in the same epoch")
	}
	if _, ok, _ := ticket.Open(nf, ticket.TLCP, tk); ok {
		t.Fatal("the replaced set's keys still open tickets after their last one expired")
	}
}

// TestFleetKeysRefuseAnotherFleetsKey: two fleets share a store and a
// wrap key, apart by their key prefixes. A sealed key copied from one
// fleet's name to the other's (someone with write access to the store,
// making the second fleet encrypt with the first's key, whose instances
// would then open its tickets) does not open.
func TestFleetKeysRefuseAnotherFleetsKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	mem := NewMemory()
	mem.SetClock(func() time.Time { return now })
	a := newTestFleet(t, mem, 9, &now)
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := NewFleetKeys(NewShared(mem, time.Second, nil), FleetKeysConfig{
		Prefix: "q:", Rotation: time.Hour, Lifetime: 5 * time.Minute, Wrap: ticket.Static{testKey(t, 9)},
	})
	b.SetClock(func() time.Time { return now })
	for e := a.epochOf(now); e <= a.epochOf(now)+1; e++ {
		v, _, _ := mem.Get(context.Background(), a.storeKey(e))
		mem.Set(context.Background(), b.storeKey(e), v, time.Hour)
	}
	if err := b.Refresh(context.Background()); !errors.Is(err, errWrap) {
		t.Fatalf("another fleet's key under this fleet's name: refresh = %v; want errWrap", err)
	}
	tk, err := ticket.Seal(nil, b, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(a, ticket.TLCP, tk); ok {
		t.Fatal("a ticket of one fleet opens in the other")
	}
}
