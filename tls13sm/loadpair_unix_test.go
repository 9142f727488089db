//go:build unix

package tls13sm

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestLoadX509KeyPairFIFO: LoadX509KeyPair refuses a FIFO in any of its
// files at once, naming it, where os.ReadFile waited in open(2) for a
// writer and never returned, and a file over 64 MiB without reading it
// whole (/dev/zero was read for ever).
func TestLoadX509KeyPairFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pair.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Readers waiting in open(2) (the defect) go on once a writer
		// opens, and then read the end.
		for range 2 {
			if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				w.Close()
			}
		}
	})
	// The other files are regular (empty): each is read before any is
	// parsed, so the FIFO is reached wherever it is.
	regular := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		args := make([]string, 2)
		for j := range args {
			args[j] = regular
		}
		args[i] = fifo
		done := make(chan error, 1)
		go func() {
			_, err := LoadX509KeyPair(args[0], args[1], nil)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), fifo) {
				t.Errorf("a FIFO as file %d: error %v, want one naming the file and saying it is not a regular file", i, err)
			}
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("a FIFO as file %d: still opening it (waiting for a writer)", i)
		}
	}
	// A file one byte over the bound (sparse) is refused, not read whole.
	big := filepath.Join(dir, "big.pem")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(namedfile.Max + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for i := range 2 {
		args := make([]string, 2)
		for j := range args {
			args[j] = regular
		}
		args[i] = big
		if _, err := LoadX509KeyPair(args[0], args[1], nil); err == nil || !strings.Contains(err.Error(), "over 64MiB") || !strings.Contains(err.Error(), big) {
			t.Errorf("a file over 64MiB as file %d: error %v, want one naming the file and saying it is over 64MiB", i, err)
		}
	}
}
