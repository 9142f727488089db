//go:build linux

package daemon

import (
	"net"
	"runtime"
	"syscall"
	"testing"

	"github.com/gmproxy/gmproxy/internal/rawsock"
)

// TestListenTCPNoKeepAlive: connections accepted by the default listener
// have no TCP keep-alive probes (Go's default turns them on per accept).
func TestListenTCPNoKeepAlive(t *testing.T) {
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*rawsock.Conn); !ok && runtime.GOOS == "linux" {
		t.Fatalf("accepted %T, want *rawsock.Conn (raw reads and writes)", s)
	}
	raw, err := s.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ka, nodelay int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		ka, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		if serr == nil {
			nodelay, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	if ka != 0 {
		t.Errorf("SO_KEEPALIVE = %d on an accepted connection, want 0", ka)
	}
	if nodelay == 0 {
		t.Error("TCP_NODELAY off on an accepted connection, want on")
	}
}
