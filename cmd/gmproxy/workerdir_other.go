//go:build !linux

package main

import (
	"errors"
	"log/slog"
	"os"
)

// makeWorkerDir: no worker mode here.
func makeWorkerDir() (string, *os.File, error) {
	return "", nil, errors.New("workers above 1 need Linux")
}

func removeStaleWorkerDirs(*slog.Logger) {}
