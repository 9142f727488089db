package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/internal/rateshare"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/localstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/shmstore"
)

// Restart back-off of a worker that died: it doubles from restartMin up to
// restartMax, and starts over once a worker has run for restartReset. After
// maxQuickDeaths deaths in a row, each within restartReset of its start or
// before the worker got ready, the supervisor gives up and stops (a worker that cannot run is a
// configuration or host problem, not a transient one).
const (
	restartMin     = 100 * time.Millisecond
	restartMax     = 10 * time.Second
	restartReset   = 30 * time.Second
	maxQuickDeaths = 10
	// workerStartTimeout bounds a worker's start (configuration load and
	// listeners) until its admin socket reports ready.
	workerStartTimeout = 60 * time.Second
	// workerCallTimeout bounds one call to a worker's admin socket
	// (metrics scrape; a reload is bounded by workerReloadTimeout).
	workerCallTimeout   = 5 * time.Second
	workerReloadTimeout = 2 * time.Minute
	// A running worker's admin socket is probed every workerProbeInterval;
	// a worker that gives no answer within workerProbeTimeout to
	// workerProbeMisses probes in a row (stopped, deadlocked, its memory
	// swapped out) is killed, and started again as after a crash. An
	// answer of any status counts: a busy worker is not killed for it.
	workerProbeInterval = 2 * time.Second
	workerProbeTimeout  = 2 * time.Second
	workerProbeMisses   = 3
)

// workerKillMargin is how long after shutdown_grace a worker that has not
// exited (hung) is killed. It is a variable for the tests only: the test
// of the kill (TestWorkersShutdownKillsHungWorker) runs gmproxy with a
// shorter margin (envTestKillMargin, read by TestMain), so that it and
// the mutants it catches do not wait the production 10 s each time.
var workerKillMargin = 10 * time.Second

// supervisor runs the worker mode's main process: it serves no traffic; it
// starts workerCount(cfg) workers and keeps them running.
type supervisor struct {
	exe string
	// self is the file of the supervisor's program (workerProgram), nil
	// where unknown: a worker is started from exe while exe is that
	// file, else from workerProgram. Started from a file a package
	// upgrade renamed over exe, a worker started again after a crash ran
	// the new version beside workers of the old one, on tables and reload
	// steps of the old one's making (nginx's workers are forks of their
	// master: a new version runs after a restart); a file removed left
	// it dead for good.
	self os.FileInfo
	args []string // the run flags, given to every worker
	file string
	// adminFlag is run's -admin, which overrides admin.address.
	adminFlag string
	dir       string
	// dirLock holds the flock on dir that tells a later start this
	// supervisor still runs (makeWorkerDir).
	dirLock *os.File
	n       int
	// cacheSize is sessions.cache_size: the store holds as many sessions
	// per worker.
	cacheSize int
	// shm is the shared memory session store every worker maps (nil: the
	// socket store in dir serves them).
	shm *os.File
	// clients is the table of per-client counts every worker maps (nil
	// where there is none: each worker counts alone), and clientsTable
	// the supervisor's own mapping of it, to clear a dead worker's counts.
	clients      *os.File
	clientsTable *clientshare.Table
	// rates is the table of the routes' rate_limit counts every worker
	// maps (nil where there is none: each worker counts alone), and
	// ratesTable the supervisor's mapping of it, to release the bucket a
	// dead worker held.
	rates      *os.File
	ratesTable interface{ ClearWorker(w int) } // a *rateshare.Table
	log        *slog.Logger
	out        io.Writer // the workers' stdout
	errw       io.Writer // the workers' stderr
	hc         *http.Client
	// startTimeout bounds a worker's start (workerStartTimeout; tests
	// shorten it).
	startTimeout time.Duration
	// reloadCtx bounds every reload's calls to the workers;
	// abandonReloads ends it when the supervisor stops during a reload.
	reloadCtx      context.Context
	abandonReloads context.CancelFunc
	// grace is shutdown_grace of the configuration in force (ns).
	grace atomic.Int64
	// admin is the admin section in force, for the admin handlers.
	admin adminState
	// listening are the listener addresses of the configuration in force
	// (reload's goroutine only, once the workers run).
	listening []string
	// counted keeps the merged counters monotonic over worker restarts.
	counted cumulative
	// scrapes takes the scrapes of the merged /metrics one at a time: of
	// two at once (two Prometheus servers), the one whose worker readings
	// are older could finish last and leave them as the ones counted
	// keeps, below what the other already returned.
	scrapes sync.Mutex

	mu       sync.Mutex
	procs    []*workerProc
	stopping bool
	restarts uint64
	// reloadFailed: the last reload failed (reloadDone); reloads and
	// failedReloads count the loads that put a configuration in force
	// (the start's included, as a single process counts it) and those
	// refused (see reloadDone); reloadedAt is when the last of the former
	// was made.
	reloadFailed  bool
	reloads       uint64
	failedReloads uint64
	reloadedAt    time.Time
}

// workerProc is one running (or dead) worker.
type workerProc struct {
	index    int
	cmd      *exec.Cmd
	started  time.Time
	exited   chan struct{} // closed when the process has been waited for
	exitCode int
	quick    int // deaths in a row within restartReset of the start, or before ready
	restarts int
	ready    bool
	// served: the worker answered ready once. One that never did failed
	// its start however long it took (a start that hangs is killed after
	// startTimeout, past restartReset), and counts as a quick death.
	served bool
	// reopen: a workerReopenSignal waits until the worker is ready (a
	// signal that reaches it before its handler is installed ends it).
	reopen bool
	misses int // probes in a row without an answer (watch only)
}

// workerExit reports a worker that exited.
type workerExit struct{ p *workerProc }

func newSupervisor(file string, args []string, cfg *conf.Config, log *slog.Logger, stdout, stderr io.Writer) (*supervisor, error) {
	if !workersSupported {
		return nil, errors.New("workers above 1 need Linux (SO_REUSEPORT); set workers: 1")
	}
	if err := portZero(file, cfg); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("workers: cannot find this program to start workers: %w", err)
	}
	// A supervisor killed (SIGKILL, a crash) left its folder, with the
	// ticket wrap key: it goes once provably no supervisor uses it.
	removeStaleWorkerDirs(log)
	dir, dirLock, err := makeWorkerDir()
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	if err := socketPathsFit(dir, workerCount(cfg)); err != nil {
		os.RemoveAll(dir)
		dirLock.Close()
		return nil, err
	}
	s := &supervisor{dirLock: dirLock, exe: exe, self: selfFile(), args: args, file: file, dir: dir, n: workerCount(cfg), cacheSize: cfg.Sessions.CacheSize, log: log, out: stdout, errw: stderr, startTimeout: workerStartTimeout}
	s.grace.Store(int64(cfg.ShutdownGrace))
	s.listening = listenerAddrs(cfg)
	s.reloadCtx, s.abandonReloads = context.WithCancel(context.Background())
	s.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			i, err := strconv.Atoi(strings.TrimPrefix(host, "worker"))
			if err != nil {
				return nil, fmt.Errorf("no worker %q", host)
			}
			var d net.Dialer
			return d.DialContext(ctx, "unix", workerSocket(s.dir, i))
		},
		MaxIdleConnsPerHost: 2,
		// Sooner than the worker's adminIdleTimeout: a request is
		// never sent on a connection the worker is closing (a reload
		// step, not idempotent, would fail).
		IdleConnTimeout: workerIdleConnTimeout,
	}}
	return s, nil
}

// maxSocketPath is the longest path a Unix socket is bound at: sun_path
// holds 108 bytes with the terminating NUL (unix(7)).
const maxSocketPath = 107

// socketPathsFit checks that the sockets in the supervisor's folder dir,
// in the temporary folder (TMPDIR), have paths a Unix socket can have:
// under a long TMPDIR the workers failed their start with only a bind
// error (invalid argument).
func socketPathsFit(dir string, n int) error {
	for _, p := range []string{workerSocket(dir, n-1), filepath.Join(dir, storeSocket)} {
		if len(p) > maxSocketPath {
			tmp := os.TempDir()
			return fmt.Errorf("workers: TMPDIR %q (%d characters) is too long for the workers' sockets: %s is %d bytes, over the %d a Unix socket path can have; set TMPDIR for gmproxy to a shorter folder (of at most about %d characters), such as /tmp", tmp, len(tmp), p, len(p), maxSocketPath, maxSocketPath-(len(p)-len(tmp)))
		}
	}
	return nil
}

// removeDir removes the supervisor's folder, then lets go of its lock.
func (s *supervisor) removeDir() {
	os.RemoveAll(s.dir)
	s.dirLock.Close()
}

// isStopSignal reports whether sig asks for the graceful shutdown.
func isStopSignal(sig os.Signal) bool {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, os.Interrupt, syscall.SIGQUIT:
		return true
	}
	return false
}

// startOrStop starts the workers (start) and reads sigs meanwhile. A stop
// signal (SIGTERM, SIGINT, SIGQUIT) or the end of sigs ends the wait for
// the workers' readiness at once, where it waited up to startTimeout (a
// slow start: many certificates, a remote key server) before a shutdown
// began: the workers are stopped as in a shutdown, with its exit status.
// Any other signal (a reload, a reopen) waits for the start, and comes
// first on the signals returned. ok is false when the supervisor stopped
// (or failed to start) with exit status code.
func (s *supervisor) startOrStop(sigs <-chan os.Signal) (exits chan workerExit, rest <-chan os.Signal, code int, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		stopSig os.Signal
		closed  bool
		held    []os.Signal
	)
	started, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-started:
				return
			case sig, open := <-sigs:
				switch {
				case !open:
					closed = true
				case isStopSignal(sig):
					stopSig = sig
				default:
					held = append(held, sig)
					continue
				}
				cancel()
				return
			}
		}
	}()
	exits, err := s.start(ctx)
	close(started)
	<-read
	if stopSig != nil || closed {
		if stopSig != nil {
			s.log.Info("signal received while the workers start: graceful shutdown of every worker", "signal", stopSig.String())
		}
		if closed {
			sigs = nil
		}
		code := s.stop(sigs)
		if err != nil && !errors.Is(err, context.Canceled) {
			// It failed before the stop cut it short.
			fmt.Fprintf(s.errw, "gmproxy run: %s\n", err)
			code = 1
		}
		return exits, nil, code, false
	}
	if err != nil {
		s.killAll()
		fmt.Fprintf(s.errw, "gmproxy run: %s\n", err)
		return exits, nil, 1, false
	}
	if len(held) == 0 {
		return exits, sigs, 0, true
	}
	out := make(chan os.Signal)
	go func() {
		defer close(out)
		for _, sig := range held {
			out <- sig
		}
		for sig := range sigs {
			out <- sig
		}
	}()
	return exits, out, 0, true
}

// start prepares the shared state (wrap key, session store) and starts
// every worker, waiting until each is ready or ctx is done.
func (s *supervisor) start(ctx context.Context) (exits chan workerExit, err error) {
	wrap := make([]byte, 32)
	rand.Read(wrap)
	if err := os.WriteFile(filepath.Join(s.dir, wrapKeyFile), wrap, 0o600); err != nil {
		return nil, err
	}
	data, err := conf.ReadConfigFile(s.file)
	if err != nil {
		return nil, err
	}
	if err := s.saveConfig(data); err != nil {
		return nil, err
	}
	if err := portsFree(s.listening); err != nil {
		return nil, err
	}
	// Sessions of every worker plus the ticket keys: in memory the
	// workers share, or served on a socket where there is none.
	entries := s.n*max(s.cacheSize, 1024) + 64
	if shmstore.Supported {
		f, err := shmstore.Create(entries)
		if err != nil {
			s.log.Warn("workers: no shared memory session store, the supervisor serves it on a socket", "error", err)
		}
		s.shm = f
	}
	if s.shm == nil {
		ln, err := net.Listen("unix", filepath.Join(s.dir, storeSocket))
		if err != nil {
			return nil, fmt.Errorf("workers: session store socket: %w", err)
		}
		go localstore.Serve(ln, sessionstore.NewBoundedMemory(entries))
		s.log.Info("workers: session store", "type", localstore.Type, "entries", entries)
	} else {
		s.log.Info("workers: session store", "type", shmstore.Type, "entries", entries, "bytes", shmstore.Size(entries), "huge_pages", shmstore.HugePages())
	}
	if clientshare.Supported {
		f, err := clientshare.Create(s.n)
		if err == nil {
			if s.clientsTable, err = clientshare.Map(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			s.log.Warn("workers: no shared per-client counts, each worker applies the per-client limits alone", "error", err)
		} else {
			s.clients = f
			s.log.Info("workers: per-client counts shared", "slots", clientshare.Slots, "bytes", clientshare.Size(s.n))
		}
	}
	if rateshare.Supported {
		f, err := rateshare.Create()
		if err == nil {
			var tab *rateshare.Table
			if tab, err = rateshare.Map(f); err != nil {
				f.Close()
			} else {
				s.ratesTable = tab
			}
		}
		if err != nil {
			s.log.Warn("workers: no shared rate_limit counts, each worker applies the routes' rate limits alone", "error", err)
		} else {
			s.rates = f
			s.log.Info("workers: rate_limit counts shared", "entries", rateshare.Counts, "bytes", rateshare.Size)
		}
	}
	exits = make(chan workerExit, s.n)
	s.procs = make([]*workerProc, s.n)
	for i := range s.n {
		p, err := s.spawn(i, exits)
		if err != nil {
			// The workers started so far, for killAll.
			s.mu.Lock()
			s.procs = s.procs[:i]
			s.mu.Unlock()
			return exits, err
		}
		s.procs[i] = p
	}
	for _, p := range s.procs {
		if err := s.waitReady(ctx, p); err != nil {
			return exits, fmt.Errorf("worker %d did not start: %w", p.index, err)
		}
	}
	s.mu.Lock()
	s.reloads = 1 // the configuration loaded at start, as a single process counts it
	s.reloadedAt = time.Now()
	s.mu.Unlock()
	return exits, nil
}

// workerEnv is the environment a worker inherits from the supervisor's
// environ, less what spawn sets for each worker. Under a memory limit
// (GOMEMLIMIT, which the Kubernetes manifests set from the container's
// limit) each of the n workers gets an nth of it: each worker's collector
// keeps only its own heap under its GOMEMLIMIT, so n workers passed the
// whole limit could together grow to n times what the container has.
// memLimit is the workers' part of the limit (workersMemLimit).
func workerEnv(environ []string, memLimit int64, n int) []string {
	limited := memLimit != math.MaxInt64 && n > 0
	env := make([]string, 0, len(environ)+8)
	for _, e := range environ {
		switch k, _, _ := strings.Cut(e, "="); k {
		case "GOMAXPROCS", envWorker, envWorkerDir, envWorkerShm, envWorkerClients, envWorkerRates, envWorkerConfig:
		case "GOMEMLIMIT":
			if !limited {
				env = append(env, e)
			}
		default:
			env = append(env, e)
		}
	}
	if limited {
		env = append(env, "GOMEMLIMIT="+strconv.FormatInt(memLimit/int64(n), 10))
	}
	return env
}

// workersMemLimit is the memory limit the workers' heaps share: the
// supervisor's (GOMEMLIMIT), less the shared memory files every worker
// maps (the session table, the per-client and rate_limit counts). Those are charged to
// the service's memory as a heap is, but no worker's collector counts
// them: split whole, the heaps could together grow to the limit with the
// tables on top. Tables that would leave less than half the limit (a
// limit far too small for the cache_size) take no more than half, so
// that a worker still gets a limit its collector can keep.
func (s *supervisor) workersMemLimit() int64 {
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 {
		return limit
	}
	var shared int64
	for _, f := range []*os.File{s.shm, s.clients, s.rates} {
		if f == nil {
			continue
		}
		if st, err := f.Stat(); err == nil {
			shared += st.Size()
		}
	}
	return max(limit-shared, limit/2)
}

// selfFile returns the file of the running program, or nil.
func selfFile() os.FileInfo {
	if workerProgram == "" {
		return nil
	}
	st, err := os.Stat(workerProgram)
	if err != nil {
		return nil
	}
	return st
}

// spawn starts worker i; its exit is reported on exits.
func (s *supervisor) spawn(i int, exits chan<- workerExit) (*workerProc, error) {
	prog := s.exe
	if s.self != nil {
		if st, err := os.Stat(s.exe); err != nil || !os.SameFile(st, s.self) {
			s.log.Warn("workers: the file at gmproxy's path is no longer the program running: worker started from the running program; restart gmproxy to run the new one", "worker", i, "path", s.exe)
			prog = workerProgram
		}
	}
	cmd := exec.Command(prog, append([]string{"run"}, s.args...)...)
	// ps shows a worker as the supervisor is shown: its argv[0], not
	// workerProgram (the worker takes its name from it too, nameWorker).
	cmd.Args[0] = os.Args[0]
	env := workerEnv(os.Environ(), s.workersMemLimit(), s.n)
	cmd.Env = append(env, envWorker+"="+strconv.Itoa(i), envWorkerDir+"="+s.dir, envWorkerConfig+"="+filepath.Join(s.dir, workerConfigFile), "GOMAXPROCS=1")
	// The key passwords the supervisor took from its environment
	// (key_password_env) when it read the configuration: the worker reads
	// the same configuration, and removes them from its environment too.
	cmd.Env = append(cmd.Env, conf.PasswordEnviron()...)
	// Inherited files: descriptor 3 is ExtraFiles[0].
	if s.shm != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.shm)
		cmd.Env = append(cmd.Env, envWorkerShm+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	}
	if s.clients != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.clients)
		cmd.Env = append(cmd.Env, envWorkerClients+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	}
	if s.rates != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.rates)
		cmd.Env = append(cmd.Env, envWorkerRates+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	}
	cmd.Stdout, cmd.Stderr = s.out, s.errw
	dieWithParent(cmd)
	os.Remove(workerSocket(s.dir, i))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &workerProc{index: i, cmd: cmd, started: time.Now(), exited: make(chan struct{})}
	s.log.Info("worker started", "worker", i, "pid", cmd.Process.Pid)
	go func() {
		cmd.Wait()
		p.exitCode = cmd.ProcessState.ExitCode()
		s.mu.Lock()
		p.ready = false // GET /workers and /readyz until its replacement runs
		s.mu.Unlock()
		close(p.exited)
		exits <- workerExit{p}
	}()
	return p, nil
}

// waitReady polls the worker's /readyz until it answers 200, the worker
// exits, s.startTimeout passes or ctx is done.
func (s *supervisor) waitReady(ctx context.Context, p *workerProc) error {
	deadline := time.Now().Add(s.startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("exited with status %d", p.exitCode)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := s.call(ctx, p.index, http.MethodGet, "/readyz", workerCallTimeout); err == nil {
			s.markReady(p)
			return nil
		}
	}
	return errors.New("not ready in time")
}

// workerIdleConnTimeout is how long the supervisor keeps an idle
// connection to a worker's admin socket.
const workerIdleConnTimeout = 30 * time.Second

// maxWorkerAnswer bounds the body of a worker's answer read by call: a
// metrics exposition of every site, upstream and listener stays far
// below it.
var maxWorkerAnswer = 64 << 20

// call makes one request to worker i's admin socket, within timeout and
// while ctx lasts, and returns the body of a 200 answer.
func (s *supervisor) call(ctx context.Context, i int, method, path string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://worker"+strconv.Itoa(i)+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxWorkerAnswer)+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxWorkerAnswer {
		// A cut answer (metrics text above all) would be taken for a
		// whole one: refused instead.
		return nil, fmt.Errorf("%s %s: answer longer than %d bytes", method, path, maxWorkerAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(body)))
	}
	return body, nil
}

// live returns the workers now running.
func (s *supervisor) live() []*workerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*workerProc
	for _, p := range s.procs {
		select {
		case <-p.exited:
		default:
			out = append(out, p)
		}
	}
	return out
}

// saveConfig writes data as the configuration workers read (at start,
// after a crash, at a reload): envWorkerConfig.
func (s *supervisor) saveConfig(data []byte) error {
	tmp := filepath.Join(s.dir, workerConfigFile+".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, workerConfigFile))
}

// reload checks the configuration file, then has every worker reload it,
// all or none: every worker prepares it (builds it and opens its new
// listeners, where what can fail fails), and only when all did do they
// commit it; otherwise every worker drops it and keeps the running one.
// It fails when the file is refused (no worker is asked) or when any
// worker refused it. The workers read the text checked here, and keep
// the one before when a worker refused it (a worker started again after
// a crash then runs what the others run).
func (s *supervisor) reload() (_ *conf.Config, err error) {
	defer func() { s.reloadDone(err) }()
	data, err := conf.ReadConfigFile(s.file)
	if err != nil {
		return nil, err
	}
	cfg, err := conf.Parse(s.file, data)
	if err != nil {
		return nil, err
	}
	prev, err := os.ReadFile(filepath.Join(s.dir, workerConfigFile))
	if err != nil {
		return nil, err
	}
	if err := portZero(s.file, cfg); err != nil {
		return nil, err
	}
	if err := portsFree(newPorts(s.listening, listenerAddrs(cfg))); err != nil {
		return nil, err
	}
	// A worker started again after a crash reads the copy while it
	// starts: it must have read the running one before the copy changes,
	// else a refused reload would leave it alone on the new one.
	for _, p := range s.live() {
		s.mu.Lock()
		ready := p.ready
		s.mu.Unlock()
		if !ready {
			if err := s.waitReady(s.reloadCtx, p); err != nil {
				return nil, fmt.Errorf("worker %d is starting and not ready: %w", p.index, err)
			}
		}
	}
	if err := s.saveConfig(data); err != nil {
		return nil, err
	}
	if s.adminFlag != "" {
		cfg.Admin.Address = s.adminFlag
	}
	if n := workerCount(cfg); n != s.n {
		s.log.Warn("workers changed: restart gmproxy to apply it", "running", s.n, "configured", n)
	}
	workers := s.live()
	if errs := s.step(workers, "/reload/prepare"); len(errs) > 0 {
		s.step(workers, "/reload/abort")
		var refused []error
		for _, e := range errs {
			refused = append(refused, e)
		}
		if err := s.saveConfig(prev); err != nil {
			refused = append(refused, err)
		}
		return cfg, errors.Join(refused...)
	}
	// Every worker prepared it; a commit fails only in a worker that
	// is stopping or died meanwhile. One that died does not fail the
	// reload: its replacement starts on the text saved above, so the
	// workers still all run it. One that refused it keeps the previous
	// configuration while the others switched: it is stopped
	// gracefully, so that its replacement runs the new one too.
	var refused []error
	errs := s.step(workers, "/reload/commit")
	if len(errs) > 0 && s.reloadCtx.Err() != nil {
		// Cut by a shutdown: the workers are about to stop.
		return cfg, errReloadAbandoned
	}
	for _, e := range errs {
		if s.diedDuring(e.p) {
			s.log.Warn("worker died during the reload; it is started again on the new configuration", "worker", e.p.index)
			continue
		}
		s.log.Error("worker refused to commit a reload the others made: stopping it gracefully, its replacement runs the new configuration", "worker", e.p.index, "err", e.err)
		e.p.cmd.Process.Signal(syscall.SIGTERM)
		refused = append(refused, e)
	}
	s.grace.Store(int64(cfg.ShutdownGrace))
	s.listening = listenerAddrs(cfg)
	if len(refused) > 0 {
		return cfg, &splitReloadError{errors.Join(refused...)}
	}
	return cfg, nil
}

// portZero refuses a listener of cfg on port 0, which gives each worker's
// socket a port of its own (conf refuses it under a workers setting; an
// unset one is decided by gmproxy run), at start and at a reload.
func portZero(file string, cfg *conf.Config) error {
	for i, a := range listenerAddrs(cfg) {
		if _, port, err := net.SplitHostPort(a); err == nil && port == "0" {
			return fmt.Errorf("%s: listeners[%d].address %s: port 0 under workers (unset: one per CPU) gives each worker a port of its own; give the port, or set workers: 1", file, i, a)
		}
	}
	return nil
}

// listenerAddrs returns the addresses of cfg's listeners.
func listenerAddrs(cfg *conf.Config) []string {
	addrs := make([]string, 0, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		addrs = append(addrs, l.Address)
	}
	return addrs
}

// newPorts returns the addresses of next that no address of running
// holds: those the workers do not hold yet. An address is held by a
// running one on its port with the same IP, or when either is a wildcard
// (a port a running listener holds may move between a wildcard and one
// of its IPs: the workers' sockets share it, and a bind without
// SO_REUSEPORT would fail on their own socket). Another IP on a held port
// is new: the workers would bind it with SO_REUSEPORT, which the kernel
// grants beside another program of the same user that holds it so (a
// second gmproxy on its own IP and the same port), taking a share of its
// connections, where the start's check refuses that address.
func newPorts(running, next []string) []string {
	var held []*net.TCPAddr
	for _, a := range running {
		if ta, err := net.ResolveTCPAddr("tcp", a); err == nil {
			held = append(held, ta)
		}
	}
	var out []string
	for _, a := range next {
		ta, err := net.ResolveTCPAddr("tcp", a)
		if err != nil || !heldBy(ta, held) {
			out = append(out, a)
		}
	}
	return out
}

// heldBy reports whether a listener of held has a's port on a's IP or on
// a wildcard, or a is a wildcard on a port of held.
func heldBy(a *net.TCPAddr, held []*net.TCPAddr) bool {
	wild := func(t *net.TCPAddr) bool { return t.IP == nil || t.IP.IsUnspecified() }
	for _, h := range held {
		if h.Port == a.Port && (wild(h) || wild(a) || h.IP.Equal(a.IP)) {
			return true
		}
	}
	return false
}

// portsFree checks that no other process listens on addrs, by listening
// on each for a moment without SO_REUSEPORT. The workers listen with
// SO_REUSEPORT, which the kernel grants as well to any other process of
// the same user that sets it: a second gmproxy started on the ports of a
// running one (another configuration, a test run) would start, and take
// a share of its connections, where a single process fails with "address
// already in use". A bind without it fails on a port so held.
func portsFree(addrs []string) error {
	for _, a := range addrs {
		ln, err := daemon.ListenTCP(a)
		if err != nil {
			return fmt.Errorf("listen %s: %w", a, err)
		}
		ln.Close()
	}
	return nil
}

// reloadDone records the outcome of a reload for the merged /metrics
// (gmproxy_config_last_reload_successful, gmproxy_config_reloads_total,
// gmproxy_config_last_reload_success_timestamp_seconds). The supervisor
// counts reloads, once each, and dates the last success, as a single
// process does: the workers' own counts and times are not merged, since
// every worker counts each reload, its start (a worker started again after
// a crash would count one more success, and date it) and only the refusals
// it saw itself (not a file the supervisor refused before asking it, nor
// one another worker refused). A reload made in part put the new
// configuration in force, in every worker once those that refused it are
// replaced: it is not a failure.
func (s *supervisor) reloadDone(err error) {
	var split *splitReloadError
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloadFailed = err != nil && !errors.As(err, &split)
	if s.reloadFailed {
		s.failedReloads++
	} else {
		s.reloads++
		s.reloadedAt = time.Now()
	}
}

// splitReloadError is a reload that some workers committed and others
// refused: the configuration is the new one, and the workers that
// refused are being replaced.
type splitReloadError struct{ err error }

func (e *splitReloadError) Error() string {
	return "reload made in part: the workers that refused to commit it are replaced: " + e.err.Error()
}
func (e *splitReloadError) Unwrap() error { return e.err }

// stepError is one worker's refusal of a reload step.
type stepError struct {
	p   *workerProc
	err error
}

func (e stepError) Error() string { return fmt.Sprintf("worker %d: %s", e.p.index, e.err) }
func (e stepError) Unwrap() error { return e.err }

// step makes the same reload step (POST path) in every one of workers at
// once and returns their refusals.
func (s *supervisor) step(workers []*workerProc, path string) []stepError {
	var errs []stepError
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.call(s.reloadCtx, p.index, http.MethodPost, path, workerReloadTimeout); err != nil {
				mu.Lock()
				errs = append(errs, stepError{p, err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// workerExitWait is how long after a failed call the supervisor waits
// for the worker's exit to be seen: its admin socket closes with the
// process, a moment before the process is waited for.
const workerExitWait = 2 * time.Second

// diedDuring reports whether worker p has exited (or exits within
// workerExitWait), so that its failed reload step is its death's, not a
// refusal.
func (s *supervisor) diedDuring(p *workerProc) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(workerExitWait):
		return false
	}
}

// signalAll sends sig to every live worker.
// markReady records that p answers, and gives it the workerReopenSignal
// that waited for that.
func (s *supervisor) markReady(p *workerProc) {
	s.mu.Lock()
	p.ready, p.served = true, true
	reopen := p.reopen
	p.reopen = false
	s.mu.Unlock()
	if reopen {
		p.cmd.Process.Signal(workerReopenSignal)
	}
}

// reopenLogs passes reopenSignal on to the ready workers, as
// workerReopenSignal (a worker ignores a SIGUSR1 of its own: sent to the
// whole group, it would reopen twice); a worker still starting gets it
// once ready (it may have opened its log before the rotation that asked
// for this).
func (s *supervisor) reopenLogs() {
	for _, p := range s.live() {
		s.mu.Lock()
		ready := p.ready
		p.reopen = !ready
		s.mu.Unlock()
		if ready {
			p.cmd.Process.Signal(workerReopenSignal)
		}
	}
}

func (s *supervisor) signalAll(sig os.Signal) {
	for _, p := range s.live() {
		p.cmd.Process.Signal(sig)
	}
}

// metrics scrapes every live worker and writes the merged exposition plus
// the supervisor's own series.
func (s *supervisor) metrics(w http.ResponseWriter, _ *http.Request) {
	s.scrapes.Lock()
	procs := s.live()
	all := make([]map[string]*dto.MetricFamily, len(procs))
	var wg sync.WaitGroup
	for k, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := s.call(context.Background(), p.index, http.MethodGet, "/metrics", workerCallTimeout)
			if err == nil {
				all[k], err = parseMetrics(strings.NewReader(string(body)))
			}
			if err != nil {
				s.log.Warn("worker metrics not read", "worker", p.index, "err", err)
			}
		}()
	}
	wg.Wait()
	all = s.counted.update(procs, all)
	for _, fams := range all {
		// Counted and dated by the supervisor: see reloadDone.
		delete(fams, "gmproxy_config_reloads_total")
		delete(fams, "gmproxy_config_last_reload_success_timestamp_seconds")
	}
	s.scrapes.Unlock() // not held while a slow client reads the answer
	s.mu.Lock()
	restarts, reloads, failed, lastOK := s.restarts, s.reloads, s.failedReloads, 1.0
	reloadedAt := float64(s.reloadedAt.UnixNano()) / 1e9
	if s.reloadFailed {
		lastOK = 0
	}
	s.mu.Unlock()
	own := map[string]*dto.MetricFamily{
		// Merged with the workers' own (a minimum, a sum): see reloadDone.
		"gmproxy_config_last_reload_successful": {Name: proto.String("gmproxy_config_last_reload_successful"), Help: proto.String("1 when the last configuration reload succeeded, else 0."),
			Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(lastOK)}}}},
		"gmproxy_config_reloads_total": {Name: proto.String("gmproxy_config_reloads_total"), Help: proto.String("Configuration reloads, by result success or failure."),
			Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{{Label: []*dto.LabelPair{{Name: proto.String("result"), Value: proto.String("failure")}},
				Counter: &dto.Counter{Value: proto.Float64(float64(failed))}},
				{Label: []*dto.LabelPair{{Name: proto.String("result"), Value: proto.String("success")}},
					Counter: &dto.Counter{Value: proto.Float64(float64(reloads))}}}},
		"gmproxy_config_last_reload_success_timestamp_seconds": {Name: proto.String("gmproxy_config_last_reload_success_timestamp_seconds"), Help: proto.String("Unix time of the last successful configuration load."),
			Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(reloadedAt)}}}},
		"gmproxy_workers": {Name: proto.String("gmproxy_workers"), Help: proto.String("Worker processes running."),
			Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(float64(len(procs)))}}}},
		"gmproxy_worker_restarts_total": {Name: proto.String("gmproxy_worker_restarts_total"), Help: proto.String("Workers restarted after they died."),
			Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(float64(restarts))}}}},
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	writeFamilies(w, mergeFamilies(append(all, own)))
}

// workerStatus is one entry of GET /workers.
type workerStatus struct {
	Index    int  `json:"index"`
	PID      int  `json:"pid"`
	Ready    bool `json:"ready"`
	Restarts int  `json:"restarts"`
}

func (s *supervisor) status(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	var out []workerStatus
	for _, p := range s.procs {
		out = append(out, workerStatus{Index: p.index, PID: p.cmd.Process.Pid, Ready: p.ready, Restarts: p.restarts})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// workerMetrics serves one worker's own exposition (GET /workers/{i}/metrics).
func (s *supervisor) workerMetrics(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 || i >= s.n {
		http.NotFound(w, r)
		return
	}
	body, err := s.call(context.Background(), i, http.MethodGet, "/metrics", workerCallTimeout)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(body)
}

// adminMux is the supervisor's admin listener: merged /metrics, the
// workers' own metrics, /healthz, /readyz (ready while every worker is),
// GET /workers, POST /reload when reload is set, and pprof while s.admin
// says so.
func (s *supervisor) adminMux(cfg *conf.Config, reload func(context.Context) error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /workers", s.status)
	mux.HandleFunc("GET /workers/{i}/metrics", s.workerMetrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ready := !s.stopping
		for _, p := range s.procs {
			ready = ready && p.ready
		}
		s.mu.Unlock()
		if !ready {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	if reload != nil {
		mux.Handle("POST /reload", controlHandler(&s.admin, cfg.Admin.Address, reload))
	}
	// The supervisor's own, and each worker's (which serves the
	// requests) under /workers/N/.
	s.admin.mountPprof(mux)
	mux.Handle("GET /workers/{i}/debug/pprof/{what...}", s.admin.whilePprof(http.HandlerFunc(s.workerPprof)))
	return mux
}

// workerPprof answers GET /workers/N/debug/pprof/...: worker N's
// /debug/pprof/... with the same query, within the seconds a profile or
// trace asks for (30 by default, as net/http/pprof) and 30 more.
func (s *supervisor) workerPprof(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 || i >= s.n {
		http.NotFound(w, r)
		return
	}
	// Read as the laxest of pprof's parsers (the trace's float), and at
	// least pprof's default: it profiles 30 s for seconds it does not
	// take as a positive integer (0, 0.5), which a budget of those
	// seconds would cut at their end.
	sec := 30
	if v := r.URL.Query().Get("seconds"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= maxProfileSeconds) {
			http.Error(w, "seconds: want 0 to "+strconv.Itoa(maxProfileSeconds), http.StatusBadRequest)
			return
		}
		sec = max(sec, int(math.Ceil(f)))
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(sec+30)*time.Second)
	defer cancel()
	// Answered within the seconds too (writeBounded gave adminWriteTimeout).
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(adminWriteTimeout + time.Duration(sec)*time.Second))
	u := "http://worker" + strconv.Itoa(i) + "/debug/pprof/" + r.PathValue("what")
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, k := range []string{"Content-Type", "Content-Disposition", "X-Content-Type-Options"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, 256<<20))
}

// died handles a worker's exit: during shutdown it is expected; otherwise
// the worker is restarted after a back-off (restart is called on the main
// loop when it is due). It returns false when the supervisor gives up.
func (s *supervisor) died(p *workerProc, restart func(i int, after time.Duration)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p.index] != p {
		return true
	}
	// What it held in the shared tables goes with it, also while the
	// others drain at a stop or after giving up: its connections closed
	// with it (other workers must not refuse a client for them while a
	// restart waits, up to restartMax), and a rate_limit bucket it held
	// locked (killed in the middle of a request's count) would stay Busy
	// for every worker.
	if s.clientsTable != nil {
		s.clientsTable.ClearWorker(p.index)
	}
	if s.ratesTable != nil {
		s.ratesTable.ClearWorker(p.index)
	}
	if s.stopping {
		return true
	}
	quick := 0
	if time.Since(p.started) < restartReset || !p.served {
		quick = p.quick + 1
	}
	if quick >= maxQuickDeaths && !s.othersServe(p) {
		s.log.Error("worker keeps dying: giving up", "worker", p.index, "deaths", quick)
		return false
	}
	// While another worker serves, one that keeps dying (a crash that
	// comes back, a certificate file changed on disk and broken, which
	// only a worker started again reads) is retried every restartMax:
	// stopping the workers that serve would turn one worker's fault into
	// an outage, which the service manager's restart would not mend
	// while the files stay broken. /readyz says 503 meanwhile.
	// The doubling stops at maxQuickDeaths: quick grows for ever while
	// others serve, and a longer shift overflows to 0 or less.
	delay := min(restartMin<<min(max(quick-1, 0), maxQuickDeaths), restartMax)
	s.log.Error("worker died: restarting it", "worker", p.index, "pid", p.cmd.Process.Pid, "status", p.exitCode, "after", delay)
	p.quick = quick
	restart(p.index, delay)
	return true
}

// othersServe reports whether a worker other than p is ready (s.mu held).
func (s *supervisor) othersServe(p *workerProc) bool {
	for _, o := range s.procs {
		if o != nil && o != p && o.ready {
			return true
		}
	}
	return false
}

// runSupervisor is gmproxy run with workers > 1.
func runSupervisor(file, adminFlag string, args []string, cfg *conf.Config, log *slog.Logger, lv *slog.LevelVar, levelFlag, formatFlag string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	s, err := newSupervisor(file, args, cfg, log, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
		return 1
	}
	defer s.removeDir()
	s.adminFlag = adminFlag
	exits, sigs, code, ok := s.startOrStop(sigs)
	if !ok {
		return code
	}
	log.Info("workers running", "workers", s.n)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go s.watch(stopWatch)

	running := started(cfg)
	s.admin.set(cfg.Admin)
	reloadReq, adminReload := adminReloadRequests()
	servers, reloads, err := s.listenAdmin(cfg, adminReload)
	defer func() {
		for _, srv := range servers {
			srv.Close()
		}
	}()
	if err != nil {
		s.stop(sigs)
		fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
		return 1
	}
	reload := func() error {
		next, err := s.reload()
		var split *splitReloadError
		if next != nil && (err == nil || errors.As(err, &split)) {
			applyReloaded(log, lv, levelFlag, formatFlag, running, next)
			s.admin.set(next.Admin)
			s.retainSeries(configNames(cfg), configNames(next))
			cfg = next
		}
		return err
	}
	if reloads {
		sigs = mergeReloads(sigs, reloadReq, reload)
	}
	return s.supervise(exits, sigs, reload)
}

// watch probes the running workers' admin sockets until stop is closed
// or the supervisor stops, and kills a worker that no longer answers
// (workerProbeMisses); its exit then goes the way of a crash (died).
func (s *supervisor) watch(stop <-chan struct{}) {
	tick := time.NewTicker(workerProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for _, p := range s.live() {
			s.mu.Lock()
			ready, stopping := p.ready, s.stopping
			s.mu.Unlock()
			if stopping {
				return
			}
			if !ready {
				continue // starting: waitReady bounds that
			}
			if s.answers(p.index, workerProbeTimeout) {
				p.misses = 0
				continue
			}
			if p.misses++; p.misses >= workerProbeMisses {
				s.log.Error("worker not answering: killing it", "worker", p.index, "pid", p.cmd.Process.Pid,
					"probes", p.misses, "timeout", workerProbeTimeout)
				p.cmd.Process.Kill()
			}
		}
	}
}

// answers reports whether worker i's admin socket answers GET /readyz,
// with any status, within timeout.
func (s *supervisor) answers(i int, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker"+strconv.Itoa(i)+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return true
}

// killAll kills every worker started so far and waits for them: the
// workers did not all start, so there is nothing to drain.
func (s *supervisor) killAll() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.signalAll(syscall.SIGKILL)
	for _, p := range s.procs {
		if p != nil {
			<-p.exited
		}
	}
}

// listenAdmin starts the supervisor's admin listener (admin.address) and
// control listener (admin.control_address), whichever are configured.
// adminReload serves POST /reload on the control listener, or on the admin
// listener when there is no control listener. It returns the servers
// started, also on error, and whether reloads are served.
func (s *supervisor) listenAdmin(cfg *conf.Config, adminReload func(context.Context) error) (servers []*http.Server, reloads bool, err error) {
	if a := cfg.Admin.Address; a != "" && a != "off" {
		var onAdmin func(context.Context) error
		if cfg.Admin.ControlAddress == "" {
			onAdmin = adminReload
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return servers, reloads, fmt.Errorf("admin listener: %w", err)
		}
		srv := adminServer(s.adminMux(cfg, onAdmin))
		serveAdmin(srv, ln)
		servers = append(servers, srv)
		s.log.Info("admin listening", "address", ln.Addr().String(), "workers", s.n)
		reloads = onAdmin != nil
	}
	if ca := cfg.ControlAddress(); ca != "" {
		ln, err := listenControl(ca)
		if err != nil {
			return servers, reloads, fmt.Errorf("control listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /reload", controlHandler(&s.admin, ca, adminReload))
		srv := adminServer(mux)
		serveAdmin(srv, ln)
		servers = append(servers, srv)
		s.log.Info("control listening", "address", ln.Addr().String(), "reload", "POST /reload")
		reloads = true
	}
	return servers, reloads, nil
}

// supervise is the supervisor's main loop: it restarts workers that die,
// and reloads, reopens logs or shuts down on signals. It returns the exit
// status.
func (s *supervisor) supervise(exits chan workerExit, sigs <-chan os.Signal, reload func() error) int {
	restartDue := make(chan int)
	restart := func(i int, after time.Duration) {
		time.AfterFunc(after, func() { restartDue <- i })
	}
	for {
		select {
		case e := <-exits:
			if !s.died(e.p, restart) {
				s.stop(sigs)
				return 1
			}
		case i := <-restartDue:
			s.restartWorker(i, exits, restart)
		case sig, ok := <-sigs:
			if !ok {
				return s.stop(nil)
			}
			if code, stop := s.onSignal(sig, sigs, reload, exits, restart); stop {
				return code
			}
		}
	}
}

// restartWorker starts worker i again in place of the one that died,
// unless the supervisor is stopping; when it cannot, it tries again after
// restartMax.
func (s *supervisor) restartWorker(i int, exits chan<- workerExit, restart func(i int, after time.Duration)) {
	s.mu.Lock()
	stopping, old := s.stopping, s.procs[i]
	s.mu.Unlock()
	if stopping {
		return
	}
	// The dead worker's per-client counts were cleared when its death was
	// seen (died).
	p, err := s.spawn(i, exits)
	if err != nil {
		s.log.Error("worker not restarted", "worker", i, "err", err)
		restart(i, restartMax)
		return
	}
	s.mu.Lock()
	p.quick, p.restarts = old.quick, old.restarts+1
	s.procs[i] = p
	s.restarts++
	s.mu.Unlock()
	// A worker that does not get ready (hung in its start) is killed:
	// its exit then goes the way of a crash (died). The watchdog leaves
	// starting workers alone.
	go func() {
		if err := s.waitReady(context.Background(), p); err != nil {
			select {
			case <-p.exited:
			default:
				s.log.Error("worker started again but not ready: killing it", "worker", i, "pid", p.cmd.Process.Pid, "err", err)
				p.cmd.Process.Kill()
			}
		}
	}()
}

// onSignal acts on a signal or an admin reload request. It reports whether
// the supervisor stops, and then the exit status.
func (s *supervisor) onSignal(sig os.Signal, sigs <-chan os.Signal, reload func() error, exits <-chan workerExit, restart func(i int, after time.Duration)) (code int, stop bool) {
	if isReloadRequest(sig) {
		return s.reloading([]os.Signal{sig}, sigs, reload, exits, restart)
	}
	switch sig {
	case reopenSignal:
		s.reopenLogs()
	default:
		if isStopSignal(sig) {
			s.log.Info("signal received: graceful shutdown of every worker", "signal", sig.String())
			return s.stop(sigs), true
		}
	}
	return 0, false
}

// isReloadRequest reports whether sig asks for a reload: SIGHUP or an
// admin reload.
func isReloadRequest(sig os.Signal) bool {
	_, admin := sig.(reloadSignal)
	return admin || sig == syscall.SIGHUP
}

// errReloadAbandoned answers a reload cut short by a shutdown.
var errReloadAbandoned = errors.New("reload abandoned: gmproxy is shutting down")

// reloading makes the reload asked by the requests in asked (SIGHUP, admin
// reloads) while it goes on answering signals. A reload asked meanwhile is
// made once more after it, for every request that came; SIGUSR1 is
// forwarded. SIGTERM, SIGINT or SIGQUIT (or sigs closing) abandons the reload: the
// calls to the workers are cut at once, rather than when a worker hung in
// a reload step answers (workerReloadTimeout), and the supervisor stops.
//
// A worker that dies meanwhile is seen at once (its clients no longer
// count against the per-client limits of the others, its death is logged)
// although its restart waits for the reload's end: started now, it would
// read the configuration the reload is replacing. When it was the death
// after which the supervisor gives up, the reload is abandoned as for
// SIGTERM (rather than waited for: up to workerReloadTimeout when another
// worker hangs in it) and the supervisor stops with status 1.
func (s *supervisor) reloading(asked []os.Signal, sigs <-chan os.Signal, reload func() error, exits <-chan workerExit, restart func(i int, after time.Duration)) (code int, stop bool) {
	giveUp := false
	for len(asked) > 0 && !giveUp {
		if asked = wantedReloads(asked); len(asked) == 0 {
			break
		}
		for _, sig := range asked {
			if rs, ok := sig.(reloadSignal); ok {
				s.log.Info(rs.describe() + " in every worker")
			} else {
				s.log.Info("SIGHUP: reloading configuration in every worker")
			}
		}
		done := make(chan error, 1)
		go func() { done <- reload() }()
		var next []os.Signal
		var err error
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case e := <-exits:
				if !s.died(e.p, restart) {
					giveUp = true
					s.log.Warn("giving up during a reload: the reload is abandoned; graceful shutdown of every worker")
					s.abandonReloads()
					<-done
					err = errReloadAbandoned
					break wait
				}
			case sig, ok := <-sigs:
				switch {
				case ok && isReloadRequest(sig):
					next = append(next, sig)
				case ok && sig == reopenSignal:
					s.reopenLogs()
				case !ok || sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == os.Interrupt || sig == syscall.SIGQUIT:
					s.log.Warn("shutdown requested during a reload: the reload is abandoned; graceful shutdown of every worker", "signal", fmt.Sprint(sig))
					s.abandonReloads()
					<-done
					answerReloads(s.log, asked, errReloadAbandoned)
					answerReloads(s.log, next, errReloadAbandoned)
					if !ok {
						sigs = nil
					}
					return s.stop(sigs), true
				}
			}
		}
		answerReloads(s.log, asked, err)
		asked = next
	}
	if giveUp {
		answerReloads(s.log, asked, errReloadAbandoned)
		s.stop(sigs)
		return 1, true
	}
	return 0, false
}

// wantedReloads returns the requests of asked still wanted: every SIGHUP,
// and the admin requests whose client has not left (reloadSignal.wanted);
// the others are answered without a reload.
func wantedReloads(asked []os.Signal) []os.Signal {
	var keep []os.Signal
	for _, sig := range asked {
		if rs, ok := sig.(reloadSignal); ok && !rs.wanted() {
			rs.answer(errNobodyWaits)
			continue
		}
		keep = append(keep, sig)
	}
	return keep
}

// answerReloads gives the outcome of a reload to the requests that asked
// for it, and logs it once: an admin request gets err, and its outcome is
// in the log as a SIGHUP's is (a single process logs every reload), for
// whoever reads the log after a deployment whose client only saw the
// answer.
func answerReloads(log *slog.Logger, asked []os.Signal, err error) {
	if len(asked) == 0 {
		return
	}
	logReload(log, err)
	for _, sig := range asked {
		if rs, ok := sig.(reloadSignal); ok {
			rs.answer(err)
		}
	}
}

// logReload logs the outcome of a reload made in every worker: a
// configuration refused one problem a record with its file:line:column,
// as gmproxy check and a single process print them.
func logReload(log *slog.Logger, err error) {
	var probs conf.Problems
	switch {
	case err == nil:
		log.Info("reload succeeded in every worker")
	case errors.As(err, &probs):
		log.Error("reload refused: configuration invalid, keeping the running one",
			"errors", probs.Count(conf.SeverityError), "warnings", probs.Count(conf.SeverityWarning))
		for _, p := range probs {
			log.Error("configuration", "problem", p.String())
		}
	default:
		log.Error("reload failed", "err", err)
	}
}

// stop forwards SIGTERM to every worker and waits for all of them; a
// further SIGTERM or SIGINT meanwhile is forwarded too (the workers then
// close every connection at once). It returns 0 when every worker running
// at the stop exited with status 0 (drained in time), else 1: today's exit
// codes. A worker that had died before the stop (its restart still in its
// back-off) had nothing to drain: it is logged, not counted.
func (s *supervisor) stop(sigs <-chan os.Signal) int {
	s.mu.Lock()
	s.stopping = true
	var procs []*workerProc
	// starting are the workers not ready yet: one the SIGTERM ends before
	// it installs its handler (a stop while the workers start) stopped as
	// asked, not in a failure.
	starting := map[*workerProc]bool{}
	for _, p := range s.procs {
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
			s.log.Warn("worker not running at shutdown: it had died, its restart was pending", "worker", p.index, "pid", p.cmd.Process.Pid, "status", p.exitCode)
		default:
			procs = append(procs, p)
			starting[p] = !p.ready
		}
	}
	s.mu.Unlock()
	s.signalAll(syscall.SIGTERM)
	// A worker that has not exited workerKillMargin after its grace period
	// is hung (its own shutdown ends by then): it is killed, so that
	// shutdown ends, with status 1.
	kill := time.AfterFunc(time.Duration(s.grace.Load())+workerKillMargin, func() {
		for _, p := range procs {
			select {
			case <-p.exited:
			default:
				s.log.Error("worker still running after the shutdown grace period: killing it", "worker", p.index, "pid", p.cmd.Process.Pid)
				p.cmd.Process.Kill()
			}
		}
	})
	defer kill.Stop()
	err := drain(func() error {
		var errs []error
		for _, p := range procs {
			<-p.exited
			if p.exitCode != 0 && !(starting[p] && endedBy(p, syscall.SIGTERM)) {
				errs = append(errs, fmt.Errorf("worker %d exited with status %d", p.index, p.exitCode))
			}
		}
		return errors.Join(errs...)
	}, func(sig os.Signal) {
		s.log.Warn("second signal during graceful shutdown: workers close every connection now", "signal", sig.String())
		s.signalAll(forceSignal)
	}, s.reopenLogs, sigs)
	if err != nil {
		s.log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// endedBy reports whether worker p, exited, was ended by signal sig.
func endedBy(p *workerProc, sig syscall.Signal) bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
