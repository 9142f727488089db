package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestReloadCommitOutcome: when a worker's commit of a prepared reload
// fails, the reload is reported made in part only if the worker still
// runs (it refused), and that worker is stopped gracefully so that its
// replacement runs what the others switched to. A worker that died
// between prepare and commit does not fail it: its replacement starts on
// the new configuration, which the supervisor saved before the prepare.
// Either way the supervisor takes on the new configuration too
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
			s, _, setGrace := reloadTestSupervisor(t)
			var commits atomic.Int32
			var ended []chan error // each process's end
			for i := range 2 {
				// Its process, to see the signals it gets.
				cmd := exec.Command("sleep", "300")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				end := make(chan error, 1)
				go func() { end <- cmd.Wait() }()
				ended = append(ended, end)
				t.Cleanup(func() { cmd.Process.Kill() })
				p := &workerProc{index: i, cmd: cmd, exited: make(chan struct{})}
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
			setGrace("7s")
			next, err := s.reload()
			if commits.Load() != 2 {
				t.Fatalf("%d commits, want 2", commits.Load())
			}
			var split *splitReloadError
			if tc.wantErr {
				if !errors.As(err, &split) || !strings.Contains(err.Error(), "worker 1") || !strings.Contains(err.Error(), "cannot switch") {
					t.Fatalf("commit refused by a live worker: err %v, want a reload made in part with worker 1's refusal", err)
				}
				for i := range s.procs {
					select {
					case err := <-ended[i]:
						var ee *exec.ExitError
						if i == 0 || !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
							t.Errorf("worker %d ended by %v after worker 1 refused its commit, want only worker 1 stopped by SIGTERM", i, err)
						}
					case <-time.After(time.Second):
						if i == 1 {
							t.Errorf("worker 1 refused its commit and was not stopped: it runs a configuration the others do not")
						}
					}
				}
			} else if err != nil {
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

// TestReloadDuringWorkerStart: a reload (SIGHUP, POST /reload) that comes
// while a worker started again after a crash is still starting. The
// starting worker reads the supervisor's copy of the configuration when
// it starts; whatever the reload's outcome, every worker must end up on
// the configuration the supervisor keeps (the copy), else a worker serves
// a configuration the others do not and the supervisor does not know of.
func TestReloadDuringWorkerStart(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	s, data, setGrace := reloadTestSupervisor(t)
	// Worker 0 runs; preparing takes it a moment (building the sites).
	w0 := &standInWorker{running: string(data), prepDur: 300 * time.Millisecond}
	s.procs = append(s.procs, &workerProc{index: 0, exited: make(chan struct{}), ready: true})
	w0.serve(t, s, 0)
	// Worker 1 was just started again (restartWorker): not ready yet.
	s.procs = append(s.procs, &workerProc{index: 1, exited: make(chan struct{})})
	w1 := &standInWorker{}
	setGrace("7s")
	go func() {
		// Worker 1's start: it reads the copy, then opens its admin socket.
		time.Sleep(100 * time.Millisecond)
		b, _ := os.ReadFile(filepath.Join(s.dir, workerConfigFile))
		w1.mu.Lock()
		w1.running = string(b)
		w1.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		w1.serve(t, s, 1)
	}()
	if _, err := s.reload(); err != nil {
		t.Errorf("reload while a worker starts: %v, want it made once the worker is ready", err)
	}
	saved, _ := os.ReadFile(filepath.Join(s.dir, workerConfigFile))
	if w0.get() != string(saved) {
		t.Errorf("worker 0 runs a configuration other than the supervisor's copy")
	}
	if w1.get() != string(saved) {
		t.Errorf("worker 1 (starting during the reload) runs shutdown_grace 7s: a configuration other than the supervisor's copy (the refused reload's), which worker 0 does not run")
	}
}

// TestRestartedWorkerHungAtStart: a worker started again after a crash
// that never gets ready (hung in its start: no admin socket), which the
// watchdog leaves alone as starting, is killed once its start timeout
// passes (and so started again as after a crash), rather than left not
// ready for ever with the supervisor's /readyz answering 503.
func TestRestartedWorkerHungAtStart(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	s := sleeperSupervisor(t)
	s.startTimeout = time.Second
	dead := &workerProc{index: 0, exited: make(chan struct{}), ready: true}
	close(dead.exited)
	s.procs = []*workerProc{dead}
	exits := make(chan workerExit, 4)
	var restarts sync.WaitGroup
	restarts.Add(1)
	var once sync.Once
	s.restartWorker(0, exits, func(i int, after time.Duration) { once.Do(restarts.Done) })
	s.mu.Lock()
	p := s.procs[0]
	s.mu.Unlock()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	stop := make(chan struct{})
	defer close(stop)
	go s.watch(stop)
	select {
	case <-p.exited:
		t.Logf("hung starting worker ended (status %d)", p.exitCode)
	case <-time.After(testwait.Bound(10 * time.Second)):
		s.mu.Lock()
		ready := p.ready
		s.mu.Unlock()
		t.Errorf("worker hung in its start still running 10 s after its restart (start timeout 1 s, ready %v): never killed nor restarted", ready)
	}
}

// standInWorker answers the reload steps on worker i's admin socket as a
// worker does: prepare reads the supervisor's copy of the configuration,
// commit runs it; running is the text it runs.
type standInWorker struct {
	mu      sync.Mutex
	running string
	pending string
	prepDur time.Duration
}

func (w *standInWorker) get() string { w.mu.Lock(); defer w.mu.Unlock(); return w.running }

func (w *standInWorker) serve(t *testing.T, s *supervisor, i int) {
	ln, err := net.Listen("unix", workerSocket(s.dir, i))
	if err != nil {
		t.Error(err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch r.URL.Path {
		case "/reload/prepare":
			time.Sleep(w.prepDur)
			b, _ := os.ReadFile(filepath.Join(s.dir, workerConfigFile))
			w.pending = string(b)
		case "/reload/commit":
			w.running = w.pending
		case "/reload/abort":
			w.pending = ""
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// TestDeadWorkerNotReady: a worker that exited is reported not ready (GET
// /workers, and so the supervisor's /readyz) from its exit on, not only
// once its replacement starts after the back-off.
func TestDeadWorkerNotReady(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	s := sleeperSupervisor(t)
	p, err := s.spawn(0, make(chan workerExit, 1))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	p.ready = true // as waitReady leaves it
	s.procs = []*workerProc{p}
	s.mu.Unlock()
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("killed worker not seen exiting")
	}
	rec := httptest.NewRecorder()
	s.status(rec, nil)
	if got := rec.Body.String(); !strings.Contains(got, `"ready":false`) {
		t.Errorf("GET /workers after the worker died: %s, want it not ready", got)
	}
}

// TestStopAfterWorkerDied: a worker that died shortly before a clean
// shutdown, its restart still in its back-off, does not make the shutdown
// fail: it had nothing to drain. The worker still running must drain:
// the same worker exiting 1 at the stop still fails it.
func TestStopAfterWorkerDied(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	for _, tc := range []struct {
		name     string
		onTerm   string
		wantCode int
	}{
		{"drained", "exit 0", 0},
		{"not drained", "exit 1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sleeperSupervisor(t)
			procs := termWorkers(t, s, tc.onTerm, make(chan workerExit, 2))
			procs[0].cmd.Process.Kill()
			<-procs[0].exited
			done := make(chan int, 1)
			go func() { done <- s.stop(nil) }()
			select {
			case code := <-done:
				if code != tc.wantCode {
					t.Errorf("stop with worker 0 dead and worker 1 exiting %q: status %d, want %d", tc.onTerm, code, tc.wantCode)
				}
			case <-time.After(testwait.Bound(20 * time.Second)):
				t.Fatal("stop did not return")
			}
		})
	}
}

// reloadTestSupervisor returns a supervisor, with no workers yet, of a
// 2-worker configuration file with shutdown_grace 5s, whose copy is saved
// as at start, and that text; setGrace rewrites the file with another
// shutdown_grace, for a reload.
func reloadTestSupervisor(t *testing.T) (s *supervisor, data []byte, setGrace func(string)) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "gmproxy.yaml")
	setGrace = func(grace string) {
		writeConfig(t, cfgPath, "workers: 2\n", "127.0.0.1:1", "127.0.0.1:2", "[{respond: {status: 200}}]", "shutdown_grace: "+grace+"\n")
	}
	setGrace("5s")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Parse(cfgPath, data)
	if err != nil {
		t.Fatal(err)
	}
	s, err = newSupervisor(cfgPath, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	if err := s.saveConfig(data); err != nil {
		t.Fatal(err)
	}
	return s, data, setGrace
}

// sleeperSupervisor returns a supervisor whose workers are a script that
// sleeps: a worker that starts and never gets ready.
func sleeperSupervisor(t *testing.T) *supervisor {
	t.Helper()
	return scriptSupervisor(t, "exec sleep 300")
}

// scriptSupervisor returns a supervisor whose workers run the shell
// script body.
func scriptSupervisor(t *testing.T, body string) *supervisor {
	t.Helper()
	dir := t.TempDir()
	s, err := newSupervisor(filepath.Join(dir, "gmproxy.yaml"), nil, &conf.Config{Workers: "2"}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	s.self = nil // a stand-in program
	s.exe = workerScript(t, body)
	return s
}

// workerScript writes the shell script body as a stand-in worker program.
func workerScript(t *testing.T, body string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "worker.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// termWorkers starts s's two workers as stand-ins that wait for SIGTERM,
// then exit with status 0 (onTerm "exit 0") or as onTerm says, and
// returns them once their trap is set.
func termWorkers(t *testing.T, s *supervisor, onTerm string, exits chan workerExit) []*workerProc {
	t.Helper()
	// The sleep must not hold the output pipes cmd.Wait waits for; the
	// script says it is ready once its trap is set.
	s.self = nil // a stand-in program
	s.exe = workerScript(t, "trap 'kill $!; "+onTerm+"' TERM\nsleep 300 >/dev/null 2>&1 &\ntouch \"$0.$"+envWorker+"\"\nwait")
	var procs []*workerProc
	for i := range 2 {
		p, err := s.spawn(i, exits)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.cmd.Process.Kill() })
		procs = append(procs, p)
	}
	for i := range 2 {
		waitFor(t, func() bool { _, err := os.Stat(s.exe + "." + strconv.Itoa(i)); return err == nil })
	}
	s.mu.Lock()
	s.procs = procs
	for _, p := range procs {
		p.ready = true
	}
	s.mu.Unlock()
	return procs
}

// gatedSteps serves the reload steps on s's workers' admin sockets as
// stand-ins whose step gate (a path) waits until release is closed (or
// the supervisor gives up the call: cut counts those); it counts the
// steps asked.
type gatedSteps struct {
	prepares, commits, cut atomic.Int32
	release                chan struct{}
}

func serveGatedSteps(t *testing.T, s *supervisor, gate string) *gatedSteps {
	g := &gatedSteps{release: make(chan struct{})}
	for i := range 2 {
		ln, err := net.Listen("unix", workerSocket(s.dir, i))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/reload/prepare":
				g.prepares.Add(1)
			case "/reload/commit":
				g.commits.Add(1)
			}
			if r.URL.Path != gate {
				return
			}
			select {
			case <-g.release:
			case <-r.Context().Done():
				g.cut.Add(1)
			}
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return g
}

// reloadHeldAt runs the main loop of a supervisor with two stand-in
// workers whose reload step gate is held (serveGatedSteps), and has it
// reload (SIGHUP) a changed file; it returns once both workers hold the
// step, with the loop's signals, its exit status to come and its log.
func reloadHeldAt(t *testing.T, gate string) (g *gatedSteps, sigs chan os.Signal, code chan int, logs *lockedBuffer) {
	t.Helper()
	s, _, setGrace := reloadTestSupervisor(t)
	logs = &lockedBuffer{}
	s.log = slog.New(slog.NewTextHandler(logs, nil))
	exits := make(chan workerExit, 2)
	termWorkers(t, s, "exit 0", exits)
	g = serveGatedSteps(t, s, gate)
	sigs = make(chan os.Signal)
	code = make(chan int, 1)
	go func() {
		code <- s.supervise(exits, sigs, func() error { _, err := s.reload(); return err })
	}()
	setGrace("7s")
	sigs <- syscall.SIGHUP
	held := &g.prepares
	if gate == "/reload/commit" {
		held = &g.commits
	}
	waitFor(t, func() bool { return held.Load() == 2 })
	return g, sigs, code, logs
}

// sendDuringReload sends sig to the supervisor's main loop while a
// reload is held in its prepare; the loop must take it at once.
func sendDuringReload(t *testing.T, sigs chan<- os.Signal, sig os.Signal, g *gatedSteps) {
	t.Helper()
	select {
	case sigs <- sig:
	case <-time.After(testwait.Bound(5 * time.Second)):
		close(g.release)
		t.Fatalf("%v not taken in 5 s during a reload: the supervisor answers no signal while it reloads", sig)
	}
}

// TestStopDuringReload: SIGTERM while the workers are slow to prepare
// or to commit a reload (their admin sockets answer, the step does not
// end) abandons the reload at once and shuts down gracefully, rather than
// after the reload step's timeout (2 min) with the signal unanswered
// meanwhile; commits cut by the shutdown are not taken for refusals.
func TestStopDuringReload(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	for _, gate := range []string{"/reload/prepare", "/reload/commit"} {
		t.Run(gate, func(t *testing.T) {
			g, sigs, code, logs := reloadHeldAt(t, gate)
			res := make(chan error, 1)
			sendDuringReload(t, sigs, askReload(res), g)
			sendDuringReload(t, sigs, syscall.SIGTERM, g)
			select {
			case c := <-code:
				if c != 0 {
					t.Errorf("graceful shutdown during a reload: status %d, want 0", c)
				}
			case <-time.After(testwait.Bound(15 * time.Second)):
				close(g.release)
				t.Fatal("SIGTERM during a slow reload step not answered in 15 s")
			}
			if err := <-res; !errors.Is(err, errReloadAbandoned) {
				t.Errorf("admin reload asked during the abandoned one: %v, want %v", err, errReloadAbandoned)
			}
			// The stand-ins see a cut call end a moment after the
			// supervisor gave it up.
			for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); g.cut.Load() != 2 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := g.cut.Load(); n != 2 {
				t.Errorf("%d of the 2 slow %s calls cut by the shutdown", n, gate)
			}
			if n := g.commits.Load(); gate == "/reload/prepare" && n != 0 {
				t.Errorf("%d commits of a reload abandoned before its commit", n)
			}
			if strings.Contains(logs.String(), "refused to commit") {
				t.Errorf("commits cut by the shutdown taken for refusals:\n%s", logs.String())
			}
		})
	}
}

// TestReloadDuringReload: reloads asked (SIGHUP, POST /reload) while one
// is being made are made together once more after it, and the admin
// request gets that reload's outcome.
func TestReloadDuringReload(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	g, sigs, code, _ := reloadHeldAt(t, "/reload/prepare")
	res := make(chan error, 1)
	sendDuringReload(t, sigs, syscall.SIGHUP, g)
	sendDuringReload(t, sigs, askReload(res), g)
	close(g.release)
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("admin reload asked during another: %v", err)
		}
	case <-time.After(testwait.Bound(15 * time.Second)):
		t.Fatal("admin reload asked during another not answered")
	}
	if p, c := g.prepares.Load(), g.commits.Load(); p != 4 || c != 4 {
		t.Errorf("%d prepares and %d commits, want 4 and 4: the reload, then one for the two asked during it", p, c)
	}
	sigs <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Errorf("shutdown: status %d", c)
	}
}

// TestStartFailureKillsWhatStarted: when a worker cannot be spawned (the
// program cannot be executed), killAll stops the workers started so far
// and returns. Before, it met the places of the workers never started and
// panicked: the exit was a Go panic instead of status 1, and
// runSupervisor's removal of its folder (which holds the ticket wrap key)
// was skipped.
func TestStartFailureKillsWhatStarted(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	s := sleeperSupervisor(t)
	if err := os.WriteFile(s.file, []byte("workers: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.self = nil // a stand-in program
	s.exe = filepath.Join(t.TempDir(), "no-such-gmproxy")
	if _, err := s.start(context.Background()); err == nil {
		t.Fatal("start with a program that cannot be executed succeeded")
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("killAll after a failed spawn panicked: %v", r)
		}
	}()
	s.killAll()
}

// TestStopWhileWorkersStart: a SIGTERM received while the workers start
// stops them at once, with a normal stop's status. Before, the supervisor
// read no signal until every worker was ready, and waited up to the start
// timeout (60 s) for a worker slow to start before it stopped; a worker
// the SIGTERM ended before it installed its handler failed the stop.
func TestStopWhileWorkersStart(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			s := sleeperSupervisor(t) // never ready
			var errs lockedBuffer
			s.errw = &errs
			if err := os.WriteFile(s.file, []byte("workers: 2\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// Short, so that without the fix the start's failure, not
			// the test's timeout, shows it.
			s.startTimeout = 5 * time.Second
			sigs := make(chan os.Signal, 2)
			sigs <- syscall.SIGHUP // waits for the start: not a stop
			sigs <- sig
			done := make(chan int, 1)
			go func() { _, _, code, _ := s.startOrStop(sigs); done <- code }()
			var code int
			select {
			case code = <-done:
			case <-time.After(testwait.Bound(30 * time.Second)):
				t.Fatal("no stop")
			}
			if code != 0 {
				t.Errorf("status %d after %v during the start, want 0 (%s)", code, sig, errs.String())
			}
			if strings.Contains(errs.String(), "did not start") {
				t.Errorf("the start ran to its timeout: %s", errs.String())
			}
			for _, p := range s.procs {
				select {
				case <-p.exited:
				default:
					t.Errorf("worker %d still running after the stop", p.index)
					p.cmd.Process.Kill()
				}
			}
		})
	}
}

// TestReopenWaitsForReadyWorkers: the access-log reopen signal reaches the
// ready workers at once and a worker still starting once it is ready,
// not before (an order that arrives before a worker installs its handler
// ends it).
func TestReopenWaitsForReadyWorkers(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	s := sleeperSupervisor(t)
	dir := t.TempDir()
	start := func(i int) (*workerProc, string) {
		got := filepath.Join(dir, fmt.Sprint("reopened-", i))
		up := filepath.Join(dir, fmt.Sprint("up-", i))
		cmd := exec.Command("sh", "-c", `trap 'echo x >> `+got+`' `+fmt.Sprint(int(workerReopenSignal.(syscall.Signal)))+`; : > `+up+`; while :; do sleep 0.02; done`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &workerProc{index: i, cmd: cmd, exited: make(chan struct{})}
		go func() { cmd.Wait(); close(p.exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-p.exited })
		waitFor(t, func() bool { _, err := os.Stat(up); return err == nil }) // its trap is set
		return p, got
	}
	ready, readyGot := start(0)
	ready.ready = true
	starting, startingGot := start(1)
	s.procs = []*workerProc{ready, starting}
	reopened := func(file string) bool { _, err := os.Stat(file); return err == nil }

	s.reopenLogs()
	waitFor(t, func() bool { return reopened(readyGot) })
	// Both run the same loop: one signalled with the other has taken it
	// within a few of its 20 ms sleeps.
	time.Sleep(200 * time.Millisecond)
	if reopened(startingGot) {
		t.Fatal("a worker not yet ready was signalled")
	}
	s.markReady(starting)
	waitFor(t, func() bool { return reopened(startingGot) })
}

// TestAdminReloadOutcomeLogged: the outcome of a reload asked over the
// admin or control endpoint (gmproxy reload, a deployment pipeline) is in
// the supervisor's log, as a SIGHUP's is and as a single process logs
// every reload: a refused file one problem a record, with its
// file:line:column. Before, only the HTTP client was told: the log said
// "reloading" and nothing more, and the one who reads the journal after a
// failed deployment did not learn that the running configuration was
// kept, nor why.
func TestAdminReloadOutcomeLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gmproxy.yaml")
	_, refusal := conf.Parse(path, []byte("workers: 2\nlisteners: [{address: 127.0.0.1:0}]\nnot_a_setting: 1\n"))
	var probs conf.Problems
	if !errors.As(refusal, &probs) || len(probs) == 0 {
		t.Fatalf("the test's bad configuration gives %v, want configuration problems", refusal)
	}
	// want: a record whose message contains msg and, when attr is set,
	// whose attribute attr is value.
	type want struct{ msg, attr, value string }
	refused := []want{{msg: "reload refused"}}
	for _, p := range probs {
		refused = append(refused, want{"configuration", "problem", p.String()})
	}
	for _, tc := range []struct {
		name string
		err  error
		want []want
	}{
		{"refused", refusal, refused},
		{"worker refused", errors.New("worker 1: listen 127.0.0.1:1: address already in use"), []want{{"reload failed", "err", "worker 1: listen 127.0.0.1:1: address already in use"}}},
		{"made", nil, []want{{msg: "reload succeeded in every worker"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			s := &supervisor{log: slog.New(slog.NewJSONHandler(&logs, nil))}
			res := make(chan error, 1)
			sigs := make(chan os.Signal)
			_, stop := s.reloading([]os.Signal{askReload(res)}, sigs, func() error { return tc.err }, nil, nil)
			if stop {
				t.Fatal("the supervisor stopped after a reload")
			}
			if err := <-res; fmt.Sprint(err) != fmt.Sprint(tc.err) {
				t.Errorf("admin request answered %v, want %v", err, tc.err)
			}
			var records []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				records = append(records, r)
			}
			for _, w := range tc.want {
				found := false
				for _, r := range records {
					msg, _ := r["msg"].(string)
					found = found || strings.Contains(msg, w.msg) && (w.attr == "" || r[w.attr] == w.value)
				}
				if !found {
					t.Errorf("no log record %+v in:\n%s", w, logs.String())
				}
			}
		})
	}
}
