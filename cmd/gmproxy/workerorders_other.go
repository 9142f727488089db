//go:build !linux

package main

import "os"

// noOrder is a signal never delivered: the worker mode needs Linux.
type noOrder struct{}

func (noOrder) String() string { return "no order" }
func (noOrder) Signal()        {}

var (
	forceSignal        os.Signal = noOrder{}
	workerReopenSignal os.Signal = noOrder{}
	workerIgnored      []os.Signal
)
