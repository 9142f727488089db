package sessionstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessioncache"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Local is the in-process level of a Tiered cache (the daemon's LRU; the
// method set of tlcp.SessionStore). Its dynamic type must be comparable
// (a pointer): the followers of ended sessions tell caches apart with ==.
type Local interface {
	Get(id string) ([]byte, bool)
	Put(id string, state []byte, lifetime time.Duration)
	Delete(id string)
}

// Tiered is a session-ID cache of two levels: Local in front of a Shared
// store. It is a tlcp.SessionStore.
//
//   - Get asks Local, then (on a miss) the store once, bounded by the store
//     timeout; a store hit is opened and kept in Local for the next time.
//   - Put keeps the session in Local and writes it, sealed, to the store
//     (one round trip, bounded by the timeout, on full handshakes only).
//   - Delete forgets the session in both, and tells the other instances
//     to forget it (ended.go); what the store does not take then is
//     retried, and meanwhile this process does not resume the session
//     from the store.
//
// So a resumption costs no round trip when this instance has seen the
// session, one when another instance made it, and a full handshake when
// the store is slow or down.
//
// In the store a session is sealed with the newest key of keys (the fleet's
// ticket keys): its plaintext is a label, the session ID and the state, so
// that an entry moved to another ID or read as a ticket never opens.
type Tiered struct {
	local    Local
	shared   *Shared
	keys     ticket.Source
	prefix   string
	lifetime time.Duration
}

// sealLabel starts the plaintext of every sealed session.
const sealLabel = "gmproxy session-id state v1\x00"

// NewTiered returns a two-level cache. prefix starts the store keys (the
// configured key prefix and the protocol, e.g. "gmproxy:tlcp:"); lifetime
// bounds sessions kept in Local after a store hit.
func NewTiered(local Local, shared *Shared, keys ticket.Source, prefix string, lifetime time.Duration) *Tiered {
	shared.followEnded(prefix, local, keys)
	return &Tiered{local: local, shared: shared, keys: keys, prefix: prefix, lifetime: lifetime}
}

// key is the store key of a session ID (hex: readable in redis-cli).
func (t *Tiered) key(id string) string {
	b := make([]byte, 0, len(t.prefix)+2*len(id))
	b = append(b, t.prefix...)
	b = hex.AppendEncode(b, []byte(id))
	return string(b)
}

// Get implements tlcp.SessionStore.
func (t *Tiered) Get(id string) ([]byte, bool) {
	if st, ok := t.local.Get(id); ok {
		return st, true
	}
	key := t.key(id)
	if t.shared.unsentHolds(key) {
		// Ended here; the store has not taken its deletion yet.
		return nil, false
	}
	sealed, result, start := t.shared.get(key)
	if result != ResultHit {
		return nil, false
	}
	st, ok := t.open(id, sealed)
	if !ok {
		// Sealed with a key this instance does not have (retired, or
		// another fleet's), or damaged: as good as absent.
		t.shared.report(OpGet, ResultMiss, start)
		return nil, false
	}
	t.shared.report(OpGet, ResultHit, start)
	t.local.Put(id, st, t.lifetime)
	return st, true
}

// Put implements tlcp.SessionStore. A state over sessioncache.MaxState
// (a client chain of many kilobytes) is not kept, in Local nor in the
// store: no instance would keep it after a store hit, and one over the
// store's read bound (redisstore.MaxValue) would be written but never
// read back.
func (t *Tiered) Put(id string, state []byte, lifetime time.Duration) {
	if len(state) > sessioncache.MaxState {
		return
	}
	t.local.Put(id, state, lifetime)
	sealed, err := t.seal(id, state)
	if err != nil {
		return
	}
	if lifetime <= 0 {
		lifetime = t.lifetime
	}
	key := t.key(id)
	t.shared.write(OpSet, func(ctx context.Context) error { return t.shared.store.Set(ctx, key, sealed, lifetime) })
}

// Delete implements tlcp.SessionStore.
func (t *Tiered) Delete(id string) {
	t.local.Delete(id)
	key := t.key(id)
	t.shared.deleteEnded(key, t.shared.now().Add(t.lifetime), func(ctx context.Context, st Store) error {
		if err := st.Delete(ctx, key); err != nil {
			return err
		}
		return t.publishEnded(ctx, st, id)
	})
}

// seal returns the store form of a session.
func (t *Tiered) seal(id string, state []byte) ([]byte, error) {
	if len(id) > 255 {
		return nil, errors.New("sessionstore: session ID longer than 255 bytes")
	}
	pt := make([]byte, 0, len(sealLabel)+1+len(id)+len(state))
	pt = append(pt, sealLabel...)
	pt = append(pt, byte(len(id)))
	pt = append(pt, id...)
	pt = append(pt, state...)
	return ticket.Seal(make([]byte, 0, len(pt)+ticket.Overhead), t.keys, ticket.StoredSession, pt)
}

// open returns the state of a sealed session if it opens with one of the
// keys and was sealed for id.
func (t *Tiered) open(id string, sealed []byte) ([]byte, bool) {
	pt, ok, _ := ticket.Open(t.keys, ticket.StoredSession, sealed)
	if !ok || len(id) > 255 {
		return nil, false
	}
	head := len(sealLabel) + 1 + len(id)
	if len(pt) < head || string(pt[:len(sealLabel)]) != sealLabel || int(pt[len(sealLabel)]) != len(id) ||
		!bytes.Equal(pt[len(sealLabel)+1:head], []byte(id)) {
		return nil, false
	}
	return pt[head:], true
}
