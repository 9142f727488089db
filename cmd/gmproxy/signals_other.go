//go:build !unix

package main

import (
	"errors"
	"os"
)

// noSignal is a signal the system never delivers: this system has no
// SIGUSR1, so the access log cannot be reopened by a signal here.
type noSignal struct{}

func (noSignal) String() string { return "no signal" }
func (noSignal) Signal()        {}

var reopenSignal os.Signal = noSignal{}

func signalReload(int) error {
	return errors.New("signals are a Unix feature: reload through the admin listener (POST /reload)")
}

// processRunning does not know here: a pid file is never taken for a
// running instance's.
func processRunning(int) bool { return false }

// umask does nothing: sockets' permissions come from the system here.
func umask(int) int { return 0 }
