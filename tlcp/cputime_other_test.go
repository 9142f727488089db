//go:build !unix

package tlcp

import (
	"testing"
	"time"
)

func cpuTimer(b *testing.B) func() { return func() {} }

// processCPU and threadCPU are not available here; the interleaved ratios
// then use wall time.
func processCPU() int64 { return time.Now().UnixNano() }
func threadCPU() int64  { return -1 }
