// Package rawsock reads and writes TCP sockets with raw system calls on
// Linux, so that a read or write does not enter the Go scheduler's
// system-call state.
//
// Go's net package already puts sockets in non-blocking mode and parks a
// goroutine in the netpoller when a read or write would block; the
// read(2)/write(2) calls themselves never block. Yet each one goes through
// entersyscall/exitsyscall, and a call that is still running when the
// runtime's monitor thread (sysmon) looks at it twice, 20 µs apart, makes
// sysmon hand the P to another thread and keep waking every 20 µs. A write
// on a loopback or virtualised socket often takes that long (the kernel
// delivers to the receiver inline), and on gmproxy's serving path those
// wake-ups and hand-offs cost more CPU than the cryptography.
//
// Conn does the same non-blocking calls through syscall.RawConn with
// syscall.RawSyscall, which is documented for calls that do not block:
// waiting for readiness and deadlines stay with the netpoller (RawConn.Read
// and Write return when the deadline passes), and every other method is
// *net.TCPConn's.
package rawsock

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// Conn is a TCP connection whose Read and Write use raw system calls. It
// embeds the *net.TCPConn for everything else (deadlines, Close,
// CloseWrite, SetLinger, addresses).
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The buffers and results of the call in progress, so that the
	// callbacks passed to RawConn (method values made once) do not
	// allocate. A read and a write may run at once: each direction has its
	// own fields, guarded by its own mutex (net.Conn allows concurrent
	// calls; the callers of one direction take turns, as netFD's own lock
	// makes them do).
	rmu     sync.Mutex
	rb      []byte
	rn      int
	rerr    error
	readFn  func(fd uintptr) bool
	wmu     sync.Mutex
	wb      []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

// Wrap returns c with raw reads and writes when the platform supports
// them, else c itself.
func Wrap(c net.Conn) net.Conn {
	if !supported {
		return c
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rs := &Conn{TCPConn: tc, rc: rc}
	rs.readFn = rs.doRead
	rs.writeFn = rs.doWrite
	return rs
}

// NetConn returns the *net.TCPConn underneath.
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rb, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.readFn)
	n, rerr := c.rn, c.rerr
	c.rb = nil
	c.rmu.Unlock()
	if err != nil {
		return n, err
	}
	if rerr != nil {
		return n, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write implements net.Conn: it returns when all of p is written, an error
// occurred or the write deadline passed.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	c.wb, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.writeFn)
	n, werr := c.wn, c.werr
	c.wb = nil
	c.wmu.Unlock()
	if err != nil {
		return n, err
	}
	if werr != nil {
		return n, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: werr}
	}
	return n, nil
}

// Listener wraps the connections its net.Listener accepts (see Wrap).
type Listener struct{ net.Listener }

// Accept implements net.Listener.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
