package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// claimPIDFile writes this process's ID to path (for gmproxy reload -pid
// and service managers) and returns the function that removes the file at
// exit. A path that names another gmproxy that is running is refused:
// a second instance started by mistake with the same -pid (which then
// fails to bind the same ports) overwrote the running instance's file and
// removed it at its exit, so that the running one could no longer be
// reloaded through it. A stale file (its process gone, or the ID taken
// by another program) is replaced. The file is written whole (a temporary
// file renamed over it), and removed at exit only while it still holds
// this process's ID.
func claimPIDFile(path string) (release func(), err error) {
	if b, err := os.ReadFile(path); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && pid > 1 && pid != os.Getpid() && processRunning(pid) {
			if exe, ok := otherProgram(pid); ok && exe != "" {
				return nil, fmt.Errorf("%s names gmproxy process %d, which is running: stop it first, or give this instance another -pid file", path, pid)
			}
		}
	}
	mine := strconv.Itoa(os.Getpid()) + "\n"
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	_, err = tmp.WriteString(mine)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && string(b) == mine {
			os.Remove(path)
		}
	}, nil
}
