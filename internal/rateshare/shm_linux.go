package rateshare

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Supported reports whether this platform has the shared table.
const Supported = true

// Create makes an empty table in a new anonymous memory file and returns
// the file, for the workers to inherit (exec.Cmd's ExtraFiles) and map
// with OpenFD, and the supervisor with Map.
func Create() (*os.File, error) {
	fd, err := unix.MemfdCreate("gmproxy-rates", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("rateshare: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gmproxy-rates")
	if err := f.Truncate(Size); err != nil {
		f.Close()
		return nil, fmt.Errorf("rateshare: %w", err)
	}
	// Its size is fixed for good (as clientshare's table): a file shrunk
	// under the others would make their next access a SIGBUS.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("rateshare: sealing the table's size: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, headerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rateshare: mmap: %w", err)
	}
	var seed [16]byte
	rand.Read(seed[:])
	format(mem, seed)
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
		return nil, fmt.Errorf("rateshare: %q is not a file descriptor", fd)
	}
	return mapFD(n)
}

// mapFD maps the whole file fd, shared, with its pages present.
func mapFD(fd int) (*Table, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("rateshare: fd %d: %w", fd, err)
	}
	if st.Size != Size {
		return nil, errLayout
	}
	mem, err := unix.Mmap(fd, 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("rateshare: mmap: %w", err)
	}
	t, err := open(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return t, nil
}

// The machine's monotonic clock (CLOCK_MONOTONIC), which every process
// reads alike, read once at start; Now goes on from it with the runtime's
// own monotonic reading (the same clock, without a system call).
var (
	monoBase int64
	timeBase = time.Now()
)

func init() {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
		monoBase = ts.Nano()
	}
}

// Now is the time on the machine's monotonic clock in ns: the scale of
// the table's times, the same in every process.
func Now() int64 { return monoBase + int64(time.Since(timeBase)) }
