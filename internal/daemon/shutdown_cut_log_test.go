package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestShutdownLogsWhatItCut: the requests still running when the
// shutdown grace period ends are cut, and their access-log lines (the
// audit of who was cut) are written by the time Shutdown returns: the
// process exits right after it, and a line the cut request's handler
// writes later is lost with it.
func TestShutdownLogsWhatItCut(t *testing.T) {
	t.Run("grace over", func(t *testing.T) {
		testLogsWhatItCut(t, func(d *testDaemon) {
			if err := d.Shutdown(context.Background()); err == nil {
				t.Error("Shutdown reported a clean drain with requests still running")
			}
		})
	})
	// A second SIGTERM during the drain calls Close, and gmproxy exits
	// once Shutdown returns; the lines of what Close cut must be in.
	t.Run("second signal", func(t *testing.T) {
		testLogsWhatItCut(t, func(d *testDaemon) {
			shut := make(chan error, 1)
			go func() { shut <- d.Shutdown(context.Background()) }()
			d.Close()
			testpeer.Recv(t, shut, "end of Shutdown")
		})
	})
}

func testLogsWhatItCut(t *testing.T, stop func(*testDaemon)) {
	b := newBackend(t)
	defer close(b.release)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.ShutdownGrace = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "access.log")
	cfg.AccessLog.Path, cfg.AccessLog.Format, cfg.AccessLog.Template = path, "template", "{uri}"
	d := startDaemon(t, cfg)
	const n = 8 // per protocol
	errc := make(chan error, 2*n)
	for i := range 2 * n {
		c := tlsClient(t, d.addr, "localhost", i >= n)
		go func() {
			resp, err := c.Get(fmt.Sprintf("https://localhost/slow?%d", i))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	for range 2 * n {
		testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	}
	stop(d)
	data, _ := os.ReadFile(path)
	for i := range 2 * n {
		if want := fmt.Sprintf("/slow?%d\n", i); !strings.Contains(string(data), want) {
			t.Errorf("access log when Shutdown returned: %q, want the line %q of a request it cut", data, want)
		}
	}
	for range 2 * n {
		testpeer.Recv(t, errc, "the cut request's end")
	}
}
