package frontdoor

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// StatsFlushInterval is how often a busy connection reports the bytes and
// records it moved to the Observer, so that per-cipher throughput from
// rate() stays smooth on long-lived connections. The rest is reported at Close.
const StatsFlushInterval = 5 * time.Second

// Conn is an established connection of any protocol: the decrypted
// net.Conn plus its ConnState. It implements StateConn. It reports the bytes
// moved to the listener's Observer while in use (at most every
// StatsFlushInterval) and the remainder and the close at Close, once.
type Conn struct {
	net.Conn
	state ConnState
	stats func() (rx, tx, rxRecords, txRecords uint64)
	rec   recordStats // Conn's records and bytes, when it counts them
	obs   Observer

	// What Close reports to the Server the connection came through (nil:
	// nothing): its listener, its accept time and its client's limits.
	srv      *Server
	listener string
	start    time.Time
	cl       *client

	// unsettled: Serve's WaitHandshakes still counts the connection,
	// until its handler has taken it (Settled).
	unsettled atomic.Bool

	rx, tx    atomic.Uint64
	closeOnce sync.Once

	lastFlush atomic.Int64 // monoNow of the last report; 0 before the first I/O
	flushMu   sync.Mutex
	reported  [4]uint64 // rx, tx, rxRecords, txRecords already reported; guarded by flushMu
}

// Settled tells the Server the connection came through that its handler
// has taken it: counted it where the handler's own shutdown will find it.
// Until then WaitHandshakes waits for the connection as for a handshake,
// so that a shutdown starting between the end of the handshake and the
// handler's counting does not miss it. Serve settles the connection when
// the handler returns, for handlers that never do; calling Settled again
// does nothing.
func (c *Conn) Settled() {
	if c.unsettled.CompareAndSwap(true, false) {
		c.srv.wg.Done()
	}
}

// ConnState implements StateConn.
func (c *Conn) ConnState() ConnState { return c.state }

// NetConn returns the protocol connection (a *tlcp.Conn, *tls.Conn, …).
func (c *Conn) NetConn() net.Conn { return c.Conn }

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.stats == nil && c.rec == nil && n > 0 {
		c.rx.Add(uint64(n))
	}
	c.maybeFlush()
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.wrote(n)
	return n, err
}

// wrote counts n bytes written, when Conn counts them itself, and reports
// the counters when it is time.
func (c *Conn) wrote(n int) {
	if c.stats == nil && c.rec == nil && n > 0 {
		c.tx.Add(uint64(n))
	}
	c.maybeFlush()
}

// lastWriter is a connection that can write a server's last bytes and
// its close_notify in one write (tlcp.Conn, tls13sm.Conn).
type lastWriter interface {
	WriteLast(p []byte) (int, error)
}

// WriteLast writes p and the protocol's close_notify in one write when the
// protocol connection is a lastWriter, and is Write otherwise (Close then
// sends close_notify, as ever).
func (c *Conn) WriteLast(p []byte) (int, error) {
	lw, ok := c.Conn.(lastWriter)
	if !ok {
		return c.Write(p)
	}
	n, err := lw.WriteLast(p)
	c.wrote(n)
	return n, err
}

// maybeFlush reports the counters moved since the last report once
// StatsFlushInterval has passed. Concurrent Read and Write never wait for
// each other here: whoever gets the lock reports.
func (c *Conn) maybeFlush() {
	if c.obs == nil {
		return
	}
	now := monoNow()
	last := c.lastFlush.Load()
	if last == 0 {
		c.lastFlush.CompareAndSwap(0, now)
		return
	}
	if now-last < int64(StatsFlushInterval) || !c.flushMu.TryLock() {
		return
	}
	c.lastFlush.Store(now)
	c.flushLocked()
	c.flushMu.Unlock()
}

// monoEpoch is the origin of monoNow.
var monoEpoch = time.Now()

// monoNow is the monotonic time in nanoseconds since monoEpoch, plus one
// (never 0): half the cost of time.Now, which also reads the wall clock,
// on the path of every Read and Write.
func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }

// flushLocked reports the counters moved since the last report.
func (c *Conn) flushLocked() {
	var now [4]uint64
	if c.rec != nil {
		s := c.rec.Stats()
		now[0], now[1], now[2], now[3] = s.BytesIn, s.BytesOut, s.RecordsIn, s.RecordsOut
	} else if c.stats != nil {
		now[0], now[1], now[2], now[3] = c.stats()
	} else {
		now[0], now[1] = c.rx.Load(), c.tx.Load()
	}
	d := [4]uint64{now[0] - c.reported[0], now[1] - c.reported[1], now[2] - c.reported[2], now[3] - c.reported[3]}
	c.reported = now
	if d != ([4]uint64{}) {
		c.obs.Bytes(c.state.Family, c.state.Cipher, d[0], d[1], d[2], d[3])
	}
}

// Close closes the connection and reports it once.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		if c.obs != nil {
			c.flushMu.Lock()
			c.flushLocked()
			c.flushMu.Unlock()
		}
		c.done()
	})
	return err
}

// done releases what the connection held on its Server (its client's
// limits, the connection count) and reports the close.
func (c *Conn) done() {
	s := c.srv
	if s == nil {
		return
	}
	if c.cl != nil {
		s.clients.release(c.cl, false, true)
	}
	s.mu.Lock()
	delete(s.est, c)
	s.mu.Unlock()
	s.conns.Add(-1)
	if d, ok := s.obs.(ConnDurationObserver); ok {
		d.ConnDone(c.listener, c.state.Family, time.Since(c.start))
	}
	s.obs.ConnClosed(c.listener)
}

// NewConn wraps an established connection with a state, for callers that do
// their own handshakes (clients, tests). Close reports nothing.
func NewConn(c net.Conn, st ConnState) *Conn { return &Conn{Conn: c, state: st} }

type connCtxKey struct{}

// WithConn returns a context carrying c, for request contexts
// (http.Server.ConnContext, http2.ServeConnOpts.Context).
func WithConn(ctx context.Context, c StateConn) context.Context {
	return context.WithValue(ctx, connCtxKey{}, c)
}

// ConnFromContext returns the connection stored by WithConn.
func ConnFromContext(ctx context.Context) (StateConn, bool) {
	c, ok := ctx.Value(connCtxKey{}).(StateConn)
	return c, ok
}

// StateFromContext returns the ConnState of the connection stored by WithConn.
func StateFromContext(ctx context.Context) (ConnState, bool) {
	c, ok := ConnFromContext(ctx)
	if !ok {
		return ConnState{}, false
	}
	return c.ConnState(), true
}
