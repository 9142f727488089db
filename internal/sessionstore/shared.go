package sessionstore

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"
)

// Shared is a Store as the handshake path uses it: every call bounded by a
// timeout, reported to an Observer, and skipped while the circuit breaker
// is open. One Shared serves all the session caches of a process.
type Shared struct {
	store   Store
	timeout time.Duration
	br      *breaker
	obs     Observer
	now     func() time.Time

	followMu     sync.Mutex
	followers    map[string]*follower // by channel (followEnded)
	followClosed bool

	// unsent are the deletions of ended sessions that the store did not
	// take (breaker open, timeout, error), by store key: retried in the
	// background, and meanwhile no lookup of this process takes the key's
	// value from the store.
	unsentMu   sync.Mutex
	unsent     map[string]unsentDelete
	retrying   bool
	closed     bool
	retryEvery time.Duration
	// next is the store that replaced this one (RetireTo): it takes
	// over the unsent deletions.
	next *Shared
}

// unsentDelete is a deletion to try again until expires (the session's
// end of life: then the store has dropped it anyway). run deletes from
// the store it is given: after a reload that is the replacing store.
type unsentDelete struct {
	expires time.Time
	run     func(ctx context.Context, st Store) error
}

// maxUnsent bounds the deletions kept for retrying; past it the oldest
// caller's session stays in the store (as before it was counted).
const maxUnsent = 4096

// NewShared guards store: calls time out after timeout (DefaultTimeout when
// 0) and are reported to obs (may be nil).
func NewShared(store Store, timeout time.Duration, obs Observer) *Shared {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Shared{store: store, timeout: timeout, br: newBreaker(BreakerThreshold, BreakerCooldown, time.Now), obs: obs, now: time.Now, retryEvery: BreakerCooldown}
}

// Store returns the guarded store.
func (s *Shared) Store() Store { return s.store }

// Close ends the subscriptions and closes the store.
func (s *Shared) Close() error {
	s.unsentMu.Lock()
	s.closed = true
	s.unsentMu.Unlock()
	s.stopFollowing()
	return s.store.Close()
}

// FlushAndClose closes the store as Close does, after one last attempt,
// within about the duration within (each deletion bounded by the store's
// timeout), at the deletions of ended sessions it has not taken: a store
// that a reload removes hands them to no other (RetireTo), and its Redis,
// which other instances may still share, would otherwise keep sessions
// ended with a fatal alert resumable there (RFC 5246 §7.2). The attempt
// passes the circuit breaker, which guards handshakes, not this. dropped
// is how many deletions the store still had not taken when it closed.
func (s *Shared) FlushAndClose(within time.Duration) (dropped int, err error) {
	deadline := s.now().Add(within)
	s.unsentMu.Lock()
	batch := maps.Clone(s.unsent)
	s.unsentMu.Unlock()
	for k, d := range batch {
		if !s.now().Before(deadline) {
			break
		}
		if !s.now().Before(d.expires) {
			continue
		}
		start := s.now()
		ctx, cancel := context.WithTimeout(context.Background(), min(s.timeout, deadline.Sub(start)))
		err := d.run(ctx, s.store)
		cancel()
		s.report(OpDelete, resultOf(err), start)
		if err == nil {
			s.unsentMu.Lock()
			delete(s.unsent, k)
			s.unsentMu.Unlock()
		}
	}
	s.unsentMu.Lock()
	s.closed = true
	for _, d := range s.unsent {
		if s.now().Before(d.expires) {
			dropped++
		}
	}
	s.unsentMu.Unlock()
	s.stopFollowing()
	return dropped, s.store.Close()
}

// BreakerOpen reports whether calls are being skipped now.
func (s *Shared) BreakerOpen() bool { return s.br.open() }

func (s *Shared) report(op, result string, start time.Time) {
	if s.obs == nil {
		return
	}
	var d time.Duration
	if !start.IsZero() {
		d = s.now().Sub(start)
	}
	s.obs.StoreOp(op, result, d)
}

// settle records the outcome of a call the breaker allowed: a refusal of
// a value for its size (ErrTooLarge) is none.
func (s *Shared) settle(err error) {
	if errors.Is(err, ErrTooLarge) {
		s.br.release()
		return
	}
	s.br.done(err == nil)
}

// get looks key up. val is nil unless found; the result is ResultHit,
// ResultMiss, or why the store did not answer. A hit is reported by the
// caller (which may still find the value unusable) through reportGet.
func (s *Shared) get(key string) (val []byte, result string, start time.Time) {
	if !s.br.allow() {
		s.report(OpGet, ResultSkipped, time.Time{})
		return nil, ResultSkipped, time.Time{}
	}
	start = s.now()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	v, found, err := s.store.Get(ctx, key)
	cancel()
	s.settle(err)
	switch {
	case err != nil:
		result = resultOf(err)
		s.report(OpGet, result, start)
		return nil, result, start
	case !found:
		s.report(OpGet, ResultMiss, start)
		return nil, ResultMiss, start
	}
	return v, ResultHit, start
}

// errSkipped: the breaker kept a write from the store.
var errSkipped = errors.New("sessionstore: skipped, the circuit breaker is open")

// write runs a bounded write (op is OpSet or OpDelete) and returns its
// error (errSkipped when the breaker is open).
func (s *Shared) write(op string, f func(ctx context.Context) error) error {
	if !s.br.allow() {
		s.report(op, ResultSkipped, time.Time{})
		return errSkipped
	}
	start := s.now()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err := f(ctx)
	cancel()
	s.settle(err)
	s.report(op, resultOf(err), start)
	return err
}

// deleteEnded runs f, the deletion of an ended session under key (and
// its message to the other instances), now; one the store does not take
// is retried every retryEvery until it is or until expires, and until
// then get does not take key's value from the store: a session ended
// with a fatal alert must not resume (RFC 5246 §7.2), also not from the
// store once it answers again.
func (s *Shared) deleteEnded(key string, expires time.Time, f func(ctx context.Context, st Store) error) {
	if s.write(OpDelete, func(ctx context.Context) error { return f(ctx, s.store) }) == nil {
		return
	}
	s.keepUnsent(key, unsentDelete{expires: expires, run: f})
}

// keepUnsent holds d, key's deletion, for retrying (on the replacing
// store once this one is retired).
func (s *Shared) keepUnsent(key string, d unsentDelete) {
	s.unsentMu.Lock()
	if next := s.next; next != nil {
		s.unsentMu.Unlock()
		next.keepUnsent(key, d)
		return
	}
	defer s.unsentMu.Unlock()
	if s.closed {
		return
	}
	if s.unsent == nil {
		s.unsent = map[string]unsentDelete{}
	}
	if _, ok := s.unsent[key]; !ok && len(s.unsent) >= maxUnsent {
		return
	}
	s.unsent[key] = d
	if !s.retrying {
		s.retrying = true
		go s.retryUnsent()
	}
}

// unsentHolds reports whether key's session ended and the store may
// still hold it.
func (s *Shared) unsentHolds(key string) bool {
	s.unsentMu.Lock()
	d, ok := s.unsent[key]
	next := s.next
	s.unsentMu.Unlock()
	if ok && s.now().Before(d.expires) {
		return true
	}
	// A retired store's lookups (handshakes still in flight) see the
	// deletions it handed over.
	return next != nil && next.unsentHolds(key)
}

// retryUnsent tries the unsent deletions again until none is left.
func (s *Shared) retryUnsent() {
	for {
		time.Sleep(s.retryEvery)
		s.unsentMu.Lock()
		if s.closed || len(s.unsent) == 0 {
			s.unsent, s.retrying = nil, false
			s.unsentMu.Unlock()
			return
		}
		batch := make(map[string]unsentDelete, len(s.unsent))
		for k, d := range s.unsent {
			batch[k] = d
		}
		s.unsentMu.Unlock()
		for k, d := range batch {
			if !s.now().Before(d.expires) || s.write(OpDelete, func(ctx context.Context) error { return d.run(ctx, s.store) }) == nil {
				s.unsentMu.Lock()
				delete(s.unsent, k)
				s.unsentMu.Unlock()
			}
		}
	}
}

// RetireTo hands the deletions of ended sessions that this store has not
// taken to next, the store replacing it after a reload, and so also those
// that fail from now until this one closes: next retries them and, until
// they are taken, does not resume their sessions (a replaced store is
// mostly the same Redis with other settings, and the sessions of the
// handshakes in flight still end on this one).
func (s *Shared) RetireTo(next *Shared) {
	if next == nil || next == s {
		return
	}
	s.unsentMu.Lock()
	s.next = next
	moved := s.unsent
	s.unsent = nil
	s.unsentMu.Unlock()
	for k, d := range moved {
		next.keepUnsent(k, d)
	}
}
