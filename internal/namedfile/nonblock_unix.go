//go:build unix

package namedfile

import "syscall"

// openNonblock opens a FIFO without waiting for a writer (Read then
// refuses it); it changes nothing for a regular file.
const openNonblock = syscall.O_NONBLOCK
