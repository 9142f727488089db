package memfile

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Create makes an anonymous memory file called name of size bytes (zeros)
// whose size can never change, and has format write its header into its
// first header bytes. The file is closed on exec unless passed on
// (exec.Cmd's ExtraFiles).
func Create(name string, size int64, header int, format func(mem []byte)) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	// The seal itself is sealed.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the table's size: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, header, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap: %w", err)
	}
	format(mem)
	unix.Munmap(mem)
	return f, nil
}

// Descriptor parses an inherited file descriptor's number (decimal, as a
// worker's environment carries it).
func Descriptor(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a file descriptor", s)
	}
	return n, nil
}

// Size is the size of the file fd.
func Size(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("fd %d: %w", fd, err)
	}
	return st.Size, nil
}

// Map maps the first size bytes of fd shared, read and write; populate
// makes its pages present at once (no page fault on a first touch).
func Map(fd int, size int, populate bool) ([]byte, error) {
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return mem, nil
}

// Unmap undoes Map.
func Unmap(mem []byte) error { return unix.Munmap(mem) }
