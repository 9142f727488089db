//go:build !linux

package main

import "time"

// sleep falls back to Go's timer, whose wake-up goes through the runtime's
// poller: coarser than nanosleep(2), so the figures are upper bounds.
func sleep(d time.Duration) error {
	time.Sleep(d)
	return nil
}
