package frontdoor

import (
	"context"
	"sync"
	"time"

	"github.com/gmproxy/gmproxy/internal/record"
)

// deadlineContext is the context of a handshake Serve runs. Nothing but
// its deadline ends it (Serve's handshakes have no parent context; Close
// ends them by closing their connections), and the connection carries
// that deadline for every read and write already. So the context needs no
// timer and no watcher of its own: Err compares the clock with the
// deadline, and only a caller that waits on Done (a key operation queued
// for a slot or sent to a key server) makes its channel and timer. It
// implements record.ConnDeadline, so the protocol stacks do not watch it.
// Net effect per handshake: no context.WithDeadline timer and no
// context.AfterFunc registration (see BenchmarkServing's allocs/op).
type deadlineContext struct {
	deadline time.Time

	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	closed bool
	timer  *time.Timer
}

var _ record.ConnDeadline = (*deadlineContext)(nil)

func (c *deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed at the deadline, made on first call.
func (c *deadlineContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if d := time.Until(c.deadline); d > 0 {
			c.timer = time.AfterFunc(d, c.expire)
		} else {
			close(c.done)
			c.closed = true
		}
	}
	return c.done
}

// Err is context.DeadlineExceeded from the deadline on. A Done channel
// made earlier is closed then if its timer has not yet fired, so that Err
// and Done agree.
func (c *deadlineContext) Err() error {
	if time.Now().Before(c.deadline) {
		return nil
	}
	c.expire()
	return context.DeadlineExceeded
}

func (c *deadlineContext) expire() {
	c.mu.Lock()
	if c.done != nil && !c.closed {
		close(c.done)
		c.closed = true
	}
	c.mu.Unlock()
}

func (c *deadlineContext) Value(any) any { return nil }

// ConnDeadline marks the context as one whose deadline its connection
// enforces (record.ConnDeadline).
func (c *deadlineContext) ConnDeadline() {}

// stop releases the timer, if Done made one.
func (c *deadlineContext) stop() {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
}

func (c *deadlineContext) String() string { return "frontdoor.deadlineContext" }
