//go:build !linux

package clientshare

import (
	"errors"
	"os"
)

// Supported reports whether this platform has the shared table.
const Supported = false

var errUnsupported = errors.New("clientshare: no shared client table on this platform")

// Create is not supported here: the worker mode needs Linux.
func Create(workers int) (*os.File, error) { return nil, errUnsupported }

// Map is not supported here.
func Map(f *os.File) (*Table, error) { return nil, errUnsupported }

// OpenFD is not supported here.
func OpenFD(fd string) (*Table, error) { return nil, errUnsupported }
