//go:build linux || darwin || freebsd

package proxy

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open for a request:
// its socket has nothing to read (a close, a reset, a TLS alert or stray
// bytes all mean it cannot carry one). It peeks without waiting
// (MSG_PEEK|MSG_DONTWAIT); a connection whose socket it cannot reach is
// reported dead, so that the request goes on a fresh one.
func alive(c net.Conn) bool {
	for {
		if b, ok := c.(interface{ Buffered() int }); ok && b.Buffered() > 0 {
			// A TLCP or TLS 1.3-SM connection whose record layer holds
			// bytes already read from the socket: the peek would miss them.
			return false
		}
		if a, ok := c.(interface{ Alive() bool }); ok {
			return a.Alive() // rawsock's: the same peek, without allocating
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = nc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	// Control, not Read: the peek does not wait, and a read deadline left
	// from the last exchange (h1Conn.roundTrip) must not count.
	live := false
	err = rc.Control(func(fd uintptr) {
		var b [1]byte
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		live = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
	})
	return err == nil && live
}
