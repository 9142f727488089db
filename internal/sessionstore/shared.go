package sessionstore

import (
	"context"
	"errors"
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
}

// NewShared guards store: calls time out after timeout (DefaultTimeout when
// 0) and are reported to obs (may be nil).
func NewShared(store Store, timeout time.Duration, obs Observer) *Shared {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Shared{store: store, timeout: timeout, br: newBreaker(BreakerThreshold, BreakerCooldown, time.Now), obs: obs, now: time.Now}
}

// Store returns the guarded store.
func (s *Shared) Store() Store { return s.store }

// Close ends the subscriptions and closes the store.
func (s *Shared) Close() error {
	s.stopFollowing()
	return s.store.Close()
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

// write runs a bounded write (op is OpSet or OpDelete).
func (s *Shared) write(op string, f func(ctx context.Context) error) {
	if !s.br.allow() {
		s.report(op, ResultSkipped, time.Time{})
		return
	}
	start := s.now()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err := f(ctx)
	cancel()
	s.settle(err)
	s.report(op, resultOf(err), start)
}
