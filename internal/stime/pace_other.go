//go:build !linux

package stime

// newWaiter returns the timer waiter: no timer file descriptor here.
func newWaiter() waiter { return timerWaiter{} }
