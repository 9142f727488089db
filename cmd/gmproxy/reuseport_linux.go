package main

import (
	"context"
	"net"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gmproxy/gmproxy/internal/rawsock"
)

// workersSupported: the worker mode needs SO_REUSEPORT's load balancing
// and a parent-death signal.
const workersSupported = true

// listenReusePort opens a TCP listening socket with SO_REUSEPORT, so that
// every worker binds the same address and the kernel spreads new
// connections over them; like daemon.ListenTCP, accepted connections get
// no TCP keep-alive probes.
func listenReusePort(addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1, Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	return rawsock.Listener{Listener: ln}, nil
}

// workerProgram names the supervisor's own program even once the file at
// its path is replaced or removed (a package upgrade renames a new one
// over it): spawn starts a worker from it then (see supervisor.self).
const workerProgram = "/proc/self/exe"

// dieWithParent makes cmd's process receive SIGTERM when the supervisor
// dies, so that no worker outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
