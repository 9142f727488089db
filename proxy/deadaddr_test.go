//go:build unix

package proxy

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// deadAddr returns a loopback address that refuses connections for the
// whole test: a socket bound to it that never listens holds the port. A
// listener closed at once freed it for the next bind(0): the test's own
// front (or any other test's listener) could take it, and "dead" requests
// then reached a live server (TestRetryRules counted no retry in CI once).
func deadAddr(t *testing.T) string {
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
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
