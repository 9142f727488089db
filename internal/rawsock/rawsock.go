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
//
// The package also sets the listening socket's options that save work on
// every connection (SetDeferAccept).
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

	// The call in progress in each direction. A read and a write may run
	// at once (net.Conn allows concurrent calls); the callers of one
	// direction take turns, as netFD's own lock makes them do.
	r, w call

	// Alive's peek: its callback (made once) and result.
	peekFn   func(fd uintptr)
	peekLive bool
	peekBuf  [1]byte
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
	rs.r.fn = rs.doRead
	rs.w.fn = rs.doWrite
	rs.peekFn = rs.doPeek
	return rs
}

// NetConn returns the *net.TCPConn underneath.
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// call is one direction's call in progress: its buffer and results, so
// that the callback passed to RawConn (a method value made once per
// connection) does not allocate.
type call struct {
	mu  sync.Mutex
	b   []byte
	n   int
	err error // of the system call (nil: RawConn's own error, if any, counts)
	fn  func(fd uintptr) bool
}

// run performs one Read (write false) or Write of p through RawConn.
func (c *Conn) run(k *call, p []byte, write bool) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.b, k.n, k.err = p, 0, nil
	var err error
	op := "read"
	if write {
		op = "write"
		err = c.rc.Write(k.fn)
	} else {
		err = c.rc.Read(k.fn)
	}
	n := k.n
	k.b = nil
	switch {
	case err != nil:
		return n, err
	case k.err != nil:
		return n, &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: k.err}
	}
	return n, nil
}

// Alive reports whether the connection is open with nothing to read: the
// peer has neither closed it nor sent anything since the last Read. It
// peeks without waiting and without allocating, so that a pool can check
// an idle connection before every reuse. It takes the read side's turn.
func (c *Conn) Alive() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.peekLive = false
	return c.rc.Control(c.peekFn) == nil && c.peekLive
}

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.run(&c.r, p, false)
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return n, err
}

// Write implements net.Conn: it returns when all of p is written, an error
// occurred or the write deadline passed.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return c.run(&c.w, p, true)
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
