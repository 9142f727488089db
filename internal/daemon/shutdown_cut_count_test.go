package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/metrics"
)

// lockedLog is a log buffer the daemon's goroutines write to at once.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShutdownCountsCutConnections: the connections still open when the
// shutdown's grace period ends, which gmproxy closes, are counted in
// gmproxy_connections_cut_total of their listener and their number is in
// the shutdown's last log line; the connection that finished in time is
// not.
func TestShutdownCountsCutConnections(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	defer close(b.release)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.ShutdownGrace = 100 * time.Millisecond
	var logs lockedLog
	log := slog.New(slog.NewTextHandler(&logs, nil))
	env := &Env{Logger: log, Observer: m, KeyOps: m, Sessions: m, ProxyObserver: m}
	d, err := New(func() (*Generation, error) { return Build(cfg, env) }, Options{Logger: log, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	defer d.Close()
	addr := d.Addr(cfg.Listeners[0].Address)
	// One request done, its connection closed: not cut.
	done := tlsClient(t, addr, "localhost", false)
	get(t, done, "https://localhost/m")
	done.CloseIdleConnections()
	const n = 3 // one connection each (h1 and h2)
	errc := make(chan error, n)
	for i := range n {
		c := tlsClient(t, addr, "localhost", i%2 == 0)
		go func() {
			resp, err := c.Get(fmt.Sprintf("https://localhost/slow?%d", i))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	for range n {
		testpeer.Recv(t, b.slowStarted, "slow request at the backend")
	}
	if err := d.Shutdown(context.Background()); err == nil {
		t.Error("Shutdown reported a clean drain with requests still running")
	}
	for range n {
		testpeer.Recv(t, errc, "the cut request's end")
	}
	var got []string
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gmproxy_connections_cut_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				got = append(got, fmt.Sprintf("%s=%s %v", l.GetName(), l.GetValue(), s.GetCounter().GetValue()))
			}
		}
	}
	if want := fmt.Sprintf("listener=%s %d", cfg.Listeners[0].Address, n); len(got) != 1 || got[0] != want {
		t.Errorf("gmproxy_connections_cut_total: %q, want [%q]", got, want)
	}
	if want := fmt.Sprintf("connections_cut=%d", n); !strings.Contains(logs.String(), want) {
		t.Errorf("the shutdown's log lacks %s:\n%s", want, logs.String())
	}
}
