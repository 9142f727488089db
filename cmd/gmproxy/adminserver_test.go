package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestAdminServerBounds: an admin listener closes a kept-alive connection
// left idle (adminIdleTimeout), and serves at most adminMaxConns
// connections at once: one more is served only once another closes.
func TestAdminServerBounds(t *testing.T) {
	defer func(d time.Duration, n int) { adminIdleTimeout, adminMaxConns = d, n }(adminIdleTimeout, adminMaxConns)
	adminIdleTimeout, adminMaxConns = 200*time.Millisecond, 3
	start := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
		serveAdmin(srv, ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	addr := start()
	get := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Idle after a request: closed by the server.
	c := dial()
	if err := get(c); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle kept-alive connection: read %d, %v; want EOF (closed by the server)", n, err)
	}

	// adminMaxConns connections held (not idle long enough to be closed):
	// one more waits for a free one.
	adminIdleTimeout = time.Minute
	addr = start()
	var held []net.Conn
	for range adminMaxConns {
		h := dial()
		if err := get(h); err != nil { // accepted and served
			t.Fatal(err)
		}
		held = append(held, h)
	}
	extra := dial() // in the listen queue
	io.WriteString(extra, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	extra.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := extra.Read(make([]byte, 1)); err == nil {
		t.Fatalf("connection %d served (%d bytes) while %d were held", adminMaxConns+1, n, adminMaxConns)
	}
	held[0].Close()
	extra.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after one closed, the waiting connection: %v %v", resp, err)
	}
	resp.Body.Close()
}
