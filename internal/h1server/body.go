package h1server

import (
	"io"
	"net/http"
	"sync"
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
	err         error
	// continueDue: the client waits for 100 Continue before sending.
	continueDue bool
	tooBig      bool // the drain gave up
}

var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")

func (b *body) start(rc io.ReadCloser, expectContinue bool) {
	b.rc = rc
	b.eof, b.closed, b.err, b.tooBig = false, false, nil, false
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
	switch {
	case err == io.EOF:
		b.eof = true
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

// finish ends the body after the handler: it reads up to maxDrainBytes of
// what is left and reports whether the connection can read the next
// request.
func (b *body) finish() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.c.w.continueArmed.Store(false)
	switch {
	case b.eof:
		return true
	case b.err != nil:
		return false
	case b.continueDue:
		// 100 Continue was never sent: the client may or may not send
		// the body; the next bytes cannot be trusted to be a request.
		return false
	}
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
		return true
	case err == nil && n > maxDrainBytes:
		b.tooBig = true
	}
	return false
}

// sawEOF reports whether the body was read to its end; a request without
// one (nil) has nothing more to read.
func (b *body) sawEOF() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}
