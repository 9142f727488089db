//go:build unix

// Package namedfiletest checks, in tests, that a loader reads the files it
// is named through namedfile: a FIFO nobody writes to is refused at once
// (os.ReadFile waits in open(2) for a writer, for good), and a file over
// namedfile.Max is refused without being read whole.
package namedfiletest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// FIFO makes a FIFO in dir that nobody writes to. At the test's end it
// opens it for writing a few times, so that readers stuck in open(2) (the
// defect a test looks for) go on, read its end and return.
func FIFO(t *testing.T, dir string) string {
	t.Helper()
	fifo := filepath.Join(dir, "named.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 16 {
			if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				w.Close()
			}
		}
	})
	return fifo
}

// Oversize makes a file in dir one byte over namedfile.Max, sparse: no
// 64 MiB are written to the disk.
func Oversize(t *testing.T, dir string) string {
	t.Helper()
	big := filepath.Join(dir, "named-big.pem")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(namedfile.Max + 1); err != nil {
		t.Fatal(err)
	}
	return big
}

// RefusesFIFO runs load, given the FIFO fifo as one of its files (what
// says which), and fails the test unless it returns at once with an error
// naming the file and saying it is not a regular file.
func RefusesFIFO(t *testing.T, what, fifo string, load func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- load() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), fifo) {
			t.Errorf("%s a FIFO: error %v, want one naming the file and saying it is not a regular file", what, err)
		}
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatalf("%s a FIFO: still opening it (waiting for a writer)", what)
	}
}

// RefusesOversize fails the test unless err, the error of a load given
// the file big (Oversize) as one of its files (what says which), names it
// and says it is over the bound.
func RefusesOversize(t *testing.T, what, big string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "over 64MiB") || !strings.Contains(err.Error(), big) {
		t.Errorf("%s a file over 64MiB: error %v, want one naming the file and saying it is over 64MiB", what, err)
	}
}

// EachArg checks a loader of n files: load is called with each of them in
// turn a FIFO, then a file over the bound, the others an empty regular
// file (each file is read before any is parsed, so the bad one is reached
// wherever it is).
func EachArg(t *testing.T, n int, load func(files []string) error) {
	t.Helper()
	dir := t.TempDir()
	regular := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo, big := FIFO(t, dir), Oversize(t, dir)
	with := func(i int, bad string) []string {
		files := make([]string, n)
		for j := range files {
			files[j] = regular
		}
		files[i] = bad
		return files
	}
	for i := range n {
		what := "file " + strconv.Itoa(i+1) + " is"
		RefusesFIFO(t, what, fifo, func() error { return load(with(i, fifo)) })
		RefusesOversize(t, what, big, load(with(i, big)))
	}
}
