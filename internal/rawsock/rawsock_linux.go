//go:build linux

package rawsock

import (
	"os"
	"syscall"
	"unsafe"
)

const supported = true

// doRead is the RawConn.Read callback: one non-blocking read(2); false
// (wait for readiness) on EAGAIN.
func (c *Conn) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.r.b[0])), uintptr(len(c.r.b)))
		switch e {
		case 0:
			c.r.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.r.err = os.NewSyscallError("read", e)
			return true
		}
	}
}

// doWrite is the RawConn.Write callback: non-blocking write(2)s until the
// buffer is written; false (wait for readiness) on EAGAIN.
func (c *Conn) doWrite(fd uintptr) bool {
	for c.w.n < len(c.w.b) {
		b := c.w.b[c.w.n:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			c.w.n += int(n)
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.w.err = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// doPeek is Alive's RawConn.Control callback: one recv(2) of a byte with
// MSG_PEEK|MSG_DONTWAIT; only EAGAIN says the connection is alive (data,
// an end of stream or an error all say it cannot carry a request).
func (c *Conn) doPeek(fd uintptr) {
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		c.peekLive = e == syscall.EAGAIN
		return
	}
}
