//go:build race

package proxy

// Run with the race detector (.ci/run does):
//   go test -race ./proxy -run TestRequestStateNotPooledWhileTransportWrites

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestRequestStateNotPooledWhileTransportWrites: a request that goes
// through net/http's Transport (Upgrade requests; every request of an
// upstream with max_conns_per_target) can be answered while the
// Transport's goroutine is still writing it (a head larger than the socket
// buffers, a backend that answers before reading it all). The handler's
// pooled request state, which holds the outgoing request, its header and
// values, is then not pooled: the next request would reuse memory that
// goroutine reads (torn strings, another request's X-Forwarded-* values
// sent upstream). The race detector sees the difference; the test only
// runs under it (.ci/run's race step).
func TestRequestStateNotPooledWhileTransportWrites(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return nil
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go acceptLoop(ln, func(c net.Conn) {
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			br := bufio.NewReaderSize(c, 4096)
			line, _ := br.ReadString('\n')
			if strings.HasPrefix(line, "GET /other") {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				return
			}
			// Refuse the oversized head at once; read the rest later.
			io.WriteString(c, "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 3\r\n\r\nbig")
			time.Sleep(1 * time.Second)
			io.Copy(io.Discard, br)
		}()
	})
	cfg := proxyTo(ln.Addr().String())
	cfg.Limits.MaxHeaderBytes = 16 << 20
	f := newFront(t, cfg, frontOpts{})
	var b strings.Builder
	b.WriteString("GET /ws HTTP/1.1\r\nHost: first.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n")
	field := strings.Repeat("v", 60000)
	for i := 0; i < 120; i++ {
		b.WriteString("A")
		b.WriteString(strings.Repeat("a", i))
		b.WriteString(": ")
		b.WriteString(field)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	c := dialRaw(t, f.addr)
	go io.WriteString(c, b.String())
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, " 431 ") {
		t.Fatalf("got %q, want the backend's early 431", line)
	}
	// Other requests take the pooled reqState meanwhile.
	for i := 0; i < 5; i++ {
		c2 := dialRaw(t, f.addr)
		io.WriteString(c2, "GET /other HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
		io.ReadAll(c2)
	}
	time.Sleep(1500 * time.Millisecond) // the backend reads the rest; the write ends
}
