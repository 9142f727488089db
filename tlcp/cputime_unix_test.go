//go:build unix

package tlcp

import (
	"syscall"
	"testing"
)

// cpuTimer reports the process CPU time per operation ("cpu-ns/op") from
// the call to the returned function's call. On a shared, loaded machine this
// is much steadier than wall time, and it is what "server CPU" means.
func cpuTimer(b *testing.B) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func processCPU() int64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return r.Utime.Nano() + r.Stime.Nano()
}
