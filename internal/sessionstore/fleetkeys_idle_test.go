package sessionstore

import (
	"context"
	"testing"
	"time"
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
