//go:build !linux

package main

import (
	"errors"
	"net"
	"os/exec"
)

const workersSupported = false

func listenReusePort(string) (net.Listener, error) {
	return nil, errors.New("workers above 1 need Linux (SO_REUSEPORT)")
}

// workerProgram: no worker mode here.
const workerProgram = ""

func dieWithParent(*exec.Cmd) {}

func nameWorker() {}
