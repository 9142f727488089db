package shmstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// mapLocal is a sessionstore.Local without bounds (a pointer: the
// caches of a channel are told apart by comparing them).
type mapLocal struct{ m map[string][]byte }

func newLocal() *mapLocal { return &mapLocal{m: map[string][]byte{}} }

func (l *mapLocal) Get(id string) ([]byte, bool)              { v, ok := l.m[id]; return v, ok }
func (l *mapLocal) Put(id string, st []byte, _ time.Duration) { l.m[id] = st }
func (l *mapLocal) Delete(id string)                          { delete(l.m, id) }

// TestOversizedSessionsDoNotOpenTheBreaker: a TLCP session with a client
// certificate chain does not fit a slot and is refused (it resumes only on
// the worker that made it), but the table works: those refusals must not
// count as store failures, or a few mutual-TLS handshakes in a row open
// the breaker and every worker's sessions (and ended-session messages)
// stop going through the table.
func TestOversizedSessionsDoNotOpenTheBreaker(t *testing.T) {
	s, _ := memTable(t, 1024)
	k, err := ticket.NewKey(bytes.Repeat([]byte{1, 2}, ticket.KeySize/2), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keys := ticket.Static{k}
	sh := sessionstore.NewShared(s, time.Second, nil)
	a := sessionstore.NewTiered(newLocal(), sh, keys, "gmproxy:tlcp:", time.Minute)
	b := sessionstore.NewTiered(newLocal(), sh, keys, "gmproxy:tlcp:", time.Minute)
	chain := bytes.Repeat([]byte{0x30}, 2*MaxValue) // a session with a client chain
	for i := range 2 * sessionstore.BreakerThreshold {
		a.Put(string(rune('A'+i)), chain, time.Minute)
	}
	if sh.BreakerOpen() {
		t.Fatal("sessions too large for a slot opened the breaker")
	}
	a.Put("small", []byte("a session without client certificates"), time.Minute)
	if _, ok := b.Get("small"); !ok {
		t.Fatal("a session that fits was not shared after oversized ones")
	}
}
