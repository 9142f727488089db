package proxy

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// boundSocket returns a TCP socket bound to a free loopback port, and the
// address, closed when the test ends. Until it listens, connections to
// the address are refused and no other bind takes the port.
func boundSocket(t *testing.T) (fd int, addr string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// deadAddr returns a loopback address that refuses connections for the
// whole test: a bound socket that never listens holds the port. A
// listener closed at once freed it for the next bind(0): the test's own
// front (or any other test's listener) could take it, and "dead" requests
// then reached a live server (TestRetryRules counted no retry in CI once).
func deadAddr(t *testing.T) string {
	_, addr := boundSocket(t)
	return addr
}
