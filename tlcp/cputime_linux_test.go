//go:build linux

package tlcp

import "syscall"

// rusageThread is Linux's RUSAGE_THREAD (not exported by package syscall).
const rusageThread = 1

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var r syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &r); err != nil {
		return -1
	}
	return r.Utime.Nano() + r.Stime.Nano()
}
