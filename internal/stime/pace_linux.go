package stime

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdWaiter waits on a timerfd (CLOCK_MONOTONIC) read through the runtime's
// poller: the goroutine parks as for a socket, and the poller's
// epoll_pwait returns when the timer expires instead of at its next
// millisecond.
type fdWaiter struct {
	f   *os.File
	fd  int
	buf [8]byte
}

// newWaiter returns a timerfd waiter, or the timer waiter when the kernel
// refuses a timerfd.
func newWaiter() waiter {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return timerWaiter{}
	}
	return &fdWaiter{f: os.NewFile(uintptr(fd), "stime-pacer"), fd: fd}
}

func (w *fdWaiter) wait(ctx context.Context, d time.Duration) bool {
	for d > 0 {
		if ctx.Err() != nil {
			return false
		}
		step := min(d, maxWaitStep)
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(step))}
		if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
			return timerWaiter{}.wait(ctx, d)
		}
		// The read ends at the expiry (8 bytes: the expiry count).
		if _, err := w.f.Read(w.buf[:]); err != nil {
			return timerWaiter{}.wait(ctx, d)
		}
		d -= step
	}
	return ctx.Err() == nil
}

func (w *fdWaiter) close() { w.f.Close() }
