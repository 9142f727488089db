package clientshare

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
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
	fd, err := unix.MemfdCreate("gmproxy-clients", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("clientshare: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gmproxy-clients")
	if err := f.Truncate(int64(Size(workers))); err != nil {
		f.Close()
		return nil, fmt.Errorf("clientshare: %w", err)
	}
	// Its size is fixed for good, as the session table's (shmstore): a
	// worker that shrank the file (a bug, or one taken over) would make
	// the next access past the new end by any other process a SIGBUS,
	// the supervisor's ClearWorker of that worker included. The seal
	// itself is sealed.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("clientshare: sealing the table's size: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, headerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("clientshare: mmap: %w", err)
	}
	var seed [16]byte
	rand.Read(seed[:])
	format(mem, workers, seed)
	unix.Munmap(mem)
	return f, nil
}

// Map maps the table in f.
func Map(f *os.File) (*Table, error) { return mapFD(int(f.Fd())) }

// OpenFD maps the table in the inherited file descriptor fd (a decimal
// number).
func OpenFD(fd string) (*Table, error) {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("clientshare: %q is not a file descriptor", fd)
	}
	return mapFD(n)
}

// mapFD maps the whole file fd, shared, with its pages present (a few
// MiB: no page fault on a client's first connection).
func mapFD(fd int) (*Table, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("clientshare: fd %d: %w", fd, err)
	}
	if st.Size < headerSize || st.Size > int64(Size(maxWorkers)) {
		return nil, errLayout
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("clientshare: mmap: %w", err)
	}
	t, err := open(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return t, nil
}
