package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/internal/rawsock"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// rawBackend accepts loopback connections and answers each request read
// from them with answer(conn index, request); answer returns false to
// close the connection after writing.
type rawBackend struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func newRawBackend(t *testing.T, answer func(conn int64, w *bufio.Writer, r *http.Request) bool) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{ln: ln}
	var open sync.Map
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(c, true)
			idx := b.conns.Add(1)
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				br, bw := bufio.NewReader(c), bufio.NewWriter(c)
				for range 1000 {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					keep := answer(idx, bw, r)
					if bw.Flush() != nil || !keep {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		// The accept loop adds to wg; it must have ended before Wait.
		<-accepting
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		b.wg.Wait()
	})
	return b
}

func (b *rawBackend) addr() string { return b.ln.Addr().String() }

func testH1Client(t *testing.T, mod func(*http.Transport)) *h1Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: time.Minute, MaxResponseHeaderBytes: 1 << 20}
	if mod != nil {
		mod(tr)
	}
	var d net.Dialer
	// Connections as the proxy's transports dial them (newTransport).
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawsock.Wrap(c), nil
	}
	cl := newH1Client(tr, dial, 0, 0)
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

func h1Get(t *testing.T, cl *h1Client, ctx context.Context, method, addr string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Body = nil
	res, err := cl.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.Status + " " + string(b), err
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// h1Do sends req through cl and reads the whole response body.
func h1Do(t *testing.T, cl *h1Client, req *http.Request) (string, error) {
	t.Helper()
	res, err := cl.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// TestH1ClientPools: sequential requests share one connection; a body
// closed before its end, a Connection: close response, or a 1xx before
// the final response are handled like http.Transport does.
func TestH1ClientPools(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		switch r.URL.Query().Get("k") {
		case "close":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
			return false
		case "big":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("z", 100000))
		case "hints":
			io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+okResponse)
		default:
			io.WriteString(w, okResponse)
		}
		return true
	})
	cl := testH1Client(t, nil)
	ctx := context.Background()
	for i := range 5 {
		if got, err := h1Get(t, cl, ctx, "GET", b.addr()); err != nil || got != "200 OK ok" {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
	}
	if n := b.conns.Load(); n != 1 {
		t.Fatalf("5 sequential requests used %d connections, want 1", n)
	}
	req, _ := http.NewRequest("GET", "http://"+b.addr()+"/?k=hints", nil)
	req.Body = nil
	res, err := cl.RoundTrip(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("after 103: %v %v", res, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()

	// Closed before its end: the connection is not reused.
	req, _ = http.NewRequest("GET", "http://"+b.addr()+"/?k=big", nil)
	req.Body = nil
	res, err = cl.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Read(make([]byte, 10))
	res.Body.Close()
	if _, err := h1Get(t, cl, ctx, "GET", b.addr()); err != nil {
		t.Fatal(err)
	}
	if n := b.conns.Load(); n != 2 {
		t.Fatalf("after a body closed early: %d connections, want 2", n)
	}
	// Connection: close from the backend: the next request dials.
	req, _ = http.NewRequest("GET", "http://"+b.addr()+"/?k=close", nil)
	req.Body = nil
	if res, err = cl.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if _, err := h1Get(t, cl, ctx, "GET", b.addr()); err != nil {
		t.Fatal(err)
	}
	if n := b.conns.Load(); n != 3 {
		t.Fatalf("after Connection: close: %d connections, want 3", n)
	}
}

// TestH1ClientStalePooledConn: a pooled connection the backend closed is
// replaced transparently: for a replayable request by a retry, for a
// POST (which may not be sent twice) by the check before taking it.
func TestH1ClientStalePooledConn(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, _ *http.Request) bool {
		io.WriteString(w, okResponse)
		return false // closes without saying so
	})
	cl := testH1Client(t, nil)
	ctx := context.Background()
	for i := range 3 {
		if got, err := h1Get(t, cl, ctx, "GET", b.addr()); err != nil || got != "200 OK ok" {
			t.Fatalf("GET %d: %q, %v", i, got, err)
		}
	}
	// Make sure the pooled connection's close has arrived, then POST.
	waitConnClosed(t, cl, b.addr())
	before := b.conns.Load()
	if got, err := h1Get(t, cl, ctx, "POST", b.addr()); err != nil || got != "200 OK ok" {
		t.Fatalf("POST after the pooled connection closed: %q, %v", got, err)
	}
	if n := b.conns.Load() - before; n != 1 {
		t.Fatalf("POST used %d new connections, want 1", n)
	}
}

// TestAlive: an idle connection is alive while its peer keeps it open and
// sends nothing, also under TLS; a close or stray bytes make it dead.
func TestAlive(t *testing.T) {
	pair := func() (client, server net.Conn) {
		c, s := testpeer.TCPPair(t)
		t.Cleanup(func() { c.Close(); s.Close() })
		return c, s
	}
	settle := func(c net.Conn) { // wait until something is readable
		c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		for i := 0; i < 500 && alive(c); i++ {
			time.Sleep(time.Millisecond)
		}
	}

	// rawsock's connections (as the proxy dials them) peek with their own
	// Alive, others through their RawConn.
	for _, wrap := range []func(net.Conn) net.Conn{func(c net.Conn) net.Conn { return c }, rawsock.Wrap} {
		c, _ := pair()
		c = wrap(c)
		if !alive(c) {
			t.Error("open idle connection: dead")
		}
		if !alive(tls.Client(c, &tls.Config{})) {
			t.Error("open idle connection under TLS: dead")
		}
		c, s := pair()
		c = wrap(c)
		s.Close()
		settle(c)
		if alive(c) {
			t.Error("connection closed by its peer: alive")
		}
		if alive(tls.Client(c, &tls.Config{})) {
			t.Error("connection closed by its peer, under TLS: alive")
		}
		c, s = pair()
		c = wrap(c)
		s.Write([]byte("x"))
		settle(c)
		if alive(c) {
			t.Error("connection with stray bytes: alive")
		}
	}
	if alive(pipeConn{}) {
		t.Error("connection without a socket: alive")
	}
}

type pipeConn struct{ net.Conn }

// waitConnClosed waits until the pooled connection to addr reads EOF.
func waitConnClosed(t *testing.T, cl *h1Client, addr string) {
	t.Helper()
	cl.mu.Lock()
	l := cl.idle[addr]
	cl.mu.Unlock()
	if len(l) != 1 {
		t.Fatalf("%d pooled connections, want 1", len(l))
	}
	c := l[0].c
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("pooled connection: %v, want EOF", err)
	}
	c.SetReadDeadline(time.Time{})
}

// TestH1ClientBounds: oversized response headers, a silent backend past
// the response header timeout, and a cancelled request all end the
// exchange with an error and close the connection.
func TestH1ClientBounds(t *testing.T) {
	release := make(chan struct{})
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		switch r.URL.Path {
		case "/big-header":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 8000)+"\r\nContent-Length: 0\r\n\r\n")
		case "/silent":
			<-release
		}
		return true
	})
	defer close(release)

	cl := testH1Client(t, func(tr *http.Transport) { tr.MaxResponseHeaderBytes = 4096 })
	req, _ := http.NewRequest("GET", "http://"+b.addr()+"/big-header", nil)
	req.Body = nil
	if _, err := cl.RoundTrip(req); !errors.Is(err, errResponseHeaderTooLarge) {
		t.Errorf("oversized header: %v, want errResponseHeaderTooLarge", err)
	}

	cl = testH1Client(t, func(tr *http.Transport) { tr.ResponseHeaderTimeout = 50 * time.Millisecond })
	req, _ = http.NewRequest("GET", "http://"+b.addr()+"/silent", nil)
	req.Body = nil
	if _, err := cl.RoundTrip(req); err == nil || !isTimeout(err) {
		t.Errorf("silent backend: %v, want a timeout", err)
	}

	cl = testH1Client(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "GET", "http://"+b.addr()+"/silent", nil)
	req.Body = nil
	done := make(chan error, 1)
	go func() { _, err := cl.RoundTrip(req); done <- err }()
	cancel()
	if err := testpeer.Recv(t, done, "cancelled round trip"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v, want context.Canceled", err)
	}
}

// TestH1ClientBodies: bodies of known length arriving with the head or
// after it, a head split across reads (left to http.ReadResponse), a
// chunked body, and a body cut short by the backend's close, which is an
// error (io.ErrUnexpectedEOF) and not a short success.
func TestH1ClientBodies(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		switch r.URL.Query().Get("k") {
		case "later":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
			w.Flush()
			time.Sleep(20 * time.Millisecond)
			io.WriteString(w, "later")
		case "split-head":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Len")
			w.Flush()
			time.Sleep(20 * time.Millisecond)
			io.WriteString(w, "gth: 5\r\n\r\nsplit")
		case "chunked":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nchunk\r\n0\r\n\r\n")
		case "echo":
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s %s", len(body)+len(r.Method)+1, r.Method, body)
		case "short":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
			return false
		default:
			io.WriteString(w, okResponse)
		}
		return true
	})
	cl := testH1Client(t, nil)
	for _, k := range []string{"later", "split-head", "chunked"} {
		req, _ := http.NewRequest("GET", "http://"+b.addr()+"/?k="+k, nil)
		req.Body = nil
		got, err := h1Do(t, cl, req)
		if want := map[string]string{"later": "later", "split-head": "split", "chunked": "chunk"}[k]; err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", k, got, err, want)
		}
	}
	// Bodies of known length go out after the head, on the same
	// connection.
	for i, body := range []string{"a=1", strings.Repeat("z", maxH1Body)} {
		req, _ := http.NewRequest("POST", "http://"+b.addr()+"/?k=echo", io.NopCloser(strings.NewReader(body)))
		req.ContentLength = int64(len(body))
		if !h1Carries(req) {
			t.Fatalf("POST %d: not for h1Client", i)
		}
		if got, err := h1Do(t, cl, req); err != nil || got != "POST "+body {
			t.Errorf("POST %d: %.40q, %v", i, got, err)
		}
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("five complete exchanges used %d connections, want 1", n)
	}
	req, _ := http.NewRequest("GET", "http://"+b.addr()+"/?k=short", nil)
	req.Body = nil
	got, err := h1Do(t, cl, req)
	if got != "only ten b" || err != io.ErrUnexpectedEOF {
		t.Errorf("short body: %q, %v; want the 10 bytes and io.ErrUnexpectedEOF", got, err)
	}
	cl.mu.Lock()
	pooled := len(cl.idle[b.addr()])
	cl.mu.Unlock()
	if pooled != 0 {
		t.Errorf("%d connections pooled after a short body, want 0", pooled)
	}
}

// TestH1ClientAllocs bounds the allocations of one exchange on a pooled
// connection with a backend that allocates nothing: the response head
// parsed by h1head (five), the body (one) and the context watch (two).
func TestH1ClientAllocs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
		for n := 0; ; {
			k, err := c.Read(buf[n:])
			if err != nil {
				return
			}
			n += k
			if bytes.HasSuffix(buf[:n], []byte("\r\n\r\n")) {
				n = 0
				c.Write(resp)
			}
		}
	}()
	cl := testH1Client(t, nil)
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/x", nil)
	req.Body = nil
	var body [16]byte
	exchange := func() {
		res, err := cl.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := io.ReadFull(res.Body, body[:2]); n != 2 {
			t.Fatal("short body")
		}
		res.Body.Read(body[:]) // the end: the connection goes back to the pool
		res.Body.Close()
	}
	exchange()
	if n := testing.AllocsPerRun(100, exchange); n > 8 {
		t.Errorf("%v allocations per exchange, want at most 8", n)
	}
	// Without the Header map (passed on as field lines): the head string,
	// the response and its body, the context watch.
	passOn := func() {
		res, err := cl.roundTripHead(req, true, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Header != nil || passOnHead(res) == nil {
			t.Fatal("a plain response came with a Header map")
		}
		if v, _ := passOnHead(res).Get("content-type"); v != "text/plain" {
			t.Fatalf("Content-Type %q", v)
		}
		io.ReadFull(res.Body, body[:2])
		res.Body.Read(body[:])
		if passOnHead(res) != nil {
			t.Fatal("the fields outlived the body")
		}
		res.Body.Close()
	}
	if n := testing.AllocsPerRun(100, passOn); n > 5 {
		t.Errorf("%v allocations per exchange passed on, want at most 5", n)
	}
}

// TestH1ClientBodyErrors: a body that ends before its declared length or
// goes on past it is not sent as complete, an error reading it reaches
// the caller as it is (the proxy answers 408 or 413 by it), and requests
// h1Client does not carry go to http.Transport.
func TestH1ClientBodyErrors(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, okResponse)
		return true
	})
	cl := testH1Client(t, nil)
	errClient := errors.New("client stalled")
	for _, c := range []struct {
		name string
		body io.Reader
		n    int64
		want error // nil: any error
	}{
		{"short", strings.NewReader("abc"), 5, nil},
		{"long", strings.NewReader("abcdefgh"), 5, nil},
		{"read error", io.MultiReader(strings.NewReader("ab"), iotestErr{errClient}), 5, errClient},
	} {
		req, _ := http.NewRequest("PUT", "http://"+b.addr()+"/", io.NopCloser(c.body))
		req.ContentLength = c.n
		res, err := cl.RoundTrip(req)
		if err == nil {
			res.Body.Close()
			t.Errorf("%s: sent as complete", c.name)
		} else if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		mod  func(*http.Request)
	}{
		{"expect", func(r *http.Request) { r.Header.Set("Expect", "100-continue") }},
		{"too long", func(r *http.Request) { r.ContentLength = maxH1Body + 1 }},
		{"unknown length", func(r *http.Request) { r.ContentLength = -1 }},
		{"trailer", func(r *http.Request) { r.Trailer = http.Header{"X": nil} }},
	} {
		req, _ := http.NewRequest("POST", "http://"+b.addr()+"/", strings.NewReader("abc"))
		c.mod(req)
		if h1Carries(req) {
			t.Errorf("%s: carried by h1Client", c.name)
		}
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

// TestH1ClientCancelBodyWrite: a backend that neither reads a request's
// body nor answers cannot hold the exchange once the request's context
// ends, whether the body's write or the response's read is blocked (the
// socket buffers are made small so that the write blocks).
func TestH1ClientCancelBodyWrite(t *testing.T) {
	addr, dial := nonReadingTarget(t)
	cl := newH1Client(&http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}, dial, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	body := strings.Repeat("b", maxH1Body)
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/", io.NopCloser(strings.NewReader(body)))
	req.ContentLength = int64(len(body))
	done := make(chan error, 1)
	go func() { _, err := cl.RoundTrip(req); done <- err }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := testpeer.Recv(t, done, "cancelled exchange"); err == nil {
		t.Fatal("exchange succeeded")
	}
}

// nonReadingTarget is a target that accepts a connection and reads
// nothing, with socket buffers small enough (4 KiB each way) that a
// request body of maxH1Body blocks; dial dials it with the small send
// buffer.
func nonReadingTarget(t *testing.T) (addr string, dial DialFunc) {
	small := func(opt int) func(_, _ string, rc syscall.RawConn) error {
		return func(_, _ string, rc syscall.RawConn) error {
			rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
			return nil
		}
	}
	lc := net.ListenConfig{Control: small(syscall.SO_RCVBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release); ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		<-release
	}()
	d := net.Dialer{Control: small(syscall.SO_SNDBUF)}
	return ln.Addr().String(), d.DialContext
}

// TestH1ClientWriteTimeout: a target that takes none of a request's body
// for writeTimeout fails the exchange with a timeout (504 for the proxy);
// without one the write would wait as long as the client.
func TestH1ClientWriteTimeout(t *testing.T) {
	addr, dial := nonReadingTarget(t)
	cl := newH1Client(&http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}, dial, 0, 200*time.Millisecond)
	body := strings.Repeat("b", maxH1Body)
	req, _ := http.NewRequest("POST", "http://"+addr+"/", io.NopCloser(strings.NewReader(body)))
	req.ContentLength = int64(len(body))
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := cl.RoundTrip(req); done <- err }()
	select {
	case err := <-done:
		if !isTimeout(err) {
			t.Fatalf("after %v: error %v; want a timeout", time.Since(start), err)
		}
	case <-time.After(testwait.Bound(5 * time.Second)): // 25 times the timeout
		t.Fatal("the exchange still waits after 5s for a target that reads nothing (write timeout 200ms)")
	}
}

// TestH1ClientHeaderTimeoutSpansHeadOnly: the response header timeout
// bounds the head only: a body that arrives slower is read whole, and a
// pooled connection whose last response came whole (the deadline left
// armed) serves a request after that deadline passed, a POST too.
func TestH1ClientHeaderTimeoutSpansHeadOnly(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		if r.URL.Query().Get("k") == "slow-body" {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
			for _, c := range "slow" {
				w.Flush()
				time.Sleep(60 * time.Millisecond)
				w.WriteRune(c)
			}
			return true
		}
		io.WriteString(w, okResponse)
		return true
	})
	cl := testH1Client(t, func(tr *http.Transport) { tr.ResponseHeaderTimeout = 100 * time.Millisecond })
	ctx := context.Background()
	if got, err := h1Get(t, cl, ctx, "GET", b.addr()); err != nil || got != "200 OK ok" {
		t.Fatalf("first: %q, %v", got, err)
	}
	time.Sleep(250 * time.Millisecond) // past the first exchange's deadline
	if got, err := h1Get(t, cl, ctx, "GET", b.addr()); err != nil || got != "200 OK ok" {
		t.Fatalf("after the deadline passed: %q, %v", got, err)
	}
	time.Sleep(250 * time.Millisecond)
	// A POST checks the pooled connection first (alive): the passed
	// deadline must not make it look dead.
	if got, err := h1Get(t, cl, ctx, "POST", b.addr()); err != nil || got != "200 OK ok" {
		t.Fatalf("POST after the deadline passed: %q, %v", got, err)
	}
	req, _ := http.NewRequest("GET", "http://"+b.addr()+"/?k=slow-body", nil)
	req.Body = nil
	if got, err := h1Do(t, cl, req); err != nil || got != "slow" {
		t.Errorf("slow body: %q, %v; want it whole", got, err)
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestH1ClientHeaderTimeoutKept: the header timeout's deadline is kept
// across a connection's exchanges while it is recent; one cleared for a
// body read after the head must be set again, so that a silent backend
// on the reused connection still times out.
func TestH1ClientHeaderTimeoutKept(t *testing.T) {
	release := make(chan struct{})
	big := strings.Repeat("b", 100<<10) // more than the read buffer
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		switch r.URL.Query().Get("k") {
		case "big":
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(big), big)
		case "silent":
			w.Flush()
			<-release
		default:
			io.WriteString(w, okResponse)
		}
		return true
	})
	defer close(release)
	cl := testH1Client(t, func(tr *http.Transport) { tr.ResponseHeaderTimeout = time.Second })
	if got, err := h1Get(t, cl, context.Background(), "GET", b.addr()); err != nil || got != "200 OK ok" {
		t.Fatalf("first: %q, %v", got, err)
	}
	req, _ := http.NewRequest("GET", "http://"+b.addr()+"/?k=big", nil)
	req.Body = nil
	if got, err := h1Do(t, cl, req); err != nil || got != big {
		t.Fatalf("big body: %d bytes, %v; want it whole", len(got), err)
	}
	req, _ = http.NewRequest("GET", "http://"+b.addr()+"/?k=silent", nil)
	req.Body = nil
	done := make(chan error, 1)
	go func() { _, err := cl.RoundTrip(req); done <- err }()
	select {
	case err := <-done:
		if !isTimeout(err) {
			t.Errorf("silent backend on a reused connection: %v, want a timeout", err)
		}
	case <-time.After(testwait.Bound(10 * time.Second)): // ten times the header timeout
		t.Fatal("a silent backend on a reused connection did not time out")
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestH1ClientSwitchedConnectionNotPooled: a 101 to a request that asked
// for no switch leaves the connection speaking another protocol (RFC 9110
// §15.2.2); it must not carry the next request. Through the proxy, the
// client that got the 101 gets 502 and the next client's request goes on
// a new connection.
func TestH1ClientSwitchedConnectionNotPooled(t *testing.T) {
	answer := func(conn int64, w *bufio.Writer, r *http.Request) bool {
		switch {
		case strings.HasPrefix(r.URL.Path, "/switch"):
			io.WriteString(w, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n")
		case conn == 1: // the switched connection answers in "other"
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\nother-protocol")
		default:
			io.WriteString(w, okResponse)
		}
		return true
	}
	b := newRawBackend(t, answer)
	cl := testH1Client(t, nil)
	req, _ := http.NewRequest("GET", "http://"+b.addr()+"/switch", nil)
	req.Body = nil
	res, err := cl.RoundTrip(req)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("switch: %v, %v", res, err)
	}
	res.Body.Close()
	if got, err := h1Get(t, cl, context.Background(), "GET", b.addr()); got != "200 OK ok" || err != nil || b.conns.Load() != 2 {
		t.Fatalf("after a 101: %q, %v over %d connections; want \"200 OK ok\" over a second one", got, err, b.conns.Load())
	}

	b = newRawBackend(t, answer)
	f := newFront(t, proxyTo(b.addr()), frontOpts{})
	if res, _, _ := rawExchange(t, f.addr, "GET /switch HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n"); res.StatusCode != http.StatusBadGateway {
		t.Fatalf("a 101 nobody asked for: %d, want 502", res.StatusCode)
	}
	if st, body, _ := get(t, testClient(t), f.url+"/next", "Host", "example.test"); st != 200 || body != "ok" {
		t.Fatalf("the next client's request: %d %q, want 200 \"ok\" (not the switched connection's)", st, body)
	}
}

// TestH1ClientHTTP10ResponseNotPooled: an HTTP/1.0 response ends its
// connection even when it says keep-alive. Its framing ignores
// Transfer-Encoding, which RFC 9112 §6.1 says makes it faulty; here the
// body the backend framed as chunked is read by Content-Length.
func TestH1ClientHTTP10ResponseNotPooled(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		if r.URL.Path == "/te10" {
			io.WriteString(w, "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nok")
			return true
		}
		io.WriteString(w, "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	cl := testH1Client(t, nil)
	for i, path := range []string{"/te10", "/plain", "/plain"} {
		req, _ := http.NewRequest("GET", "http://"+b.addr()+path, nil)
		req.Body = nil
		if got, err := h1Do(t, cl, req); err != nil || got != "ok" {
			t.Fatalf("%s: %q, %v", path, got, err)
		}
		if n := b.conns.Load(); n != int64(i+1) {
			t.Fatalf("after %d HTTP/1.0 responses, %d connections: one was reused", i+1, n)
		}
	}
}

// TestH1ClientStrayBytesOnIdleConnection: bytes a backend sends on an idle
// pooled connection (here a response after its HEAD response, which
// announced no body: one that announces a body is not pooled,
// TestH1ClientBodilessAnnouncedNotPooled) are not the next request's
// response: the connection is dropped before reuse, for a GET as for a
// POST.
func TestH1ClientStrayBytesOnIdleConnection(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npoison"
	wrote := make(chan struct{}, 2) // the stray bytes are in the proxy's receive queue
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		if r.Method == http.MethodHead {
			io.WriteString(w, "HTTP/1.1 200 OK\r\n\r\n")
			w.Flush()
			time.Sleep(20 * time.Millisecond) // after the client read the head
			io.WriteString(w, stray)
			w.Flush() // on loopback, queued at the proxy's socket when this returns
			wrote <- struct{}{}
			return true
		}
		io.WriteString(w, okResponse)
		return true
	})
	cl := testH1Client(t, nil)
	for _, method := range []string{"GET", "POST"} {
		if got, err := h1Get(t, cl, context.Background(), "HEAD", b.addr()); err != nil {
			t.Fatal(got, err)
		}
		select { // not a fixed sleep: under load the backend may write them later
		case <-wrote:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatal("the backend never wrote its stray bytes")
		}
		if got, err := h1Get(t, cl, context.Background(), method, b.addr()); got != "200 OK ok" || err != nil {
			t.Fatalf("%s after the stray bytes: %q, %v; want \"200 OK ok\"", method, got, err)
		}
	}
}

// TestH1ClientDeadlinesOnMonotonicClock: a pooled connection keeps the
// header and write deadlines in place while they were set less than an
// eighth of the timeout ago. The deadlines run on the monotonic clock, so
// that age must be read on it too: read on the wall clock, a step back
// (NTP, a resumed VM) made every pooled connection keep a deadline long
// past, and its next request failed at once with a timeout (504, the
// target charged). The instants recorded must be monoclock readings.
func TestH1ClientDeadlinesOnMonotonicClock(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, _ *http.Request) bool {
		io.WriteString(w, okResponse)
		return true
	})
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: time.Minute, MaxResponseHeaderBytes: 1 << 20}
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawsock.Wrap(c), nil
	}
	cl := newH1Client(tr, dial, 0, time.Minute)
	defer cl.CloseIdleConnections()
	before := monoclock.Now()
	if got, err := h1Get(t, cl, context.Background(), "GET", b.addr()); err != nil || got != "200 OK ok" {
		t.Fatalf("got %q, %v", got, err)
	}
	after := monoclock.Now()
	cl.mu.Lock()
	idle := cl.idle[b.addr()]
	cl.mu.Unlock()
	if len(idle) != 1 {
		t.Fatalf("%d pooled connections, want 1", len(idle))
	}
	pc := idle[0]
	if a := pc.hdrArmed; a < before || a > after {
		t.Errorf("header deadline armed at %d, not a monotonic reading within [%d, %d]", a, before, after)
	}
	if a := pc.sw.armed.Load(); a < before || a > after {
		t.Errorf("write deadline armed at %d, not a monotonic reading within [%d, %d]", a, before, after)
	}
}

// TestH1ClientBodyWithHeadWrittenByNetHTTP: a request with a body that
// h1Client carries has its head written by http.Request.Write when
// writeRequest does not write it itself (more fields than it sorts, a
// value with surrounding white space): that write sends the body too,
// which must then not be sent again. The second send found the body read
// and failed the exchange ("ended after 0"), which the proxy answered
// with 502 and charged to the target: a client could take every target
// out with POSTs of many fields.
func TestH1ClientBodyWithHeadWrittenByNetHTTP(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	})
	cl := testH1Client(t, nil)
	for name, mod := range map[string]func(http.Header){
		"40 fields": func(h http.Header) {
			for i := range 40 {
				h.Set(fmt.Sprintf("X-F%d", i), "v")
			}
		},
		"value with trailing space": func(h http.Header) { h["X-Padded"] = []string{"v "} },
	} {
		req, _ := http.NewRequest("POST", "http://"+b.addr()+"/", io.NopCloser(strings.NewReader("a=1")))
		req.ContentLength = 3
		mod(req.Header)
		if !h1Carries(req) {
			t.Fatalf("%s: not for h1Client", name)
		}
		if got, err := h1Do(t, cl, req); err != nil || got != "a=1" {
			t.Errorf("%s: %q, %v; want the body echoed", name, got, err)
		}
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestPostWithManyFieldsProxied: through the proxy, a small POST whose
// head h1Client leaves to http.Request.Write (here 40 fields) reaches the
// target whole and its answer comes back; it was a 502 that charged the
// target with a failure (max_fails 1 took it out).
func TestPostWithManyFieldsProxied(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	})
	f, c := frontFor(t, proxyTo(b.addr()), false)
	for range 2 { // the second finds the target still in balancing
		req, _ := http.NewRequest("POST", f.url+"/form", strings.NewReader("a=1"))
		req.Host = "example.test"
		for i := range 40 {
			req.Header.Set(fmt.Sprintf("X-F%d", i), "v")
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(got) != "a=1" {
			t.Fatalf("status %d body %q, want 200 with the body echoed", res.StatusCode, got)
		}
	}
}

// TestH1ClientRefusesInvalidFields: a request whose header has a field
// that is no field (RFC 9110 §5.5: a NUL, a line break or another control
// character in a value; a name that is no token) is refused before a
// connection is taken, as http.Transport refuses it. The writer it
// shares with http.Request.Write wrote the NUL as it was (a backend in C
// ends the value there) and dropped the bad name, or turned the line
// break into a space: the target got another request than the proxy's.
func TestH1ClientRefusesInvalidFields(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, _ *http.Request) bool {
		io.WriteString(w, okResponse)
		return true
	})
	cl := testH1Client(t, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, h := range []http.Header{
		{"X-Id": {"admin\x00.evil"}},
		{"X-Id": {"a\x01b"}},
		{"X-Id": {"a\x7fb"}},
		{"X-Id": {"a\r\nInjected: 1"}},
		{"User-Agent": {"ua\x00"}},
		{"Bad Name": {"v"}},
		{"X-Ok": {"v"}, "X-Id": {"fine", "bad\x00"}},
	} {
		mk := func() *http.Request {
			req, _ := http.NewRequest("GET", "http://"+b.addr()+"/x", nil)
			req.Body, req.Header = nil, h
			return req
		}
		if _, err := tr.RoundTrip(mk()); err == nil {
			t.Fatalf("%q: http.Transport sent it; the reference changed", h)
		}
		if res, err := cl.RoundTrip(mk()); err == nil {
			res.Body.Close()
			t.Errorf("%q: sent, want it refused as http.Transport refuses it", h)
		}
		if n := b.conns.Load(); n != 0 {
			t.Fatalf("%q: %d connections to the target, want none", h, n)
		}
	}
	if got, err := h1Get(t, cl, context.Background(), "GET", b.addr()); got != "200 OK ok" || err != nil {
		t.Fatalf("a plain request after them: %q, %v", got, err)
	}
}

// TestH1ClientBodilessAnnouncedNotPooled: a backend that writes the body
// of a response that has none (a HEAD's, a 304's) after its head, once
// the proxy sent the connection's next request, had that body read as
// the next request's response (another client's): the peek at reuse
// (TestH1ClientStrayBytesOnIdleConnection) came before the bytes. A
// bodiless response that announced a body (Content-Length above 0, or
// Transfer-Encoding) ends its connection; one that announced none is
// pooled still.
func TestH1ClientBodilessAnnouncedNotPooled(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npoison"
	for _, tc := range []struct {
		name, method, head string
		pooled             bool
	}{
		{"HEAD with Content-Length", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 43\r\n\r\n", false},
		{"HEAD chunked", "HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"HEAD head split", "HEAD", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 43\r\n\r\n", false},
		{"304 with Content-Length", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 43\r\n\r\n", false},
		{"304 chunked", "GET", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"HEAD without a length", "HEAD", "HTTP/1.1 200 OK\r\n\r\n", true},
		{"HEAD with Content-Length 0", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
		{"304 without a length", "GET", "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n", true},
		{"200 with Content-Length 0", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRawBackend(t, func(conn int64, w *bufio.Writer, r *http.Request) bool {
				switch {
				case r.URL.Path == "/x":
					io.WriteString(w, tc.head)
				case conn == 1 && !tc.pooled:
					// The first exchange's body, late: read as this
					// request's answer on a reused connection.
					io.WriteString(w, stray+okResponse)
				default:
					io.WriteString(w, okResponse)
				}
				return true
			})
			cl := testH1Client(t, nil)
			if _, err := h1Get(t, cl, context.Background(), tc.method, b.addr()); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", "http://"+b.addr()+"/next", nil)
			req.Body = nil
			if got, err := h1Do(t, cl, req); got != "ok" || err != nil {
				t.Fatalf("the next request: %q, %v; want \"ok\"", got, err)
			}
			want := int64(2)
			if tc.pooled {
				want = 1
			}
			if n := b.conns.Load(); n != want {
				t.Fatalf("%d connections, want %d", n, want)
			}
		})
	}
}

// TestOversizedResponseFieldRefused: a target's response head with one
// field longer than the client's read buffer (32 KiB) but within
// max_response_header_bytes (64 KiB by default) is passed on whole; one
// with a field longer than max_response_header_bytes, here never ending,
// is answered 502 without waiting for its end (the head is read no
// further than the bound), the reason logged, and its connection closed,
// not pooled: the next request goes over a new one. For the proxy's own
// client (a GET) and for net/http's Transport (a chunked POST).
func TestOversizedResponseFieldRefused(t *testing.T) {
	long := strings.Repeat("l", 40<<10)
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/long":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Long: "+long+"\r\nContent-Length: 2\r\n\r\nok")
		case "/huge":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Huge: ")
			chunk := strings.Repeat("h", 64<<10)
			for range 16 { // 1 MiB and no end: the proxy stops reading first
				if _, err := io.WriteString(w, chunk); err != nil {
					return false
				}
			}
			w.Flush()
			return true // left open: the proxy must not wait for the end
		default:
			io.WriteString(w, okResponse)
		}
		return true
	})
	var logs testpeer.SyncBuffer
	f := newFront(t, proxyTo(b.addr()), frontOpts{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := testClient(t)
	c.Timeout = testwait.Bound(10 * time.Second)
	for _, post := range []bool{false, true} {
		do := func(path string) *http.Response {
			t.Helper()
			var req *http.Request
			if post { // a body of unknown length: net/http's Transport
				req, _ = http.NewRequest("POST", f.url+path, io.MultiReader(strings.NewReader("x")))
			} else {
				req, _ = http.NewRequest("GET", f.url+path, nil)
			}
			req.Host = "example.test"
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(res.Body)
			res.Body.Close()
			return res
		}
		before := b.conns.Load()
		if res := do("/long"); res.StatusCode != 200 || res.Header.Get("X-Long") != long {
			t.Fatalf("post %v: a 40 KiB field: %d, %d bytes passed on; want 200 and the whole field", post, res.StatusCode, len(res.Header.Get("X-Long")))
		}
		if res := do("/huge"); res.StatusCode != http.StatusBadGateway {
			t.Fatalf("post %v: a field past max_response_header_bytes: %d, want 502", post, res.StatusCode)
		}
		if res := do("/next"); res.StatusCode != 200 {
			t.Fatalf("post %v: the next request: %d, want 200", post, res.StatusCode)
		}
		if n := b.conns.Load() - before; n != 2 {
			t.Fatalf("post %v: %d connections for the three requests, want 2 (the refused head's not reused)", post, n)
		}
	}
	if l := logs.String(); strings.Count(l, "header") < 2 || !strings.Contains(l, "too large") {
		t.Fatalf("the reason not logged:\n%s", l)
	}
}
