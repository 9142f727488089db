package ticket

import (
	"bytes"
	"testing"
	"time"
)

// FuzzOpen feeds Open what a client or a shared store can send: any bytes as
// a ticket, under any protocol number. Arbitrary bytes never open; a ticket
// Seal made opens to its state under its own protocol only, and any one
// flipped byte makes it fail.
func FuzzOpen(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	k1, err := NewKey(bytes.Repeat([]byte{0x5a, 0xa5}, KeySize/2), now)
	if err != nil {
		f.Fatal(err)
	}
	k2, err := NewKey(bytes.Repeat([]byte{0x3c, 0xc3}, KeySize/2), now)
	if err != nil {
		f.Fatal(err)
	}
	keys := Static{k1, k2}
	f.Add([]byte("session state"), uint8(TLCP), uint16(0))
	f.Add([]byte{}, uint8(TLS13SM), uint16(40))
	f.Add(bytes.Repeat([]byte{0}, Overhead), uint8(StoredSession), uint16(7))
	f.Add(append(k1.Name[:], make([]byte, 40)...), uint8(WrappedKey), uint16(16))
	f.Add([]byte("x"), uint8(numProtocols), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, proto uint8, flip uint16) {
		p := Protocol(proto)
		// data as a ticket: it did not come from Seal, so it must not open
		// (a forgery would need the key).
		if state, ok, _ := Open(keys, p, data); ok {
			t.Fatalf("bytes not made by Seal opened: %x -> %x", data, state)
		}
		// data as a state: sealed and opened back.
		tk, err := Seal(nil, keys, p, data)
		if p >= numProtocols {
			if err == nil {
				t.Fatalf("Seal accepted unknown protocol %d", p)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(tk) != len(data)+Overhead {
			t.Fatalf("ticket of %d bytes for a %d-byte state", len(tk), len(data))
		}
		state, ok, stale := OpenTo(make([]byte, 0, 8), keys, p, tk)
		if !ok || stale || !bytes.Equal(state, data) {
			t.Fatalf("round trip: ok=%v stale=%v state=%x want %x", ok, stale, state, data)
		}
		if _, ok, _ := Open(keys, (p+1)%numProtocols, tk); ok {
			t.Fatalf("a ticket of protocol %d opened as %d", p, (p+1)%numProtocols)
		}
		if _, ok, _ := Open(Static{k2}, p, tk); ok {
			t.Fatal("a ticket opened without the key that sealed it")
		}
		bad := bytes.Clone(tk)
		bad[int(flip)%len(bad)] ^= 1 << (flip >> 13)
		if _, ok, _ := Open(keys, p, bad); ok {
			t.Fatalf("a ticket with byte %d damaged opened", int(flip)%len(bad))
		}
		if _, ok, _ := Open(keys, p, tk[:len(tk)-1-int(flip)%len(tk)]); ok {
			t.Fatal("a truncated ticket opened")
		}
	})
}

// FuzzParseKeyFile reads any file contents as a ticket key file: it either
// fails with a message or gives one key per secret, and a second parse of the
// same bytes gives keys that open the first one's tickets.
func FuzzParseKeyFile(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	f.Add(pattern(32, 1))
	f.Add(pattern(48, 2))
	f.Add(pattern(80, 3))
	f.Add(pattern(96, 4))
	f.Add(bytes.Repeat([]byte{0}, 32))
	f.Add(append(pattern(32, 5), bytes.Repeat([]byte{9}, 32)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParseKeyFile(b, now)
		if err != nil {
			if keys != nil || err.Error() == "" {
				t.Fatalf("error %q with %d keys", err, len(keys))
			}
			return
		}
		want := len(b) / KeySize
		if len(b) == 48 || len(b) == 80 {
			want = 1
		}
		if len(keys) != want {
			t.Fatalf("%d keys from %d bytes, want %d", len(keys), len(b), want)
		}
		again, err := ParseKeyFile(b, now)
		if err != nil || len(again) != len(keys) {
			t.Fatalf("second parse: %d keys, %v", len(again), err)
		}
		for i := range keys {
			if keys[i].Name != again[i].Name || !keys[i].Created.Equal(now) {
				t.Fatalf("key %d differs between parses", i)
			}
			tk, err := Seal(nil, Static{keys[i]}, TLCP, []byte("s"))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := Open(Static{again[i]}, TLCP, tk); !ok {
				t.Fatalf("key %d of the second parse does not open the first's ticket", i)
			}
		}
	})
}
