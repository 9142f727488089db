package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
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

// cutReader is a client's body whose Read blocks until a read deadline is
// set, then fails with err (as a passed deadline does: os.ErrDeadlineExceeded).
type cutReader struct {
	cut  chan struct{}
	once sync.Once
	err  error
}

func newCutReader() *cutReader {
	return &cutReader{cut: make(chan struct{}), err: os.ErrDeadlineExceeded}
}

func (c *cutReader) Read([]byte) (int, error) { <-c.cut; return 0, c.err }
func (c *cutReader) Close() error             { return nil }
func (c *cutReader) SetReadDeadline(time.Time) error {
	c.once.Do(func() { close(c.cut) })
	return nil
}

func (c *cutReader) wasCut() bool {
	select {
	case <-c.cut:
		return true
	default:
		return false
	}
}

// TestAttemptBodyClose: a transport's Close of one attempt's body ends
// that attempt's read of the client in progress and every later read of
// the attempt, cuts no other attempt's read, and leaves an untouched body
// for a retry; a read in progress or one so cut makes the body touched
// (no retry), and a cut read is neither the client's stall nor its
// malformed body.
func TestAttemptBodyClose(t *testing.T) {
	cr := newCutReader()
	b := &reqBody{rc: cr, rd: cr}
	reading, other := &attemptBody{b: b}, &attemptBody{b: b}
	if !b.untouched() {
		t.Fatal("a fresh body is touched")
	}
	done := make(chan error, 1)
	go func() {
		_, err := reading.Read(make([]byte, 8))
		done <- err
	}()
	waitReading(t, b, reading)
	if b.untouched() {
		t.Error("a body whose read is in progress counts as untouched: another target could be sent it while the first reads on")
	}
	other.Close()
	if cr.wasCut() {
		t.Fatal("another attempt's Close cut the read in progress")
	}
	reading.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the closed attempt's read ended with %v, want its cut", err)
		}
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the closed attempt's read of the client went on")
	}
	if b.untouched() {
		t.Error("a body whose read was cut counts as untouched")
	}
	if b.timedOut.Load() || b.readError() != nil {
		t.Errorf("the cut read counted as the client's: timed out %v, error %v", b.timedOut.Load(), b.readError())
	}
	if _, err := reading.Read(make([]byte, 8)); !errors.Is(err, errAttemptClosed) {
		t.Errorf("a read of the closed attempt: %v, want errAttemptClosed", err)
	}

	// A read the cut ends with an error of the client's body itself
	// (x/net's stream reset for more body than declared, at the same
	// moment): the client's error, not the cut.
	broken := newCutReader()
	broken.err = errors.New("sender tried to send more than declared Content-Length of 5 bytes")
	b = &reqBody{rc: broken, rd: broken}
	reading = &attemptBody{b: b}
	go func() {
		_, err := reading.Read(make([]byte, 8))
		done <- err
	}()
	waitReading(t, b, reading)
	reading.Close()
	<-done
	if err := b.readError(); err != broken.err {
		t.Errorf("the client's own error when its read was cut: readError %v, want %v", err, broken.err)
	}

	// Closed before reading (a failed dial): the body stays whole for
	// the next attempt.
	b = &reqBody{rc: io.NopCloser(strings.NewReader("body"))}
	failed := &attemptBody{b: b}
	failed.Close()
	if _, err := failed.Read(make([]byte, 8)); !errors.Is(err, errAttemptClosed) {
		t.Errorf("a read of an attempt closed before reading: %v, want errAttemptClosed", err)
	}
	if !b.untouched() {
		t.Fatal("an attempt closed before reading touched the body")
	}
	got, err := io.ReadAll(&attemptBody{b: b})
	if err != nil || string(got) != "body" {
		t.Fatalf("the next attempt read %q, %v; want the whole body", got, err)
	}
}

// waitReading waits until attempt a's read of b's client is under way.
func waitReading(t *testing.T, b *reqBody, a *attemptBody) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		started := b.reader == a
		b.mu.Unlock()
		if started {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the attempt's read did not start")
		}
	}
}

// TestAttemptBodyClosePre: a closed attempt reads no more of a body
// request_buffer read whole (pre) either: net/http's Transport closes an
// attempt's body before RoundTrip returns its failure while its writer
// may still go on to read it, and what that writer took of pre would be
// missing from the next attempt's.
func TestAttemptBodyClosePre(t *testing.T) {
	b := &reqBody{pre: []byte("body"), preEOF: true}
	failed := &attemptBody{b: b}
	failed.Close()
	if n, err := failed.Read(make([]byte, 2)); n != 0 || !errors.Is(err, errAttemptClosed) {
		t.Errorf("a read of a closed attempt of a buffered body: %d, %v; want 0, errAttemptClosed", n, err)
	}
	if !b.untouched() {
		t.Fatal("a closed attempt's late read touched the buffered body")
	}
	got, err := io.ReadAll(&attemptBody{b: b})
	if err != nil || string(got) != "body" {
		t.Fatalf("the next attempt read %q, %v; want the whole body", got, err)
	}
}

// TestBufferedBodyReplay: a body request_buffer read whole (pre, to the
// client's EOF) is served again from its start for another attempt once an
// attempt took it; one only partly buffered (the process's bound on
// buffered bodies reached, the rest streamed from the client) is not:
// what an attempt read of the client is gone, and a second target would
// get the buffered head followed by the client's rest, a body the client
// never sent.
func TestBufferedBodyReplay(t *testing.T) {
	whole := &reqBody{pre: []byte("body"), preEOF: true}
	for i := range 2 {
		a := &attemptBody{b: whole}
		got, err := io.ReadAll(a)
		a.Close()
		if err != nil || string(got) != "body" {
			t.Fatalf("attempt %d read %q, %v; want the whole body", i, got, err)
		}
		if !whole.untouched() {
			t.Fatalf("after attempt %d a body held whole cannot be sent again", i)
		}
	}

	part := &reqBody{rc: io.NopCloser(strings.NewReader("-rest")), pre: []byte("head")}
	a := &attemptBody{b: part}
	got, err := io.ReadAll(a)
	a.Close()
	if err != nil || string(got) != "head-rest" {
		t.Fatalf("read %q, %v; want head-rest", got, err)
	}
	if part.untouched() {
		t.Error("a partly buffered body whose rest an attempt read of the client counts as untouched")
	}
	part = &reqBody{rc: io.NopCloser(strings.NewReader("-rest")), pre: []byte("head")}
	a = &attemptBody{b: part}
	a.Read(make([]byte, 2))
	a.Close()
	if part.untouched() {
		t.Error("a partly buffered body whose head an attempt took counts as untouched")
	}
}
