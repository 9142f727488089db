//go:build linux

package tlcp

import (
	"syscall"
	"unsafe"
)

// clockThreadCPUTimeID is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTimeID = 3

// threadCPU returns the calling thread's CPU time in nanoseconds
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID): the scheduler's exact runtime,
// not tick samples). RawSyscall: clock_gettime never blocks, and the
// scheduler hooks of Syscall would double the cost of each reading.
func threadCPU() int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return -1
	}
	return ts.Nano()
}
