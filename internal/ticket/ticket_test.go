package ticket

import (
	"bytes"
	"testing"
	"time"
)

func mustKey(t *testing.T, b byte, at time.Time) Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, KeySize), at)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRotation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k1, k2 := mustKey(t, 1, now), mustKey(t, 2, now)
	state := []byte("session state")

	t1, err := Seal(nil, Static{k1}, state)
	if err != nil {
		t.Fatal(err)
	}
	if len(t1) != len(state)+Overhead {
		t.Fatalf("ticket length %d, want %d", len(t1), len(state)+Overhead)
	}
	// After rotation k2 encrypts and k1 still decrypts, reported as stale.
	got, ok, stale := Open(Static{k2, k1}, t1)
	if !ok || !stale || !bytes.Equal(got, state) {
		t.Fatalf("open with rotated keys: ok=%v stale=%v got=%q", ok, stale, got)
	}
	got, ok, stale = Open(Static{k1}, t1)
	if !ok || stale || !bytes.Equal(got, state) {
		t.Fatalf("open with current key: ok=%v stale=%v", ok, stale)
	}
	// Once k1 is retired the ticket no longer opens.
	if _, ok, _ := Open(Static{k2}, t1); ok {
		t.Fatal("ticket opened after its key was retired")
	}
	// Any flipped bit is rejected.
	for i := range t1 {
		bad := bytes.Clone(t1)
		bad[i] ^= 0x40
		if _, ok, _ := Open(Static{k1}, bad); ok {
			t.Fatalf("tampered byte %d accepted", i)
		}
	}
	if _, ok, _ := Open(Static{k1}, t1[:Overhead-1]); ok {
		t.Fatal("short ticket accepted")
	}
}

func TestSealWithoutKeys(t *testing.T) {
	if _, err := Seal(nil, Static{}, []byte("x")); err == nil {
		t.Fatal("Seal with no keys succeeded")
	}
}

func TestRotator(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := NewRotator(time.Hour, 3*time.Hour)
	r.SetClock(func() time.Time { return now })
	first := r.TicketKeys()
	if len(first) != 1 {
		t.Fatalf("got %d keys, want 1", len(first))
	}
	tk, err := Seal(nil, r, []byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	keys := r.TicketKeys()
	if len(keys) != 2 || keys[1].Name != first[0].Name {
		t.Fatalf("after one interval: %d keys, want the new key first and the old one kept", len(keys))
	}
	if _, ok, stale := Open(r, tk); !ok || !stale {
		t.Fatalf("old ticket after rotation: ok=%v stale=%v", ok, stale)
	}
	now = now.Add(3 * time.Hour)
	r.TicketKeys()
	if _, ok, _ := Open(r, tk); ok {
		t.Fatal("ticket still opens after its key outlived the lifetime")
	}
}

func TestParseKeyFile(t *testing.T) {
	now := time.Now()
	for _, n := range []int{48, 80, 32, 64} {
		keys, err := ParseKeyFile(bytes.Repeat([]byte{7}, n), now)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		want := 1
		if n == 64 {
			want = 2
		}
		if len(keys) != want {
			t.Fatalf("%d bytes: %d keys, want %d", n, len(keys), want)
		}
	}
	if _, err := ParseKeyFile(make([]byte, 33), now); err == nil {
		t.Fatal("33-byte key file accepted")
	}
	// The same secret gives the same key on two instances.
	a, _ := ParseKeyFile(bytes.Repeat([]byte{9}, 48), now)
	b, _ := ParseKeyFile(bytes.Repeat([]byte{9}, 48), now)
	tk, err := Seal(nil, Static(a), []byte("shared"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Open(Static(b), tk); !ok {
		t.Fatal("a ticket sealed by one instance did not open on another with the same key file")
	}
}

// OpenTo opens into the caller's buffer, and neither it nor Seal allocates
// when given room.
func TestOpenTo(t *testing.T) {
	k := mustKey(t, 1, time.Unix(1_800_000_000, 0))
	state := []byte("session state")
	tk, err := Seal(nil, Static{k}, state)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	got, ok, _ := OpenTo(buf, Static{k}, tk)
	if !ok || !bytes.Equal(got, state) || &got[0] != &buf[:1][0] {
		t.Fatalf("OpenTo: ok=%v got=%q (in buf: %v)", ok, got, ok && &got[0] == &buf[:1][0])
	}
	var src Source = Static{k}
	if n := testing.AllocsPerRun(10, func() { OpenTo(buf, src, tk) }); n != 0 {
		t.Fatalf("OpenTo with room allocates %v times", n)
	}
	if _, ok, _ := OpenTo(buf, Static{k}, tk[:len(tk)-1]); ok {
		t.Fatal("truncated ticket opened")
	}
	// Seal with room in dst allocates nothing either.
	out := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(10, func() { Seal(out, src, state) }); n != 0 {
		t.Fatalf("Seal with room allocates %v times", n)
	}
}
