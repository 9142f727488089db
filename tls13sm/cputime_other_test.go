//go:build !linux

package tls13sm

import "time"

func threadCPU() time.Duration { return time.Duration(time.Now().UnixNano()) }
