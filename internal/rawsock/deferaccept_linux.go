//go:build linux

package rawsock

import "golang.org/x/sys/unix"

const deferAcceptSupported = true

func setDeferAccept(fd uintptr, secs int) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, secs)
}

func getDeferAccept(fd uintptr) (int, error) {
	return unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT)
}
