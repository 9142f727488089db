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

// smallInput is the inline input buffer of an idle connection: a
// handshake's small records and a record header fit without a pooled
// buffer.
const smallInput = 512

// bigInputs recycles the input buffers of connections moving records
// larger than smallInput: one holds two full records, so that bulk
// reading allocates nothing.
var bigInputs = sync.Pool{New: func() any { b := make([]byte, 2*maxRecord); return &b }}

// Reader buffers the bytes read from a connection and cuts them into
// records. Records are read into an inline buffer while they are small and
// into a pooled big one while they are not; Release gives the big one back
// once the caller no longer holds slices of it, so idle connections keep
// none. The zero value is ready to use; a Reader is not safe for concurrent
// use.
type Reader struct {
	buf      []byte // small[:] or *big
	big      *[]byte
	pos, end int // unread bytes are buf[pos:end]
	small    [smallInput]byte
}

// errBadRead is returned for a net.Conn whose Read reported an impossible
// count.
var errBadRead = errors.New("record: invalid Read result")

// fill makes at least n (≤ 2*maxRecord) unread bytes available. At the
// end of the stream it returns io.EOF when nothing is buffered and
// io.ErrUnexpectedEOF otherwise; other errors are the connection's.
func (r *Reader) fill(conn net.Conn, n int) error {
	if r.buf == nil {
		r.buf = r.small[:]
	}
	for r.end-r.pos < n {
		if n > len(r.buf)-r.pos {
			if n > len(r.small) && r.big == nil {
				r.big = bigInputs.Get().(*[]byte)
				nb := *r.big
				m := copy(nb, r.buf[r.pos:r.end])
				r.buf, r.pos, r.end = nb, 0, m
			} else {
				m := copy(r.buf, r.buf[r.pos:r.end])
				r.pos, r.end = 0, m
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

// Release returns the big buffer to the pool when what is still unread
// fits the inline one. The caller must hold no slice of a record read
// before (pending application data or handshake bytes).
func (r *Reader) Release() {
	if r.big == nil || r.end-r.pos > len(r.small) {
		return
	}
	m := copy(r.small[:], r.buf[r.pos:r.end])
	r.putBig()
	r.buf, r.pos, r.end = r.small[:], 0, m
}

// Free returns the big buffer to the pool and drops what is unread (the
// connection is closed). The caller must hold no slice of a record.
func (r *Reader) Free() {
	if r.big != nil {
		r.putBig()
	}
	r.buf, r.pos, r.end = nil, 0, 0
}

// putBig clears the part of the big buffer that held records (they may
// have been decrypted in place) and pools it.
func (r *Reader) putBig() {
	clear((*r.big)[:r.end])
	bigInputs.Put(r.big)
	r.big = nil
}
