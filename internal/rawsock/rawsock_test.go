package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pair returns a wrapped server side and the plain client side of a
// loopback TCP connection.
func pair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listener{ln}.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	if _, ok := s.(*Conn); !ok && supported {
		t.Fatalf("Accept returned %T, want *Conn", s)
	}
	return s, c
}

func TestReadWriteEOF(t *testing.T) {
	s, c := pair(t)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty Read = %d, %v", n, err)
	}
	if _, err := s.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	n, err = io.ReadFull(c, buf[:5])
	if err != nil || string(buf[:n]) != "world" {
		t.Fatalf("client read %q, %v", buf[:n], err)
	}
	c.Close()
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// A write larger than the socket buffers waits for the reader (the EAGAIN
// path) and delivers every byte in order, while reads run concurrently.
func TestLargeWriteBackpressure(t *testing.T) {
	s, c := pair(t)
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var got bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		io.CopyN(&got, c, int64(len(data)))
	}()
	// An echo in the other direction at the same time.
	go c.Write([]byte("ping"))
	ping := make([]byte, 4)
	if _, err := io.ReadFull(s, ping); err != nil || string(ping) != "ping" {
		t.Fatalf("concurrent read %q, %v", ping, err)
	}
	s.SetWriteDeadline(time.Now().Add(20 * time.Second))
	n, err := s.Write(data)
	if err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	wg.Wait()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("received %d bytes, not what was written", got.Len())
	}
}

// Deadlines stay with the netpoller: a read with nothing to read and a
// write that cannot drain end with os.ErrDeadlineExceeded, a timeout.
func TestDeadlines(t *testing.T) {
	s, _ := pair(t)
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := s.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline: %v, want a timeout", err)
	}
	s.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	big := make([]byte, 64<<20) // the client never reads
	n, err := s.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(big) {
		t.Fatalf("Write past the deadline: %d, %v; want a timeout before the end", n, err)
	}
}

// Close from another goroutine ends a blocked Read with net.ErrClosed.
func TestCloseUnblocksRead(t *testing.T) {
	s, _ := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	s.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked 10 s after Close")
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// A reset by the peer is an error of the read system call, not EOF.
func TestPeerReset(t *testing.T) {
	s, c := pair(t)
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	s.SetReadDeadline(deadline)
	_, err := s.Read(make([]byte, 1))
	var se *os.SyscallError
	if err == io.EOF || !errors.As(err, &se) {
		t.Fatalf("Read after a reset: %v, want a read system-call error", err)
	}
}

// The embedded *net.TCPConn's methods (CloseWrite here) are reachable.
func TestCloseWrite(t *testing.T) {
	s, c := pair(t)
	if err := s.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after CloseWrite = %d, %v", n, err)
	}
	if _, err := c.Write([]byte("still open")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "still open" {
		t.Fatalf("read after CloseWrite %q, %v", buf, err)
	}
}

// Read and Write allocate nothing (the callbacks are made once per
// connection).
func TestNoAllocs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw system calls are Linux-only")
	}
	s, c := pair(t)
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		s.Write(buf)
		io.ReadFull(c, buf)
		c.Write(buf)
		io.ReadFull(s, buf)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round trip, want 0", allocs)
	}
}

// BenchmarkRoundTrip compares a 1 KiB echo round trip over a raw Conn with
// the same over a plain *net.TCPConn.
func BenchmarkRoundTrip(b *testing.B) {
	for _, raw := range []bool{false, true} {
		name := "net"
		if raw {
			name = "rawsock"
		}
		b.Run(name, func(b *testing.B) {
			s, c := pair(b)
			if !raw {
				s = s.(*Conn).TCPConn
			}
			go io.Copy(c, c) // the client echoes
			buf := make([]byte, 1024)
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				s.Write(buf)
				io.ReadFull(s, buf)
			}
		})
	}
}

// Concurrent Reads (net.Conn allows them) each get whole, distinct data:
// every byte written arrives exactly once across the readers.
func TestConcurrentReads(t *testing.T) {
	s, c := pair(t)
	const total = 1 << 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sum, count int
	s.SetReadDeadline(time.Now().Add(20 * time.Second))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1000)
			for {
				n, err := s.Read(buf)
				mu.Lock()
				for _, b := range buf[:n] {
					sum += int(b)
				}
				count += n
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	data := bytes.Repeat([]byte{1, 2, 3, 4}, total/4)
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	wg.Wait()
	if count != total || sum != total/4*10 {
		t.Fatalf("readers got %d bytes summing to %d, want %d summing to %d", count, sum, total, total/4*10)
	}
}

// TestAlive: Alive is true while the peer keeps the connection open and
// sends nothing; unread bytes or the peer's close make it false, and it
// allocates nothing.
func TestAlive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw system calls are Linux-only")
	}
	s, c := pair(t)
	rs := s.(*Conn)
	if !rs.Alive() {
		t.Fatal("open idle connection: not alive")
	}
	if n := testing.AllocsPerRun(100, func() { rs.Alive() }); n != 0 {
		t.Errorf("Alive: %.1f allocations, want 0", n)
	}
	wait := func(want bool) {
		t.Helper()
		for i := 0; i < 500 && rs.Alive() != want; i++ {
			time.Sleep(time.Millisecond)
		}
		if rs.Alive() != want {
			t.Fatalf("Alive %v, want %v", !want, want)
		}
	}
	c.Write([]byte("x"))
	wait(false)
	if rs.Alive() {
		t.Fatal("alive with a byte unread")
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	if !rs.Alive() {
		t.Fatal("not alive once the byte was read")
	}
	c.Close()
	wait(false)
}
