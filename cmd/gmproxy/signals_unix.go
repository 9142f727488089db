//go:build unix

package main

import (
	"os"
	"syscall"
)

// reopenSignal asks a running gmproxy to reopen its access log.
var reopenSignal os.Signal = syscall.SIGUSR1

// forceSignal is a supervisor's order to its workers to close every
// connection now: a second stop request during the graceful shutdown
// (workerSignals).
var forceSignal os.Signal = syscall.SIGUSR2

// signalReload asks the gmproxy with process ID pid to reload.
func signalReload(pid int) error { return syscall.Kill(pid, syscall.SIGHUP) }

// umask sets the file mode creation mask and returns the previous one.
func umask(mask int) int { return syscall.Umask(mask) }
