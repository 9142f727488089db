package rateshare

import (
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gmproxy/gmproxy/internal/memfile"
)

// Supported reports whether this platform has the shared table.
const Supported = true

// Create makes an empty table in a new anonymous memory file and returns
// the file, for the workers to inherit (exec.Cmd's ExtraFiles) and map
// with OpenFD, and the supervisor with Map.
func Create() (*os.File, error) {
	var seed [16]byte
	rand.Read(seed[:])
	f, err := memfile.Create("gmproxy-rates", Size, headerSize, func(mem []byte) { format(mem, seed) })
	if err != nil {
		return nil, fmt.Errorf("rateshare: %w", err)
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
		return nil, fmt.Errorf("rateshare: %w", err)
	}
	return mapFD(n)
}

// mapFD maps the whole file fd, shared, with its pages present.
func mapFD(fd int) (*Table, error) {
	size, err := memfile.Size(fd)
	if err != nil {
		return nil, fmt.Errorf("rateshare: %w", err)
	}
	if size != Size {
		return nil, errLayout
	}
	mem, err := memfile.Map(fd, Size, true)
	if err != nil {
		return nil, fmt.Errorf("rateshare: %w", err)
	}
	t, err := open(mem)
	if err != nil {
		memfile.Unmap(mem)
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
