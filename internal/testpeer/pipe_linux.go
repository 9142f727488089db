//go:build linux

package testpeer

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeDrained reports whether the pipe written through w holds no unread
// bytes; ok is false when that cannot be told (FIONREAD on a pipe's
// write end is Linux's).
func pipeDrained(w *os.File) (drained, ok bool) {
	n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ) // FIONREAD
	return n == 0, err == nil
}
