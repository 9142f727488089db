package proxy

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// sendChunk is the most written to a target under one write deadline.
const sendChunk = 4 << 10

// sendTimed bounds every write to a target by write_timeout (d), like
// nginx's proxy_send_timeout, which runs between two successive writes:
// before each piece of at most sendChunk bytes the write deadline is
// moved d ahead (set d + d/8 ahead and kept while at least d is left, so
// a fast transfer does not pay a deadline per write). A target that takes
// none of a request for d fails it with a timeout (504); one that takes
// bytes slowly but steadily keeps its exchange; and time spent between
// writes (the client's pauses, a wait for 100 Continue, a dial) is never
// counted.
type sendTimed struct {
	c     net.Conn
	d     time.Duration
	armed atomic.Int64 // unix ns: when the deadline in place was set
	// stop, when set, is an interrupt's (h1Client's): once it is true the
	// deadline the interrupt put in the past is kept there.
	stop *atomic.Bool
}

func (w *sendTimed) Write(p []byte) (n int, err error) {
	for len(p) > 0 {
		k := min(len(p), sendChunk)
		w.arm()
		m, err := w.c.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// arm moves the write deadline d ahead unless the one in place is recent.
func (w *sendTimed) arm() {
	now := time.Now()
	t := now.UnixNano()
	if t-w.armed.Load() < int64(w.d/8) {
		return
	}
	w.c.SetWriteDeadline(now.Add(w.d + w.d/8))
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
	sc.w = sendTimed{c: c, d: d}
	return sc
}
