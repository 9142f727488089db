// Package clientshare counts, in memory the worker processes share, the
// connections and handshakes in progress of each client address, so that
// the per-client limits (max_connections_per_client,
// max_handshakes_per_client) bound a client across all the workers, as
// they bound it in one process. The kernel spreads one client's
// connections over the workers' SO_REUSEPORT sockets; counted by each
// worker alone, a client could hold N times each limit.
//
// The table is a fixed array of slots. A slot holds a tag word (a keyed
// hash of the listener and the client address in the high 48 bits, a
// version in the low 16; 0: free) and one counter word per worker: the
// connections (high 32 bits) and handshakes (low 32 bits) that worker
// holds for the client. A worker writes only its own counter word, so the
// counts of a worker that dies are known: the supervisor clears its word
// in every slot (ClearWorker) before it starts the replacement. No lock
// is taken; every access is atomic:
//   - Admit finds the client's slot among probeLen slots from its hash, or
//     claims a free one (tag word 0, or a tag whose counters are all zero)
//     with a compare-and-swap of the tag word it read before checking the
//     counters; adds one connection and one handshake to its own word;
//     then bumps the slot's version with a compare-and-swap that fails if
//     the slot was reclaimed for another client in between (its count is
//     then undone and retried); and sums every worker's word: over a
//     limit, it takes its counts back and refuses. Adding before summing
//     means two workers admitting at once may both refuse, never both pass
//     a limit.
//   - The version closes the window between a reclaimer's check that a
//     slot is idle and its compare-and-swap: an admission of the slot's
//     client that completes in that window has bumped the version, so the
//     reclaim fails instead of taking over a slot with a count in it
//     (which would leave that count to the wrong client and let the right
//     one start again from zero elsewhere).
//   - A worker that claims a slot looks again for the client earlier in
//     its window: two workers claiming different slots for one client at
//     once (one reclaimed while the other scanned) would each count only
//     their own; the later gives its slot back and counts in the first.
//   - A client whose probeLen slots are all held by others (the table is
//     full there) gets NoRoom: the caller counts it in its own process, as
//     before the table existed.
package clientshare

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"net/netip"
	"sync/atomic"
	"unsafe"
)

// Verdict is Admit's answer.
type Verdict int

const (
	// Admitted: counted; give it back with Release.
	Admitted Verdict = iota
	// NoRoom: the table has no slot for the client; count it elsewhere.
	NoRoom
	// TooManyConns: the client holds its maximum of connections.
	TooManyConns
	// TooManyHandshakes: the client holds its maximum of handshakes in
	// progress.
	TooManyHandshakes
)

// Clients is the number of client addresses with connections open at
// once over all workers and listeners (a client counts once per listener
// it connects to) that the table has room for; a client past it is counted
// by its worker alone.
const Clients = 1 << 16

// Slots is the number of client slots: twice Clients, because a client's
// slot is one of probeLen from its hash, and with that few to choose from
// a table fills unevenly: one of Clients slots turns clients away from
// about 40% full (thousands when full), one of twice that many turns away
// a few in ten thousand with Clients in it. Each slot takes 8 bytes plus
// 8 per worker: 3 MiB for 2 workers, 17 MiB for 16.
const Slots = 2 * Clients

// probeLen is how many slots from its hash a client's slot may be in.
const probeLen = 16

// maxWorkers bounds the workers a table counts for (conf allows 256).
const maxWorkers = 256

const (
	magic      = 0x32746e6c63706d67 // "gmpclnt2", little-endian
	headerSize = 64
	hs         = 1       // a handshake in a counter word
	conn       = 1 << 32 // a connection
)

var errLayout = errors.New("clientshare: not a client table of this version")

// Size is the bytes of a table for workers workers.
func Size(workers int) int { return headerSize + Slots*slotSize(workers) }

func slotSize(workers int) int { return 8 * (1 + workers) }

// format writes the header of an empty table (mem zeroed) for workers
// workers, with the hash key seed.
func format(mem []byte, workers int, seed [16]byte) {
	binary.LittleEndian.PutUint32(mem[8:], uint32(workers))
	binary.LittleEndian.PutUint32(mem[12:], Slots)
	copy(mem[16:32], seed[:])
	binary.LittleEndian.PutUint64(mem[0:], magic) // last: the header is whole
}

// Table is a mapped client table.
type Table struct {
	mem     []byte
	workers int
	seed    [16]byte
}

// open checks mem's header and returns its table.
func open(mem []byte) (*Table, error) {
	if len(mem) < headerSize || binary.LittleEndian.Uint64(mem) != magic {
		return nil, errLayout
	}
	w := int(binary.LittleEndian.Uint32(mem[8:]))
	if w < 1 || w > maxWorkers || binary.LittleEndian.Uint32(mem[12:]) != Slots || len(mem) != Size(w) {
		return nil, errLayout
	}
	t := &Table{mem: mem, workers: w}
	copy(t.seed[:], mem[16:32])
	return t, nil
}

// Workers is the number of workers the table counts for.
func (t *Table) Workers() int { return t.workers }

func (t *Table) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&t.mem[off]))
}

// id is slot s's tag word; counter(s, w) is worker w's counter word in
// it.
func (t *Table) id(s int) *atomic.Uint64 { return t.word(headerSize + s*slotSize(t.workers)) }
func (t *Table) counter(s, w int) *atomic.Uint64 {
	return t.word(headerSize + s*slotSize(t.workers) + 8*(1+w))
}

// A tag word: the client's tag in the high 48 bits, the slot's version in
// the low 16.
const versionBits = 16

func tagOf(word uint64) uint64 { return word >> versionBits }

// bumped is word with its version advanced (wrapping) and its tag kept.
func bumped(word uint64) uint64 {
	const mask = 1<<versionBits - 1
	return word&^mask | (word+1)&mask
}

// claimed is the tag word of a slot claimed for tag from word: a new
// version, so that one who read word before cannot take it back unseen.
func claimed(tag, word uint64) uint64 { return tag<<versionBits | (word+1)&(1<<versionBits-1) }

// testHook, when set (tests), runs at the named points of Admit.
var testHook func(point string)

// idle reports whether no worker counts anything in slot s.
func (t *Table) idle(s int) bool {
	for w := 0; w < t.workers; w++ {
		if t.counter(s, w).Load() != 0 {
			return false
		}
	}
	return true
}

// ClearWorker zeroes worker w's counters in every slot: the counts of a
// worker process that exited (its connections closed with it). Call it
// before another process counts as w.
func (t *Table) ClearWorker(w int) {
	for s := 0; s < Slots; s++ {
		t.counter(s, w).Store(0)
	}
}

// Worker returns worker w's view of the table.
func (t *Table) Worker(w int) (*View, error) {
	if w < 0 || w >= t.workers {
		return nil, errors.New("clientshare: worker index out of range")
	}
	return &View{t: t, w: w}, nil
}

// View counts as one worker. It is safe for concurrent use.
type View struct {
	t *Table
	w int
}

// key is the slot tag of client on listener: a hash keyed with the table's
// seed, so that clients cannot choose addresses that crowd one client's
// slots; 48 bits, never 0.
func (t *Table) key(listener string, client netip.Addr) uint64 {
	var in [16 + 8 + 16]byte
	copy(in[:16], t.seed[:])
	f := fnv.New64a()
	f.Write([]byte(listener))
	binary.LittleEndian.PutUint64(in[16:], f.Sum64())
	a := client.As16()
	copy(in[24:], a[:])
	sum := sha256.Sum256(in[:])
	return binary.LittleEndian.Uint64(sum[:])>>versionBits | 1
}

// Admit counts one connection with its handshake from client on listener,
// unless the client already holds maxConns connections or maxHandshakes
// handshakes (0: no limit) summed over every worker. On Admitted, slot is
// what Release takes.
func (v *View) Admit(listener string, client netip.Addr, maxConns, maxHandshakes int) (slot int, _ Verdict) {
	t := v.t
	tag := t.key(listener, client)
	start := int(tag>>1) % Slots
	for try := 0; try < 8; try++ {
		s, ok := t.find(tag, start)
		if !ok {
			noRooms.Add(1)
			return 0, NoRoom
		}
		own := t.counter(s, v.w)
		own.Add(conn + hs)
		if !t.bump(s, tag) { // reclaimed for another client meanwhile
			sub(own, conn+hs)
			continue
		}
		var conns, handshakes uint64
		for w := 0; w < t.workers; w++ {
			c := t.counter(s, w).Load()
			conns += c >> 32
			handshakes += c & 0xffffffff
		}
		switch {
		case maxConns > 0 && conns > uint64(maxConns):
			sub(own, conn+hs)
			return 0, TooManyConns
		case maxHandshakes > 0 && handshakes > uint64(maxHandshakes):
			sub(own, conn+hs)
			return 0, TooManyHandshakes
		}
		return s, Admitted
	}
	noRooms.Add(1)
	return 0, NoRoom
}

// noRooms counts this process's NoRoom verdicts.
var noRooms atomic.Uint64

// NoRooms is how many connections this process was told NoRoom for (a
// client's every connection while the table has no slot for it: full, or
// its slots taken by others at each try), and so counted alone (their
// per-client limits then apply per worker): a metric, as nginx logs a
// shared zone that could not allocate a node.
func NoRooms() uint64 { return noRooms.Load() }

// bump advances slot s's version if it still holds tag; false when it
// was reclaimed for another client.
func (t *Table) bump(s int, tag uint64) bool {
	w := t.id(s)
	for {
		word := w.Load()
		if tagOf(word) != tag {
			return false
		}
		if w.CompareAndSwap(word, bumped(word)) {
			return true
		}
	}
}

// holder returns the first of the probeLen slots from start that holds
// tag, or -1.
func (t *Table) holder(tag uint64, start int) int {
	for j := 0; j < probeLen; j++ {
		if s := (start + j) % Slots; tagOf(t.id(s).Load()) == tag {
			return s
		}
	}
	return -1
}

// find returns the slot holding tag among the probeLen slots from start,
// or claims the first free one for it; false when every one is held by
// another client.
func (t *Table) find(tag uint64, start int) (int, bool) {
	for try := 0; try < 4; try++ {
		free, freeWord := -1, uint64(0)
		for j := 0; j < probeLen; j++ {
			s := (start + j) % Slots
			// The word is read before the counters: a count added after
			// the check below comes with a version bump that fails the
			// claim.
			got := t.id(s).Load()
			if got != 0 && tagOf(got) == tag {
				return s, true
			}
			if free < 0 && (got == 0 || t.idle(s)) {
				free, freeWord = s, got
			}
		}
		if free < 0 {
			return 0, false
		}
		if testHook != nil {
			testHook("claim")
		}
		word := claimed(tag, freeWord)
		if !t.id(free).CompareAndSwap(freeWord, word) {
			continue // taken or used meanwhile, perhaps for this client: look again
		}
		// Another worker may have claimed another slot for the client at
		// the same time: the first in the window is the client's, and
		// this one goes back (unless someone counts in it already: then
		// both stay, each counted, until that count drains).
		if s := t.holder(tag, start); s >= 0 && s != free {
			t.id(free).CompareAndSwap(word, 0)
			return s, true
		}
		return free, true
	}
	return 0, false
}

// Release gives back what Admit counted in slot: its handshake (when the
// handshake ended) and/or its connection (when it closed).
func (v *View) Release(slot int, handshake, connection bool) {
	var d uint64
	if handshake {
		d += hs
	}
	if connection {
		d += conn
	}
	sub(v.t.counter(slot, v.w), d)
}

// sub takes d from a.
func sub(a *atomic.Uint64, d uint64) { a.Add(^(d - 1)) }
