package clientshare

import (
	"crypto/rand"
	"fmt"
	"os"

	"github.com/gmproxy/gmproxy/internal/memfile"
)

// Supported reports whether this platform has the shared table.
const Supported = true

// Create makes an empty table for workers workers in a new anonymous
// memory file and returns the file, for the workers to inherit (exec.Cmd's
// ExtraFiles) and map with OpenFD, and the supervisor with Map.
func Create(workers int) (*os.File, error) {
	if workers < 1 || workers > maxWorkers {
		return nil, fmt.Errorf("clientshare: %d workers", workers)
	}
	var seed [16]byte
	rand.Read(seed[:])
	f, err := memfile.Create("gmproxy-clients", int64(Size(workers)), headerSize, func(mem []byte) { format(mem, workers, seed) })
	if err != nil {
		return nil, fmt.Errorf("clientshare: %w", err)
	}
	return f, nil
}

// Map maps the table in f.
func Map(f *os.File) (*Table, error) { return mapFD(int(f.Fd())) }

// OpenFD maps the table in the inherited file descriptor fd (a decimal
// number).
func OpenFD(fd string) (*Table, error) {
	n, err := memfile.Descriptor(fd)
	if err != nil {
		return nil, fmt.Errorf("clientshare: %w", err)
	}
	return mapFD(n)
}

// mapFD maps the whole file fd, shared, with its pages present (a few
// MiB: no page fault on a client's first connection).
func mapFD(fd int) (*Table, error) {
	size, err := memfile.Size(fd)
	if err != nil {
		return nil, fmt.Errorf("clientshare: %w", err)
	}
	if size < headerSize || size > int64(Size(maxWorkers)) {
		return nil, errLayout
	}
	mem, err := memfile.Map(fd, int(size), true)
	if err != nil {
		return nil, fmt.Errorf("clientshare: %w", err)
	}
	t, err := open(mem)
	if err != nil {
		memfile.Unmap(mem)
		return nil, err
	}
	return t, nil
}
