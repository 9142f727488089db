package shmstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gmproxy/gmproxy/internal/memfile"
)

// Supported reports whether this platform has the shared memory store.
const Supported = true

// Create makes a table for about entries entries in a new anonymous memory
// file and returns the file, for the workers to inherit (exec.Cmd's
// ExtraFiles) and map with OpenFD. Its memory is taken when the first
// worker maps it, or as it is written for a table over populateMax (see
// mapFD).
func Create(entries int) (*os.File, error) {
	var seed [8]byte
	rand.Read(seed[:])
	f, err := memfile.Create("gmproxy-sessions", Size(entries), headerSize, func(mem []byte) {
		format(mem, entries, binary.LittleEndian.Uint64(seed[:]))
	})
	if err != nil {
		return nil, fmt.Errorf("shmstore: %w", err)
	}
	return f, nil
}

var (
	mu     sync.Mutex
	byDesc = map[string]*table{}
)

// OpenFD maps the table in the inherited file descriptor fd (a decimal
// number, as the worker's configuration carries it). The file is mapped
// once per process: every call with the same fd returns a Store of the
// same table.
func OpenFD(fd string) (*Store, error) {
	mu.Lock()
	defer mu.Unlock()
	if t, ok := byDesc[fd]; ok {
		return &Store{t: t}, nil
	}
	n, err := memfile.Descriptor(fd)
	if err != nil {
		return nil, fmt.Errorf("shmstore: %w", err)
	}
	mem, err := mapFD(n)
	if err != nil {
		return nil, err
	}
	t, err := open(mem)
	if err != nil {
		memfile.Unmap(mem)
		return nil, err
	}
	byDesc[fd] = t
	return &Store{t: t}, nil
}

// populateMax bounds the table that mapFD maps with every page present.
const populateMax = 256 << 20

// mapFD maps the whole file fd, shared, and asks for it in 2 MiB pages
// (MADV_HUGEPAGE; see HugePages). A table of up to populateMax bytes (12
// workers at the default cache_size) is then mapped with every page
// present: the first process to map it allocates all of its memory (Size:
// 21 MiB per 20480 sessions) and every process builds its page tables at
// start. Mapped lazily, the table would cost a page fault on the first
// touch of each page by each worker, and since session IDs are random a
// busy worker touches a new page on most full handshakes until it has
// covered the table, at several µs a fault on a virtual machine
// (BenchmarkHandshake). A larger table is mapped lazily, so that a machine
// with many workers does not build page tables for memory its sessions may
// never fill.
func mapFD(fd int) ([]byte, error) {
	size, err := memfile.Size(fd)
	if err != nil {
		return nil, fmt.Errorf("shmstore: %w", err)
	}
	if size < headerSize || size > 1<<32 {
		return nil, errLayout
	}
	mem, err := memfile.Map(fd, int(size), false)
	if err != nil {
		return nil, fmt.Errorf("shmstore: %w", err)
	}
	// The advice must come before the pages: a page already present
	// stays a 4 KiB one. An error means a kernel without transparent huge
	// pages, where the table works the same in 4 KiB pages.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	if size <= populateMax {
		populate(mem)
	}
	return mem, nil
}

// populate makes every page of mem present and mapped: MADV_POPULATE_WRITE
// (Linux 5.14), or on an older kernel a read of one byte per page, which
// for a shared memory file allocates the page as a write would. Other
// processes may be using the table: neither way changes its contents.
func populate(mem []byte) {
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	touch(mem)
}

// touch reads one byte of every page of mem.
func touch(mem []byte) {
	page := os.Getpagesize()
	var sum byte
	for i := 0; i < len(mem); i += page {
		sum += mem[i]
	}
	touched = sum
}

// touched keeps touch's reads from being optimised away; nothing reads it.
//
//lint:ignore U1000 written so that the reads stay
var touched byte

// hugePageModes are the settings of shmem_enabled under which a table
// mapped with MADV_HUGEPAGE gets 2 MiB pages.
var hugePageModes = []string{"advise", "within_size", "always", "force"}

// HugePages reports whether this kernel gives the table 2 MiB pages: its
// transparent huge pages for shared memory
// (/sys/kernel/mm/transparent_hugepage/shmem_enabled) are set to advise,
// within_size, always or force. Debian and most distributions ship never.
// With 4 KiB pages a worker's lookup of a random session ID misses the
// TLB on most new handshakes. What a miss costs depends on the machine:
// in profiles on a paravirtualised VM the 2 MiB pages cut the session
// table's share of a new TLCP handshake from about 28 µs to 7 µs; on a
// KVM guest it was about 3 µs with either page size. The setting is the operator's:
//
//	echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled
//
// before gmproxy starts (deploy/systemd/gmproxy.service shows a
// tmpfiles.d line that sets it at boot); advise gives huge pages only to
// memory that asks.
func HugePages() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
	if err != nil {
		return false
	}
	return hugePagesFrom(string(b))
}

// hugePagesFrom reads shmem_enabled's text, whose chosen mode is the one
// in brackets ("always within_size [advise] never deny force").
func hugePagesFrom(s string) bool {
	for _, f := range strings.Fields(s) {
		if mode, ok := strings.CutPrefix(f, "["); ok {
			return slices.Contains(hugePageModes, strings.TrimSuffix(mode, "]"))
		}
	}
	return false
}

// processAlive reports whether process pid exists (a process of another
// user counts).
func processAlive(pid uint32) bool {
	err := syscall.Kill(int(pid), 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}
