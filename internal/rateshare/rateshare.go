// Package rateshare keeps, in memory the worker processes share, the state
// of the routes' rate_limit: one theoretical arrival time (the generic
// cell rate algorithm's) per route and client, so that a limit bounds a
// client across all the workers, as it bounds it in one process. The
// kernel spreads one client's connections over the workers'
// SO_REUSEPORT sockets; counted by each worker alone, a client could send
// N times the rate.
//
// The table is a fixed array of buckets, each a lock word and
// SlotsPerBucket slots of two words: a tag (a keyed hash of the route's
// scope and the client; 0: free) and the theoretical arrival time on the
// machine's monotonic clock (Now). A key's bucket and tag come from one
// hash; everything a request does to its bucket happens under the bucket's
// lock, held for a few loads and stores:
//   - the lock word holds the holder's worker index + 1, so that the
//     supervisor can release the locks of a worker that died holding one
//     (ClearWorker), which no other worker could tell from a slow holder;
//   - a worker that cannot take a lock within lockWait (its holder
//     stopped, or descheduled for far longer than a time slice) gets
//     Busy: the caller counts the client in its own process, as before
//     the table existed;
//   - a slot whose time has passed says what a free one does (its client
//     has its whole allowance back): it may be taken for another key;
//     with none such, the slot with the earliest time is (its client is
//     the nearest to its whole allowance, the one that can only gain from
//     being forgotten).
package rateshare

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Counts is the number of routes' clients inside their limits (an entry
// leaves as soon as its client has its allowance back) the table keeps at
// once. Buckets and SlotsPerBucket size it: four times Counts slots,
// because keys crowd some buckets while others stay half empty; with only
// Counts slots, a table of Counts clients forgets one in five of them,
// with four times that, a few in ten thousand. 4.2 MiB.
const (
	Counts         = 1 << 16
	SlotsPerBucket = 8
	Buckets        = 4 * Counts / SlotsPerBucket
)

const (
	magic      = 0x31657461727067 // "gprate1", little-endian
	headerSize = 64
	slotSize   = 16
	bucketSize = 8 + SlotsPerBucket*slotSize
	// spinTries attempts to take a bucket's lock spin; the later ones
	// yield the processor between attempts, for up to lockWait.
	spinTries = 64
	// lockWait bounds the wait for a bucket's lock: far longer than the
	// few loads and stores a holder makes, even one descheduled by the
	// kernel in the middle of them for a time slice or two (milliseconds),
	// so that Busy means a holder that stopped (a worker killed holding
	// it, until the supervisor's ClearWorker), not a slow one. A fixed
	// count of attempts gave up after about 0.2 ms, shorter than one time
	// slice: every worker then counted the busy bucket's clients alone,
	// each with its whole burst again.
	lockWait = 20 * time.Millisecond
	// maxWorkers bounds the worker indexes a lock word may hold (conf
	// allows 256).
	maxWorkers = 256
)

// Size is the bytes of a table.
const Size = headerSize + Buckets*bucketSize

var errLayout = errors.New("rateshare: not a rate table of this version")

// format writes the header of an empty table (mem zeroed, Size bytes) with
// the hash key seed.
func format(mem []byte, seed [16]byte) {
	binary.LittleEndian.PutUint32(mem[8:], Buckets)
	binary.LittleEndian.PutUint32(mem[12:], SlotsPerBucket)
	copy(mem[16:32], seed[:])
	binary.LittleEndian.PutUint64(mem[0:], magic) // last: the header is whole
}

// Table is a mapped rate table.
type Table struct {
	mem  []byte
	seed [16]byte
}

// open checks mem's header and returns its table.
func open(mem []byte) (*Table, error) {
	if len(mem) != Size || binary.LittleEndian.Uint64(mem) != magic ||
		binary.LittleEndian.Uint32(mem[8:]) != Buckets || binary.LittleEndian.Uint32(mem[12:]) != SlotsPerBucket {
		return nil, errLayout
	}
	t := &Table{mem: mem}
	copy(t.seed[:], mem[16:32])
	return t, nil
}

func (t *Table) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&t.mem[off]))
}

func (t *Table) lock(b int) *atomic.Uint64 { return t.word(headerSize + b*bucketSize) }
func (t *Table) tag(b, s int) *atomic.Uint64 {
	return t.word(headerSize + b*bucketSize + 8 + s*slotSize)
}
func (t *Table) tat(b, s int) *atomic.Uint64 {
	return t.word(headerSize + b*bucketSize + 8 + s*slotSize + 8)
}

// ClearWorker releases the bucket locks worker w holds: a worker process
// that exited (or was killed) while holding one. Call it before another
// process counts as w.
func (t *Table) ClearWorker(w int) {
	owner := uint64(w) + 1
	for b := 0; b < Buckets; b++ {
		t.lock(b).CompareAndSwap(owner, 0)
	}
}

// Worker returns worker w's view of the table.
func (t *Table) Worker(w int) (*View, error) {
	if w < 0 || w >= maxWorkers {
		return nil, errors.New("rateshare: worker index out of range")
	}
	return &View{t: t, owner: uint64(w) + 1}, nil
}

// View counts as one worker. It is safe for concurrent use.
type View struct {
	t     *Table
	owner uint64
}

// Scope is the hash of a route's scope (its site, name and rate): part of
// every key of its clients.
func Scope(s string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(s))
	return f.Sum64()
}

// Key is where a route's client is counted.
type Key struct {
	bucket int
	tag    uint64 // never 0
}

// Key is the key of client on the route of scope: a hash keyed with the
// table's seed, so that a client cannot choose an address whose tag is
// another client's and spend that client's allowance.
func (v *View) Key(scope uint64, client netip.Addr) Key {
	var in [16 + 8 + 16]byte
	copy(in[:16], v.t.seed[:])
	binary.LittleEndian.PutUint64(in[16:], scope)
	a := client.As16()
	copy(in[24:], a[:])
	sum := sha256.Sum256(in[:])
	tag := binary.LittleEndian.Uint64(sum[:8])
	if tag == 0 {
		tag = 1
	}
	return Key{bucket: int(binary.LittleEndian.Uint32(sum[8:]) % Buckets), tag: tag}
}

// Verdict is Allow's answer.
type Verdict int

const (
	// Allowed: the request took one of the client's allowance.
	Allowed Verdict = iota
	// Limited: the client has no allowance left; Allow returns how long
	// until it has one.
	Limited
	// Busy: the key's bucket could not be locked; count the client
	// elsewhere.
	Busy
)

// busies counts this process's Busy verdicts.
var busies atomic.Uint64

// Busies is how many requests this process was told Busy for, and so
// counted alone (their client's rate then applies per worker): a metric.
func Busies() uint64 { return busies.Load() }

// Allow takes one request from k's allowance at now (Now's scale): a
// client may run tolerance ns ahead of one request per interval ns. When
// it is Limited, wait is the time until it may send again.
func (v *View) Allow(k Key, now, interval, tolerance int64) (verdict Verdict, wait int64) {
	t := v.t
	lk := t.lock(k.bucket)
	if !v.acquire(lk) {
		busies.Add(1)
		return Busy, 0
	}
	defer lk.Store(0)
	// The key's slot, else the one it may take: a free one, else the one
	// with the earliest time (a passed time is as good as free).
	slot, victim := -1, -1
	var victimTat uint64
	for s := 0; s < SlotsPerBucket; s++ {
		tag := t.tag(k.bucket, s).Load()
		if tag == k.tag {
			slot = s
			break
		}
		at := uint64(0)
		if tag != 0 {
			at = t.tat(k.bucket, s).Load()
		}
		if victim < 0 || at < victimTat {
			victim, victimTat = s, at
		}
	}
	tat := int64(0)
	if slot >= 0 {
		tat = int64(t.tat(k.bucket, slot).Load())
	} else {
		slot = victim // taken only if the request passes
	}
	if tat < now {
		tat = now
	}
	if w := tat - now - tolerance; w > 0 {
		return Limited, w
	}
	t.tag(k.bucket, slot).Store(k.tag)
	t.tat(k.bucket, slot).Store(uint64(tat + interval))
	return Allowed, 0
}

// spinHook, when set (tests), runs after each failed attempt to take a
// bucket's lock, with the attempt's number.
var spinHook func(try int)

// acquire takes lk for v's worker, or gives up after lockWait.
func (v *View) acquire(lk *atomic.Uint64) bool {
	var start time.Time
	for i := 0; ; i++ {
		if lk.Load() == 0 && lk.CompareAndSwap(0, v.owner) {
			return true
		}
		if spinHook != nil {
			spinHook(i)
		}
		if i < spinTries {
			continue
		}
		if i%spinTries == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) >= lockWait {
				return false
			}
		}
		runtime.Gosched()
	}
}
