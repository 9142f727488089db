package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestReopenDuringDrain: SIGUSR1 (the access log's rotation) while SIGTERM
// drains reopens the log, as it does before: nginx's old workers take
// theirs while they exit. Ignored, the lines of the drain (the requests
// in flight at the stop) went into the rotated file, which logrotate may
// have compressed or removed by then.
func TestReopenDuringDrain(t *testing.T) {
	if reopenSignal != syscall.SIGUSR1 {
		t.Skip("no reopen signal on this system")
	}
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	backend, started, release := heldBackend(1)
	defer backend.Close()
	logPath := filepath.Join(dir, "access.log")
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := fmt.Sprintf(`listeners: [{address: 127.0.0.1:0}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes: [{path_prefix: /, upstream: app}]
upstreams: [{name: app, targets: [%s]}]
shutdown_grace: 30s
admin: {address: "off"}
access_log: {path: %q, format: template, template: "{uri}"}
`, backend.Listener.Addr().String(), logPath)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)
	done := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		done <- runGet([]string{"-ntls", "-CAfile", filepath.Join(dir, devpki.FileCACert), "-connect", r.addr, "-q", "https://localhost/slow"}, &out, &errb)
	}()
	<-started
	r.sigs <- syscall.SIGTERM
	for i := 0; !strings.Contains(r.stderr.String(), "graceful shutdown"); i++ {
		if i > 4000 {
			t.Fatalf("no graceful shutdown after SIGTERM:\n%s", r.stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.Rename(logPath, logPath+".1"); err != nil { // logrotate
		t.Fatal(err)
	}
	r.sigs <- reopenSignal
	// The reopen is made before the request ends: it waits for the
	// log's new file to exist.
	for i := 0; ; i++ {
		if _, err := os.Stat(logPath); err == nil {
			break
		}
		if i > 2000 {
			close(release)
			<-done
			<-r.exit
			t.Fatal("SIGUSR1 during the drain did not reopen the access log")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if code := <-done; code != 0 {
		t.Errorf("in-flight request: exit %d", code)
	}
	select {
	case code := <-r.exit:
		if code != 0 {
			t.Errorf("exit %d after a drained shutdown", code)
		}
	case <-time.After(testwait.Bound(30 * time.Second)):
		t.Fatal("run did not stop")
	}
	if cur, _ := os.ReadFile(logPath); !strings.Contains(string(cur), "/slow\n") {
		old, _ := os.ReadFile(logPath + ".1")
		t.Errorf("line of the request the drain served: current log %q, rotated log %q", cur, old)
	}
}
