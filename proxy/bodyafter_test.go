package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowFirstWrite is an upstream connection whose first Write (the
// request head, flushed by http.Transport before the body) returns only
// after a pause, as when the Transport's writer goroutine waits for a
// processor after that system call on a busy machine.
type slowFirstWrite struct {
	net.Conn
	once sync.Once
}

func (c *slowFirstWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.once.Do(func() { time.Sleep(200 * time.Millisecond) })
	return n, err
}

// TestH2BodyReadAfterHandler: http.Transport writes a request body from
// its own goroutine, which may go on after RoundTrip returned: here the
// target answers before reading the body (with Connection: close, so the
// response is handed over at once). For an HTTP/2 client the handler then
// returns, and the writer's next body read used to arm the body timeout
// through x/net's ResponseWriter.SetReadDeadline, whose state x/net has
// cleared: a nil dereference outside the handler's goroutine, which ended
// the process (about every other run of 16×800 such requests on a 2-CPU
// machine without the slowed write; every run with it).
func TestH2BodyReadAfterHandler(t *testing.T) {
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if l == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		io.Copy(io.Discard, br)
	})
	f, client := frontFor(t, proxyTo(addr), true)
	tr := f.p.upstreams["u"].transport
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowFirstWrite{Conn: c}, nil
	}
	pr, pw := io.Pipe() // a body of unknown length, not sent yet
	defer pw.Close()
	req, _ := http.NewRequest("POST", f.url+"/upload", pr)
	req.Host = "example.test"
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want the target's 403", res.StatusCode)
	}
	time.Sleep(500 * time.Millisecond) // the Transport's writer reads the body
}

// deadlineCounter is a ResponseWriter's read-deadline side that counts
// the deadlines set.
type deadlineCounter struct{ n int }

func (d *deadlineCounter) SetReadDeadline(time.Time) error { d.n++; return nil }

// TestReqBodyAfterHandlerDone: once its handler returned, a read of the
// request body touches neither the server's read deadline nor the
// client's request (its trailers), and fails; before, a read arms the
// body timeout and EOF copies the trailers.
func TestReqBodyAfterHandlerDone(t *testing.T) {
	newBody := func() (*reqBody, *deadlineCounter, http.Header) {
		dc := &deadlineCounter{}
		in := &http.Request{Trailer: http.Header{"X-Sum": {"1"}}}
		out := http.Header{"X-Sum": nil}
		return &reqBody{rc: io.NopCloser(strings.NewReader("body")), dl: bodyDeadline{opDeadline: opDeadline{d: time.Second}, rw: dc},
			trailerIn: in, trailerOut: out}, dc, out
	}
	b, dc, out := newBody()
	if _, err := io.ReadAll(b); err != nil {
		t.Fatal(err)
	}
	if dc.n == 0 || out.Get("X-Sum") != "1" {
		t.Fatalf("while the handler runs: %d deadlines set, trailer %q; want the timeout armed and the trailer copied", dc.n, out.Get("X-Sum"))
	}
	b, dc, out = newBody()
	b.handlerDone()
	if n, err := b.Read(make([]byte, 8)); n != 0 || !errors.Is(err, errHandlerDone) {
		t.Fatalf("read after the handler: %d, %v; want errHandlerDone", n, err)
	}
	if dc.n != 0 || out.Get("X-Sum") != "" {
		t.Fatalf("after the handler: %d deadlines set, trailer %q; want neither touched", dc.n, out.Get("X-Sum"))
	}
}
