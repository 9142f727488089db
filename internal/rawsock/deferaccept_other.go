//go:build !linux

package rawsock

import "errors"

const deferAcceptSupported = false

func setDeferAccept(fd uintptr, secs int) error { return nil }

func getDeferAccept(fd uintptr) (int, error) {
	return 0, errors.New("rawsock: TCP_DEFER_ACCEPT is Linux's")
}
