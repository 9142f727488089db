package record

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
)

// chunkConn returns its data in reads of at most chunk bytes, then err.
type chunkConn struct {
	net.Conn
	data  []byte
	chunk int
	err   error
	bad   bool // report an impossible count
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if c.bad {
		return len(b) + 1, nil
	}
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := copy(b[:min(len(b), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func makeRecord(typ uint8, body []byte) []byte {
	return append([]byte{typ, 1, 1, byte(len(body) >> 8), byte(len(body))}, body...)
}

// readAll reads records until an error and returns them and the error.
func readAll(r *Reader, conn net.Conn) ([][]byte, error) {
	var recs [][]byte
	for range 100 {
		typ, vers, n, err := r.Header(conn)
		if err != nil {
			return recs, err
		}
		if vers != 0x0101 || n > maxRecord-HeaderLen {
			return recs, errors.New("bad header")
		}
		rec, err := r.Record(conn, n)
		if err != nil {
			return recs, err
		}
		if rec[0] != typ {
			return recs, errors.New("type changed")
		}
		recs = append(recs, bytes.Clone(rec))
		r.Release()
	}
	return recs, errors.New("too many records")
}

func TestReaderRecords(t *testing.T) {
	big := bytes.Repeat([]byte{7}, MaxPlaintext+2048)
	want := [][]byte{makeRecord(TypeHandshake, []byte("hello")), makeRecord(TypeApplicationData, big), makeRecord(TypeAlert, []byte{1, 0}), makeRecord(TypeApplicationData, nil)}
	stream := bytes.Join(want, nil)
	for _, chunk := range []int{1, 3, 5, 512, 4096, len(stream)} {
		var r Reader
		got, err := readAll(&r, &chunkConn{data: stream, chunk: chunk, err: io.EOF})
		if err != io.EOF {
			t.Fatalf("chunk %d: end of stream: %v, want io.EOF", chunk, err)
		}
		if len(got) != len(want) {
			t.Fatalf("chunk %d: %d records, want %d", chunk, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("chunk %d: record %d differs", chunk, i)
			}
		}
		if r.Release(); r.box != nil {
			t.Fatalf("chunk %d: buffer kept after the last record", chunk)
		}
	}
}

func TestReaderTruncated(t *testing.T) {
	rec := makeRecord(TypeHandshake, []byte("hello"))
	for cut := 1; cut < len(rec); cut++ {
		var r Reader
		_, err := readAll(&r, &chunkConn{data: rec[:cut], chunk: 2, err: io.EOF})
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
}

func TestReaderTimeoutKeepsBytes(t *testing.T) {
	rec := makeRecord(TypeApplicationData, bytes.Repeat([]byte{1}, 1000))
	c := &chunkConn{data: rec[:700], chunk: 300, err: os.ErrDeadlineExceeded}
	var r Reader
	_, _, n, err := r.Header(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Record(c, n); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("short record: %v, want the deadline's error", err)
	}
	c.data, c.err = rec[700:], io.EOF
	got, err := r.Record(c, n)
	if err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("after the timeout: %v, record equal %v", err, bytes.Equal(got, rec))
	}
}

func TestReaderBadRead(t *testing.T) {
	var r Reader
	if _, _, _, err := r.Header(&chunkConn{bad: true}); err != errBadRead {
		t.Fatalf("impossible Read count: %v", err)
	}
}

func TestReaderReleaseToSmall(t *testing.T) {
	rec := makeRecord(TypeApplicationData, bytes.Repeat([]byte{9}, 4000))
	next := makeRecord(TypeHandshake, []byte("tail"))
	var r Reader
	c := &chunkConn{data: append(rec, next...), chunk: 1 << 20, err: io.EOF}
	_, _, n, _ := r.Header(c)
	if _, err := r.Record(c, n); err != nil {
		t.Fatal(err)
	}
	if len(r.buf) <= smallInput {
		t.Fatal("a 4 KB record read into the small buffer")
	}
	r.Release()
	if len(r.buf) != smallInput || !bytes.Equal(r.buf[r.pos:r.end], next) {
		t.Fatal("the unread record did not move to a small buffer")
	}
	recs, err := readAll(&r, c)
	if err != io.EOF || len(recs) != 1 || !bytes.Equal(recs[0], next) {
		t.Fatalf("after the move: %d records, %v", len(recs), err)
	}
}

func TestReaderFree(t *testing.T) {
	rec := makeRecord(TypeApplicationData, bytes.Repeat([]byte{9}, 4000))
	var r Reader
	c := &chunkConn{data: append(rec, rec...), chunk: 1 << 20, err: io.EOF}
	_, _, n, _ := r.Header(c)
	if _, err := r.Record(c, n); err != nil {
		t.Fatal(err)
	}
	big := r.box
	r.Release() // the second record is still buffered: too big to move
	if r.box != big {
		t.Fatal("released the buffer holding an unread record")
	}
	r.Free()
	if r.box != nil || r.buf != nil || r.pos != 0 || r.end != 0 {
		t.Fatal("Free kept state")
	}
	if !bytes.Equal((*big)[:2*len(rec)], make([]byte, 2*len(rec))) {
		t.Fatal("pooled buffer not cleared")
	}
}

// FuzzReader: any byte stream in any read sizes is cut into records whose
// concatenation is a prefix of the stream; nothing panics.
func FuzzReader(f *testing.F) {
	f.Add(makeRecord(TypeHandshake, []byte("hello")), uint8(3))
	f.Add(append(makeRecord(TypeApplicationData, make([]byte, 600)), 22, 3), uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		var r Reader
		recs, _ := readAll(&r, &chunkConn{data: data, chunk: int(chunk) + 1, err: io.EOF})
		if joined := bytes.Join(recs, nil); !bytes.HasPrefix(data, joined) {
			t.Fatal("records are not the stream's prefix")
		}
	})
}

func TestReaderFreeOnClose(t *testing.T) {
	rec := makeRecord(TypeApplicationData, bytes.Repeat([]byte{9}, 4000))
	load := func() *Reader {
		var r Reader
		c := &chunkConn{data: rec, chunk: 1 << 20, err: io.EOF}
		_, _, n, _ := r.Header(c)
		if _, err := r.Record(c, n); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	var mu sync.Mutex
	var input []byte
	r := load()
	mu.Lock() // a Read still running
	r.FreeOnClose(&mu, &input)
	mu.Unlock()
	if r.box == nil {
		t.Fatal("freed the buffer under a running Read")
	}
	input = r.buf[HeaderLen:10] // data not yet read
	r.FreeOnClose(&mu, &input)
	if r.box == nil {
		t.Fatal("freed the buffer under pending data")
	}
	input = nil
	r.FreeOnClose(&mu, &input)
	if r.box != nil || !mu.TryLock() {
		t.Fatal("idle reader not freed, or lock kept")
	}
}

func TestReaderReadData(t *testing.T) {
	var r Reader
	var data, hand []byte
	var stats Counters
	recs := [][]byte{nil, []byte("hello, world")} // an empty record, then data
	posts := 0
	next := func() error {
		if len(recs) == 0 {
			return io.EOF
		}
		data, recs = recs[0], recs[1:]
		if data == nil {
			hand = []byte{4, 0, 0, 0} // a post-handshake message came instead
		}
		return nil
	}
	post := func() error { posts++; hand = nil; return nil }
	b := make([]byte, 5)
	if n, err := r.ReadData(b, &data, &hand, &stats, next, post); err != nil || string(b[:n]) != "hello" || posts != 1 {
		t.Fatalf("first read: %q %v, %d post-handshake messages", b[:n], err, posts)
	}
	if n, err := r.ReadData(make([]byte, 64), &data, &hand, &stats, next, post); err != nil || n != 7 {
		t.Fatalf("rest: %d %v", n, err)
	}
	if _, err := r.ReadData(b, &data, &hand, &stats, next, post); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if s := stats.Stats(); s.BytesIn != 12 {
		t.Fatalf("counted %d bytes in", s.BytesIn)
	}
}
