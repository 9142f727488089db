package record

import (
	"bytes"
	"errors"
	"testing"
)

// countWriter counts writes.
type countWriter struct {
	bytes.Buffer
	writes int
	err    error
}

func (w *countWriter) Write(b []byte) (int, error) {
	w.writes++
	if w.err != nil {
		return 0, w.err
	}
	return w.Buffer.Write(b)
}

func TestFlightOneWrite(t *testing.T) {
	var f Flight
	var want []byte
	for i, n := range []int{5, 3000, 7000, 20000} { // outgrows the pooled buffer
		b := f.Room(n)
		rec := bytes.Repeat([]byte{byte(i + 1)}, n)
		f.Set(append(b, rec...))
		want = append(want, rec...)
	}
	if !f.Active() || f.Len() != len(want) {
		t.Fatalf("active %v, %d bytes, want %d", f.Active(), f.Len(), len(want))
	}
	var w countWriter
	if err := f.Flush(&w); err != nil || w.writes != 1 || !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("flush: %v, %d writes, same bytes %v", err, w.writes, bytes.Equal(w.Bytes(), want))
	}
	if f.Active() || f.box != nil {
		t.Fatal("flight still active after Flush")
	}
	// An inactive or empty flight writes nothing.
	if err := f.Flush(&w); err != nil || w.writes != 1 {
		t.Fatalf("empty flush wrote: %v, %d writes", err, w.writes)
	}
}

func TestFlightDropAndError(t *testing.T) {
	var f Flight
	f.Set(append(f.Room(10), "0123456789"...))
	f.Drop()
	if f.Active() || f.Len() != 0 {
		t.Fatal("Drop kept the flight")
	}
	boom := errors.New("boom")
	f.Set(append(f.Room(3), "abc"...))
	if err := f.Flush(&countWriter{err: boom}); err != boom || f.Active() {
		t.Fatalf("failed write: %v, active %v", err, f.Active())
	}
}
