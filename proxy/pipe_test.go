package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestPipeIdleCountsFromWriteEnd: a tunnel's idle time counts from the
// end of its last write, not from the read before it. A write that a slow
// client takes 3/4 of the idle timeout to take in, followed by a pause
// of 3/4 of the timeout, is not idleness: the tunnel stays open and
// carries the next data. (The client side is a synchronous in-memory
// pipe, so the write lasts until the client reads: loopback TCP would
// absorb it in kernel buffers.)
func TestPipeIdleCountsFromWriteEnd(t *testing.T) {
	const idle = 1600 * time.Millisecond
	client, clientEnd := net.Pipe()
	target, targetEnd := net.Pipe()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		pipe(clientEnd, targetEnd, idle, nil)
	}()
	defer func() { client.Close(); target.Close(); <-ended }()
	// The target sends at once; the client takes 1.2 s to read it (the
	// proxy's write lasts that long), then the target pauses 1.2 s.
	if _, err := target.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	b := make([]byte, 16)
	if n, err := io.ReadAtLeast(client, b, 5); err != nil || string(b[:n]) != "first" {
		t.Fatalf("first read: %q %v", b[:n], err)
	}
	time.Sleep(1200 * time.Millisecond)
	// 2.4 s after the read from the target, 1.2 s after the write to the
	// client ended.
	target.SetWriteDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if _, err := target.Write([]byte("second")); err != nil {
		t.Fatalf("the tunnel was cut as idle 1.2 s after its last write ended (idle timeout %v): %v", idle, err)
	}
	client.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if n, err := io.ReadAtLeast(client, b, 6); err != nil || string(b[:n]) != "second" {
		t.Fatalf("second read: %q %v", b[:n], err)
	}
	// Then idle for real: cut.
	client.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if n, err := client.Read(b); err == nil {
		t.Fatalf("read %q from a tunnel idle past its timeout", b[:n])
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("tunnel idle for 5 s (timeout %v) not cut", idle)
	}
}
