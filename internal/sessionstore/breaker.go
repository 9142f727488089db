package sessionstore

import (
	"sync"
	"time"
)

// Breaker defaults: after BreakerThreshold failures in a row the store is
// not asked for BreakerCooldown; then one call probes it, and its success
// closes the breaker.
const (
	BreakerThreshold = 5
	BreakerCooldown  = time.Second
)

// breaker is a circuit breaker: closed (every call goes through), open (no
// call until the cooldown ends), half-open (one probe call at a time).
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu        sync.Mutex
	fails     int
	openUntil time.Time // zero when closed
	probing   bool
}

func newBreaker(threshold int, cooldown time.Duration, now func() time.Time) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: now}
}

// allow reports whether a call may go to the store; a true answer must be
// followed by done or release.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return true
	}
	if b.now().Before(b.openUntil) || b.probing {
		return false
	}
	b.probing = true
	return true
}

// done records the outcome of an allowed call.
func (b *breaker) done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if ok {
		b.fails, b.openUntil = 0, time.Time{}
		return
	}
	b.fails++
	if b.fails >= b.threshold || !b.openUntil.IsZero() {
		b.openUntil = b.now().Add(b.cooldown)
	}
}

// release ends an allowed call that says nothing of the store's health
// (it refused a value for its size): a probe's turn passes to the next
// call, and the count of failures stays.
func (b *breaker) release() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// open reports whether the breaker is refusing calls now.
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openUntil.IsZero() && b.now().Before(b.openUntil)
}
