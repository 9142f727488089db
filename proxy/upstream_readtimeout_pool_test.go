package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestReadTimeoutNotLeftOnPooledConn: with the response header timeout
// off (negative, which http.Transport and h1Client both take as none) and
// a read timeout, h1Client leaves the last body read deadline on the
// connection it pools; the next exchange on it sets no deadline of its
// own for the header wait, so a target that takes longer than that stale
// deadline to answer the next request gets a 504 the configuration does
// not ask for.
func TestReadTimeoutNotLeftOnPooledConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns := make(chan struct{}, 16)
	go acceptLoop(ln, func(c net.Conn) {
		conns <- struct{}{}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			for i := 0; ; i++ {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if i == 0 { // head, then the body a little later
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
					time.Sleep(20 * time.Millisecond)
					io.WriteString(c, "first")
					continue
				}
				time.Sleep(700 * time.Millisecond) // a slow answer
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
			}
		}()
	})
	cfg := proxyTo(ln.Addr().String())
	cfg.Upstreams[0].Transport.ResponseHeaderTimeout = -1 // none
	cfg.Upstreams[0].Transport.ReadTimeout = 300 * time.Millisecond
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for i, want := range []string{"first", "second"} {
		status, body, _ := get(t, c, f.url+"/")
		if status != 200 || body != want {
			t.Fatalf("request %d: status %d body %q, want 200 %q (connections: %d)", i, status, body, want, len(conns))
		}
	}
	if n := len(conns); n != 1 {
		t.Errorf("%d connections to the target, want the second request on the pooled one", n)
	}
}
