package sessionstore

import (
	"bytes"
	"encoding/binary"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// FuzzStoredValues feeds the values an instance reads from the shared store
// (Redis: anyone who can write to it chooses them) to their openers: a
// sealed session (Tiered.open), a sealed ticket-key secret
// (FleetKeys.openSecret) and an ended-session message (follower.deliver).
// Raw values never open (they are not sealed with the keys), and no
// opener panics. Values sealed with the right keys open only when their
// plaintext carries the label and the binding (the session ID; the epoch
// and fleet prefix; the ended label) and give back exactly the rest: a
// value moved to another ID, epoch or fleet, or of another kind, never
// opens. What Tiered.seal and sealSecret write opens again.
func FuzzStoredValues(f *testing.F) {
	f.Add("id-1", []byte("state"), []byte(sealLabel+"\x04id-1state"), int64(7))
	f.Add("", []byte{}, []byte(sealLabel+"\x00"), int64(0))
	f.Add("id", []byte("x"), []byte(sealLabel+"\x03id-"), int64(-1))
	f.Add("p:", bytes.Repeat([]byte{1}, ticket.KeySize), []byte(wrapLabel+"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x02p:"+strings.Repeat("k", ticket.KeySize)), int64(7))
	f.Add("id-1", []byte(endedLabel), []byte(endedLabel+"id-1"), int64(1))
	f.Add(strings.Repeat("i", 256), []byte("s"), []byte(sealLabel+"\xff"), int64(1<<62))

	key, err := ticket.NewKey(bytes.Repeat([]byte{1}, ticket.KeySize), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	other, err := ticket.NewKey(bytes.Repeat([]byte{2}, ticket.KeySize), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	keys := ticket.Static{key}
	f.Fuzz(func(t *testing.T, id string, state, pt []byte, epoch int64) {
		tr := &Tiered{keys: keys}
		// A raw value is no sealed value.
		if st, ok := tr.open(id, state); ok {
			t.Fatalf("raw value %x opened as a session: %x", state, st)
		}
		// A sealed session opens for its ID only, with its state.
		if sealed, err := tr.seal(id, state); len(id) > 255 {
			if err == nil {
				t.Fatalf("sealed a %d-byte session ID", len(id))
			}
		} else if err != nil {
			t.Fatal(err)
		} else {
			if st, ok := tr.open(id, sealed); !ok || !bytes.Equal(st, state) {
				t.Fatalf("round trip: %x %v, want %x", st, ok, state)
			}
			if st, ok := tr.open(id+"x", sealed); ok {
				t.Fatalf("a session sealed for %q opened for %q: %x", id, id+"x", st)
			}
			if st, ok := (&Tiered{keys: ticket.Static{other}}).open(id, sealed); ok {
				t.Fatalf("opened with another key: %x", st)
			}
		}
		// Any plaintext sealed with the keys: opens iff it binds id.
		sealed, err := ticket.Seal(nil, keys, ticket.StoredSession, pt)
		if err != nil {
			t.Fatal(err)
		}
		head := sealLabel + string([]byte{byte(len(id))}) + id
		wantOK := len(id) <= 255 && bytes.HasPrefix(pt, []byte(head))
		if st, ok := tr.open(id, sealed); ok != wantOK || (ok && !bytes.Equal(st, pt[len(head):])) {
			t.Fatalf("open(%q, seal(%x)): %x %v, want ok %v", id, pt, st, ok, wantOK)
		}

		// Ticket-key secrets: the fleet prefix is id, the epoch epoch.
		fk := &FleetKeys{wrap: keys, prefix: id, rotation: time.Hour}
		if _, err := fk.openSecret(epoch, state); err == nil {
			t.Fatalf("raw value %x opened as a ticket key", state)
		}
		if len(id) <= 0xffff {
			secret := make([]byte, ticket.KeySize)
			for i := range secret {
				secret[i] = byte(i) ^ byte(epoch)
			}
			if s, err := fk.sealSecret(epoch, secret); err != nil {
				t.Fatal(err)
			} else if _, err := fk.openSecret(epoch, s); err != nil {
				t.Fatalf("round trip of a ticket key: %v", err)
			} else if _, err := fk.openSecret(epoch+1, s); err == nil {
				t.Fatal("the key of one epoch opened as the next one's")
			}
			wrapped, err := ticket.Seal(nil, keys, ticket.WrappedKey, pt)
			if err != nil {
				t.Fatal(err)
			}
			h := binary.BigEndian.AppendUint64([]byte(wrapLabel), uint64(epoch))
			h = binary.BigEndian.AppendUint16(h, uint16(len(id)))
			h = append(h, id...)
			wantOK := len(pt) == len(h)+ticket.KeySize && bytes.HasPrefix(pt, h)
			if _, err := fk.openSecret(epoch, wrapped); (err == nil) != wantOK {
				t.Fatalf("openSecret(%d, seal(%x)): %v, want ok %v", epoch, pt, err, wantOK)
			}
		}

		// Ended-session messages: only a sealed ended label names a
		// session, and only that session is forgotten.
		local := newMapLocal()
		for _, k := range []string{id, id + "x", "other"} {
			local.Put(k, []byte("s"), time.Minute)
		}
		before := maps.Clone(local.m)
		fl := &follower{}
		fl.targets.Store(&[]endedTarget{{local: local, keys: keys}})
		fl.deliver(state)
		if !maps.EqualFunc(local.m, before, bytes.Equal) {
			t.Fatalf("raw message %x forgot sessions", state)
		}
		msg, err := ticket.Seal(nil, keys, ticket.StoredSession, pt)
		if err != nil {
			t.Fatal(err)
		}
		fl.deliver(msg)
		named := len(msg) <= maxEnded && len(pt) > len(endedLabel) && strings.HasPrefix(string(pt), endedLabel)
		for k := range before {
			if _, ok := local.m[k]; ok == (named && k == string(pt[len(endedLabel):])) {
				t.Fatalf("message %q: session %q kept %v", pt, k, ok)
			}
		}
	})
}
