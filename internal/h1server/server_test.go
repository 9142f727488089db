package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// testServer serves h on loopback with s's settings; it is closed when
// the test ends.
func testServer(t testing.TB, s *Server, h http.Handler) (*Server, string) {
	t.Helper()
	if s == nil {
		s = &Server{}
	}
	s.Handler = h
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.ServeConn(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.Close()
		wg.Wait()
	})
	return s, ln.Addr().String()
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testwait.Bound(3 * time.Second)))
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends raw and reads everything until the server closes.
func exchange(t testing.TB, addr, raw string) string {
	t.Helper()
	c := dial(t, addr)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// readResponses reads n responses to method requests from br.
func readResponses(t testing.TB, br *bufio.Reader, methods ...string) []*http.Response {
	t.Helper()
	var out []*http.Response
	for _, m := range methods {
		res, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("response %d: %v", len(out)+1, err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", len(out)+1, err)
		}
		res.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, res)
	}
	return out
}

func bodyOf(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %s host=%s body=%s", r.Method, r.RequestURI, r.Proto, r.Host, b)
})

func TestPipelinedRequestsInOrder(t *testing.T) {
	_, addr := testServer(t, nil, echo)
	c := dial(t, addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
	rs := readResponses(t, bufio.NewReader(c), "GET", "POST", "GET")
	want := []string{"GET /1 HTTP/1.1 host=a body=", "POST /2 HTTP/1.1 host=a body=abc", "GET /3 HTTP/1.1 host=a body="}
	for i, r := range rs {
		if got := bodyOf(r); got != want[i] || r.ContentLength != int64(len(want[i])) {
			t.Errorf("response %d: %q (length %d), want %q", i+1, got, r.ContentLength, want[i])
		}
	}
}

func TestHTTP10KeepAlive(t *testing.T) {
	_, addr := testServer(t, nil, echo)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	r := readResponses(t, br, "GET")[0]
	if r.Header.Get("Connection") != "keep-alive" || r.Close {
		t.Fatalf("HTTP/1.0 keep-alive: Connection %q, close %v", r.Header.Get("Connection"), r.Close)
	}
	io.WriteString(c, "GET /b HTTP/1.0\r\n\r\n")
	r = readResponses(t, br, "GET")[0]
	if got := bodyOf(r); got != "GET /b HTTP/1.0 host= body=" {
		t.Fatalf("second request: %q", got)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("HTTP/1.0 without keep-alive: connection not closed (%v)", err)
	}
}

func TestConnectionClose(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/handler-close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	for _, tc := range []struct{ name, req string }{
		{"client", "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"handler", "GET /handler-close HTTP/1.1\r\nHost: a\r\n\r\nGET /never HTTP/1.1\r\nHost: a\r\n\r\n"},
	} {
		out := exchange(t, addr, tc.req)
		if strings.Count(out, "HTTP/1.1 200") != 1 || !strings.Contains(out, "Connection: close\r\n") {
			t.Errorf("%s close: %q", tc.name, out)
		}
	}
}

func TestChunkedRequestAndResponse(t *testing.T) {
	big := strings.Repeat("x", 40<<10)
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/undeclared" {
			w.(http.Flusher).Flush()
			w.Header().Set(http.TrailerPrefix+"X-Late", "late")
			// Fields that may not be trailers (RFC 9110 §6.5.1).
			w.Header().Set(http.TrailerPrefix+"Content-Length", "99")
			w.Header().Set(http.TrailerPrefix+"Host", "evil.test")
			return
		}
		w.Header().Set("Trailer", "X-Sum")
		w.Write(b)
		io.WriteString(w, big)
		w.Header().Set("X-Sum", strconv.Itoa(len(b)))
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
		w.Header().Set("X-Not-Declared", "ignored")
		if r.Trailer.Get("X-In") != "t" {
			w.Header().Set(http.TrailerPrefix+"X-In-Missing", "1")
		}
	}))
	c := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-In\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-In: t\r\n\r\n")
	r := readResponses(t, bufio.NewReader(c), "POST")[0]
	if got := bodyOf(r); got != "abcde"+big {
		t.Fatalf("body: %d bytes", len(got))
	}
	if r.TransferEncoding == nil || r.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", r.TransferEncoding)
	}
	if r.Trailer.Get("X-Sum") != "5" || r.Trailer.Get("X-Late") != "late" || r.Trailer.Get("X-In-Missing") != "" || r.Trailer.Get("X-Not-Declared") != "" {
		t.Errorf("trailers %v", r.Trailer)
	}
	// Trailers set with http.TrailerPrefix after the header went out,
	// none declared.
	io.WriteString(c, "GET /undeclared HTTP/1.1\r\nHost: a\r\n\r\n")
	r = readResponses(t, bufio.NewReader(c), "GET")[0]
	if r.Trailer.Get("X-Late") != "late" || r.Trailer.Get("Content-Length") != "" || r.Trailer.Get("Host") != "" {
		t.Errorf("undeclared trailers: %v, want X-Late alone", r.Trailer)
	}
}

func TestOneWriteResponse(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(make([]byte, 1024))
	})}
	a, b := net.Pipe()
	defer b.Close()
	wc := &writeCounter{Conn: a}
	go s.ServeConn(wc)
	b.SetDeadline(time.Now().Add(testpeer.WaitLimit))
	br := bufio.NewReader(b)
	for i := 0; i < 3; i++ {
		io.WriteString(b, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		r := readResponses(t, br, "GET")[0]
		if r.ContentLength != 1024 {
			t.Fatalf("content length %d", r.ContentLength)
		}
	}
	if n := wc.n.Load(); n != 3 {
		t.Errorf("%d writes for 3 responses, want 3", n)
	}
}

type writeCounter struct {
	net.Conn
	n atomic.Int64
}

func (w *writeCounter) Write(p []byte) (int, error) { w.n.Add(1); return w.Conn.Write(p) }

func TestHeadAndBodylessStatus(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(304)
		}
		if _, err := io.WriteString(w, "body"); err != nil && r.URL.Path == "/" {
			t.Errorf("write: %v", err)
		}
	}))
	c := dial(t, addr)
	io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET /204 HTTP/1.1\r\nHost: a\r\n\r\nGET /304 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	rs := readResponses(t, br, "HEAD", "GET", "GET", "GET")
	if rs[0].ContentLength != 4 || rs[0].Header.Get("Content-Type") == "" {
		t.Errorf("HEAD: length %d, type %q", rs[0].ContentLength, rs[0].Header.Get("Content-Type"))
	}
	if rs[1].StatusCode != 204 || rs[1].Header.Get("Content-Length") != "" {
		t.Errorf("204: %v", rs[1].Header)
	}
	if rs[2].StatusCode != 304 || rs[2].Header.Get("Content-Type") != "" {
		t.Errorf("304: %v", rs[2].Header)
	}
	if bodyOf(rs[3]) != "body" {
		t.Errorf("GET after HEAD/204/304 out of sync")
	}
}

func TestExpectContinue(t *testing.T) {
	read := make(chan struct{})
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-read
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	// Nothing before the handler reads the body.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := br.Peek(1); err == nil {
		t.Fatal("100 Continue sent before the handler read the body")
	}
	c.SetReadDeadline(time.Now().Add(testpeer.WaitLimit))
	close(read)
	line, _ := br.ReadString('\n')
	if line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q", line)
	}
	br.ReadString('\n')
	io.WriteString(c, "hi")
	if r := readResponses(t, br, "PUT")[0]; bodyOf(r) != "hi" {
		t.Fatal("body after 100 Continue lost")
	}

	out := exchange(t, addr, "PUT / HTTP/1.1\r\nHost: a\r\nExpect: something-else\r\nContent-Length: 2\r\n\r\nhi")
	if !strings.HasPrefix(out, "HTTP/1.1 417 ") {
		t.Errorf("other expectation: %q, want 417", out)
	}
}

// TestExpectContinueFullDuplex: with 100-continue, a response header the
// handler flushes while another of its goroutines waits in the body's
// Read for bytes the client has not sent goes out at once: the client
// may wait for it before sending more (EnableFullDuplex).
func TestExpectContinueFullDuplex(t *testing.T) {
	continued := make(chan struct{})
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(r.Body)
			got <- b
		}()
		<-continued // the reader is in Read, past 100 Continue
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		w.Write(<-got)
	}))
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\n")
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q", line)
	}
	br.ReadString('\n')
	close(continued)
	if line, err := br.ReadString('\n'); line != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("response header not sent before the rest of the body: %q %v", line, err)
	}
	io.WriteString(c, "hi")
	if out, _ := io.ReadAll(br); !strings.HasSuffix(string(out), "\r\n\r\n2\r\nhi\r\n0\r\n\r\n") {
		t.Errorf("rest: %q", out)
	}
}

// TestExpectContinueUnreadLingers: a final status for a 100-continue
// request whose body the handler did not read closes the connection
// with a linger, not a reset, when the client sent the body anyway.
func TestExpectContinueUnreadLingers(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	c := dial(t, addr)
	io.WriteString(c, "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 262144\r\n\r\n"+strings.Repeat("x", 256<<10))
	out, err := io.ReadAll(c)
	if !strings.HasPrefix(string(out), "HTTP/1.1 401 ") || !strings.Contains(string(out), "\r\nConnection: close\r\n") || err != nil {
		t.Errorf("%.60q, %v; want 401 with Connection: close, ended by a close", out, err)
	}
}

func TestBadRequests(t *testing.T) {
	served := make(chan string, 10)
	_, addr := testServer(t, &Server{MaxHeaderBytes: 1 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- r.URL.Path
	}))
	for _, tc := range []struct{ name, req, want string }{
		{"missing Host", "GET /x HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request: missing required Host header"},
		{"two Hosts", "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"bad Host", "GET /x HTTP/1.1\r\nHost: a b\r\n\r\n", "HTTP/1.1 400 Bad Request: malformed Host header"},
		{"bad Host, absolute target", "GET http://a/x HTTP/1.1\r\nHost: a\x01b\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"bad field name", "GET /x HTTP/1.1\r\nHost: a\r\nBad Name: v\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"empty field name", "GET /x HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"bad field value", "GET /x HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"header too large", "GET /x HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", "HTTP/1.1 431 Request Header Fields Too Large"},
		// The request line alone past the bound: the target is what is
		// too long (RFC 9112 §3, RFC 9110 §15.5.15), as nginx answers it.
		{"request line too large", "GET /" + strings.Repeat("a", 8<<10) + " HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 414 "},
		{"HTTP/2.0", "GET /x HTTP/2.0\r\nHost: a\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported"},
		{"HTTP/0.9", "GET /x HTTP/0.9\r\nHost: a\r\n\r\n", "HTTP/1.1 505"},
		{"bad version", "GET /x HTTP/1.x\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"gzip TE", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501 Not Implemented"},
		{"two TEs", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 501 Not Implemented"},
		{"two Content-Lengths", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "HTTP/1.1 400 Bad Request"},
		// RFC 9112 §6.1: faulty framing. ReadRequest would frame the body
		// as empty and read the chunked body as the next request.
		{"TE in HTTP/1.0", "POST /x HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request: Transfer-Encoding in an HTTP/1.0 request"},
		{"TE and CL in HTTP/1.0", "POST /x HTTP/1.0\r\nContent-Length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 400 Bad Request: Transfer-Encoding in an HTTP/1.0 request"},
	} {
		out := exchange(t, addr, tc.req)
		if !strings.HasPrefix(out, tc.want) || !strings.Contains(out, "Connection: close") {
			t.Errorf("%s: %q, want %q", tc.name, out, tc.want)
		}
	}
	select {
	case p := <-served:
		t.Errorf("bad request reached the handler: %s", p)
	default:
	}
	// HTTP/1.0 needs no Host; an empty Host is allowed.
	if out := exchange(t, addr, "GET /ok HTTP/1.0\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.0 200") {
		t.Errorf("HTTP/1.0 without Host: %q", out)
	}
	if out := exchange(t, addr, "GET /ok HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Errorf("empty Host: %q", out)
	}
}

// A request with both Content-Length and Transfer-Encoding is answered
// with Connection: close and nothing after it on the connection is
// served, whichever field a peer would have trusted (RFC 9112 §6.1).
// TestRefusedRequestLingers: a request refused before its handler while
// its body is still coming (417, 501, 400) gets its answer ended by a
// close, not by a reset that makes the close-delimited answer an error.
func TestRefusedRequestLingers(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	body := strings.Repeat("x", 256<<10)
	for _, tc := range []struct{ head, want string }{
		{"PUT / HTTP/1.1\r\nHost: a\r\nExpect: foo\r\nContent-Length: 262144\r\n\r\n", "HTTP/1.1 417 "},
		{"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "HTTP/1.1 501 "},
		{"PUT / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 400 "},
		{"PUT / HTTP/1.1\r\nContent-Length: 262144\r\n\r\n", "HTTP/1.1 400 "},
		{"PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n", "HTTP/1.1 400 "},
	} {
		c := dial(t, addr)
		io.WriteString(c, tc.head+body)
		out, err := io.ReadAll(c)
		if !strings.HasPrefix(string(out), tc.want) || err != nil {
			t.Errorf("%q: %.40q, %v; want %q ended by a close", tc.head, out, err, tc.want)
		}
	}
}

func TestContentLengthAndTransferEncoding(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
	for _, order := range []string{
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"transfer-encoding: chunked\r\ncontent-length: 5\r\n",
	} {
		out := exchange(t, addr, "POST /first HTTP/1.1\r\nHost: a\r\n"+order+"\r\n0\r\n\r\n"+smuggled)
		if !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.Contains(out, "Connection: close\r\n") || strings.Count(out, "HTTP/1.1") != 1 {
			t.Errorf("CL+TE: %q", out)
		}
	}
	// Split across reads, after a first ordinary request.
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /plain HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponses(t, br, "GET")
	for _, part := range []string{"POST /first HTTP/1.1\r\nHost: a\r\nContent-Le", "ngth: 5\r\nTransfer-Enc", "oding: chunked\r\n\r\n0\r\n\r\n" + smuggled} {
		io.WriteString(c, part)
		time.Sleep(10 * time.Millisecond)
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "Connection: close\r\n") || strings.Count(string(rest), "HTTP/1.1") != 1 {
		t.Errorf("CL+TE in pieces: %q", rest)
	}
	mu.Lock()
	for _, p := range paths {
		if p == "/smuggled" {
			t.Errorf("the smuggled request was served: %v", paths)
		}
	}
	mu.Unlock()
	// A body that merely contains such lines is no reason to close.
	c = dial(t, addr)
	br = bufio.NewReader(c)
	inner := "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
	io.WriteString(c, "POST /body HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(len(inner))+"\r\n\r\n"+inner)
	if r := readResponses(t, br, "POST")[0]; r.Close {
		t.Error("a body with field-like lines closed the connection")
	}
}

func TestHandlerPanic(t *testing.T) {
	var logs syncBuffer
	_, addr := testServer(t, &Server{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			io.WriteString(w, "partial")
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, "alive")
	}))
	for _, p := range []string{"/panic", "/abort"} {
		if out := exchange(t, addr, "GET "+p+" HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"); out != "" {
			t.Errorf("%s: %q, want the connection closed without a response", p, out)
		}
	}
	if out := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); !strings.HasSuffix(out, "alive") {
		t.Errorf("server after panics: %q", out)
	}
	// The panic is logged with its value and where it happened; the
	// abort is silent.
	if l := logs.String(); strings.Count(l, "panic serving") != 1 || !strings.Contains(l, "panic=boom") || !strings.Contains(l, "uri=/panic") {
		t.Errorf("log:\n%s", l)
	}
}

// TestPanicLingers: a handler that answered (a 500 it wrote and flushed)
// and then panicked without reading the request body ends the connection
// as a refused request does: lingering over what the client still sends,
// so that the close does not reset the connection and lose the answer
// in the client's receive queue.
func TestPanicLingers(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "boom!")
		w.(http.Flusher).Flush()
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}))
	body := strings.Repeat("x", 256<<10)
	for _, p := range []string{"/panic", "/abort"} {
		c := dial(t, addr)
		io.WriteString(c, "PUT "+p+" HTTP/1.1\r\nHost: a\r\nContent-Length: 262144\r\n\r\n"+body)
		out, err := io.ReadAll(c)
		if !strings.HasPrefix(string(out), "HTTP/1.1 500 ") || !strings.HasSuffix(string(out), "\r\n\r\nboom!") || err != nil {
			t.Errorf("%s: %.40q, %v; want the whole 500 ended by a close", p, out, err)
		}
	}
}

// TestPanicClosesBody: the body of a request whose handler panicked fails
// a later read by a goroutine the handler left behind, as after a handler
// that returned, rather than read the connection (or, once its reader is
// pooled, another connection's bytes).
func TestPanicClosesBody(t *testing.T) {
	readNow, got := make(chan struct{}), make(chan error, 1)
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		go func() {
			<-readNow
			_, err := r.Body.Read(make([]byte, 1))
			got <- err
		}()
		panic("boom")
	}))
	c := dial(t, addr)
	io.WriteString(c, "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabcde")
	io.ReadAll(c)
	c.Close()
	close(readNow)
	if err := <-got; err != http.ErrBodyReadAfterClose {
		t.Errorf("a read after the handler panicked: %v, want %v", err, http.ErrBodyReadAfterClose)
	}
}

// syncBuffer is a log buffer the server's goroutines write to.
type syncBuffer = testpeer.SyncBuffer

func TestHijack(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo:"+line)
	}))
	c := dial(t, addr)
	// The tunnel's first bytes arrive with the request.
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nhello\n")
	out, _ := io.ReadAll(c)
	if string(out) != "HTTP/1.1 101 Switching Protocols\r\n\r\necho:hello\n" {
		t.Errorf("hijacked: %q", out)
	}
}

// TestHijackClearsDeadlines: the hijacker gets the connection without
// the request's ReadTimeout and WriteTimeout deadlines (as net/http's
// Hijack): a WebSocket lives past them.
func TestHijackClearsDeadlines(t *testing.T) {
	const timeout = 5 * time.Millisecond
	s := &Server{ReadHeaderTimeout: time.Minute, ReadTimeout: timeout, WriteTimeout: timeout}
	_, addr := testServer(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		time.Sleep(4 * timeout) // both request deadlines are behind
		if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n\r\n"); err != nil {
			t.Errorf("write after hijack: %v", err)
			return
		}
		line, err := brw.ReadString('\n')
		if err != nil {
			t.Errorf("read after hijack: %v", err)
			return
		}
		io.WriteString(c, "echo:"+line)
	}))
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	if l, _ := br.ReadString('\n'); l != "HTTP/1.1 101 Switching Protocols\r\n" {
		t.Fatalf("status line %q", l)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello\n")
	if out, _ := io.ReadAll(br); string(out) != "echo:hello\n" {
		t.Errorf("hijacked: %q", out)
	}
}

// TestSwitchingProtocolsWithoutHijackCloses: after a 101 the connection
// speaks the protocol switched to (RFC 9110 §15.2.2); a handler that
// wrote one and returned without hijacking the connection leaves nothing
// to speak it, so the server closes the connection rather than read the
// client's bytes in that protocol as requests, and lingers over them so
// that the close does not reset the connection under the 101.
func TestSwitchingProtocolsWithoutHijackCloses(t *testing.T) {
	var calls atomic.Int32
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/up" {
			io.WriteString(w, "served")
			return
		}
		w.Header().Set("Upgrade", "x")
		w.Header().Set("Connection", "Upgrade")
		w.WriteHeader(http.StatusSwitchingProtocols)
	}))
	c := dial(t, addr)
	// The new protocol's first bytes follow the request at once: some
	// that look like a request, then more than the server buffers.
	io.WriteString(c, "GET /up HTTP/1.1\r\nHost: a\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"+
		"GET /after HTTP/1.1\r\nHost: a\r\n\r\n"+strings.Repeat("x", 256<<10))
	out, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 101 Switching Protocols\r\n") ||
		!strings.Contains(string(out), "\r\nConnection: Upgrade\r\n") || !strings.HasSuffix(string(out), "\r\n\r\n") ||
		strings.Count(string(out), "HTTP/1.1 ") != 1 {
		t.Errorf("read %q, %v; want the 101 alone, ended by a close", out, err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests served, want 1 (the bytes after the 101 are not requests)", n)
	}
}

// TestNoInformationalToHTTP10: a 1xx the handler writes is not sent to an
// HTTP/1.0 client (RFC 9110 §15.2), which would take it for the response.
func TestNoInformationalToHTTP10(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusContinue)
		io.WriteString(w, "final")
	}))
	out := exchange(t, addr, "GET / HTTP/1.0\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.0 200 OK\r\n") || !strings.HasSuffix(out, "\r\n\r\nfinal") {
		t.Errorf("HTTP/1.0: %q", out)
	}
	out = exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 100 Continue\r\n") {
		t.Errorf("HTTP/1.1: %q", out)
	}
}

func TestTimeoutsClose(t *testing.T) {
	_, addr := testServer(t, &Server{IdleTimeout: 50 * time.Millisecond, ReadHeaderTimeout: 50 * time.Millisecond}, echo)
	// Idle after a response.
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	readResponses(t, br, "GET")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF", err)
	}
	// A header that never ends after a first request, and empty lines
	// after a POST followed by nothing: the header timeout, not the longer
	// idle one, closes the connection.
	_, addr2 := testServer(t, &Server{IdleTimeout: time.Minute, ReadHeaderTimeout: 50 * time.Millisecond}, echo)
	for _, tc := range []struct{ first, method, then string }{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET", "GET / HTTP/1.1\r\nHost: a\r\n"},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi", "POST", "\n\n"},
	} {
		c = dial(t, addr2)
		io.WriteString(c, tc.first)
		br = bufio.NewReader(c)
		readResponses(t, br, tc.method)
		io.WriteString(c, tc.then)
		c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%q after a %s: %v, want EOF from the header timeout", tc.then, tc.method, err)
		}
	}
	// A header that never ends on a new connection.
	c = dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Errorf("slow header: %q %v, want a silent close", b, err)
	}
}

func TestShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	}))
	idle := dial(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	ibr := bufio.NewReader(idle)
	readResponses(t, ibr, "GET")
	busy := dial(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	testpeer.Recv(t, entered, "slow request")
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testpeer.WaitLimit)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Errorf("idle connection after Shutdown: %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	default:
	}
	close(release)
	out, _ := io.ReadAll(busy)
	if !strings.Contains(string(out), "Connection: close\r\n") || !strings.HasSuffix(string(out), "done") {
		t.Errorf("busy connection: %q", out)
	}
	if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer b.Close()
	if err := s.ServeConn(a); !errors.Is(err, ErrServerClosed) {
		t.Errorf("ServeConn after Shutdown: %v", err)
	}
}

// readSignalConn reports its first Read: the server waits for the
// connection's first request.
type readSignalConn struct {
	net.Conn
	once    sync.Once
	reading chan struct{}
}

func (c *readSignalConn) Read(p []byte) (int, error) {
	c.once.Do(func() { close(c.reading) })
	return c.Conn.Read(p)
}

// TestShutdownClosesSilentNewConn: Shutdown closes a connection that has
// sent nothing for longer than newConnGrace (net/http closes a StateNew
// connection older than 5 s): a peer that connects and stays silent does
// not hold a graceful shutdown until read_header_timeout, or for ever
// without one. Before, a connection was marked active before its first
// byte.
func TestShutdownClosesSilentNewConn(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srvSide, cli := net.Pipe()
	defer cli.Close()
	rc := &readSignalConn{Conn: srvSide, reading: make(chan struct{})}
	go s.ServeConn(rc)
	testpeer.Recv(t, rc.reading, "the server's first read")
	// The connection has been silent for longer than newConnGrace.
	s.mu.Lock()
	for c := range s.conns {
		c.started = monoclock.Now() - int64(2*newConnGrace)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), testpeer.WaitLimit)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v: a connection that never sent a byte, silent for 2×newConnGrace, was not closed", err)
	}
	cli.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if _, err := cli.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("silent connection after Shutdown: read err %v, want it closed", err)
	}
}

// After Drain every response closes its connection, and requests are
// still served: the next one of a kept-alive connection, the first of a
// new one.
func TestDrain(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-release
		}
		io.WriteString(w, "ok")
	}))
	kept := dial(t, addr)
	kbr := bufio.NewReader(kept)
	io.WriteString(kept, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if res := readResponses(t, kbr, "GET")[0]; res.Close {
		t.Fatal("a response before Drain closed its connection")
	}
	// Drain while the connection's next request is being served: an
	// idle one may be closed before it reads another (a kept-alive
	// connection's client retries), so the request is in first.
	io.WriteString(kept, "GET /block HTTP/1.1\r\nHost: a\r\n\r\n")
	testpeer.Recv(t, entered, "the second request")
	s.Drain()
	close(release)
	if res := readResponses(t, kbr, "GET")[0]; !res.Close {
		t.Error("the kept-alive connection's next response after Drain did not close it")
	}
	if _, err := kbr.ReadByte(); err != io.EOF {
		t.Errorf("kept-alive connection after its last response: %v, want EOF", err)
	}
	out := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if !strings.Contains(out, "Connection: close\r\n") || !strings.HasSuffix(out, "ok") {
		t.Errorf("a new connection after Drain: %q", out)
	}
}

// A client that goes away while a slow handler runs cancels the request
// context.
func TestClientGoneCancelsContext(t *testing.T) {
	gone := make(chan error, 1)
	entered := make(chan struct{})
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-r.Context().Done():
			gone <- r.Context().Err()
		case <-time.After(testpeer.WaitLimit):
			gone <- nil
		}
	}))
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	testpeer.Recv(t, entered, "request")
	c.Close()
	if err := testpeer.Recv(t, gone, "handler end"); !errors.Is(err, context.Canceled) {
		t.Errorf("request context after the client left: %v, want canceled", err)
	}
}

// A pipelined request that arrives while a slow handler runs is served
// next (the byte the background read took is not lost).
func TestPipelinedDuringSlowHandler(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * watchDelay)
		}
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(2 * watchDelay)
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	rs := readResponses(t, bufio.NewReader(c), "GET", "GET")
	if bodyOf(rs[0]) != "/slow" || bodyOf(rs[1]) != "/next" {
		t.Error("pipelined request lost")
	}
}

func TestUnreadBody(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ignored the body")
	}))
	c := dial(t, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
	if rs := readResponses(t, br, "POST", "GET"); rs[1].StatusCode != 200 {
		t.Error("small unread body not drained")
	}
	big := 1 << 20
	c = dial(t, addr)
	go func() {
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(big)+"\r\n\r\n")
		c.Write(make([]byte, big))
	}()
	br = bufio.NewReader(c)
	if r := readResponses(t, br, "POST")[0]; !r.Close {
		t.Error("big unread body: connection kept")
	}
}

// TestUnreadBodyStillSent: a handler that answers without reading a body
// the client is still sending (a target's 403 or 413 before the upload)
// has its response sent at once, not after the drain of the rest, which
// waits for the client up to idle_timeout; once the client ends the body
// the connection serves its next request.
func TestUnreadBodyStillSent(t *testing.T) {
	_, addr := testServer(t, &Server{IdleTimeout: time.Minute}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upload" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		io.WriteString(w, "next")
	}))
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	br := bufio.NewReader(c)
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	res, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatalf("no response while the client's body goes on (the drain held it): %v", err)
	}
	io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusForbidden || res.Close {
		t.Fatalf("status %d, close %v; want 403 on a kept connection", res.StatusCode, res.Close)
	}
	io.WriteString(c, "5\r\nworld\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	if rs := readResponses(t, br, "GET"); rs[0].StatusCode != 200 {
		t.Errorf("next request after the drained body: %d", rs[0].StatusCode)
	}
}

// TestUnreadBodyClosing: a response that closes the connection whose
// handler left a body unread that the client keeps sending closes after
// a bounded linger, not after a drain that waits for the client up to
// idle_timeout.
func TestUnreadBodyClosing(t *testing.T) {
	_, addr := testServer(t, &Server{IdleTimeout: time.Minute}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	br := bufio.NewReader(c)
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: a\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	res, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusForbidden || !res.Close {
		t.Fatalf("status %d, close %v; want 403 closing", res.StatusCode, res.Close)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the connection was not closed while the client's body stayed open: %v", err)
	}
}

func TestContentLengthMismatch(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4")
		if r.URL.Path == "/long" {
			if _, err := io.WriteString(w, "12345"); !errors.Is(err, http.ErrContentLength) {
				t.Errorf("too long a write: %v", err)
			}
			return
		}
		io.WriteString(w, "12")
	}))
	out := exchange(t, addr, "GET /short HTTP/1.1\r\nHost: a\r\n\r\nGET /short HTTP/1.1\r\nHost: a\r\n\r\n")
	if strings.Count(out, "HTTP/1.1 200") != 1 {
		t.Errorf("short body: the connection went on: %q", out)
	}
	exchange(t, addr, "GET /long HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
}

func TestResponseFields(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Bad Name"] = []string{"x"}
		w.Header().Set("X-Split", "a\r\nInjected: yes")
		w.Header().Add("Link", "</s.css>; rel=preload")
		w.WriteHeader(103)
		w.Header().Set("X-After", "ignored")
		w.Header().Del("Link")
		w.WriteHeader(200)
		w.Header().Set("X-Too-Late", "1")
		io.WriteString(w, "<html><body>hi</body></html>")
	}))
	out := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	for _, want := range []string{"HTTP/1.1 103 Early Hints\r\n", "Link: </s.css>; rel=preload\r\n", "X-Split: a  Injected: yes\r\n", "Content-Type: text/html; charset=utf-8\r\n", "Date: "} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
	for _, bad := range []string{"Bad Name", "\r\nInjected", "X-Too-Late"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q sent: %q", bad, out)
		}
	}
}

func TestHTTP10CloseDelimited(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a")
		w.(http.Flusher).Flush()
		io.WriteString(w, "b")
	}))
	out := exchange(t, addr, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if !strings.HasSuffix(out, "\r\n\r\nab") || strings.Contains(out, "chunked") || strings.Contains(out, "Content-Length") {
		t.Errorf("HTTP/1.0 flushed response: %q", out)
	}
}

// A large body write after the header went out reaches the connection in
// one Write of the handler's slice (the record layer can then seal it in
// full records); small writes still gather in the buffer.
func TestLargeWritePassesThrough(t *testing.T) {
	const big = 64 << 10
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(3*big+10))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(make([]byte, 10)) // buffered with the header
		w.(http.Flusher).Flush()  // header and 10 bytes: one write
		for range 3 {
			w.Write(make([]byte, big)) // one write each
		}
	})}
	a, b := net.Pipe()
	defer b.Close()
	wc := &writeSizes{Conn: a}
	go s.ServeConn(wc)
	b.SetDeadline(time.Now().Add(testpeer.WaitLimit))
	io.WriteString(b, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	r := readResponses(t, bufio.NewReader(b), "GET")[0]
	if r.ContentLength != 3*big+10 {
		t.Fatalf("content length %d", r.ContentLength)
	}
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if len(wc.sizes) != 4 || wc.sizes[1] != big || wc.sizes[2] != big || wc.sizes[3] != big {
		t.Fatalf("write sizes %v, want the header write then 3 of %d", wc.sizes, big)
	}
}

type writeSizes struct {
	net.Conn
	mu    sync.Mutex
	sizes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.sizes = append(w.sizes, len(p))
	w.mu.Unlock()
	return w.Conn.Write(p)
}

// lastWriteConn is a connection with WriteLast, which it counts; WriteLast
// also half-closes a pipe end the way close_notify ends the stream.
type lastWriteConn struct {
	net.Conn
	writes, lasts atomic.Int64
}

func (w *lastWriteConn) Write(p []byte) (int, error) { w.writes.Add(1); return w.Conn.Write(p) }

func (w *lastWriteConn) WriteLast(p []byte) (int, error) {
	w.lasts.Add(1)
	return w.Conn.Write(p)
}

// TestLastResponseWithClose: the response after which the connection
// closes (Connection: close, HTTP/1.0) goes out through WriteLast, so a
// TLS connection sends it with close_notify in one write, also when a
// small body the handler left unread is drained after it; a kept-alive
// response does not, nor one the server answers before lingering over a
// large unread body.
func TestLastResponseWithClose(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 100))
	})}
	for _, tc := range []struct {
		req          string
		writes, last int64
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 1, 1},
		{"GET / HTTP/1.0\r\n\r\n", 0, 1},
		{"POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 10\r\n\r\n0123456789", 0, 1},
		{"POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 1048576\r\n\r\n" + strings.Repeat("x", 1<<20), 1, 0},
	} {
		a, b := net.Pipe()
		wc := &lastWriteConn{Conn: a}
		done := make(chan struct{})
		go func() { s.ServeConn(wc); close(done) }()
		b.SetDeadline(time.Now().Add(testpeer.WaitLimit))
		go io.WriteString(b, tc.req)
		io.Copy(io.Discard, b) // until the server closes
		b.Close()
		<-done
		if w, l := wc.writes.Load(), wc.lasts.Load(); w != tc.writes || l != tc.last {
			t.Errorf("%q: %d writes and %d WriteLast, want %d and %d", tc.req, w, l, tc.writes, tc.last)
		}
	}
}

// deadlineConn records the last write deadline set on it.
type deadlineConn struct {
	net.Conn
	mu sync.Mutex
	wd time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) lastWrite() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wd
}

// TestHandlerWriteDeadlineKept: a write deadline the handler sets stays
// for the connection's next request when the server has no WriteTimeout
// (as net/http's; the proxy's send_timeout relies on it, and
// WriteDeadline tells it); with a WriteTimeout the server clears it after
// each response. One that is less than a second away when the next
// request starts is cleared, so that it cannot fail a handler that sets
// none.
func TestHandlerWriteDeadlineKept(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wt    time.Duration
		ahead time.Duration
		wait  time.Duration
		kept  bool
	}{
		{"kept", 0, time.Hour, 0, true},
		{"WriteTimeout", time.Minute, time.Hour, 0, false},
		{"about to pass", 0, 1200 * time.Millisecond, 400 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := time.Now().Add(tc.ahead)
			var seen atomic.Pointer[time.Time]
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/set" {
					if err := http.NewResponseController(w).SetWriteDeadline(set); err != nil {
						t.Error(err)
					}
				} else {
					dl := w.(interface{ WriteDeadline() time.Time }).WriteDeadline()
					seen.Store(&dl)
				}
				io.WriteString(w, "ok")
			})
			s := &Server{Handler: h, WriteTimeout: tc.wt, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			dc := make(chan *deadlineConn, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				d := &deadlineConn{Conn: c}
				s.ServeConn(d)
				dc <- d // the connection's requests are over
			}()
			defer s.Close()
			c := dial(t, ln.Addr().String())
			br := bufio.NewReader(c)
			io.WriteString(c, "GET /set HTTP/1.1\r\nHost: a\r\n\r\n")
			readResponses(t, br, "GET")
			time.Sleep(tc.wait)
			io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
			for _, res := range readResponses(t, br, "GET") {
				if b := bodyOf(res); res.StatusCode != 200 || b != "ok" {
					t.Fatalf("%d %q", res.StatusCode, b)
				}
			}
			c.Close()
			d := testpeer.Recv(t, dc, "end of the connection")
			got, told := d.lastWrite(), *seen.Load()
			if tc.kept {
				if !got.Equal(set) || !told.Equal(set) {
					t.Errorf("write deadline in place %v, told %v; want the handler's %v kept", got, told, set)
				}
			} else if !got.IsZero() || !told.IsZero() {
				t.Errorf("write deadline in place %v, told %v; want it cleared", got, told)
			}
		})
	}
}

// lineFields is a Fields of fixed lines.
type lineFields []string // name, value, name, value...

func (f lineFields) AppendFields(b []byte) []byte {
	for i := 0; i < len(f); i += 2 {
		b = append(b, f[i]+": "+f[i+1]+"\r\n"...)
	}
	return b
}

func (f lineFields) Get(name string) (string, bool) {
	for i := 0; i < len(f); i += 2 {
		if strings.EqualFold(f[i], name) {
			return f[i+1], true
		}
	}
	return "", false
}

// TestWriteFields: a header given as lines goes out as they are, in their
// order, with the Date the server adds when they have none and no sniffed
// Content-Type when they have one; the connection stays open. Responses
// it does not fit are refused and WriteHeader works after.
func TestWriteFields(t *testing.T) {
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw := w.(interface {
			WriteFields(int, int64, Fields) bool
		})
		switch r.URL.Path {
		case "/lines":
			if !fw.WriteFields(201, 5, lineFields{"X-B", "2", "Content-Type", "text/x", "Set-Cookie", "a", "Set-Cookie", "b", "Content-Length", "5"}) != (r.Method == "HEAD") {
				t.Errorf("%s: WriteFields refused, or took a HEAD", r.Method)
			}
			io.WriteString(w, "hello")
		case "/dated":
			fw.WriteFields(200, 2, lineFields{"Date", "Mon, 01 Jan 2001 00:00:00 GMT", "Content-Length", "2"})
			io.WriteString(w, "hi")
		default:
			var refused []string
			for name, try := range map[string]func() bool{
				"204":        func() bool { return fw.WriteFields(204, 0, lineFields{}) },
				"101":        func() bool { return fw.WriteFields(101, 0, lineFields{}) },
				"length -1":  func() bool { return fw.WriteFields(200, -1, lineFields{}) },
				"Connection": func() bool { return fw.WriteFields(200, 0, lineFields{"connection", "x"}) },
				"TE":         func() bool { return fw.WriteFields(200, 0, lineFields{"Transfer-Encoding", "chunked"}) },
				"Trailer":    func() bool { return fw.WriteFields(200, 0, lineFields{"Trailer", "X"}) },
				"map": func() bool {
					w.Header().Set("X-Map", "1")
					defer w.Header().Del("X-Map")
					return fw.WriteFields(200, 0, lineFields{})
				},
			} {
				if !try() {
					refused = append(refused, name)
				}
			}
			w.Header().Set("X-Refused", fmt.Sprint(len(refused)))
			w.WriteHeader(202)
		}
	}))
	c := dial(t, addr)
	io.WriteString(c, "GET /lines HTTP/1.1\r\nHost: a\r\n\r\nGET /dated HTTP/1.1\r\nHost: a\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\nHEAD /lines HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(c)
	got := string(b)
	first, rest, _ := strings.Cut(got, "\r\n\r\nhello")
	if !strings.HasPrefix(first, "HTTP/1.1 201 Created\r\nX-B: 2\r\nContent-Type: text/x\r\nSet-Cookie: a\r\nSet-Cookie: b\r\nContent-Length: 5\r\nDate: ") || strings.Count(first, "\r\n") != 6 {
		t.Errorf("first response:\n%s", first)
	}
	// No Content-Type is sniffed for fields made elsewhere (a backend's).
	if !strings.HasPrefix(rest, "HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2001 00:00:00 GMT\r\nContent-Length: 2\r\n\r\nhi") {
		t.Errorf("second response (no Content-Type added):\n%s", rest)
	}
	if !strings.Contains(rest, "HTTP/1.1 202 Accepted\r\nX-Refused: 7\r\n") {
		t.Errorf("third response (7 refusals):\n%s", rest)
	}
	// HEAD: refused, so the map path answers (no body, a Content-Length
	// of the body it would have had).
	if i := strings.LastIndex(rest, "HTTP/1.1"); i < 0 || !strings.HasSuffix(rest, "\r\n\r\n") || strings.Contains(rest[i:], "hello") {
		t.Errorf("HEAD response:\n%s", rest)
	}
}

// TestServeConnCounted: counted runs once the server counts the
// connection and before it reads from it, so a Shutdown that starts
// there waits for the connection and answers its request (with
// Connection: close), even when the connection's state comes from the
// pool; after Shutdown, counted still runs and the connection is refused.
func TestServeConnCounted(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") }),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	// A connection served to its end first leaves a conn in the pool that
	// ended idle; the next connection must not start out idle (Shutdown
	// would close it at once).
	s.ServeConn(&sinkConn{fuzzConn{in: []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), step: 64}})
	a, b := net.Pipe()
	defer b.Close()
	go io.WriteString(b, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	shut := make(chan error, 1)
	served := make(chan error, 1)
	calls := 0
	go func() {
		served <- s.ServeConnCounted(a, func() {
			calls++
			s.mu.Lock()
			n := len(s.conns)
			s.mu.Unlock()
			if n != 1 {
				t.Errorf("counted ran with %d connections counted, want 1", n)
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), testpeer.WaitLimit)
				defer cancel()
				shut <- s.Shutdown(ctx)
			}()
			for i := 0; i < 2000 && !s.shutting.Load(); i++ {
				time.Sleep(time.Millisecond)
			}
		})
	}()
	out, _ := io.ReadAll(b)
	if !strings.Contains(string(out), "Connection: close\r\n") || !strings.HasSuffix(string(out), "served") {
		t.Errorf("a connection counted before Shutdown started: %q, want its answer", out)
	}
	if err := testpeer.Recv(t, served, "end of ServeConnCounted"); err != nil {
		t.Errorf("ServeConnCounted: %v", err)
	}
	if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
		t.Fatal(err)
	}
	a2, b2 := net.Pipe()
	defer b2.Close()
	if err := s.ServeConnCounted(a2, func() { calls++ }); !errors.Is(err, ErrServerClosed) {
		t.Errorf("ServeConnCounted after Shutdown: %v", err)
	}
	if calls != 2 {
		t.Errorf("counted ran %d times, want 2", calls)
	}
}

// TestNewConnStartsNew: a conn taken from the pool starts out new, not in
// the state its last connection ended in (an idle one would be closed at
// once by Shutdown). TestServeConnCounted sees this only when the pool
// hands the same conn back, which depends on scheduling; here the conn
// is put and taken on one goroutine until the pool returns it.
func TestNewConnStartsNew(t *testing.T) {
	s := &Server{}
	for range 100 { // the pool may drop what is put (always possible; often under -race)
		old := newConn(s, nil)
		old.state.Store(stateIdle)
		putConn(old)
		c := newConn(s, nil)
		if c != old {
			continue
		}
		if st := c.state.Load(); st != stateNew {
			t.Fatalf("a pooled conn starts out in state %d, want %d (new)", st, stateNew)
		}
		return
	}
	t.Fatal("the pool never returned the conn put in it in 100 tries")
}

// TestConnStartOnMonotonicClock: a connection's start, which Shutdown's
// grace for its first request counts from, is a monotonic reading, so a
// wall clock step neither cuts a new connection at once nor keeps it.
func TestConnStartOnMonotonicClock(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	before := monoclock.Now()
	c := newConn(&Server{}, a)
	after := monoclock.Now()
	if c.started < before || c.started > after {
		t.Errorf("connection started at %d, not a monotonic reading within [%d, %d]", c.started, before, after)
	}
}

// TestFieldLinesCountAsInHTTP2: max_header_bytes counts 32 bytes more for
// each field line, as the HTTP/2 server counts the same limit (RFC 7541
// §4.1, SETTINGS_MAX_HEADER_LIST_SIZE). Counted in bytes alone, a head of
// tiny fields ("a1:", five bytes a line) held about 140,000 fields in the
// default 1 MiB, some 14 MiB of header map while it was read: 14 times
// what the client sent, on each of its connections.
func TestFieldLinesCountAsInHTTP2(t *testing.T) {
	served := make(chan int, 10)
	_, addr := testServer(t, &Server{MaxHeaderBytes: 16 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- len(r.Header)
	}))
	head := func(fields int, value string) string {
		var b strings.Builder
		b.WriteString("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n")
		for i := range fields {
			fmt.Fprintf(&b, "a%x:%s\r\n", i, value)
		}
		b.WriteString("\r\n")
		return b.String()
	}
	// Under the limit in bytes (16 KiB and read-ahead), over it with 32
	// bytes a field.
	tiny := head(2000, "")
	if len(tiny) > 16<<10 {
		t.Fatalf("%d bytes", len(tiny))
	}
	if out := exchange(t, addr, tiny); !strings.HasPrefix(out, "HTTP/1.1 431 ") {
		t.Errorf("2000 empty fields in %d bytes: %.40q, want 431", len(tiny), out)
	}
	// As many bytes in fewer, longer fields pass.
	long := head(30, strings.Repeat("v", 400))
	if out := exchange(t, addr, long); !strings.HasPrefix(out, "HTTP/1.1 200 ") {
		t.Errorf("30 fields in %d bytes: %.40q, want 200", len(long), out)
	}
	if n := <-served; n != 31 {
		t.Errorf("served with %d fields, want 31", n)
	}
	select {
	case n := <-served:
		t.Errorf("a head over the limit was served (%d fields)", n)
	default:
	}
	// A head read whole in one read, over only with the overhead.
	s := &Server{MaxHeaderBytes: 1 << 10, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- len(r.Header)
	})}
	c := &fuzzConn{in: []byte(head(300, "")), step: 4 << 10}
	if len(c.in) > 4<<10 {
		t.Fatalf("%d bytes", len(c.in))
	}
	s.ServeConn(c)
	if out := c.out.String(); !strings.HasPrefix(out, "HTTP/1.1 431 ") {
		t.Errorf("300 empty fields read at once: %.40q, want 431", out)
	}
	select {
	case n := <-served:
		t.Errorf("a head over the limit was served (%d fields)", n)
	default:
	}
}

// TestEmptyLinesBeforeRequestLine: RFC 9112 §2.2 has a server ignore at
// least one empty line before a request-line, as nginx does before any
// request. Only those after a POST were (net/http's rule): a CRLF after a
// PUT's body, or before a connection's first request, got 400 and the
// connection's end.
func TestEmptyLinesBeforeRequestLine(t *testing.T) {
	var served []string
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		served = append(served, r.Method+" "+r.URL.Path+" "+string(b))
	})}
	c := &fuzzConn{in: []byte("\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\n" +
		"PUT /b HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx\r\n" +
		"PATCH /c HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\ny\n" +
		"GET /d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), step: 3}
	s.ServeConn(c)
	if want := []string{"GET /a ", "PUT /b x", "PATCH /c y", "GET /d "}; !slices.Equal(served, want) {
		t.Errorf("served %q, want %q\n%s", served, want, c.out.String())
	}
}

// TestDiscard: a response none of which went out is dropped whole (its
// status, fields and body) and another takes its place on the same
// connection, framed as its own; once the header is out, Discard refuses
// and the response goes on.
func TestDiscard(t *testing.T) {
	_, addr := testServer(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := w.(interface{ Discard() bool })
		w.Header().Set("X-First", "1")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "first")
		if r.URL.Path == "/flushed" {
			w.Header().Del("Content-Length")
			w.(http.Flusher).Flush()
			if d.Discard() {
				t.Error("Discard dropped a response whose header was out")
			}
			return
		}
		if !d.Discard() {
			t.Error("Discard refused a response still in the buffer")
		}
		w.Header().Set("X-Second", "2")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "second")
	}))
	out := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if strings.Count(out, "HTTP/1.1 502 Bad Gateway\r\n") != 2 || strings.Contains(out, "first") || strings.Contains(out, "X-First") ||
		strings.Count(out, "Content-Length: 6\r\n") != 2 || !strings.HasSuffix(out, "\r\n\r\nsecond") {
		t.Errorf("discarded response: %q", out)
	}
	if out := exchange(t, addr, "GET /flushed HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.Contains(out, "first") {
		t.Errorf("flushed response: %q", out)
	}
}
