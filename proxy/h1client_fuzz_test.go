package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// scriptConn is a target connection that answers with a fixed byte
// stream, step bytes per Read, and takes whatever is written. Its peek
// (Alive, as alive's) sees an open connection with nothing to read once
// the stream is used up; a closed one is never alive.
type scriptConn struct {
	in     []byte
	step   int
	closed bool
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *scriptConn) Alive() bool                      { return !c.closed && len(c.in) == 0 }
func (c *scriptConn) Close() error                     { c.closed = true; return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzH1ClientResponse: whatever a target answers, the proxy's HTTP/1.1
// client reads no other response than net/http's reader does (the same
// status and body; it may refuse more), and pools the connection for
// another client's request only after a response that net/http would
// keep the connection after, read to its end with no byte left over (a
// byte left over would be read as the next exchange's response): the
// connection may go to the pool, but the next request must not take it.
func FuzzH1ClientResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npoison",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 100 Continue\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;e=\"a\"\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\nContent-Length: 6\r\n\r\npoison",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n", // to a HEAD
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\rContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok",
		"HTTP/1.1 200 OK\r\n\r\nok",
	} {
		for _, step := range []uint8{0, 7} {
			f.Add([]byte(s), step, false, false)
			f.Add([]byte(s), step, true, true)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, step uint8, head, passOn bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		steps := len(in) + 1
		if step != 0 {
			steps = int(step%32) + 1
		}
		// The reference: net/http's reader, 1xx but 101 skipped.
		ref := func() (res *http.Response, body []byte, rest int, err error) {
			r := bytes.NewReader(in)
			br := bufio.NewReader(r)
			req := &http.Request{Method: method}
			for range 8 {
				if res, err = http.ReadResponse(br, req); err != nil {
					return nil, nil, 0, err
				}
				if res.StatusCode < 100 || res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
					break
				}
			}
			body, err = io.ReadAll(io.LimitReader(res.Body, 1<<20))
			return res, body, br.Buffered() + r.Len(), err
		}
		conn := &scriptConn{in: in, step: steps}
		dials := 0
		dial := func(context.Context, string, string) (net.Conn, error) {
			if dials++; dials > 1 {
				return nil, errors.New("one connection only")
			}
			return conn, nil
		}
		cl := newH1Client(&http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute, MaxResponseHeaderBytes: 1 << 16}, dial, 0, 0)
		defer cl.CloseIdleConnections()
		req, _ := http.NewRequest(method, "http://target.test/", nil)
		req.Body = nil
		res, err := cl.roundTripHead(req, passOn, 0, 0)
		if err != nil {
			if len(cl.idle["target.test"]) != 0 {
				t.Fatalf("%q: pooled after %v", in, err)
			}
			return
		}
		body, berr := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		// Pooled, and taken again for the next request (get peeks first).
		pooled := false
		if pc, reused, err := cl.get(context.Background(), "target.test"); err == nil && reused {
			pooled = true
			pc.c.Close()
		}
		wres, wbody, rest, werr := ref()
		switch {
		case werr != nil && berr == nil:
			t.Fatalf("%s %q: read %d %q where net/http fails: %v", method, in, res.StatusCode, body, werr)
		case wres == nil:
		case wres.StatusCode != res.StatusCode || !bytes.Equal(wbody, body) || wres.ContentLength != res.ContentLength && res.StatusCode != http.StatusSwitchingProtocols:
			t.Fatalf("%s %q: %d %d %q, net/http reads %d %d %q", method, in, res.StatusCode, res.ContentLength, body, wres.StatusCode, wres.ContentLength, wbody)
		}
		if pooled && (berr != nil || werr != nil || wres.Close || !wres.ProtoAtLeast(1, 1) || rest != 0 || res.StatusCode == http.StatusSwitchingProtocols) {
			t.Fatalf("%s %q: connection pooled, but net/http closes it (%v %v) or %d bytes are left", method, in, werr, wres.Close, rest)
		}
	})
}
