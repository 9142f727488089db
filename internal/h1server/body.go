package h1server

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxDrainBytes is how much of a request body the handler left unread the
// server reads to keep the connection; a longer rest closes it (as
// net/http's server).
const maxDrainBytes = 256 << 10

// body is the request body handed to the handler: ReadRequest's body plus
// the lazy 100 Continue, the end-of-body notice for the client watch and
// the drain after the handler. The handler, or a goroutine of its (a
// transport sending the body upstream), may read it; mu orders those
// reads with the server's drain.
type body struct {
	c  *conn
	mu sync.Mutex
	rc io.ReadCloser

	eof, closed bool
	// sawEnd is eof for readers that must not wait for mu (sawEOF).
	sawEnd atomic.Bool
	err    error
	// continueDue: the client waits for 100 Continue before sending.
	continueDue bool
	tooBig      bool // the drain gave up, or would have to
	// left is what the request declared (Content-Length) less what was
	// read; -1 for a chunked body.
	left int64
}

var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")

func (b *body) start(rc io.ReadCloser, length int64, expectContinue bool) {
	b.rc, b.left = rc, length
	b.eof, b.closed, b.err, b.tooBig = false, false, nil, false
	b.sawEnd.Store(false)
	b.continueDue = expectContinue
	if expectContinue {
		b.c.w.continueArmed.Store(true)
	}
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case b.eof:
		return 0, io.EOF
	case b.err != nil:
		return 0, b.err
	}
	if b.continueDue {
		b.continueDue = false
		if err := b.c.w.writeContinue(); err != nil {
			b.err = err
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	switch {
	case err == io.EOF:
		b.eof = true
		b.sawEnd.Store(true)
		b.c.watch.bodyDone(b.c)
	case err != nil:
		b.err = err
	}
	return n, err
}

// Close makes later reads fail; the unread rest is dealt with after the
// handler (finish).
func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// settle ends the body's reads after the handler and reports what is left
// to do: nothing (done, with keep telling whether the connection can read
// the next request), or a drain of the unread rest (done false: finish),
// which waits for the client and so comes after the response is out.
func (b *body) settle() (done, keep bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.c.w.continueArmed.Store(false)
	switch {
	case b.eof:
		return true, true
	case b.err != nil:
		return true, false
	case b.continueDue:
		// 100 Continue was never sent: the client may or may not send
		// the body; the next bytes cannot be trusted to be a request.
		// The close lingers (tooBig) all the same: a client may send
		// the body without waiting (RFC 9110 §10.1.1), and closing over
		// it unread would reset the connection under the response.
		b.tooBig = true
		return true, false
	case b.left > maxDrainBytes:
		// Known now to be more than a drain reads: the response says
		// the connection closes, and the close lingers for the rest.
		b.tooBig = true
		return true, false
	}
	return false, false
}

// finish reads up to maxDrainBytes of what is left of a body settle left
// unread and reports whether the connection can read the next request.
func (b *body) finish() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.drainLocked()
}

// drainLocked is finish with b.mu held.
func (b *body) drainLocked() bool {
	if d := b.c.srv.idleTimeout(); d > 0 {
		// A stalled body must not hold the connection longer than an
		// idle one; ReadTimeout's deadline, when set, stays the bound.
		if b.c.srv.ReadTimeout <= 0 {
			b.c.rwc.SetReadDeadline(time.Now().Add(d))
		}
	}
	n, err := io.CopyN(io.Discard, b.rc, maxDrainBytes+1)
	switch {
	case err == io.EOF:
		b.eof = true
		b.sawEnd.Store(true)
		return true
	case err == nil && n > maxDrainBytes:
		b.tooBig = true
	}
	return false
}

// sawEOF reports whether the body was read to its end; a request without
// one (nil) has nothing more to read. It does not wait for mu: the
// response's header is committed while another goroutine of the handler
// may be blocked in Read, holding mu until the client sends more (a full
// duplex exchange, whose client waits for that header first); a read in
// flight is not the end.
func (b *body) sawEOF() bool {
	if b == nil {
		return true
	}
	return b.sawEnd.Load()
}
