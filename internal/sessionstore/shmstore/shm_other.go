//go:build !linux

package shmstore

import (
	"errors"
	"os"
)

// Supported reports whether this platform has the shared memory store.
const Supported = false

var errUnsupported = errors.New("shmstore: shared memory store not supported on this platform")

// Create is not supported here: the worker mode uses its socket store.
func Create(entries int) (*os.File, error) { return nil, errUnsupported }

// OpenFD is not supported here.
func OpenFD(fd string) (*Store, error) { return nil, errUnsupported }

func processAlive(pid uint32) bool { return true }

// HugePages is false here: there is no shared table.
func HugePages() bool { return false }
