package record

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Record framing shared by TLCP (GB/T 38636 §6.3.3.1) and TLS (RFC 8446
// §5.1): type<u8> || version<u16> || length<u16> || fragment.
const (
	HeaderLen    = 5
	MaxPlaintext = 16384 // 2^14, both protocols

	// maxRecord is the largest record either stack accepts: a TLCP
	// ciphertext of 2^14+2048 bytes (TLS 1.3's limit, 2^14+256, is lower).
	maxRecord = HeaderLen + MaxPlaintext + 2048
)

// Content types (RFC 8446 §5.1; TLCP uses the same values).
const (
	TypeChangeCipherSpec = 20
	TypeAlert            = 21
	TypeHandshake        = 22
	TypeApplicationData  = 23
)

// smallInput is the size of the input buffer of a connection moving
// small records (a handshake): a client's whole second flight, and the
// request right behind it, are read at once, so a server that fails the
// handshake closes with nothing unread (which would reset the connection
// before the peer reads the alert).
const smallInput = 2048

// smallInputs and bigInputs recycle input buffers; a big one holds two full
// records, so that bulk reading allocates nothing.
var (
	smallInputs = sync.Pool{New: func() any { b := make([]byte, smallInput); return &b }}
	bigInputs   = sync.Pool{New: func() any { b := make([]byte, 2*maxRecord); return &b }}
)

// Reader buffers the bytes read from a connection and cuts them into
// records, in a pooled small buffer while records are small and a pooled
// big one while they are not. Release gives the buffer back once the
// caller no longer holds slices of it, so idle connections keep none. The
// zero value is ready to use; a Reader is not safe for concurrent use.
type Reader struct {
	buf      []byte  // *box
	box      *[]byte // from smallInputs or bigInputs
	pos, end int     // unread bytes are buf[pos:end]
}

// Buffered is the number of bytes read from the connection and not yet
// taken as records.
func (r *Reader) Buffered() int { return r.end - r.pos }

// errBadRead is returned for a net.Conn whose Read reported an impossible
// count.
var errBadRead = errors.New("record: invalid Read result")

// fill makes at least n (≤ 2*maxRecord) unread bytes available. At the
// end of the stream it returns io.EOF when nothing is buffered and
// io.ErrUnexpectedEOF otherwise; other errors are the connection's.
func (r *Reader) fill(conn net.Conn, n int) error {
	if r.box == nil {
		r.take(&smallInputs)
	}
	for r.end-r.pos < n {
		if n > len(r.buf)-r.pos {
			if n > len(r.buf) {
				old, oldEnd := r.box, r.end
				unread := r.buf[r.pos:r.end]
				r.box = bigInputs.Get().(*[]byte)
				r.buf = *r.box
				r.pos, r.end = 0, copy(r.buf, unread)
				putSmall(old, oldEnd)
			} else {
				r.pos, r.end = 0, copy(r.buf, r.buf[r.pos:r.end])
			}
		}
		k, err := conn.Read(r.buf[r.end:])
		if k < 0 || k > len(r.buf)-r.end {
			return errBadRead
		}
		r.end += k
		if r.end-r.pos >= n {
			break
		}
		if err != nil {
			if err == io.EOF && r.end-r.pos > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// Header reads the next record's header; the record stays unread. A
// read error is returned as fill returns it (a deadline's timeout leaves
// what was read buffered: the caller may try again).
func (r *Reader) Header(conn net.Conn) (typ uint8, vers uint16, n int, err error) {
	if err := r.fill(conn, HeaderLen); err != nil {
		return 0, 0, 0, err
	}
	h := r.buf[r.pos : r.pos+HeaderLen]
	return h[0], uint16(h[1])<<8 | uint16(h[2]), int(h[3])<<8 | int(h[4]), nil
}

// Record reads and consumes the record whose header Header returned, with
// n bytes of fragment (n ≤ 2^14+2048, which the caller checked), and
// returns it, header included. The bytes are the Reader's: they stay valid
// until the next Header, Release or Free, and the caller may decrypt them
// in place.
func (r *Reader) Record(conn net.Conn, n int) ([]byte, error) {
	if err := r.fill(conn, HeaderLen+n); err != nil {
		return nil, err
	}
	rec := r.buf[r.pos : r.pos+HeaderLen+n]
	r.pos += HeaderLen + n
	return rec, nil
}

// Release gives the buffer back when nothing is unread, and trades a big
// one for a small one when what is unread fits. The caller must hold no
// slice of a record read before (pending application data or handshake
// bytes).
func (r *Reader) Release() {
	switch {
	case r.box == nil:
	case r.pos == r.end:
		r.put()
		r.buf, r.box, r.pos, r.end = nil, nil, 0, 0
	case len(r.buf) > smallInput && r.end-r.pos <= smallInput:
		big := r.box
		unread := r.buf[r.pos:r.end]
		r.take(&smallInputs)
		r.end = copy(r.buf, unread)
		bigInputs.Put(big) // not cleared: bulk traffic would pay it per record
	}
}

// Free gives the buffer back and drops what is unread (the connection is
// closed). The caller must hold no slice of a record.
func (r *Reader) Free() {
	if r.box != nil {
		if len(r.buf) > smallInput {
			clear(r.buf[:r.end]) // records may have been decrypted in place
		}
		r.put()
	}
	r.buf, r.box, r.pos, r.end = nil, nil, 0, 0
}

// take starts reading into an empty buffer from pool.
func (r *Reader) take(pool *sync.Pool) {
	r.box = pool.Get().(*[]byte)
	r.buf, r.pos, r.end = *r.box, 0, 0
}

// put returns the buffer to its pool; a small one is cleared first (it
// may hold records decrypted in place, and clearing it is cheap).
func (r *Reader) put() {
	if len(r.buf) > smallInput {
		bigInputs.Put(r.box)
		return
	}
	putSmall(r.box, r.end)
}

func putSmall(b *[]byte, used int) {
	clear((*b)[:used])
	smallInputs.Put(b)
}

// FreeOnClose is Free for a Conn being closed: it runs only when mu, the
// lock of the input side, is free (a handshake or Read still running keeps
// its buffer) and no decrypted data in *input still refers to the buffer.
func (r *Reader) FreeOnClose(mu *sync.Mutex, input *[]byte) {
	if !mu.TryLock() {
		return
	}
	if len(*input) == 0 {
		r.Free()
	}
	mu.Unlock()
}

// ReleaseIdle is Release when no decrypted application data (data) and no
// handshake bytes (hand) are pending, which may point into the buffer.
func (r *Reader) ReleaseIdle(data, hand []byte) {
	if len(data) == 0 && len(hand) == 0 {
		r.Release()
	}
}

// ReadData is the body of both stacks' Conn.Read once the handshake is
// done and the input side is locked: until decrypted application data
// waits in *data, it gives the input buffer back when nothing refers to
// it, reads and processes one record with next, and handles the
// post-handshake messages that completed with post (while *hand holds
// bytes); then it copies what waits into b, counts it in stats, and gives
// the buffer back once everything was read.
func (r *Reader) ReadData(b []byte, data, hand *[]byte, stats *Counters, next, post func() error) (int, error) {
	for len(*data) == 0 {
		r.ReleaseIdle(*data, *hand)
		if err := next(); err != nil {
			return 0, err
		}
		for len(*hand) > 0 {
			if err := post(); err != nil {
				return 0, err
			}
		}
	}
	n := copy(b, *data)
	*data = (*data)[n:]
	stats.BytesIn(n)
	r.ReleaseIdle(*data, *hand)
	return n, nil
}
