package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// workerDirPrefix starts the name of the supervisor's private folder in
// the temporary folder: gmproxy-w<supervisor's PID>-<random>. Short: the
// workers' sockets in it must have paths of at most 107 bytes
// (socketPathsFit), and with the PID it is no longer than the name before
// it (gmproxy-workers-<random>), so a TMPDIR that served then serves now.
const workerDirPrefix = "gmproxy-w"

// makeWorkerDir creates the supervisor's private folder (the workers'
// admin sockets, the wrap key, the configuration copy) and takes an
// exclusive flock on it, held as long as the returned file is open: the
// supervisor's life, also across PID namespaces sharing the folder, where
// its PID means nothing. A later start tests that lock to tell a folder
// left by a supervisor that is gone (SIGKILL, a crash: no deferred
// removal ran) from a live one's (removeStaleWorkerDirs). The file is
// close-on-exec: the workers do not hold the lock.
func makeWorkerDir() (dir string, lock *os.File, err error) {
	dir, err = os.MkdirTemp("", workerDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", nil, err
	}
	lock, err = os.Open(dir)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, lock, nil
}

// removeStaleWorkerDirs removes from the temporary folder the private
// folders that supervisors which are gone left behind: a folder is removed
// only when its name is of makeWorkerDir's making, it is a folder (no
// symbolic link) of this user, the supervisor whose PID its name holds
// is not running this program (a supervisor between its folder's creation
// and its lock), and its flock can be taken (no live supervisor holds it).
// It runs before this supervisor creates its own.
func removeStaleWorkerDirs(log *slog.Logger) {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := workerDirPID(e.Name())
		if !ok {
			continue
		}
		path := filepath.Join(tmp, e.Name())
		if stale, err := removeIfStale(path, pid); stale {
			if err != nil {
				log.Warn("workers: cannot remove the folder a stopped gmproxy left", "path", path, "error", err)
			} else {
				log.Info("workers: removed the folder a stopped gmproxy left", "path", path)
			}
		}
	}
}

// workerDirPID returns the PID in a name of makeWorkerDir's making.
func workerDirPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, workerDirPrefix)
	if !ok {
		return 0, false
	}
	p, suffix, ok := strings.Cut(rest, "-")
	if !ok || suffix == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}

// removeIfStale removes path, a folder whose name holds the PID pid, when
// the supervisor that made it is provably gone; it reports whether it was.
func removeIfStale(path string, pid int) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != os.Getuid() {
		return false, nil
	}
	if pid != os.Getpid() && runsThisProgram(pid) {
		return false, nil // a supervisor starting: not locked yet
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer syscall.Close(fd)
	var fst syscall.Stat_t
	if err := syscall.Fstat(fd, &fst); err != nil || fst.Dev != st.Dev || fst.Ino != st.Ino {
		return false, nil // replaced since the Lstat
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false, nil // a live supervisor's
	}
	return true, os.RemoveAll(path)
}

// runsThisProgram reports whether process pid lives and runs a program of
// this one's name (/proc/PID/comm), as a supervisor's PID in a folder's
// name does while the supervisor runs; a PID taken over since by another
// program does not.
func runsThisProgram(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // unreadable: assume it does
	}
	self, err := os.ReadFile("/proc/self/comm")
	return err != nil || bytes.Equal(comm, self)
}
