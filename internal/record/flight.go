package record

import (
	"io"
	"sync"
)

// flightSize is the capacity of a pooled flight buffer: a server's first
// flight with a certificate chain or two fits.
const flightSize = 8192

// flightBufs recycles the buffers flights are built in.
var flightBufs = sync.Pool{New: func() any { b := make([]byte, 0, flightSize); return &b }}

// Flight coalesces the records of one handshake flight, so that a flight
// goes out in one write (one syscall, one TCP segment train; peers and
// middleboxes see whole flights). The records are built in place in a
// pooled buffer, which goes back to the pool when the flight is written or
// dropped. The zero value is an empty flight; a Flight is not safe for
// concurrent use.
type Flight struct {
	buf []byte
	box *[]byte // the pooled buffer buf started in, if any
}

// Active reports whether records are being collected.
func (f *Flight) Active() bool { return f.buf != nil }

// Room returns the flight's bytes with room for n more past their end,
// taking a pooled buffer for a new flight and growing the buffer when
// needed. The caller appends its records and hands the result to Set.
func (f *Flight) Room(n int) []byte {
	if f.buf == nil {
		f.box = flightBufs.Get().(*[]byte)
		f.buf = (*f.box)[:0]
	}
	if cap(f.buf)-len(f.buf) < n {
		nb := make([]byte, len(f.buf), max(2*cap(f.buf), len(f.buf)+n))
		copy(nb, f.buf)
		f.release() // copied out: free again
		f.buf = nb
	}
	return f.buf
}

// Set records the flight's bytes after the caller appended to what Room
// returned.
func (f *Flight) Set(b []byte) { f.buf = b }

// Flush writes the flight in one write and ends it. Nothing is written for
// an empty or inactive flight.
func (f *Flight) Flush(w io.Writer) error {
	var err error
	if len(f.buf) > 0 {
		_, err = w.Write(f.buf)
	}
	f.Drop()
	return err
}

// Drop ends the flight without writing it.
func (f *Flight) Drop() {
	f.release()
	f.buf = nil
}

// release returns the pooled buffer, unless it was let go already or an
// append outgrew it (then buf is a new array and the pooled one is
// returned as it was).
func (f *Flight) release() {
	if f.box != nil {
		flightBufs.Put(f.box)
		f.box = nil
	}
}

// Len returns the number of bytes collected.
func (f *Flight) Len() int { return len(f.buf) }
