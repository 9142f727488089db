//go:build unix && !linux

package tlcp

// threadCPU is not available here; only cpu-ns/op is reported.
func threadCPU() int64 { return -1 }
