// Package lograte bounds the log lines that remote peers can cause: a
// warning about one client's misbehaviour (an HTTP/2 reset flood) is worth
// a line, but a client that repeats it on connection after connection, or
// many clients at once, must not fill the disk or drown the other lines.
// A Limiter lets one line through per interval and counts the ones it
// holds back, which the next line let through reports.
package lograte

import (
	"sync"

	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// Limiter lets a line through at most once per Interval. The zero value
// is not usable: set Interval. It is safe for concurrent use.
type Limiter struct {
	// Interval is the least time between two lines, in nanoseconds of
	// monoclock (a time.Duration).
	Interval int64
	// now reads the clock (tests replace it); nil: monoclock.Now.
	now func() int64

	mu         sync.Mutex
	next       int64 // when the next line may go; 0: now
	suppressed int
}

// Allow reports whether a line may be logged now and, if so, how many
// lines were held back since the last one let through (to be logged with
// it, e.g. as "suppressed").
func (l *Limiter) Allow() (ok bool, suppressed int) {
	now := monoclock.Now
	if l.now != nil {
		now = l.now
	}
	t := now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next != 0 && t < l.next {
		l.suppressed++
		return false, 0
	}
	l.next = t + l.Interval
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
