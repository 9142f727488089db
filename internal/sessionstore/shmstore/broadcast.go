package shmstore

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
)

// Messages between the workers (sessionstore.Broadcaster): a ring of
// ringSlots entries in the header page, after the geometry.
//
//	ringCount u64 at ringCountOff: messages published so far
//	ring lock u64 at ringLockOff: the publishers' lock word (as a bucket's)
//	entry i at ringOff + i*ringEntry:
//	  seq u64 (the message's number; 0 while written) || channel hash u64 ||
//	  len u16 || message (ringMax bytes)
//
// Publishers take the ring lock, write the entry of message n+1 (its seq
// last) and then the count. Subscribers read the count every pollEvery (an
// atomic load: nothing else while there is nothing new); when it moved they
// take the lock and copy the entries they have not seen. A subscriber that
// fell more than ringSlots messages behind, or finds an entry that does not
// hold the message it expects (its writer died while writing), calls lost:
// the messages are gone.
const (
	ringCountOff = 64
	ringLockOff  = 72
	ringOff      = 128
	ringEntry    = 128
	ringHead     = 18
	ringSlots    = (headerSize - ringOff) / ringEntry
	// RingMax bounds one message (a sealed session ID takes 104 bytes).
	RingMax = ringEntry - ringHead
)

// pollEvery is how often a subscription looks for new messages (an
// atomic load when there are none).
var pollEvery = 50 * time.Millisecond

var _ sessionstore.Broadcaster = (*Store)(nil)

func (t *table) ringCount() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&t.mem[ringCountOff]))
}

func (t *table) entrySeq(i uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&t.mem[ringOff+int(i%ringSlots)*ringEntry]))
}

func (t *table) publish(ctx context.Context, channel string, msg []byte) error {
	if len(msg) > RingMax {
		return ErrTooLarge
	}
	if err := t.lock(ctx, ringLockOff); err != nil {
		return err
	}
	defer t.unlock(ringLockOff)
	n := t.ringCount().Load() + 1
	seq := t.entrySeq(n)
	seq.Store(0)
	e := t.mem[ringOff+int(n%ringSlots)*ringEntry:][:ringEntry]
	binary.LittleEndian.PutUint64(e[8:], t.hash(channel))
	binary.LittleEndian.PutUint16(e[16:], uint16(len(msg)))
	copy(e[ringHead:], msg)
	seq.Store(n)
	t.ringCount().Store(n)
	return nil
}

// read returns the messages on channel after message seen, the number of
// the last one read, and whether some were lost.
func (t *table) read(channel string, seen uint64) (msgs [][]byte, last uint64, lost bool) {
	if t.ringCount().Load() == seen {
		return nil, seen, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	if t.lock(ctx, ringLockOff) != nil {
		return nil, seen, false // the next poll tries again
	}
	defer t.unlock(ringLockOff)
	count := t.ringCount().Load()
	if count < seen {
		return nil, count, true // a count going back: another table
	}
	if count-seen > ringSlots {
		lost = true
		seen = count - ringSlots
	}
	h := t.hash(channel)
	// At most ringSlots entries, counted apart from the numbers: a
	// damaged count near 2^64 must not make n wrap around.
	for i := uint64(1); i <= count-seen; i++ {
		n := seen + i
		seq := t.entrySeq(n)
		if seq.Load() != n {
			lost = true
			continue
		}
		e := t.mem[ringOff+int(n%ringSlots)*ringEntry:][:ringEntry:ringEntry]
		ch := binary.LittleEndian.Uint64(e[8:])
		l := int(binary.LittleEndian.Uint16(e[16:]))
		switch {
		case l > RingMax:
			lost = true // damaged
		case ch == h:
			msgs = append(msgs, append([]byte(nil), e[ringHead:ringHead+l]...))
		}
	}
	return msgs, count, lost
}

// Publish implements sessionstore.Broadcaster: the message reaches every
// worker's subscriptions (this one's included) within pollEvery.
func (s *Store) Publish(ctx context.Context, channel string, msg []byte) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.t.publish(ctx, channel, msg)
}

// Subscribe implements sessionstore.Broadcaster. It starts from the
// messages published after the call.
func (s *Store) Subscribe(channel string, deliver func([]byte), lost func()) (stop func()) {
	if s.err != nil {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	seen := s.t.ringCount().Load()
	go func() {
		defer close(stopped)
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if s.closed.Load() {
				continue
			}
			msgs, last, missed := s.t.read(channel, seen)
			seen = last
			if missed {
				lost()
			}
			for _, m := range msgs {
				deliver(m)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
