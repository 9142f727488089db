package daemon

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestReopenLogsDuringShutdown: a rotation (rename, then SIGUSR1:
// ReopenLogs) while shutdown drains must reach the generation it drains,
// which still logs what it serves: here a WebSocket that outlasts the
// listeners' drain (a hijacked connection no HTTP server waits for).
// Otherwise the tunnel's line goes into the rotated file, which logrotate
// may have compressed or removed.
func TestReopenLogsDuringShutdown(t *testing.T) {
	cfg := wsConfig(t)
	path := filepath.Join(t.TempDir(), "access.log")
	cfg.AccessLog.Path, cfg.AccessLog.Format, cfg.AccessLog.Template = path, "template", "{uri}"
	d := startDaemon(t, cfg)
	conn := dialWebSocket(t, d.addr)
	shut := make(chan error, 1)
	go func() { shut <- d.Shutdown(context.Background()) }()
	// The listeners drained: the generation is being retired, its
	// tunnel still open.
	for i := 0; ; i++ {
		d.Daemon.mu.Lock() // the daemon's, not the harness's
		retiring := d.gen == nil
		d.Daemon.mu.Unlock()
		if retiring {
			break
		}
		if i == 4000 {
			t.Fatal("shutdown did not get past the listeners' drain")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := conn.Write([]byte("still open")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, make([]byte, 10)); err != nil {
		t.Fatalf("the tunnel during the drain: %v", err)
	}
	if err := os.Rename(path, path+".1"); err != nil { // logrotate
		t.Fatal(err)
	}
	if err := d.ReopenLogs(); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if !strings.Contains(string(cur), "/ws\n") {
		t.Errorf("line of the tunnel the drain served: current log %q, rotated log %q", cur, old)
	}
}
