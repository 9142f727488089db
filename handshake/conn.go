package handshake

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
)

// Conn is an established connection of any protocol: the decrypted
// net.Conn plus its ConnState. It implements StateConn. Closing it reports
// the bytes moved and the close to the listener's Observer, once.
type Conn struct {
	net.Conn
	state ConnState
	stats func() (rx, tx, rxRecords, txRecords uint64)
	obs   Observer
	done  func()

	rx, tx    atomic.Uint64
	closeOnce sync.Once
}

// ConnState implements StateConn.
func (c *Conn) ConnState() ConnState { return c.state }

// NetConn returns the protocol connection (a *tlcp.Conn, *tls.Conn, …).
func (c *Conn) NetConn() net.Conn { return c.Conn }

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.stats == nil && n > 0 {
		c.rx.Add(uint64(n))
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.stats == nil && n > 0 {
		c.tx.Add(uint64(n))
	}
	return n, err
}

// Close closes the connection and reports it once.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		var rx, tx, rr, tr uint64
		if c.stats != nil {
			rx, tx, rr, tr = c.stats()
		} else {
			rx, tx = c.rx.Load(), c.tx.Load()
		}
		if c.obs != nil {
			c.obs.Bytes(c.state.Family, c.state.Cipher, rx, tx, rr, tr)
		}
		if c.done != nil {
			c.done()
		}
	})
	return err
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
