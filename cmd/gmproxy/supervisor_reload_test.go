package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
)

// TestReloadCommitOutcome: when a worker's commit of a prepared reload
// fails, the reload fails only if the worker still runs (it refused). A
// worker that died between prepare and commit does not fail it: its
// replacement starts on the new configuration, which the supervisor
// saved before the prepare, so the supervisor takes it on too
// (shutdown_grace here). The workers are stand-ins answering on the
// workers' admin sockets, so that the death falls exactly between the
// two steps.
func TestReloadCommitOutcome(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	for _, tc := range []struct {
		name    string
		dies    bool // worker 1 dies at the commit; else it refuses it
		wantErr bool
	}{
		{"died", true, false},
		{"refused", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath := filepath.Join(t.TempDir(), "gmproxy.yaml")
			writeConfig(t, cfgPath, "workers: 2\n", "127.0.0.1:1", "127.0.0.1:2", "[{respond: {status: 200}}]", "shutdown_grace: 5s\n")
			data, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := conf.Parse(cfgPath, data)
			if err != nil {
				t.Fatal(err)
			}
			s, err := newSupervisor(cfgPath, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(s.dir) })
			if err := s.saveConfig(data); err != nil {
				t.Fatal(err)
			}
			var commits atomic.Int32
			for i := range 2 {
				p := &workerProc{index: i, exited: make(chan struct{})}
				s.procs = append(s.procs, p)
				ln, err := net.Listen("unix", workerSocket(s.dir, i))
				if err != nil {
					t.Fatal(err)
				}
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/reload/commit" {
						return // prepare (and anything else) succeeds
					}
					commits.Add(1)
					switch {
					case i == 0:
					case tc.dies:
						close(p.exited)
						c, _, _ := http.NewResponseController(w).Hijack()
						c.Close()
					default:
						http.Error(w, "cannot switch", http.StatusInternalServerError)
					}
				})}
				go srv.Serve(ln)
				t.Cleanup(func() { srv.Close() })
			}
			writeConfig(t, cfgPath, "workers: 2\n", "127.0.0.1:1", "127.0.0.1:2", "[{respond: {status: 200}}]", "shutdown_grace: 7s\n")
			next, err := s.reload()
			if commits.Load() != 2 {
				t.Fatalf("%d commits, want 2", commits.Load())
			}
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "worker 1") || !strings.Contains(err.Error(), "cannot switch") {
					t.Fatalf("reload refused by a live worker: err %v, want worker 1's refusal", err)
				}
				if got := time.Duration(s.grace.Load()); got != 5*time.Second {
					t.Errorf("shutdown_grace %v after a refused commit, want the previous 5s", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("reload with a worker that died before its commit: %v, want success", err)
			}
			if next == nil || next.ShutdownGrace != 7*time.Second {
				t.Fatalf("reload returned %+v", next)
			}
			if got := time.Duration(s.grace.Load()); got != 7*time.Second {
				t.Errorf("shutdown_grace %v after the reload, want 7s", got)
			}
			saved, err := os.ReadFile(filepath.Join(s.dir, workerConfigFile))
			if err != nil || !strings.Contains(string(saved), "shutdown_grace: 7s") {
				t.Errorf("a replacement worker would read %q (%v), want the new configuration", saved, err)
			}
		})
	}
}
