package redisstore

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// clearLocal is a memLocal that can forget everything, as the daemon's
// session cache can.
type clearLocal struct {
	memLocal
	deletes []string // the IDs Delete was called with
}

func (l *clearLocal) Delete(id string) {
	l.mu.Lock()
	delete(l.m, id)
	l.deletes = append(l.deletes, id)
	l.mu.Unlock()
}

func (l *clearLocal) Clear() { l.mu.Lock(); clear(l.m); l.mu.Unlock() }

func (l *clearLocal) has(id string) bool { _, ok := l.Get(id); return ok }

// instance is one gmproxy's session-ID cache on a shared Redis.
type instance struct {
	local *clearLocal
	cache *sessionstore.Tiered
}

func newInstance(t *testing.T, addr string, keys ticket.Source) instance {
	t.Helper()
	sh := sessionstore.NewShared(New(Options{Addresses: []string{addr}, Timeout: time.Second}), time.Second, nil)
	t.Cleanup(func() { sh.Close() })
	local := &clearLocal{memLocal: memLocal{m: map[string][]byte{}}}
	return instance{local: local, cache: sessionstore.NewTiered(local, sh, keys, "gmproxy:tlcp:", time.Minute)}
}

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within the bound: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEndedSessionForgottenByTheFleet: a session that one instance ends
// (tlcp deletes it after a fatal alert) is dropped from the in-process
// cache of another instance that had resumed it, not only from the store;
// messages that do not open with the fleet's keys (a bare session ID,
// another fleet's key, a stored session's seal) drop nothing; and after
// the store restarted, when messages may have been lost, the cache is
// emptied.
func TestEndedSessionForgottenByTheFleet(t *testing.T) {
	srv := redistest.Start(t)
	keys := staticKeys(t)
	a, b := newInstance(t, srv.Addr, keys), newInstance(t, srv.Addr, keys)
	state := []byte("a session state")
	for _, id := range []string{"id-1", "id-2", "id-3", "id-4"} {
		a.cache.Put(id, state, time.Minute)
		if st, ok := b.cache.Get(id); !ok || !bytes.Equal(st, state) {
			t.Fatalf("%s made on a did not resume on b: %q %v", id, st, ok)
		}
		if !b.local.has(id) {
			t.Fatalf("%s is not in b's own cache after the store hit", id)
		}
	}
	// b's own subscription may not be confirmed yet: end id-4 until b
	// forgets it (a deleted session stays deleted; Delete is idempotent).
	eventually(t, "b forgets id-4 ended on a", func() bool {
		a.cache.Delete("id-4")
		time.Sleep(20 * time.Millisecond)
		return !b.local.has("id-4")
	})

	// Forged messages, then a real one: b handles them in order, so when
	// the real one has arrived the forged ones were read.
	raw := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer raw.Close()
	other, err := ticket.NewKey(bytes.Repeat([]byte{9}, ticket.KeySize), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seal := func(src ticket.Source, pt string) []byte {
		m, err := ticket.Seal(nil, src, ticket.StoredSession, []byte(pt))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx := context.Background()
	for _, m := range [][]byte{
		[]byte("id-1"),
		seal(ticket.Static{other}, "gmproxy session-id ended v1\x00id-1"),
		seal(keys, "gmproxy session-id state v1\x00id-1"), // another use's label
		seal(keys, "id-1"),
		append(seal(keys, "gmproxy session-id ended v1\x00id-1"), make([]byte, 600)...),
		// Over the size bound: not opened (each opening costs the
		// subscriber a decryption of the whole message).
		seal(keys, "gmproxy session-id ended v1\x00id-1"+string(make([]byte, 600))),
	} {
		if err := raw.Publish(ctx, "gmproxy:tlcp:ended", m); err != nil {
			t.Fatal(err)
		}
	}
	a.cache.Delete("id-2")
	eventually(t, "b forgets id-2 ended on a", func() bool { return !b.local.has("id-2") })
	if !b.local.has("id-1") {
		t.Fatal("a message that does not open with the fleet's keys dropped id-1")
	}
	b.local.mu.Lock()
	for _, id := range b.local.deletes {
		if id != "id-4" && id != "id-2" {
			t.Errorf("b deleted %q (%d bytes) on a forged or oversized message", id[:min(len(id), 8)], len(id))
		}
	}
	b.local.mu.Unlock()
	if _, ok := a.cache.Get("id-2"); ok {
		t.Fatal("the ended id-2 resumes on a")
	}

	// The store restarts: b cannot know what ended meanwhile.
	srv.Stop()
	srv.Restart()
	eventually(t, "b's cache emptied after the store restarted", func() bool { return !b.local.has("id-1") && !b.local.has("id-3") })
}

// TestEndedSessionsWithoutChannels: where the Redis user may not use the
// channels, ending a session still deletes it from the store and never
// opens the circuit breaker (the store stays in use).
func TestEndedSessionsWithoutChannels(t *testing.T) {
	srv := redistest.Start(t)
	if r, err := srv.Command("ACL SETUSER gmproxy on >pw ~gmproxy:* resetchannels +get +getrange +set +del +ping +auth +hello +select"); err != nil || r != "+OK" {
		t.Fatalf("ACL SETUSER: %q %v", r, err)
	}
	st := New(Options{Addresses: []string{srv.Addr}, Username: "gmproxy", Password: "pw", Timeout: time.Second})
	sh := sessionstore.NewShared(st, time.Second, nil)
	defer sh.Close()
	keys := staticKeys(t)
	c := sessionstore.NewTiered(&memLocal{m: map[string][]byte{}}, sh, keys, "gmproxy:tlcp:", time.Minute)
	const n = sessionstore.BreakerThreshold + 2
	for i := range n {
		c.Put(string(rune('a'+i)), []byte("s"), time.Minute)
	}
	for i := range n { // more refusals in a row than open the breaker
		c.Delete(string(rune('a' + i)))
	}
	if sh.BreakerOpen() {
		t.Fatal("refused PUBLISHes opened the circuit breaker")
	}
	if r, err := srv.Command("DBSIZE"); err != nil || r != ":0" {
		t.Fatalf("the ended sessions are still in the store: DBSIZE %q %v", r, err)
	}
}
