package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// nameWorker gives a worker started from workerProgram the name
// (/proc/PID/comm, what ps and top show) of its argv[0], the supervisor's:
// the kernel names a process after the file it executes, here "exe".
// The name is the main thread's, which /proc/self/comm sets from any
// thread (proc(5)); it holds 15 bytes.
func nameWorker() {
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil || strings.TrimSpace(string(comm)) != filepath.Base(workerProgram) {
		return
	}
	name := filepath.Base(os.Args[0])
	if len(name) > 15 {
		name = name[:15]
	}
	os.WriteFile("/proc/self/comm", []byte(name), 0)
}
