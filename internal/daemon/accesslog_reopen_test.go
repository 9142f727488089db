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

// TestReopenLogsReachesRetiredGenerations: a request that a reload left
// in flight is served by the retired generation, whose access log is its
// own; a rotation after the reload (rename, then SIGUSR1: ReopenLogs) must
// reopen that log too, or the request's line goes into the rotated file,
// which logrotate may have compressed or removed (the open descriptor
// then holds a deleted file's space until the generation is gone).
func TestReopenLogsReachesRetiredGenerations(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	path := filepath.Join(t.TempDir(), "access.log")
	cfg.AccessLog.Path, cfg.AccessLog.Format, cfg.AccessLog.Template = path, "template", "{uri}"
	d := startDaemon(t, cfg)
	c := tlsClient(t, d.addr, "localhost", true)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get("https://localhost/slow")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil { // logrotate
		t.Fatal(err)
	}
	if err := d.ReopenLogs(); err != nil {
		t.Fatal(err)
	}
	close(b.release)
	if err := testpeer.Recv(t, done, "the slow request's answer"); err != nil {
		t.Fatal(err)
	}
	// The retired generation logs the request and, drained, closes its
	// log (flushing it); the line is in one of the two files then.
	var cur, old []byte
	for i := 0; ; i++ {
		cur, _ = os.ReadFile(path)
		old, _ = os.ReadFile(path + ".1")
		if strings.Contains(string(cur)+string(old), "/slow") || i == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(cur), "/slow\n") {
		t.Errorf("line of the request the retired generation served: current log %q, rotated log %q", cur, old)
	}
}

// TestReopenLogsReachesPreparedGeneration: the workers of gmproxy run
// reload in two steps (Prepare, then Commit once every worker prepared),
// and the supervisor passes a rotation's SIGUSR1 on at once, also between
// the two. The prepared generation opened its access log already: the
// rotation must reopen it too, or once committed it writes every line
// into the rotated file (compressed or removed by logrotate) until the
// next rotation.
func TestReopenLogsReachesPreparedGeneration(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	path := filepath.Join(t.TempDir(), "access.log")
	cfg.AccessLog.Path, cfg.AccessLog.Format, cfg.AccessLog.Template = path, "template", "{uri}"
	d := startDaemon(t, cfg)
	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil { // logrotate
		t.Fatal(err)
	}
	if err := d.ReopenLogs(); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	c := tlsClient(t, d.addr, "localhost", true)
	resp, err := c.Get("https://localhost/after-rotation")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := d.Shutdown(context.Background()); err != nil { // closes the log: its lines written
		t.Fatal(err)
	}
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if !strings.Contains(string(cur), "/after-rotation\n") {
		t.Errorf("line of a request after the rotation: current log %q, rotated log %q", cur, old)
	}
}
