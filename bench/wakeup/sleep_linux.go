package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleep is nanosleep(2), resumed after a signal for the time left.
func sleep(d time.Duration) error {
	ts := unix.NsecToTimespec(int64(d))
	for {
		var left unix.Timespec
		err := unix.Nanosleep(&ts, &left)
		if err != unix.EINTR {
			return err
		}
		ts = left
	}
}
