package sessionstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// FleetKeys is a ticket-key set that the instances of a fleet agree on
// through a Store, with no leader. Time is cut into epochs of Rotation;
// the key of epoch e lives in the store under prefix+"ticket-key-v2:"+e and is
// created by whichever instance first needs it, with AddOrGet (SET NX):
// every instance reads back the one value that won, so there is never more
// than one key per epoch. The key of the current epoch encrypts; the next
// epoch's key is created ahead and decrypts (an instance whose clock runs
// ahead may already use it), and so do the keys of past epochs for as long
// as a ticket sealed with them can be valid (Lifetime). When the epoch
// turns every instance switches to the key it already holds, with no round
// trip; a background refresh creates the key after it.
//
// Secrets are sealed in the store with the wrap key, which only the
// instances have (a file), so reading the store opens no ticket and no
// session. Until the store has answered once, FleetKeys encrypts with a
// random key of its own (tickets then resume on this instance only), and it
// keeps opening those tickets afterwards.
type FleetKeys struct {
	shared   *Shared
	wrap     ticket.Source
	prefix   string
	rotation time.Duration
	keep     int64 // past epochs that still decrypt
	timeout  time.Duration
	now      func() time.Time
	fallback *ticket.Rotator
	usedFb   atomic.Bool
	// prev are the keys of the set this one replaced (a reload), which
	// open tickets until prevUntil and never encrypt.
	prev      []ticket.Key
	prevUntil time.Time

	snap atomic.Pointer[keySnap]

	refreshMu sync.Mutex
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// keySnap is the key set as of one epoch.
type keySnap struct {
	epoch   int64
	byEpoch map[int64]fleetKey
	keys    []ticket.Key // epoch's key first (if known), newest first
	prev    bool         // keys ends with the previous set's keys
	// fallback says that the store gave neither epoch's key nor the one
	// before: the instance's own rotating keys encrypt, ahead of keys.
	fallback bool
}

// fleetKey is one epoch's key and its sealed form in the store.
type fleetKey struct {
	key    ticket.Key
	sealed []byte
	// displaced are keys this instance held for the epoch before the
	// store gave another (it lost its keys, and an instance that held
	// none made the epoch's first): they open the tickets sealed with
	// them for as long as the epoch's key would, and never encrypt.
	displaced []ticket.Key
}

// maxDisplaced bounds the displaced keys kept per epoch.
const maxDisplaced = 4

// withHeld is k, the epoch's key as the store gave it, keeping held, what
// this instance had for the epoch before: a key other than the store's
// is displaced, not dropped.
func withHeld(k, held fleetKey) fleetKey {
	k.displaced = held.displaced
	if held.key.Name != k.key.Name {
		k.displaced = append(slices.Clip(held.displaced), held.key)
		if n := len(k.displaced); n > maxDisplaced {
			k.displaced = k.displaced[n-maxDisplaced:]
		}
	}
	return k
}

// FleetKeysConfig configures FleetKeys.
type FleetKeysConfig struct {
	// Prefix starts the store keys (the configured key prefix).
	Prefix string
	// Rotation is how long one key encrypts.
	Rotation time.Duration
	// Lifetime is how long a ticket stays valid (the session lifetime):
	// a key decrypts that long after it stopped encrypting.
	Lifetime time.Duration
	// Wrap seals the secrets in the store (its first key seals; all open).
	Wrap ticket.Source
	// RefreshTimeout bounds one refresh (default 2s): refreshes run in the
	// background, never on a handshake.
	RefreshTimeout time.Duration
	// Previous and PreviousUntil are what Retiring gave of the key set
	// this one replaces (a reload that changed the rotation, the lifetime,
	// the key prefix, the wrap key or the store): those keys open the
	// tickets they sealed until PreviousUntil, as if no reload had
	// happened, and never encrypt. (A new rotation numbers the epochs
	// anew, so the store's keys of the old numbering are never read
	// again.)
	Previous      []ticket.Key
	PreviousUntil time.Time
}

// wrapLabel starts the plaintext of a sealed ticket-key secret, followed by
// the epoch (8 bytes, big endian), the key prefix's length (2 bytes) and
// the prefix, then the secret: a sealed key opens only as the key of its
// own epoch and of its own fleet (key prefix), so that someone who can
// write to a store two fleets share with one wrap key cannot make one
// fleet encrypt with the other's key (its tickets would resume on the
// other's sites). Version 1 had no prefix; its keys are under other names
// (storeKey), so instances of both versions share a store during an
// upgrade, each with its own keys.
const wrapLabel = "gmproxy fleet ticket key v2\x00"

// NewFleetKeys returns the fleet's key set. It does not talk to the store:
// call Refresh once (bounded) and Start to keep it fresh.
func NewFleetKeys(shared *Shared, cfg FleetKeysConfig) *FleetKeys {
	rot := cfg.Rotation
	if rot <= 0 {
		rot = time.Hour
	}
	keep := int64((cfg.Lifetime+rot-1)/rot) + 1
	t := cfg.RefreshTimeout
	if t <= 0 {
		t = 2 * time.Second
	}
	return &FleetKeys{
		shared: shared, wrap: cfg.Wrap, prefix: cfg.Prefix, rotation: rot, keep: keep, timeout: t,
		prev: slices.Clone(cfg.Previous), prevUntil: cfg.PreviousUntil,
		now:      time.Now,
		fallback: ticket.NewRotator(rot, time.Duration(keep+1)*rot),
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
}

// SetClock replaces the clock (tests; before Start).
func (f *FleetKeys) SetClock(now func() time.Time) {
	f.now = now
	f.fallback.SetClock(now)
}

func (f *FleetKeys) epochOf(t time.Time) int64 { return t.UnixNano() / int64(f.rotation) }

func (f *FleetKeys) storeKey(epoch int64) string {
	return f.prefix + "ticket-key-v2:" + strconv.FormatInt(epoch, 10)
}

// Retiring returns the keys that open this set's tickets now, and when
// the last ticket they sealed stops being valid (a key encrypts for a
// rotation at most, and a ticket lives Lifetime): the set that replaces
// this one at a reload takes them as FleetKeysConfig.Previous and
// PreviousUntil.
func (f *FleetKeys) Retiring() ([]ticket.Key, time.Time) {
	now := f.now()
	until := now.Add(time.Duration(f.keep) * f.rotation)
	if f.prevUntil.After(until) {
		until = f.prevUntil
	}
	return slices.Clone(f.TicketKeys()), until
}

// prevLive reports whether the previous set's keys still open tickets.
func (f *FleetKeys) prevLive(now time.Time) bool {
	return len(f.prev) > 0 && now.Before(f.prevUntil)
}

// TicketKeys implements ticket.Source.
func (f *FleetKeys) TicketKeys() []ticket.Key {
	s := f.snap.Load()
	now := f.now()
	if s == nil {
		f.usedFb.Store(true)
		fb := f.fallback.TicketKeys()
		if f.prevLive(now) {
			return append(slices.Clip(fb), f.prev...)
		}
		return fb
	}
	ep := f.epochOf(now)
	if ep == s.epoch && !s.fallback {
		if s.prev && !f.prevLive(now) {
			// The previous set's keys expired within the epoch.
			n := f.snapshot(ep, s.byEpoch)
			f.snap.CompareAndSwap(s, n)
			return n.keys
		}
		return s.keys
	}
	if _, ok := s.byEpoch[ep]; !ok {
		// The store has not given this epoch's key since the epoch
		// turned (unreachable, or what it holds does not open). The key
		// of the epoch before keeps encrypting for this one; later the
		// instance's own rotating keys do, so that no key encrypts for
		// more than two rotations (someone who can write junk into the
		// store must not pin one), and the fleet's keys still decrypt.
		if _, ok := s.byEpoch[ep-1]; ok {
			if s.epoch == ep-1 {
				return s.keys
			}
			// A snapshot older than the epoch before (no handshake
			// since): the epoch before's key encrypts, not its own.
			n := f.snapshot(ep-1, s.byEpoch)
			f.snap.CompareAndSwap(s, n)
			return n.keys
		}
		f.usedFb.Store(true)
		if ep != s.epoch || (s.prev && !f.prevLive(now)) {
			// Once an epoch, the keys too old to open a valid ticket
			// go, as when the store answers: one snapshot would
			// otherwise keep them for as long as the store is down.
			n := f.snapshot(ep, s.byEpoch)
			n.fallback = true
			f.snap.CompareAndSwap(s, n)
			s = n
		}
		return append(slices.Clip(f.fallback.TicketKeys()), s.keys...)
	}
	n := f.snapshot(ep, s.byEpoch)
	f.snap.CompareAndSwap(s, n)
	return n.keys
}

// snapshot orders the keys for epoch ep: ep's key, then the others newest
// first, dropping those too old to open a valid ticket, then the fallback
// keys if they were used.
func (f *FleetKeys) snapshot(ep int64, byEpoch map[int64]fleetKey) *keySnap {
	s := &keySnap{epoch: ep, byEpoch: map[int64]fleetKey{}}
	epochs := make([]int64, 0, len(byEpoch))
	for e, k := range byEpoch {
		if e >= ep-f.keep && e <= ep+1 {
			s.byEpoch[e] = k
			epochs = append(epochs, e)
		}
	}
	slices.SortFunc(epochs, func(a, b int64) int {
		switch {
		case a == ep:
			return -1
		case b == ep:
			return 1
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	for _, e := range epochs {
		s.keys = append(s.keys, s.byEpoch[e].key)
		s.keys = append(s.keys, s.byEpoch[e].displaced...)
	}
	if f.usedFb.Load() {
		s.keys = append(s.keys, f.fallback.TicketKeys()...)
	}
	if f.prevLive(f.now()) {
		s.keys = append(s.keys, f.prev...)
		s.prev = true
	}
	return s
}

// Refresh makes sure the keys of this epoch and the next exist in the
// store and loads them with the past ones that still decrypt.
func (f *FleetKeys) Refresh(ctx context.Context) error {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	start := f.shared.now()
	err := f.refresh(ctx)
	f.shared.report(OpKeys, resultOf(err), start)
	return err
}

func (f *FleetKeys) refresh(ctx context.Context) error {
	now := f.now()
	ep := f.epochOf(now)
	ttl := time.Duration(f.keep+3) * f.rotation
	old := f.snap.Load()
	byEpoch := map[int64]fleetKey{}
	for e := ep; e <= ep+1; e++ {
		// Offer the key this instance already holds for e, if any: a
		// store that lost its keys (a restarted Redis) gets the same ones
		// back, and the fleet's tickets keep opening.
		var sealed []byte
		if old != nil {
			sealed = old.byEpoch[e].sealed
		}
		if sealed == nil {
			var secret [ticket.KeySize]byte
			if _, err := rand.Read(secret[:]); err != nil {
				return err
			}
			var err error
			if sealed, err = f.sealSecret(e, secret[:]); err != nil {
				return err
			}
		}
		got, err := f.shared.store.AddOrGet(ctx, f.storeKey(e), sealed, ttl)
		if err != nil {
			return err
		}
		k, err := f.openSecret(e, got)
		if err != nil {
			return err
		}
		byEpoch[e] = fleetKey{key: k, sealed: got}
		if old != nil {
			if held, ok := old.byEpoch[e]; ok {
				byEpoch[e] = withHeld(byEpoch[e], held)
			}
		}
	}
	past := make([]string, 0, f.keep)
	for e := ep - f.keep; e < ep; e++ {
		past = append(past, f.storeKey(e))
	}
	vals, err := f.shared.store.GetMany(ctx, past)
	if err != nil {
		return err
	}
	for i, v := range vals {
		e := ep - f.keep + int64(i)
		if v == nil {
			continue
		}
		if k, err := f.openSecret(e, v); err == nil {
			byEpoch[e] = fleetKey{key: k, sealed: v}
			if old != nil {
				if held, ok := old.byEpoch[e]; ok {
					byEpoch[e] = withHeld(byEpoch[e], held)
				}
			}
		}
	}
	if old != nil {
		// Keep keys the store lost (a restarted Redis) while they can
		// still open valid tickets.
		for e, k := range old.byEpoch {
			if _, ok := byEpoch[e]; !ok {
				byEpoch[e] = k
			}
		}
	}
	f.snap.Store(f.snapshot(ep, byEpoch))
	return nil
}

func (f *FleetKeys) sealSecret(epoch int64, secret []byte) ([]byte, error) {
	pt := make([]byte, 0, len(wrapLabel)+8+2+len(f.prefix)+len(secret))
	pt = append(pt, wrapLabel...)
	pt = binary.BigEndian.AppendUint64(pt, uint64(epoch))
	pt = binary.BigEndian.AppendUint16(pt, uint16(len(f.prefix)))
	pt = append(pt, f.prefix...)
	pt = append(pt, secret...)
	return ticket.Seal(nil, f.wrap, ticket.WrappedKey, pt)
}

// errWrap: a stored key did not open with the wrap key.
var errWrap = errors.New("the stored ticket key does not open with this instance's wrap key (sessions.ticket_keys.wrap_key_file differs between instances?)")

func (f *FleetKeys) openSecret(epoch int64, sealed []byte) (ticket.Key, error) {
	pt, ok, _ := ticket.Open(f.wrap, ticket.WrappedKey, sealed)
	head := len(wrapLabel) + 8 + 2 + len(f.prefix)
	if !ok || len(pt) != head+ticket.KeySize || string(pt[:len(wrapLabel)]) != wrapLabel ||
		binary.BigEndian.Uint64(pt[len(wrapLabel):]) != uint64(epoch) ||
		string(pt[len(wrapLabel)+10:head]) != f.prefix { // (a prefix of another length: another total length)
		return ticket.Key{}, fmt.Errorf("epoch %d: %w", epoch, errWrap)
	}
	return ticket.NewKey(pt[head:], time.Unix(0, epoch*int64(f.rotation)))
}

// Start refreshes in the background every interval until Close; onErr,
// if not nil, hears about failed refreshes.
func (f *FleetKeys) Start(interval time.Duration, onErr func(error)) {
	if interval <= 0 {
		interval = min(max(f.rotation/8, time.Second), 30*time.Second)
	}
	go func() {
		defer close(f.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				if err := f.Refresh(context.Background()); err != nil && onErr != nil {
					onErr(err)
				}
			}
		}
	}()
}

// Close stops the background refresh started by Start.
func (f *FleetKeys) Close() {
	f.closeOnce.Do(func() {
		close(f.stop)
	})
}

// Wait waits for the background refresh to end after Close (only when
// Start was called).
func (f *FleetKeys) Wait() { <-f.done }
