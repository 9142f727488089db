//go:build unix

package main

import "syscall"

// reexec replaces the process image (same PID, so service managers do not
// notice); it returns only on failure.
func reexec(exe string, args, env []string) error {
	return syscall.Exec(exe, args, env)
}
