package shmstore

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSharedBetweenProcesses: a table made by Create and inherited by
// another process (as the supervisor hands it to its workers) is one
// table: what the child writes, the parent reads, and the other way.
func TestSharedBetweenProcesses(t *testing.T) {
	if os.Getenv("SHMSTORE_CHILD") == "1" {
		s, err := OpenFD("3")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		v, ok, err := s.Get(ctx, "from-parent")
		if err != nil || !ok || string(v) != "p" {
			t.Fatalf("child: %q %v %v", v, ok, err)
		}
		if err := s.Set(ctx, "from-child", []byte("c"), time.Minute); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := Create(1000)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The parent maps it on its own (not through OpenFD's per-process
	// cache), as a second worker would.
	mem, err := mapFD(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	tb, err := open(mem)
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{t: tb}
	ctx := context.Background()
	if err := s.Set(ctx, "from-parent", []byte("p"), time.Minute); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedBetweenProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SHMSTORE_CHILD=1")
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if v, ok, err := s.Get(ctx, "from-child"); !ok || err != nil || string(v) != "c" {
		t.Fatalf("the child's entry: %q %v %v", v, ok, err)
	}
}

func TestOpenFDErrors(t *testing.T) {
	if _, err := OpenFD("x"); err == nil {
		t.Error("OpenFD of a non-number succeeded")
	}
	f, err := os.CreateTemp(t.TempDir(), "notatable")
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(Size(64))
	defer f.Close()
	if _, err := mapFD(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFD(strconv.Itoa(int(f.Fd()))); err == nil {
		t.Error("a file of zeros opened as a table")
	}
	if !processAlive(uint32(os.Getpid())) {
		t.Error("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err == nil && processAlive(uint32(cmd.Process.Pid)) {
		t.Error("a process that exited and was reaped is alive")
	}
}
