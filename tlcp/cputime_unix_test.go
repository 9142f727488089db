//go:build unix

package tlcp

import (
	"runtime"
	"syscall"
	"testing"
)

// cpuTimer reports, from the call to the returned function's call:
//
//   - "cpu-ns/op": the process CPU time per operation (all threads: the
//     benchmark goroutine plus the garbage collector's background work and
//     anything else running). On a shared, loaded machine this is much
//     steadier than wall time.
//   - "thread-ns/op" (Linux): the CPU time of the benchmark goroutine's own
//     thread only, which it is locked to for the measurement. The server
//     handshake benchmarks run the whole server handshake on that goroutine
//     (recorded client flights, no client work), so this is exactly the
//     server's CPU per handshake without the GC's background workers; GC
//     assists of this goroutine are included.
func cpuTimer(b *testing.B) func() {
	runtime.LockOSThread()
	start, tstart := processCPU(), threadCPU()
	return func() {
		end, tend := processCPU(), threadCPU()
		runtime.UnlockOSThread()
		if b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
			if tstart >= 0 && tend >= 0 {
				b.ReportMetric(float64(tend-tstart)/float64(b.N), "thread-ns/op")
			}
		}
	}
}

func processCPU() int64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return r.Utime.Nano() + r.Stime.Nano()
}
