//go:build !linux

package rateshare

import (
	"errors"
	"os"
	"time"
)

// Supported reports whether this platform has the shared table.
const Supported = false

var errUnsupported = errors.New("rateshare: no shared rate table on this platform")

// Create is not supported here: the worker mode needs Linux.
func Create() (*os.File, error) { return nil, errUnsupported }

// Map is not supported here.
func Map(f *os.File) (*Table, error) { return nil, errUnsupported }

// OpenFD is not supported here.
func OpenFD(fd string) (*Table, error) { return nil, errUnsupported }

var timeBase = time.Now()

// Now is a monotonic time in ns (this process's own scale here).
func Now() int64 { return int64(time.Since(timeBase)) + 1 }
