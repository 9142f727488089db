package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestPIDFileHolderHelper is not a test: started by TestPIDFileOfRunningInstance
// as a running gmproxy stand-in (the same executable), it waits until
// its standard input closes (30 s at most).
func TestPIDFileHolderHelper(t *testing.T) {
	if os.Getenv("GMPROXY_PID_HOLDER") != "1" {
		t.Skip("helper process")
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}

// TestPIDFileOfRunningInstance: gmproxy run -pid F refuses to start when
// F names another gmproxy that is running (a second instance started by
// mistake overwrote the running one's file, failed to bind, and removed
// it, so that gmproxy reload -pid F no longer reached the running one);
// a stale F (its process another program) is taken over; and at exit F is
// removed only while it still holds this instance's ID.
func TestPIDFileOfRunningInstance(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the program of a process is read from /proc")
	}
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "gmproxy.yaml")
	if err := os.WriteFile(cfgFile, []byte(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes: [{path: /, respond: {body: "ok"}}]
admin: {address: "off"}
access_log: {path: "off"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(os.Args[0], "-test.run=^TestPIDFileHolderHelper$", "-test.count=1")
	holder.Env = append(os.Environ(), "GMPROXY_PID_HOLDER=1")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer stdin.Close()
	holderPID := strconv.Itoa(holder.Process.Pid) + "\n"
	pidFile := filepath.Join(dir, "gmproxy.pid")

	// The file of a running gmproxy: refused, and left as it was.
	os.WriteFile(pidFile, []byte(holderPID), 0o644)
	var out, errb bytes.Buffer
	sigs := make(chan os.Signal, 1)
	exit := make(chan int, 1)
	go func() {
		// Served (the file not refused): stopped at once, so that the
		// test fails rather than waits.
		exit <- runMain([]string{"-c", cfgFile, "-pid", pidFile}, &out, &errb, sigs, &runHooks{ready: func(*daemon.Daemon, string, string) {
			sigs <- syscall.SIGTERM
		}})
	}()
	select {
	case code := <-exit:
		if code != 1 || !strings.Contains(errb.String(), "which is running") {
			t.Errorf("pid file of a running gmproxy: exit %d, %s%s; want 1 and the running process named", code, out.String(), errb.String())
		}
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("run neither refused the pid file nor stopped")
	}
	if b, _ := os.ReadFile(pidFile); string(b) != holderPID {
		t.Errorf("the running instance's pid file now holds %q, want %q", b, holderPID)
	}

	// A stale file (another program's ID) is taken over and removed at
	// exit.
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Skip("no sleep program:", err)
	}
	defer sleeper.Process.Kill()
	os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o644)
	r := startRun(t, "-c", cfgFile, "-pid", pidFile)
	if b, _ := os.ReadFile(pidFile); string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("a stale pid file not taken over: %q", b)
	}
	if code := r.stop(t); code != 0 {
		t.Errorf("run exit %d", code)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file left after exit: %v", err)
	}

	// A file another instance took meanwhile stays at exit.
	r = startRun(t, "-c", cfgFile, "-pid", pidFile)
	os.WriteFile(pidFile, []byte(holderPID), 0o644)
	if code := r.stop(t); code != 0 {
		t.Errorf("run exit %d", code)
	}
	if b, _ := os.ReadFile(pidFile); string(b) != holderPID {
		t.Errorf("another instance's pid file removed or changed at exit: %q", b)
	}
}
