// Package callgate holds the Write/Close interlock of a connection, shared
// by the tlcp and tls13sm stacks.
package callgate

import "sync/atomic"

// Gate interlocks a connection's Writes with its Close as crypto/tls
// does: after Close, new Writes fail (with net.ErrClosed) and a second
// Close too; Writes already under way go on, and Close tells its caller
// about them (a Close during a Write is meant to break it). The zero
// value is open.
type Gate struct {
	// n is twice the number of Writes under way, plus 1 once closed.
	n atomic.Int32
}

// Enter registers a Write; false once closed. Each successful Enter is
// paired with a Leave.
func (g *Gate) Enter() bool {
	for {
		x := g.n.Load()
		if x&1 != 0 {
			return false
		}
		if g.n.CompareAndSwap(x, x+2) {
			return true
		}
	}
}

// Leave ends a Write registered by Enter.
func (g *Gate) Leave() { g.n.Add(-2) }

// Close closes the gate: first is false if it was already closed, and
// writing reports whether Writes were under way when it closed.
func (g *Gate) Close() (first, writing bool) {
	for {
		x := g.n.Load()
		if x&1 != 0 {
			return false, x != 1
		}
		if g.n.CompareAndSwap(x, x|1) {
			return true, x != 0
		}
	}
}
