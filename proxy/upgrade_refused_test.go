package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestRefusedUpgradeOpensNoTunnel: a target that refuses an HTTP/1.1
// Upgrade (426, keeping its connection) opens no tunnel. What the client
// sends next is read by the proxy as its next request, checked and
// forwarded as one (the target sees the proxy's X-Forwarded-For on it),
// and bytes that are no request get the proxy's 400 (a target reading
// them raw would fail, a 502): none reach a pooled target connection.
func TestRefusedUpgradeOpensNoTunnel(t *testing.T) {
	var mu sync.Mutex
	var seen []string // per request the target read: path and X-Forwarded-For
	backend := connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, req.URL.Path+" "+req.Header.Get("X-Forwarded-For"))
			mu.Unlock()
			if req.Header.Get("Upgrade") != "" {
				io.WriteString(c, "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 4\r\n\r\nnope")
			} else {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		}
	})
	f := newFront(t, proxyTo(backend), frontOpts{})
	c := dialRaw(t, f.addr)
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	// The upgrade, the client's first frame sent ahead of the answer as
	// WebSocket clients may, then an ordinary request.
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 426 || string(body) != "nope" {
		t.Fatalf("refused upgrade: %d %q, want the target's 426", res.StatusCode, body)
	}
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: example.test\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n")
	res, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("request after the refused upgrade: %d %q", res.StatusCode, body)
	}
	io.WriteString(c, "\x81\x85\x00\x00\x00\x00hello\r\n\r\n")
	res, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 400 {
		t.Errorf("frame bytes after a refused upgrade: status %d, want the proxy's 400", res.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "/ws 127.0.0.1" || seen[1] != "/next 127.0.0.1" {
		t.Errorf("target read %q, want the upgrade and /next, each with the proxy's X-Forwarded-For", seen)
	}
}
