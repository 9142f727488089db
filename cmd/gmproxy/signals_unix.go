//go:build unix

package main

import (
	"os"
	"syscall"
)

// reopenSignal asks a running gmproxy to reopen its access log.
var reopenSignal os.Signal = syscall.SIGUSR1

// signalReload asks the gmproxy with process ID pid to reload.
func signalReload(pid int) error { return syscall.Kill(pid, syscall.SIGHUP) }

// processRunning reports whether process pid exists (signal 0, which is
// delivered to nobody; a process of another user exists too).
func processRunning(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// umask sets the file mode creation mask and returns the previous one.
func umask(mask int) int { return syscall.Umask(mask) }
