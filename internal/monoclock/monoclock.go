// Package monoclock reads the monotonic clock alone. time.Now reads both
// the wall clock and the monotonic one; code that only compares instants
// (is a deadline due again, has a handler run for long) needs one read,
// which on the per-request path is measurable.
package monoclock

import (
	"math"
	"time"
)

// base anchors Now; instants before it are negative.
var base = time.Now()

// Now returns the monotonic clock in nanoseconds since the process
// started; it is never 0, so that 0 can mean "never".
func Now() int64 { return int64(time.Since(base)) + 1 }

// Of returns t on Now's scale: t's monotonic reading when it has one
// (time.Now and its Add results do), else its wall clock. An instant
// further from the start than a Duration reaches maps to the earliest or
// the latest value (time.Time.Sub saturates; the +1 must not carry the
// latest over to the earliest).
func Of(t time.Time) int64 {
	n := int64(t.Sub(base))
	if n == math.MaxInt64 {
		return n
	}
	return n + 1
}
