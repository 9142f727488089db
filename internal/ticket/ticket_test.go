package ticket

import (
	"bytes"
	"strings"
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

	t1, err := Seal(nil, Static{k1}, TLCP, state)
	if err != nil {
		t.Fatal(err)
	}
	if len(t1) != len(state)+Overhead {
		t.Fatalf("ticket length %d, want %d", len(t1), len(state)+Overhead)
	}
	// After rotation k2 encrypts and k1 still decrypts, reported as stale.
	got, ok, stale := Open(Static{k2, k1}, TLCP, t1)
	if !ok || !stale || !bytes.Equal(got, state) {
		t.Fatalf("open with rotated keys: ok=%v stale=%v got=%q", ok, stale, got)
	}
	got, ok, stale = Open(Static{k1}, TLCP, t1)
	if !ok || stale || !bytes.Equal(got, state) {
		t.Fatalf("open with current key: ok=%v stale=%v", ok, stale)
	}
	// Once k1 is retired the ticket no longer opens.
	if _, ok, _ := Open(Static{k2}, TLCP, t1); ok {
		t.Fatal("ticket opened after its key was retired")
	}
	// Any flipped bit is rejected.
	for i := range t1 {
		bad := bytes.Clone(t1)
		bad[i] ^= 0x40
		if _, ok, _ := Open(Static{k1}, TLCP, bad); ok {
			t.Fatalf("tampered byte %d accepted", i)
		}
	}
	if _, ok, _ := Open(Static{k1}, TLCP, t1[:Overhead-1]); ok {
		t.Fatal("short ticket accepted")
	}
}

func TestSealWithoutKeys(t *testing.T) {
	if _, err := Seal(nil, Static{}, TLCP, []byte("x")); err == nil {
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
	tk, err := Seal(nil, r, TLCP, []byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	keys := r.TicketKeys()
	if len(keys) != 2 || keys[1].Name != first[0].Name {
		t.Fatalf("after one interval: %d keys, want the new key first and the old one kept", len(keys))
	}
	if _, ok, stale := Open(r, TLCP, tk); !ok || !stale {
		t.Fatalf("old ticket after rotation: ok=%v stale=%v", ok, stale)
	}
	now = now.Add(3 * time.Hour)
	r.TicketKeys()
	if _, ok, _ := Open(r, TLCP, tk); ok {
		t.Fatal("ticket still opens after its key outlived the lifetime")
	}
}

func TestParseKeyFile(t *testing.T) {
	now := time.Now()
	for _, n := range []int{48, 80, 32, 64} {
		keys, err := ParseKeyFile(pattern(n, 7), now)
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
	a, _ := ParseKeyFile(pattern(48, 9), now)
	b, _ := ParseKeyFile(pattern(48, 9), now)
	tk, err := Seal(nil, Static(a), TLS13SM, []byte("shared"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Open(Static(b), TLS13SM, tk); !ok {
		t.Fatal("a ticket sealed by one instance did not open on another with the same key file")
	}
}

// OpenTo opens into the caller's buffer, and neither it nor Seal allocates
// when given room.
func TestOpenTo(t *testing.T) {
	k := mustKey(t, 1, time.Unix(1_800_000_000, 0))
	state := []byte("session state")
	tk, err := Seal(nil, Static{k}, TLS13SM, state)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	got, ok, _ := OpenTo(buf, Static{k}, TLS13SM, tk)
	if !ok || !bytes.Equal(got, state) || &got[0] != &buf[:1][0] {
		t.Fatalf("OpenTo: ok=%v got=%q (in buf: %v)", ok, got, ok && &got[0] == &buf[:1][0])
	}
	var src Source = Static{k}
	if n := testing.AllocsPerRun(10, func() { OpenTo(buf, src, TLS13SM, tk) }); n != 0 {
		t.Fatalf("OpenTo with room allocates %v times", n)
	}
	if _, ok, _ := OpenTo(buf, Static{k}, TLS13SM, tk[:len(tk)-1]); ok {
		t.Fatal("truncated ticket opened")
	}
	// Seal with room in dst allocates nothing either.
	out := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(10, func() { Seal(out, src, TLS13SM, state) }); n != 0 {
		t.Fatalf("Seal with room allocates %v times", n)
	}
}

// pattern is n bytes counting up from first (a key file that is not one
// repeated byte).
func pattern(n int, first byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = first + byte(i)
	}
	return b
}

// A key file made of one repeated byte (all zeros, a placeholder) is
// refused, for each of the accepted sizes and for any key of several.
func TestParseKeyFileRejectsRepeatedByte(t *testing.T) {
	now := time.Now()
	for _, n := range []int{32, 48, 80} {
		for _, b := range []byte{0, 0xff, 'a'} {
			if _, err := ParseKeyFile(bytes.Repeat([]byte{b}, n), now); err == nil {
				t.Errorf("%d bytes of 0x%02x accepted as a ticket key", n, b)
			}
		}
	}
	second := append(pattern(32, 1), make([]byte, 32)...)
	if _, err := ParseKeyFile(second, now); err == nil || !strings.Contains(err.Error(), "ticket key 2 of 2") {
		t.Errorf("an all-zero second key: err = %v", err)
	}
}

// A ticket sealed for one protocol does not open as the other's under the
// same keys: the protocol is authenticated as additional data.
func TestProtocolLabel(t *testing.T) {
	k := mustKey(t, 3, time.Unix(1_800_000_000, 0))
	for _, c := range []struct{ seal, open Protocol }{{TLCP, TLS13SM}, {TLS13SM, TLCP}} {
		tk, err := Seal(nil, Static{k}, c.seal, []byte("state"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := Open(Static{k}, c.seal, tk); !ok {
			t.Fatalf("protocol %d: own ticket did not open", c.seal)
		}
		if _, ok, _ := Open(Static{k}, c.open, tk); ok {
			t.Errorf("a protocol %d ticket opened as protocol %d", c.seal, c.open)
		}
	}
	if _, err := Seal(nil, Static{k}, numProtocols, []byte("s")); err == nil {
		t.Error("Seal with an unknown protocol succeeded")
	}
}

// TestRotatorDropsKeysPastTheirLifetime: a key is dropped as soon as it is
// lifetime old (for tickets valid L after they are issued, lifetime is
// interval + L), not at the next rotation.
func TestRotatorDropsKeysPastTheirLifetime(t *testing.T) {
	r := NewRotator(time.Hour, time.Hour+5*time.Minute)
	t0 := time.Unix(1_000_000, 0)
	now := t0
	r.SetClock(func() time.Time { return now })
	first := r.TicketKeys()[0]
	now = t0.Add(time.Hour) // rotates; first still opens its last tickets
	if keys := r.TicketKeys(); len(keys) != 2 || keys[1].Name != first.Name {
		t.Fatalf("after one interval: %d keys", len(keys))
	}
	now = t0.Add(time.Hour + 6*time.Minute)
	if keys := r.TicketKeys(); len(keys) != 1 || keys[0].Name == first.Name {
		t.Errorf("%d keys held when the first is past its lifetime, want the current one only", len(keys))
	}
	r.SetLifetime(3 * time.Hour) // a reload lengthened sessions.lifetime
	now = t0.Add(2 * time.Hour)
	if keys := r.TicketKeys(); len(keys) != 2 {
		t.Errorf("%d keys after the lifetime grew, want 2", len(keys))
	}
}

// TestRotatorShortLifetime: a lifetime shorter than the interval is
// raised to the interval, as SetLifetime raises it, not to twelve
// intervals: the keys of a site whose sessions last minutes must not open
// tickets for half a day.
func TestRotatorShortLifetime(t *testing.T) {
	for _, set := range []bool{false, true} {
		r := NewRotator(time.Hour, 10*time.Minute)
		if set {
			r = NewRotator(time.Hour, 0)
			r.SetLifetime(10 * time.Minute)
		}
		t0 := time.Unix(1_000_000, 0)
		now := t0
		r.SetClock(func() time.Time { return now })
		r.TicketKeys()
		now = t0.Add(time.Hour)
		r.TicketKeys()
		now = t0.Add(2*time.Hour + time.Minute)
		if keys := r.TicketKeys(); len(keys) != 1 {
			t.Errorf("SetLifetime %v: %d keys two intervals on, want the current one only", set, len(keys))
		}
	}
}

// TestNewKeyShortSecret: a secret under 16 bytes is refused (too little
// to derive a name and an SM4 key from).
func TestNewKeyShortSecret(t *testing.T) {
	if _, err := NewKey(bytes.Repeat([]byte{7}, 15), time.Now()); err == nil {
		t.Fatal("NewKey took a 15-byte secret")
	}
}

// TestOpenShortTicket: a ticket shorter than the name, nonce and tag,
// even one that starts with a key's name, does not open (and does not
// panic: tickets come from the network).
func TestOpenShortTicket(t *testing.T) {
	k := mustKey(t, 1, time.Now())
	for n := 0; n < Overhead; n++ {
		tk := append(k.Name[:min(n, len(k.Name))], make([]byte, max(n-len(k.Name), 0))...)
		if _, ok, _ := Open(Static{k}, TLS13SM, tk); ok {
			t.Fatalf("a %d-byte ticket opened", n)
		}
	}
}
