package h1server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"
)

// fuzzConn delivers in at most step bytes per Read and records what is
// written; deadlines are ignored.
type fuzzConn struct {
	in   []byte
	step int
	out  bytes.Buffer
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *fuzzConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *fuzzConn) Close() error                     { return nil }
func (c *fuzzConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fuzzConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

var dateLine = regexp.MustCompile(`Date: [^\r]*\r\n`)

// FuzzServeConn: whatever the client sends, the server does not panic,
// and what it serves and answers does not depend on how the bytes are
// split into reads (the header scan, the size limit and the request
// parsing see the same stream either way).
func FuzzServeConn(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /s HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\n",
		"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nHEAD / HTTP/1.0\r\n\r\n",
		"GET http://h/p HTTP/1.1\r\nHost: a b\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: a\r\nHOST: b\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: " + string(bytes.Repeat([]byte("a"), 2000)) + "\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	s := &Server{MaxHeaderBytes: 1 << 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var served bytes.Buffer
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		fmt.Fprintf(&served, "%s %q %q %q %v %q %v\n", r.Method, r.RequestURI, r.Host, b, err, r.Header, r.Trailer)
		if r.URL.Path == "/flush" {
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "%s %d", r.Method, len(b))
	})
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		run := func(step int) (string, string) {
			served.Reset()
			c := &fuzzConn{in: in, step: step}
			s.ServeConn(c)
			return served.String(), dateLine.ReplaceAllString(c.out.String(), "")
		}
		served1, out1 := run(len(in) + 1)
		served2, out2 := run(int(step%16) + 1)
		if served1 != served2 || out1 != out2 {
			t.Fatalf("reads of %d bytes change the result:\nwhole: %s\n%q\nsplit: %s\n%q", step%16+1, served1, out1, served2, out2)
		}
	})
}
