//go:build linux

package tls13sm

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU returns the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID);
// callers lock the goroutine to its thread. Unlike wall time it does not
// count time when other processes hold the CPU.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}
