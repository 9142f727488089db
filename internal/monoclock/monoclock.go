// Package monoclock reads the monotonic clock alone. time.Now reads both
// the wall clock and the monotonic one; code that only compares instants
// (is a deadline due again, has a handler run for long) needs one read,
// which on the per-request path is measurable.
package monoclock

import "time"

// base anchors Now; instants before it are negative.
var base = time.Now()

// Now returns the monotonic clock in nanoseconds since the process
// started; it is never 0, so that 0 can mean "never".
func Now() int64 { return int64(time.Since(base)) + 1 }

// Of returns t on Now's scale: t's monotonic reading when it has one
// (time.Now and its Add results do), else its wall clock.
func Of(t time.Time) int64 { return int64(t.Sub(base)) + 1 }
