package rawsock

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// SetDeferAccept makes the kernel hand ln's new connections over only once
// their client has sent data, holding a silent one for about d (Linux
// TCP_DEFER_ACCEPT: the kernel rounds d up to its SYN-ACK retransmission
// schedule, 1 s, 3 s, 7 s...; 0 turns it off). Every protocol gmproxy
// serves starts with the client (a ClientHello, a PROXY header, an HTTP
// request), so the accepting goroutine finds the first flight already
// there: no read that returns EAGAIN and no wait for it. A connection
// still silent after d is handed over anyway.
//
// ln is a Listener or a *net.TCPListener; on other systems, and for other
// listeners, it does nothing.
func SetDeferAccept(ln net.Listener, d time.Duration) error {
	if d < 0 {
		return errors.New("rawsock: negative defer_accept")
	}
	tl, rc, err := listenerSocket(ln)
	if tl == nil || !deferAcceptSupported {
		return nil
	}
	if err != nil {
		return err
	}
	secs := int((d + time.Second - 1) / time.Second)
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setDeferAccept(fd, secs) }); err != nil {
		return err
	}
	if serr != nil {
		return &net.OpError{Op: "setsockopt", Net: "tcp", Addr: tl.Addr(), Err: serr}
	}
	return nil
}

// DeferAccept reads ln's TCP_DEFER_ACCEPT back, as the kernel rounded it;
// an error on other systems and for other listeners.
func DeferAccept(ln net.Listener) (time.Duration, error) {
	tl, rc, err := listenerSocket(ln)
	if tl == nil {
		return 0, errors.New("rawsock: not a TCP listener")
	}
	if err != nil {
		return 0, err
	}
	var secs int
	var gerr error
	if err := rc.Control(func(fd uintptr) { secs, gerr = getDeferAccept(fd) }); err != nil {
		return 0, err
	}
	return time.Duration(secs) * time.Second, gerr
}

// listenerSocket returns the TCP listener under ln (a Listener or a
// *net.TCPListener) and its socket, or a nil listener for other kinds.
func listenerSocket(ln net.Listener) (*net.TCPListener, syscall.RawConn, error) {
	if l, ok := ln.(Listener); ok {
		ln = l.Listener
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, nil, nil
	}
	rc, err := tl.SyscallConn()
	return tl, rc, err
}
