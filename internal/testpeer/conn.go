package testpeer

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// WriteCounter is a net.Conn that counts the Writes made on it (a flight
// of records must go out in one).
type WriteCounter struct {
	net.Conn
	n atomic.Int32
}

func (w *WriteCounter) Write(b []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(b)
}

// Writes returns the number of Writes so far.
func (w *WriteCounter) Writes() int { return int(w.n.Load()) }

// CorruptWrites is a client connection whose writes, once On is set,
// arrive with their last byte flipped: a record that fails its MAC.
type CorruptWrites struct {
	net.Conn
	On atomic.Bool
}

func (c *CorruptWrites) Write(b []byte) (int, error) {
	if c.On.Load() && len(b) > 0 {
		b = append([]byte(nil), b...)
		b[len(b)-1] ^= 1
	}
	return c.Conn.Write(b)
}

// Handshaker is a connection of either SM stack.
type Handshaker interface {
	Handshake() error
	Close() error
}

// HandshakeBoth runs the server's handshake in a goroutine and the
// client's in this one; a client that fails is closed so that the server
// stops waiting for it.
func HandshakeBoth(cli, srv Handshaker) (cerr, serr error) {
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	if cerr = cli.Handshake(); cerr != nil {
		cli.Close()
	}
	return cerr, <-done
}

// LastWriter is a server connection of either SM stack that can write its
// last bytes together with close_notify.
type LastWriter interface {
	net.Conn
	WriteLast(b []byte) (int, error)
}

// CheckWriteLast has srv, whose writes w counts, WriteLast size bytes to
// cli (both after their handshake): the client must read the bytes and
// then a clean end of stream; up to 20 KiB they must take one write; a
// later Write must fail and Close must write nothing more.
func CheckWriteLast(t testing.TB, size int, srv LastWriter, cli net.Conn, w *WriteCounter) {
	t.Helper()
	before := w.Writes()
	data := bytes.Repeat([]byte("x"), size)
	got := make(chan []byte, 1)
	go func() {
		b, err := io.ReadAll(cli)
		if err != nil {
			b = append(b, " read: "+err.Error()...)
		}
		got <- b
	}()
	if n, err := srv.WriteLast(data); n != size || err != nil {
		t.Fatalf("%d bytes: WriteLast = %d, %v", size, n, err)
	}
	if size <= 20<<10 {
		if n := w.Writes() - before; n != 1 {
			t.Errorf("%d bytes: WriteLast made %d writes, want 1", size, n)
		}
	}
	if r := <-got; !bytes.Equal(r, data) {
		t.Fatalf("%d bytes: client read %d bytes (%.40q), want the data then a clean end", size, len(r), r)
	}
	if _, err := srv.Write([]byte("late")); err == nil {
		t.Errorf("%d bytes: Write after WriteLast succeeded", size)
	}
	after := w.Writes()
	if err := srv.Close(); err != nil {
		t.Errorf("%d bytes: Close: %v", size, err)
	}
	if w.Writes() != after {
		t.Errorf("%d bytes: Close wrote again after WriteLast", size)
	}
	cli.Close()
}

// WriteDeadlines is a net.Conn that records the write deadline in place
// at each of its Writes.
type WriteDeadlines struct {
	net.Conn
	mu      sync.Mutex
	current time.Time
	at      []time.Time
}

func (c *WriteDeadlines) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.current = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *WriteDeadlines) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.current = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *WriteDeadlines) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.at = append(c.at, c.current)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// Since returns the deadlines of the Writes after the first n.
func (c *WriteDeadlines) Since(n int) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.at[n:]...)
}

// CheckWriteLastDeadline has srv, whose writes w records, WriteLast a
// response of 1000 bytes to cli (both after their handshake) under a
// write deadline an hour ahead: the write that carries the data must be
// bounded by that deadline, not by the few seconds Close allows
// close_notify alone (a slow client would see its response cut), and
// the deadline must still be in place afterwards.
func CheckWriteLastDeadline(t testing.TB, srv LastWriter, cli net.Conn, w *WriteDeadlines) {
	t.Helper()
	go io.Copy(io.Discard, cli)
	before := len(w.Since(0))
	deadline := time.Now().Add(time.Hour)
	srv.SetWriteDeadline(deadline)
	if _, err := srv.WriteLast(bytes.Repeat([]byte("x"), 1000)); err != nil {
		t.Fatalf("WriteLast: %v", err)
	}
	at := w.Since(before)
	if len(at) == 0 {
		t.Fatal("WriteLast wrote nothing")
	}
	for _, d := range at {
		if !d.Equal(deadline) {
			t.Fatalf("WriteLast wrote under the deadline %v, want the caller's %v", d, deadline)
		}
	}
	w.mu.Lock()
	after := w.current
	w.mu.Unlock()
	if !after.Equal(deadline) {
		t.Fatalf("after WriteLast the write deadline is %v, want the caller's %v", after, deadline)
	}
	srv.Close()
}

// DialFrom dials addr over TCP from the loopback address from (127.0.0.x
// works on Linux without setup); the connection is closed with the test.
// A refusal that resets the connect itself (a close with linger 0) gives
// a closed connection.
func DialFrom(t testing.TB, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 20 * time.Second}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		a, b := net.Pipe()
		b.Close()
		return a
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ClosedWithin reports whether the peer closed c (end of file or a
// reset) within d (testwait.Bound), reading and discarding what it sent
// before.
func ClosedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(testwait.Bound(d)))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}
