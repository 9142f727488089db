package proxy

import (
	"context"
	"net"

	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/internal/rawsock"
	"sync/atomic"
	"time"
)

// sendChunk is the most written to a target under one write deadline
// when a write that timed out cannot be resumed (a TLCP or TLS 1.3-SM
// connection latches the error): one full record.
const sendChunk = 16 << 10

// sendTimed bounds every write to a target by write_timeout (d), like
// nginx's proxy_send_timeout, which runs between two successive writes:
// before a write the deadline is moved d ahead (set d + d/8 ahead and
// kept while at least d is left, so a fast transfer does not pay a
// deadline per write). On a TCP connection (resume) a write goes whole,
// and one that times out after the target took some of it goes on under
// a new deadline; on another connection writes go in pieces of at most
// sendChunk. A target that takes none of a request for d fails it with a
// timeout (504); one that takes bytes slowly but steadily keeps its
// exchange; time spent between writes (the client's pauses, a wait for
// 100 Continue, a dial) is never counted.
type sendTimed struct {
	c      net.Conn
	d      time.Duration
	resume bool         // c is TCP: a timed-out write can go on
	armed  atomic.Int64 // monoclock ns: when the deadline in place was set (its clock)
	// stop, when set, is an interrupt's (h1Client's): once it is true the
	// deadline the interrupt put in the past is kept there.
	stop *atomic.Bool
}

func newSendTimed(c net.Conn, d time.Duration, stop *atomic.Bool) sendTimed {
	return sendTimed{c: c, d: d, stop: stop, resume: isTCP(c)}
}

// isTCP reports whether c is a TCP connection, on which a write that
// timed out may be resumed.
func isTCP(c net.Conn) bool {
	switch c.(type) {
	case *rawsock.Conn, *net.TCPConn:
		return true
	}
	return false
}

func (w *sendTimed) Write(p []byte) (n int, err error) {
	force := false
	for len(p) > 0 {
		k := len(p)
		if !w.resume {
			k = min(k, sendChunk)
		}
		w.arm(force)
		m, err := w.c.Write(p[:k])
		n += m
		p = p[m:]
		if err != nil {
			if w.resume && m > 0 && isTimeout(err) && (w.stop == nil || !w.stop.Load()) {
				force = true // the target took some within d: a new d for the rest
				continue
			}
			return n, err
		}
		force = false
	}
	return n, nil
}

// arm moves the write deadline d ahead unless the one in place is recent
// (and force is false).
func (w *sendTimed) arm(force bool) {
	t := monoclock.Now()
	if a := w.armed.Load(); !force && a != 0 && t-a < int64(w.d/8) {
		return
	}
	w.c.SetWriteDeadline(time.Now().Add(w.d + w.d/8))
	w.armed.Store(t)
	if w.stop != nil && w.stop.Load() {
		w.c.SetWriteDeadline(aLongTimeAgo) // the interrupt may have run before the line above
	}
}

// sendTimedConn is a connection of net/http's Transport whose writes
// sendTimed bounds.
type sendTimedConn struct {
	net.Conn
	w sendTimed
}

func (c *sendTimedConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// NetConn returns the connection written (for closeWrite and alive).
func (c *sendTimedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection underneath (see scanConn's).
func (c *sendTimedConn) CloseWrite() error { return closeWriteOf(c.Conn) }

// sendTimeouts makes dial's connections bound their writes by d.
func sendTimeouts(dial DialFunc, d time.Duration) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newSendTimedConn(c, d), nil
	}
}

// newSendTimedConn returns c with its writes bounded by d.
func newSendTimedConn(c net.Conn, d time.Duration) *sendTimedConn {
	sc := &sendTimedConn{Conn: c}
	sc.w = newSendTimed(c, d, nil)
	return sc
}
