package stime

import (
	"context"
	"time"
)

// A waiter sleeps until an operation's scheduled start (-rate).
//
// Go's timers wake an otherwise idle program through epoll_pwait, whose
// timeout is in whole milliseconds: on the reference machine a 300 µs
// time.Sleep ends 0.82 ms late at the median and 0.9 ms at p99 (2026-12-02,
// 5000 sleeps). -rate counts latency from the scheduled start, so that
// lateness was counted as the server's, and the paced starts bunched into
// millisecond ticks. Where the platform allows, a waiter is a timer that
// the runtime's poller watches as a file descriptor (timerfd on Linux),
// which ends the wait when the kernel's high-resolution timer fires.
type waiter interface {
	// wait sleeps for d; false when ctx ended first.
	wait(ctx context.Context, d time.Duration) bool
	close()
}

// maxWaitStep bounds one sleep of a waiter, so that a long wait still sees
// its context end.
const maxWaitStep = 50 * time.Millisecond

// timerWaiter is the portable waiter: a runtime timer.
type timerWaiter struct{}

func (timerWaiter) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (timerWaiter) close() {}
