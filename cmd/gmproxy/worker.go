package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/rateshare"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/localstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/shmstore"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// The worker mode (conf workers > 1): gmproxy run starts as a supervisor
// (supervisor.go) that re-executes the same binary once per worker with
// these variables set. A worker is an ordinary gmproxy run with a few
// settings replaced (worker.adjust).
const (
	// envWorker marks a worker process and carries its index.
	envWorker = "GMPROXY_WORKER"
	// envWorkerDir is the supervisor's private folder (mode 0700): the
	// workers' admin sockets, the session store socket, the wrap key.
	envWorkerDir = "GMPROXY_WORKER_DIR"
	// envWorkerShm is the file descriptor of the shared memory session
	// store, when the supervisor made one.
	envWorkerShm = "GMPROXY_WORKER_SHM"
	// envWorkerClients is the file descriptor of the per-client counts
	// the workers share (package clientshare), when the supervisor made
	// them.
	envWorkerClients = "GMPROXY_WORKER_CLIENTS"
	// envWorkerRates is the file descriptor of the routes' rate_limit
	// counts the workers share (package rateshare), when the supervisor
	// made them.
	envWorkerRates = "GMPROXY_WORKER_RATES"
	// envWorkerConfig is the supervisor's copy of the configuration it
	// last accepted (at start, or a reload every worker applied): a
	// worker reads it, parsed as the configuration file (whose folder
	// relative paths start from), so that one started again after a crash
	// runs what the others run, not a file a reload refused since.
	envWorkerConfig = "GMPROXY_WORKER_CONFIG"
	// workerConfigFile is that copy's name in the supervisor's folder.
	workerConfigFile = "config.yaml"
)

// readConfigFile loads the configuration file at path; a worker reads the
// supervisor's copy of it (envWorkerConfig) instead.
func readConfigFile(path string) (*conf.Config, error) {
	if snap := os.Getenv(envWorkerConfig); snap != "" && os.Getenv(envWorker) != "" {
		data, err := os.ReadFile(snap)
		if err != nil {
			return nil, err
		}
		return conf.Parse(path, data)
	}
	return loadConfigFile(path)
}

// unsetWorkersIsOne makes an unset workers setting one process: on
// platforms without the worker mode, and in this command's own tests,
// whose in-process runs cannot start the test binary as a worker (see
// TestMain).
var unsetWorkersIsOne = !workersSupported

// workerCount is the number of processes cfg asks gmproxy run to serve
// with: cfg.WorkerCount(), except that an unset workers is 1 where
// unsetWorkersIsOne.
func workerCount(cfg *conf.Config) int {
	if cfg.Workers == "" && unsetWorkersIsOne {
		return 1
	}
	return cfg.WorkerCount()
}

// Files in the supervisor's folder.
const (
	storeSocket = "store.sock"
	wrapKeyFile = "wrap.key"
)

func workerSocket(dir string, i int) string {
	return filepath.Join(dir, "worker-"+strconv.Itoa(i)+".sock")
}

// worker is this process's place in the worker mode.
type worker struct {
	index int
	dir   string
	wrap  []ticket.Key // the key that seals the shared ticket keys
	shm   string       // the shared memory store's descriptor, or ""
	// clients is this worker's view of the shared per-client counts, or
	// nil.
	clients *clientshare.View
	// rates is this worker's view of the shared rate_limit counts, or nil.
	rates *rateshare.View
}

// workerFromEnv returns the worker this process is, or nil when it is not
// one.
func workerFromEnv() (*worker, error) {
	v, ok := os.LookupEnv(envWorker)
	if !ok {
		return nil, nil
	}
	nameWorker()
	i, err := strconv.Atoi(v)
	dir := os.Getenv(envWorkerDir)
	if err != nil || i < 0 || dir == "" {
		return nil, fmt.Errorf("%s=%q and %s=%q do not name a worker", envWorker, v, envWorkerDir, dir)
	}
	w := &worker{index: i, dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, wrapKeyFile))
	if err != nil {
		return nil, err
	}
	if w.wrap, err = ticket.ParseKeyFile(b, time.Now()); err != nil {
		return nil, err
	}
	if fd := os.Getenv(envWorkerShm); fd != "" {
		// Mapped now, so that a worker that cannot map it does not start.
		if _, err := shmstore.OpenFD(fd); err != nil {
			return nil, err
		}
		w.shm = fd
	}
	if fd := os.Getenv(envWorkerClients); fd != "" {
		t, err := clientshare.OpenFD(fd)
		if err != nil {
			return nil, err
		}
		if w.clients, err = t.Worker(i); err != nil {
			return nil, err
		}
	}
	if fd := os.Getenv(envWorkerRates); fd != "" {
		t, err := rateshare.OpenFD(fd)
		if err != nil {
			return nil, err
		}
		if w.rates, err = t.Worker(i); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// adjust replaces what a worker does differently from a single process in
// a configuration just loaded (at start and on every reload):
//   - its admin listener is a Unix socket in the supervisor's folder, with
//     the steps of the supervisor's reloads (POST /reload/prepare, commit,
//     abort) and no reload of its own (the supervisor serves the
//     configured admin and control addresses);
//   - without sessions.store, the workers share a session store: memory
//     they all map (shmstore, on Linux) or the supervisor's socket store
//     (localstore): session IDs made on one worker resume on another;
//   - without ticket_key_file or sessions.ticket_keys, the ticket keys are
//     agreed on through that store (rotating, sealed with the supervisor's
//     wrap key), so a ticket made on one worker resumes on another.
func (w *worker) adjust(c *conf.Config) {
	c.Admin.Address = conf.UnixPrefix + workerSocket(w.dir, w.index)
	c.Admin.ControlAddress = ""
	c.Admin.Token = nil
	c.Workers = "1" // a worker serves what it accepts itself
	s := &c.Sessions
	if s.Store == nil {
		s.Store = &conf.SessionStore{
			Type:      localstore.Type,
			Addresses: []string{filepath.Join(w.dir, storeSocket)},
			KeyPrefix: sessionstore.DefaultKeyPrefix,
			Timeout:   sessionstore.DefaultTimeout,
		}
		if w.shm != "" {
			s.Store.Type, s.Store.Addresses = shmstore.Type, []string{w.shm}
		}
		if s.TicketKeyFile == "" && s.TicketKeys == nil {
			s.TicketKeys = &conf.FleetTicketKeys{Store: s.Store.Type, WrapKeys: w.wrap}
		}
	}
}

// workerSignals turns the signals a worker receives into those it acts
// on, so that a worker acts on one stop request once. A stop request
// reaches a worker from its supervisor and, with systemd's default
// KillMode=control-group or a terminal's Ctrl-C (the whole process
// group), straight from the sender too: a repeated SIGTERM, SIGINT or
// SIGQUIT (nginx's graceful stop, which gmproxy takes as SIGTERM) is
// therefore the same request, not a second one. The supervisor orders
// the second one (close every connection now) with forceSignal, and the
// reopening of the access log with workerReopenSignal. SIGHUP is
// ignored: every worker makes a reload together, through the
// supervisor; a worker reloading alone would serve a configuration the
// others do not, and drop a reload prepared meanwhile. SIGUSR1 and
// SIGUSR2 from anyone else are ignored too: sent to the whole group, the
// supervisor passes on the one it takes (see workerorders_linux.go).
func workerSignals(in <-chan os.Signal, log *slog.Logger) <-chan os.Signal {
	orders := make(chan os.Signal, 2)
	signal.Notify(orders, forceSignal, workerReopenSignal)
	ignored := make(chan os.Signal, 1)
	if len(workerIgnored) > 0 {
		signal.Notify(ignored, workerIgnored...)
	}
	out := make(chan os.Signal, 4)
	go func() {
		defer signal.Stop(orders)
		defer signal.Stop(ignored)
		defer close(out)
		stopping := false
		for {
			select {
			case sig, ok := <-in:
				if !ok {
					return
				}
				switch sig {
				case syscall.SIGHUP:
					log.Info("SIGHUP ignored: a worker reloads when its supervisor asks")
					continue
				case reopenSignal:
					log.Info("SIGUSR1 ignored: a worker reopens the access log when its supervisor asks")
					continue
				case syscall.SIGTERM, syscall.SIGINT, os.Interrupt, syscall.SIGQUIT:
					if stopping {
						continue
					}
					stopping = true
				}
				out <- sig
			case <-ignored:
				log.Info("SIGUSR2 ignored: a worker closes its connections at once when its supervisor asks")
			case sig := <-orders:
				if sig == workerReopenSignal {
					out <- reopenSignal
					continue
				}
				if !stopping {
					stopping = true
					out <- syscall.SIGTERM
				}
				out <- syscall.SIGTERM // the second stop request
			}
		}
	}()
	return out
}
