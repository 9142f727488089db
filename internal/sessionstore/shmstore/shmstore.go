// Package shmstore is a sessionstore.Store in memory that the worker
// processes of one machine share: a fixed-size hash table in an anonymous
// memory file (memfd) that gmproxy's supervisor creates and every worker
// maps. A TLCP session ID made by one worker resumes on another without a
// round trip to another process, as nginx's "ssl_session_cache shared:"
// zone does for its workers. (The supervisor's socket store, localstore,
// costs a wake-up of the supervisor per full handshake; shmstore takes
// its place on Linux.)
//
// Layout. A header page (magic, geometry, hash seed, and the ring of the
// workers' messages: broadcast.go), then the buckets. A
// bucket is a 64-byte header holding its lock word, then Ways slots of
// SlotSize bytes. A key lives in the bucket its hash names; a full bucket
// gives up the entry that expires first. A slot is
//
//	expiry u64 (Unix ms; 0: empty) || hash u64 || key_len u16 || 0 u16 ||
//	value_len u32 || key (MaxKey bytes) || value (MaxValue bytes)
//
// little-endian. A key longer than MaxKey or a value longer than MaxValue
// is refused (ErrTooLarge): such a session resumes only on the worker that
// made it.
//
// Locking. A bucket's lock word (u64) holds the process ID of its holder
// in its low 32 bits (0: free) and the number of times the lock was taken
// in its high 32 bits, taken with compare-and-swap. Every critical section
// is a copy of at most one slot. A process that died holding a lock
// (killed in the middle of a write) is noticed after a millisecond of
// waiting and its lock taken over; the slot it was writing may then hold
// anything, which costs nothing but a miss: values are sealed by their
// writers (sessionstore.Tiered, FleetKeys) and whatever is read back is
// bounds-checked. A holder that is alive but slow past the call's timeout
// makes the call fail (the handshake goes on without the store, as with
// a slow Redis); but one acquisition seen held for staleHold is taken
// over even from a live process: that is no worker copying a slot but one
// that died holding the lock and whose process ID was given to another
// process since, which would otherwise keep the bucket (or the ring)
// refusing every call for as long as it lives. The goroutines of one
// process wait for each other on mutexes, not on the lock word.
//
// The mapping lives as long as the process: Close refuses later calls but
// keeps the memory mapped, because a handshake that still holds the store
// after a reload must not touch unmapped memory.
package shmstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
)

// Type is the sessions.store type of the worker mode's shared memory
// store; it is never written in a configuration file.
const Type = "shm"

// Geometry.
const (
	// Ways is the number of slots per bucket.
	Ways = 8
	// SlotSize is the size of one entry.
	SlotSize = 1024
	// MaxKey and MaxValue bound one entry's key and value.
	MaxKey   = 128
	MaxValue = SlotSize - slotHead - MaxKey

	headerSize   = 4096
	bucketHeader = 64
	bucketSize   = bucketHeader + Ways*SlotSize
	slotHead     = 24
	// maxBuckets keeps the file under 4 GiB.
	maxBuckets = (1<<32 - headerSize) / bucketSize
)

const magic = "gmproxy shm v1\x00\x00"

// deadCheck is the wait for a bucket's lock after which its holder is
// checked for life; lockWait bounds the wait (and so does the call's
// context).
const (
	deadCheck = time.Millisecond
	lockWait  = 50 * time.Millisecond
)

// staleHold is how long one acquisition of a lock may be seen held by a
// live process before it is taken over (see Locking in the package
// comment): far longer than any critical section, even descheduled.
const staleHold = time.Second

var (
	// ErrTooLarge refuses a key or value that does not fit a slot; it is
	// a sessionstore.ErrTooLarge, no failure of the store.
	ErrTooLarge = fmt.Errorf("shmstore: entry larger than a slot: %w", sessionstore.ErrTooLarge)
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("shmstore: store closed")
	errBusy   = errors.New("shmstore: bucket locked by a live process for too long")
	errLayout = errors.New("shmstore: not a gmproxy shared memory store")
)

// Size returns the size of a table that holds about entries entries.
func Size(entries int) int64 {
	return headerSize + int64(buckets(entries))*bucketSize
}

func buckets(entries int) uint32 {
	n := (max(entries, 1) + Ways - 1) / Ways
	return uint32(min(n, maxBuckets))
}

// table is the hash table in mem.
type table struct {
	mem      []byte
	nbuckets uint32
	seed     uint64
	pid      uint32
	stripes  [64]stripe
	now      func() time.Time
	alive    func(pid uint32) bool
}

// stripe is one of a process's mutexes in front of the lock words, with
// what its holder knows of the lock words of its buckets.
type stripe struct {
	mu   sync.Mutex
	held uint64 // the lock word as this process took it (one at a time)
	// seen are the lock words this process waited for in vain, by bucket,
	// and when each was first seen: a word seen for staleHold is one
	// acquisition that has held its lock that long. An entry goes when
	// its bucket's lock is taken.
	seen map[int]seenLock
}

type seenLock struct {
	word  uint64
	since time.Time
}

// format writes the header of a table of Size(entries) bytes in mem (the
// slots of a new file are zero: empty).
func format(mem []byte, entries int, seed uint64) {
	copy(mem, magic)
	binary.LittleEndian.PutUint32(mem[16:], buckets(entries))
	binary.LittleEndian.PutUint32(mem[20:], Ways)
	binary.LittleEndian.PutUint32(mem[24:], SlotSize)
	binary.LittleEndian.PutUint64(mem[32:], seed)
}

// open checks the header of mem and returns its table.
func open(mem []byte) (*table, error) {
	if len(mem) < headerSize || string(mem[:16]) != magic ||
		binary.LittleEndian.Uint32(mem[20:]) != Ways || binary.LittleEndian.Uint32(mem[24:]) != SlotSize {
		return nil, errLayout
	}
	n := binary.LittleEndian.Uint32(mem[16:])
	if n == 0 || n > maxBuckets || int64(len(mem)) < headerSize+int64(n)*bucketSize {
		return nil, errLayout
	}
	return &table{
		mem: mem, nbuckets: n, seed: binary.LittleEndian.Uint64(mem[32:]),
		pid: uint32(os.Getpid()), now: time.Now, alive: processAlive,
	}, nil
}

// hash is FNV-1a of the key, from an offset basis mixed with the table's
// seed: the same in every process (a per-process seeded hash would not
// be).
func (t *table) hash(key string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037) ^ t.seed
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	return h
}

func (t *table) bucket(h uint64) int {
	return headerSize + int(h%uint64(t.nbuckets))*bucketSize
}

func (t *table) lockWord(b int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&t.mem[b]))
}

func (t *table) stripe(b int) *stripe { return &t.stripes[(b/bucketSize)%len(t.stripes)] }

// acquired is the lock word of lock word w taken by pid: one more
// acquisition, held by pid.
func acquired(w uint64, pid uint32) uint64 { return (w>>32+1)<<32 | uint64(pid) }

// lock takes bucket b's lock: first the stripe of this process's own
// mutexes that b falls in, so that the goroutines of one process queue on
// a mutex and only processes spin on the word; then the word. A word
// holding this process's ID under the stripe is a dead process's whose
// ID came back; one holding a dead process's ID is taken over after
// deadCheck, and so is one acquisition seen held for staleHold; a live
// holder is otherwise waited for until ctx ends or lockWait.
func (t *table) lock(ctx context.Context, b int) error {
	st := t.stripe(b)
	st.mu.Lock()
	w := t.lockWord(b)
	take := func(word uint64) bool {
		nw := acquired(word, t.pid)
		if !w.CompareAndSwap(word, nw) {
			return false
		}
		st.held = nw
		if len(st.seen) > 0 {
			delete(st.seen, b)
		}
		return true
	}
	var start time.Time
	for i := 0; ; i++ {
		word := w.Load()
		holder := uint32(word)
		if (holder == 0 || holder == t.pid) && take(word) {
			return nil
		}
		if i < 64 {
			continue
		}
		runtime.Gosched()
		if i%64 != 0 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
			continue
		}
		waited := time.Since(start)
		if waited >= deadCheck && holder != 0 && (!t.alive(holder) || st.stale(b, word, t.now())) && take(word) {
			return nil
		}
		if waited >= lockWait || ctx.Err() != nil {
			st.mu.Unlock()
			return errBusy
		}
	}
}

// stale reports whether lock word word of bucket b was first seen at
// least staleHold before now; it remembers the word when it is new.
func (st *stripe) stale(b int, word uint64, now time.Time) bool {
	if s, ok := st.seen[b]; ok && s.word == word {
		return now.Sub(s.since) >= staleHold
	}
	if st.seen == nil {
		st.seen = map[int]seenLock{}
	}
	st.seen[b] = seenLock{word: word, since: now}
	return false
}

// unlock lets bucket b's lock go, unless it was taken over meanwhile.
func (t *table) unlock(b int) {
	st := t.stripe(b)
	t.lockWord(b).CompareAndSwap(st.held, st.held&^(1<<32-1))
	st.mu.Unlock()
}

// slot returns the offset of slot i of bucket b.
func slot(b, i int) int { return b + bucketHeader + i*SlotSize }

// entry reads slot s's fields; ok is false for an empty, expired or
// damaged slot.
func (t *table) entry(s int, now int64) (expiry int64, h uint64, key, val []byte, ok bool) {
	m := t.mem[s : s+SlotSize]
	expiry = int64(binary.LittleEndian.Uint64(m))
	h = binary.LittleEndian.Uint64(m[8:])
	kl := int(binary.LittleEndian.Uint16(m[16:]))
	vl := int(binary.LittleEndian.Uint32(m[20:]))
	if expiry <= now || kl > MaxKey || vl > MaxValue {
		return expiry, h, nil, nil, false
	}
	return expiry, h, m[slotHead : slotHead+kl], m[slotHead+MaxKey : slotHead+MaxKey+vl], true
}

// find returns the slot holding key in bucket b, or -1.
func (t *table) find(b int, h uint64, key string, now int64) int {
	for i := range Ways {
		s := slot(b, i)
		_, eh, k, _, ok := t.entry(s, now)
		if ok && eh == h && string(k) == key {
			return s
		}
	}
	return -1
}

// victim returns the slot to write a new key into: an empty or expired
// one, else the one that expires first.
func (t *table) victim(b int, now int64) int {
	best, bestExp := -1, int64(0)
	for i := range Ways {
		s := slot(b, i)
		exp, _, _, _, ok := t.entry(s, now)
		if !ok {
			return s
		}
		if best < 0 || exp < bestExp {
			best, bestExp = s, exp
		}
	}
	return best
}

func (t *table) write(s int, h uint64, key string, val []byte, expiry int64) {
	m := t.mem[s : s+SlotSize]
	binary.LittleEndian.PutUint64(m, 0) // empty while half written
	binary.LittleEndian.PutUint64(m[8:], h)
	binary.LittleEndian.PutUint16(m[16:], uint16(len(key)))
	binary.LittleEndian.PutUint32(m[20:], uint32(len(val)))
	copy(m[slotHead:], key)
	copy(m[slotHead+MaxKey:], val)
	binary.LittleEndian.PutUint64(m, uint64(expiry))
}

func (t *table) get(ctx context.Context, key string) ([]byte, bool, error) {
	if len(key) > MaxKey {
		return nil, false, nil
	}
	h := t.hash(key)
	b := t.bucket(h)
	now := t.now().UnixMilli()
	if err := t.lock(ctx, b); err != nil {
		return nil, false, err
	}
	defer t.unlock(b)
	s := t.find(b, h, key, now)
	if s < 0 {
		return nil, false, nil
	}
	_, _, _, v, _ := t.entry(s, now)
	return append([]byte(nil), v...), true, nil
}

// put stores val under key until expiry; with addOnly a live entry is kept
// and its value returned instead.
func (t *table) put(ctx context.Context, key string, val []byte, ttl time.Duration, addOnly bool) ([]byte, error) {
	if len(key) > MaxKey || len(val) > MaxValue {
		return nil, ErrTooLarge
	}
	h := t.hash(key)
	b := t.bucket(h)
	now := t.now()
	ms := now.UnixMilli()
	expiry := now.Add(ttl).UnixMilli()
	if expiry <= ms {
		expiry = ms + 1
	}
	if err := t.lock(ctx, b); err != nil {
		return nil, err
	}
	defer t.unlock(b)
	s := t.find(b, h, key, ms)
	if s >= 0 && addOnly {
		_, _, _, v, _ := t.entry(s, ms)
		return append([]byte(nil), v...), nil
	}
	if s < 0 {
		s = t.victim(b, ms)
	}
	t.write(s, h, key, val, expiry)
	return val, nil
}

func (t *table) delete(ctx context.Context, key string) error {
	if len(key) > MaxKey {
		return nil
	}
	h := t.hash(key)
	b := t.bucket(h)
	now := t.now().UnixMilli()
	if err := t.lock(ctx, b); err != nil {
		return err
	}
	defer t.unlock(b)
	if s := t.find(b, h, key, now); s >= 0 {
		binary.LittleEndian.PutUint64(t.mem[s:], 0)
	}
	return nil
}

// Store is a sessionstore.Store over a mapped table.
type Store struct {
	t      *table
	err    error // Failed's
	closed atomic.Bool
}

// Failed returns a Store whose every call fails with err: the store of a
// table that could not be mapped (the handshakes go on without it).
func Failed(err error) *Store { return &Store{err: err} }

func (s *Store) check(ctx context.Context) error {
	switch {
	case s.err != nil:
		return s.err
	case s.closed.Load():
		return ErrClosed
	}
	return ctx.Err()
}

// Get implements sessionstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.check(ctx); err != nil {
		return nil, false, err
	}
	return s.t.get(ctx, key)
}

// Set implements sessionstore.Store.
func (s *Store) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	_, err := s.t.put(ctx, key, val, ttl, false)
	return err
}

// AddOrGet implements sessionstore.Store.
func (s *Store) AddOrGet(ctx context.Context, key string, val []byte, ttl time.Duration) ([]byte, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.t.put(ctx, key, val, ttl, true)
}

// GetMany implements sessionstore.Store.
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, ok, err := s.t.get(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok {
			out[i] = v
		}
	}
	return out, nil
}

// Delete implements sessionstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.t.delete(ctx, key)
}

// Close refuses later calls; the memory stays mapped (see the package
// comment).
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}
