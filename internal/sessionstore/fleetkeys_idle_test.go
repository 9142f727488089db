package sessionstore

import (
	"context"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestIdleFleetKeyEncryptsTwoRotationsAtMost: no key encrypts for more
// than two rotations while the store does not give the current epoch's
// key. An instance that made its snapshot in epoch E (holding E and the
// prefetched E+1), saw no handshake during E+1, and whose store has been
// down since, encrypts in E+2 with E+1's key, not E's.
func TestIdleFleetKeyEncryptsTwoRotationsAtMost(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(10 * time.Minute)
	st := &flakyStore{Memory: NewMemory()}
	st.Memory.SetClock(func() time.Time { return now })
	f := newTestFleet(t, st, 9, &now)
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = f.TicketKeys() // a handshake in epoch E
	st.down = true     // the store goes away
	now = now.Add(time.Hour)
	f.Refresh(context.Background()) // fails; no handshake during E+1
	now = now.Add(time.Hour + 40*time.Minute)
	f.Refresh(context.Background()) // fails
	k := f.TicketKeys()[0]          // first handshake in epoch E+2
	if age := now.Sub(k.Created); age > 2*f.rotation {
		t.Fatalf("epoch E+2: the encrypting key was made %s ago (rotation %s): a key encrypts for more than two rotations", age, f.rotation)
	}
}

// TestFleetKeysRetiredWhileTheStoreIsDown: a fleet key is dropped once no
// ticket it sealed can be valid (Lifetime after its epoch), also while
// the store does not answer. The snapshot of the last refresh kept
// opening tickets for as long as the store was down (a day here), so a
// key that leaked from memory then opened the tickets recorded under it
// (RFC 5077 §5.5), and a ticket held past its lifetime still opened.
func TestFleetKeysRetiredWhileTheStoreIsDown(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(10 * time.Minute)
	st := &flakyStore{Memory: NewMemory()}
	st.Memory.SetClock(func() time.Time { return now })
	f := newTestFleet(t, st, 9, &now)
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	tk, err := ticket.Seal(nil, f, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	st.down = true
	for range 24 {
		now = now.Add(time.Hour)
		f.Refresh(context.Background()) // fails
		// Two handshakes each hour.
		for range 2 {
			if _, err := ticket.Seal(nil, f, ticket.TLCP, []byte("state")); err != nil {
				t.Fatal(err)
			}
			if k := f.TicketKeys()[0]; now.Sub(k.Created) > 2*f.rotation {
				t.Fatalf("the encrypting key was made %s ago (rotation %s)", now.Sub(k.Created), f.rotation)
			}
		}
	}
	if _, ok, _ := ticket.Open(f, ticket.TLCP, tk); ok {
		t.Fatal("a day after its epoch (rotation 1h, lifetime 5m), with the store down, the key still opens its tickets")
	}
	for _, k := range f.TicketKeys() {
		if now.Sub(k.Created) > time.Duration(f.keep+2)*f.rotation {
			t.Fatalf("a key made %v ago is still held (rotation %v, lifetime 5m)", now.Sub(k.Created), f.rotation)
		}
	}
}
