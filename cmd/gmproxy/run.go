package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/daemon"
)

func init() {
	register("run", "serve: gmproxy run -c FILE (no -c: the embedded development setup on 127.0.0.1:8443)", func(args []string, stdout, stderr io.Writer) int {
		sigs := make(chan os.Signal, 4)
		// Not stopped when run returns: the process exits right after,
		// and a signal that comes in between must not end it. A stop
		// sent to the whole process group (systemd's KillMode=
		// control-group, Ctrl-C) reaches a worker twice, from the sender
		// and from its supervisor; one with nothing to drain is done
		// with the first before the second comes, which Go's default
		// (SIGTERM, SIGINT, SIGHUP end the process) then turned into a
		// death by the signal, a failed drain for its supervisor (exit
		// status 1 for a clean stop).
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, reopenSignal)
		return runMain(args, stdout, stderr, sigs, nil)
	})
}

// runHooks lets tests observe the running daemon.
type runHooks struct {
	// ready is called once the listeners are up.
	ready func(d *daemon.Daemon, addr, admin string)
}

// Integration points filled in by other files of this command when the
// corresponding packages are linked: loading a config file, the metrics
// observer and admin handler, and reopening the access log.
var (
	loadConfigFile func(path string) (*conf.Config, error)
	newTelemetry   func(log *slog.Logger, env *daemon.Env) telemetry
)

// telemetry is what the metrics package provides to run.
type telemetry interface {
	// AdminHandler returns the admin mux of the listener at addr, which
	// serves pprof while live says so; reload, if set, is mounted on it,
	// guarded by live's token.
	AdminHandler(addr string, live *adminState, reload func(context.Context) error) http.Handler
	SetReady(bool)
	Reloaded(ok bool, cfg *conf.Config)
}

func runMain(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal, hooks *runHooks) int {
	o, code, ok := parseRunFlags(args, stderr)
	if !ok {
		return code
	}
	wk, err := workerFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy run: worker: %s\n", err)
		return 1
	}
	bootL, _ := newLogger(stderr, o.logFormat, o.logLevel, conf.Log{})
	cfg, dev, ok := loadRunConfig(&o, stderr, bootL)
	if !ok {
		return 1
	}
	if dev != nil {
		defer dev.Close()
	}
	r := newRunner(o, wk, cfg, dev != nil, stderr)
	if wk != nil {
		sigs = workerSignals(sigs, r.log)
	}
	if o.pidFile != "" && wk == nil {
		release, err := claimPIDFile(o.pidFile)
		if err != nil {
			fmt.Fprintf(stderr, "gmproxy run: pid file: %s\n", err)
			return 1
		}
		defer release()
	}
	if wk == nil && dev == nil && workerCount(cfg) > 1 {
		return runSupervisor(o.file, o.adminAddr, args, cfg, r.log, r.logLevel, o.logLevel, o.logFormat, stdout, stderr, sigs)
	}
	r.newEnv()
	defer r.env.Close()
	if err := r.startDaemon(); err != nil {
		fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
		return 1
	}
	sigs, ok = r.startAdminAndControl(stderr, sigs)
	if !ok {
		return 1
	}
	if r.tel != nil {
		r.tel.Reloaded(true, r.cfg)
		r.tel.SetReady(true)
	}
	addr := r.d.Addr(r.cfg.Listeners[0].Address)
	if dev != nil {
		fmt.Fprintln(stdout, dev.Instructions(addr))
	}
	if hooks != nil && hooks.ready != nil {
		hooks.ready(r.d, addr, r.adminBound)
	}
	return r.serveSignals(sigs)
}

// newRunner applies the command line and the worker's share to cfg and
// sets up the logger of a runner for it.
func newRunner(o runFlags, wk *worker, cfg *conf.Config, isDev bool, stderr io.Writer) *runner {
	if o.adminAddr != "" {
		cfg.Admin.Address = o.adminAddr
	}
	if wk != nil {
		wk.adjust(cfg)
	}
	r := &runner{o: o, wk: wk, cfg: cfg, current: cfg, isDev: isDev, started: started(cfg)}
	r.live.set(cfg.Admin)
	r.log, r.logLevel = newLogger(stderr, o.logFormat, o.logLevel, cfg.Log)
	if wk != nil {
		r.log = r.log.With("worker", wk.index)
	}
	r.logWarnings()
	slog.SetDefault(r.log)
	return r
}

// newEnv sets up the daemon's environment and the telemetry that observes
// it; the caller closes r.env.
func (r *runner) newEnv() {
	r.env = &daemon.Env{Logger: r.log}
	if r.wk != nil {
		r.env.SharedClients = r.wk.clients
		r.env.SharedRates = r.wk.rates
	}
	if newTelemetry != nil {
		r.tel = newTelemetry(r.log, r.env)
	}
	if r.env.Observer == nil {
		r.env.Observer = frontdoor.NopObserver{}
	}
}

// startDaemon builds the first generation and starts serving it (on
// SO_REUSEPORT listeners in a worker).
func (r *runner) startDaemon() error {
	opts := daemon.Options{Logger: r.log, Observer: r.env.Observer}
	if r.wk != nil {
		opts.Listen = listenReusePort
	}
	var err error
	r.d, err = daemon.New(r.build, opts)
	return err
}

// startAdminAndControl starts the admin listener (metrics, health, and
// POST /reload unless a control address serves it) and the control
// listener. Admin reloads run on the main loop, like SIGHUP: the returned
// channel carries them merged into sigs. ok is false (reason on stderr)
// when a listener cannot start.
func (r *runner) startAdminAndControl(stderr io.Writer, sigs <-chan os.Signal) (_ <-chan os.Signal, ok bool) {
	reloadReq, adminReload := adminReloadRequests()
	r.reqs = reloadReq
	adminReloads, ok := r.startAdmin(stderr, adminReload)
	if !ok {
		return sigs, false
	}
	controlReloads, ok := r.startControl(stderr, adminReload)
	if !ok {
		return sigs, false
	}
	if adminReloads || controlReloads {
		sigs = mergeReloads(sigs, reloadReq, r.reload)
	}
	return sigs, true
}

// runFlags are gmproxy run's command-line flags.
type runFlags struct {
	file, devDir, listen, adminAddr, logFormat, logLevel, pidFile string
}

// parseRunFlags parses run's arguments; ok is false when run must exit
// with code.
func parseRunFlags(args []string, stderr io.Writer) (o runFlags, code int, ok bool) {
	fs := newFlags("run", stderr, "usage: gmproxy run [-c FILE] [-log-format text|json] [-log-level LEVEL] [-admin ADDR|off] [-pid FILE]",
		"                   [-dev-dir DIR] [-listen ADDR]   (no -c: the embedded development setup)")
	fs.StringVar(&o.file, "c", "", "configuration `file` (YAML); without it the embedded development setup runs")
	fs.StringVar(&o.devDir, "dev-dir", "", "development setup: folder of the throwaway PKI (default "+daemon.DefaultDevDir()+")")
	fs.StringVar(&o.listen, "listen", daemon.DevListen, "development setup: listen `address`")
	fs.StringVar(&o.adminAddr, "admin", "", "admin listener `address` (overrides the config's admin.address; \"off\" disables it)")
	fs.StringVar(&o.logFormat, "log-format", "", "log format: text or json (default: the config's log.format, else text)")
	fs.StringVar(&o.logLevel, "log-level", "", "log level: debug, info, warn, error (default: the config's log.level, else info)")
	fs.StringVar(&o.pidFile, "pid", "", "write the process ID to `file` while running (for gmproxy reload -pid); refused when it names another gmproxy that runs")
	if code, ok := parseFlags(fs, args); !ok {
		return o, code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gmproxy run: unexpected arguments %q\n", fs.Args())
		return o, 2, false
	}
	if err := checkLogFlags(o.logFormat, o.logLevel); err != nil {
		fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
		return o, 2, false
	}
	if o.file != "" && (isSet(fs, "listen") || isSet(fs, "dev-dir")) {
		// They shape the embedded setup only: with a file they would
		// be ignored, and the port served not the one asked for.
		fmt.Fprintln(stderr, "gmproxy run: -listen and -dev-dir are for the development setup (no -c); with -c FILE set the file's listeners[].address")
		return o, 2, false
	}
	return o, 0, true
}

// checkLogFlags refuses a -log-format or -log-level that newLogger would
// not know: it would fall back to text at info without a word.
func checkLogFlags(format, level string) error {
	if format != "" && !strings.EqualFold(format, "text") && !strings.EqualFold(format, "json") {
		return fmt.Errorf("-log-format %q: want text or json", format)
	}
	switch strings.ToLower(level) {
	case "", "debug", "info", "warn", "warning", "error":
		return nil
	}
	return fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
}

// isSet reports whether the command line gave the flag name.
func isSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// loadRunConfig loads the configuration file, or without one sets up the
// development configuration (dev, to be closed by the caller); ok is false,
// with the reason on stderr, when neither works.
func loadRunConfig(o *runFlags, stderr io.Writer, bootL *slog.Logger) (cfg *conf.Config, dev *daemon.DevSetup, ok bool) {
	if o.file != "" {
		if loadConfigFile == nil {
			fmt.Fprintln(stderr, "gmproxy run: this build cannot load configuration files")
			return nil, nil, false
		}
		cfg, err := readConfigFile(o.file)
		if err != nil {
			reportUnusable(stderr, "run", o.file, err)
			return nil, nil, false
		}
		return cfg, nil, true
	}
	dir := o.devDir
	if dir == "" {
		dir = daemon.DefaultDevDir()
	}
	dev, err := daemon.NewDevSetup(dir, o.listen)
	if err != nil {
		// The home folder may be read-only: fall back to ./gmproxy-dev.
		// A default folder whose files the configuration refuses is
		// reported instead: serving a new PKI from the working directory
		// would hide it.
		var refused *daemon.DevFolderRefused
		if o.devDir == "" && !errors.As(err, &refused) {
			bootL.Warn("dev folder not usable, trying ./gmproxy-dev", "dir", dir, "err", err)
			dev, err = daemon.NewDevSetup("gmproxy-dev", o.listen)
		}
		if err != nil {
			fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
			return nil, nil, false
		}
	}
	return dev.Config, dev, true
}

// runner is a running gmproxy: its daemon, the configuration in force,
// and the admin and control listeners.
type runner struct {
	o  runFlags
	wk *worker // nil unless this process is a worker
	// reqs carries admin requests to the main loop; prepared is set
	// between a worker's prepare and its commit or abort.
	reqs     chan reloadSignal
	prepared bool
	isDev    bool
	log      *slog.Logger
	logLevel *slog.LevelVar
	env      *daemon.Env
	tel      telemetry
	d        *daemon.Daemon
	// cfg is the configuration in force; current is the one the next
	// build uses (nil: re-read the file).
	cfg, current *conf.Config
	// live is cfg's admin section, for the admin handlers; started is
	// what only a restart changes.
	live           adminState
	started        startedWith
	adminBound     string
	admin, control *http.Server
}

func (r *runner) logWarnings() {
	for _, w := range r.cfg.Warnings {
		r.log.Warn("configuration", "problem", w.String())
	}
	// The names the metrics will show as "other", as gmproxy check says:
	// a configuration put in place without check says so too.
	for _, w := range labelProblems(r.cfg) {
		r.log.Warn("configuration", "problem", w.String())
	}
	if r.wk == nil { // a worker's admin address is its socket
		for _, w := range adminFlagWarnings(r.o.adminAddr, r.cfg.Admin) {
			r.log.Warn("command line", "problem", w)
		}
	}
}

// adminFlagWarnings are the warnings the configuration check gives an
// admin.address open to the network, for the -admin flag, which replaces
// it once checked.
func adminFlagWarnings(flag string, a conf.Admin) []string {
	if flag == "" || flag == "off" || !conf.NetworkReachable(flag) {
		return nil
	}
	var ws []string
	if a.ControlAddress == "" && len(a.Token) == 0 {
		ws = append(ws, "-admin "+flag+": POST /reload is reachable from the network without a token; set admin.control_address or admin.token_file, or give -admin a 127.0.0.1 address")
	}
	if a.Pprof {
		ws = append(ws, "-admin "+flag+": the admin endpoint with pprof is reachable from the network; give -admin a 127.0.0.1 address or turn admin.pprof off")
	}
	return ws
}

// build is the daemon's generation builder: it builds r.current, reading
// the file first when r.current is nil.
func (r *runner) build() (*daemon.Generation, error) {
	c := r.current
	if r.o.file != "" && c == nil {
		var err error
		if c, err = readConfigFile(r.o.file); err != nil {
			return nil, err
		}
		if r.o.adminAddr != "" {
			c.Admin.Address = r.o.adminAddr
		}
		if r.wk != nil {
			r.wk.adjust(c)
		}
	}
	gen, err := daemon.Build(c, r.env)
	if err != nil {
		return nil, err
	}
	r.current = c
	return gen, nil
}

// reload re-reads the configuration file (if any) and swaps generations;
// on failure the configuration in force stays.
func (r *runner) reload() error {
	if r.o.file != "" {
		r.current = nil // re-read the file
	}
	prev := r.cfg
	err := r.d.Reload()
	if err != nil {
		r.current = prev
	} else {
		r.cfg = r.current
		r.logWarnings()
		applyReloaded(r.log, r.logLevel, r.o.logLevel, r.o.logFormat, r.started, r.cfg)
		r.live.set(r.cfg.Admin)
	}
	if r.tel != nil {
		r.tel.Reloaded(err == nil, r.cfg)
	}
	return err
}

// reloadSteps adds to a worker's admin handler the steps of a reload that
// the supervisor makes in every worker together: POST /reload/prepare
// (build and open listeners; what can fail fails here), then
// /reload/commit when every worker prepared, else /reload/abort. Each
// runs on the main loop, as a reload does. POST /reload, a reload of this
// worker alone, is refused.
func (r *runner) reloadSteps(admin http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", admin)
	// In place of admin's: a worker reloads with the others, in these
	// steps (as it ignores SIGHUP), not on its own.
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "a worker does not reload alone, which would leave it serving a configuration the other workers do not: reload through the supervisor's admin address (gmproxy reload, or SIGHUP to the supervisor)", http.StatusForbidden)
	})
	for path, step := range map[string]func() error{
		"/reload/prepare": onMainLoop(r.reqs, "preparing a reload", r.prepare),
		"/reload/commit":  onMainLoop(r.reqs, "committing the prepared reload", r.commit),
		"/reload/abort":   onMainLoop(r.reqs, "dropping the prepared reload", func() error { r.abort(); return nil }),
	} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, _ *http.Request) {
			err := step()
			writeFromNow(w)
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnprocessableEntity)
				return
			}
			io.WriteString(w, "ok\n")
		})
	}
	return mux
}

// prepare is the first step of a reload made in every worker (see
// reloadSteps): it reads the file and builds and stages its generation;
// on failure the configuration in force stays and nothing is pending.
func (r *runner) prepare() error {
	r.abort()
	if r.o.file != "" {
		r.current = nil // re-read the file
	}
	if err := r.d.Prepare(); err != nil {
		r.current = r.cfg
		if r.tel != nil {
			r.tel.Reloaded(false, r.cfg)
		}
		return err
	}
	r.prepared = true
	return nil
}

// commit serves the generation prepare staged.
func (r *runner) commit() error {
	if !r.prepared {
		return errors.New("no reload prepared")
	}
	r.prepared = false
	prev := r.cfg
	if err := r.d.Commit(); err != nil {
		r.current = prev
		return err
	}
	r.cfg = r.current
	r.logWarnings()
	applyReloaded(r.log, r.logLevel, r.o.logLevel, r.o.logFormat, r.started, r.cfg)
	r.live.set(r.cfg.Admin)
	if r.tel != nil {
		r.tel.Reloaded(true, r.cfg)
	}
	return nil
}

// abort drops what prepare staged, if anything.
func (r *runner) abort() {
	if r.prepared {
		r.d.Abort()
		r.prepared = false
		r.current = r.cfg
	}
}

// startAdmin starts the admin listener if one is configured; it serves
// reloads unless a control address does. ok is false (daemon closed,
// reason on stderr) when it cannot listen outside the development setup.
func (r *runner) startAdmin(stderr io.Writer, adminReload func(context.Context) error) (reloads, ok bool) {
	cfg := r.cfg
	if r.tel == nil || cfg.Admin.Address == "" || cfg.Admin.Address == "off" {
		return false, true
	}
	var onAdmin func(context.Context) error
	if cfg.Admin.ControlAddress == "" {
		onAdmin = adminReload
	}
	handler := r.tel.AdminHandler(cfg.Admin.Address, &r.live, onAdmin)
	if r.wk != nil && onAdmin != nil {
		handler = r.reloadSteps(handler)
	}
	admin := adminServer(handler)
	ln, err := listenControl(cfg.Admin.Address) // a worker's is a Unix socket
	switch {
	case err != nil && r.isDev:
		r.log.Warn("admin listener not started", "address", cfg.Admin.Address, "err", err)
		return false, true
	case err != nil:
		r.d.Close()
		fmt.Fprintf(stderr, "gmproxy run: admin listener: %s\n", err)
		return false, false
	}
	r.admin = admin
	serveAdmin(admin, ln)
	r.adminBound = ln.Addr().String()
	where := "POST /reload"
	if onAdmin == nil {
		where = "at control_address"
	}
	r.log.Info("admin listening", "address", r.adminBound, "reload", where)
	return onAdmin != nil, true
}

// startControl starts the control listener (POST /reload) if one is
// configured. ok is false (daemon and admin closed, reason on stderr) when
// it cannot listen.
func (r *runner) startControl(stderr io.Writer, adminReload func(context.Context) error) (reloads, ok bool) {
	ca := r.cfg.ControlAddress()
	if ca == "" {
		return false, true
	}
	ln, err := listenControl(ca)
	if err != nil {
		r.d.Close()
		if r.admin != nil {
			r.admin.Close()
		}
		fmt.Fprintf(stderr, "gmproxy run: control listener: %s\n", err)
		return false, false
	}
	mux := http.NewServeMux()
	mux.Handle("POST /reload", controlHandler(&r.live, ca, adminReload))
	r.control = adminServer(mux)
	serveAdmin(r.control, ln)
	r.log.Info("control listening", "address", ln.Addr().String(), "reload", "POST /reload")
	return true, true
}

// serveSignals handles signals (and admin reloads merged into sigs) until
// a shutdown signal or the end of sigs, and returns the exit code.
func (r *runner) serveSignals(sigs <-chan os.Signal) int {
	for sig := range sigs {
		if rs, ok := sig.(reloadSignal); ok {
			rs.serve(r.log)
			continue
		}
		switch sig {
		case syscall.SIGHUP:
			r.log.Info("SIGHUP: reloading configuration")
			if err := r.reload(); err == nil {
				r.log.Info("reload succeeded")
			}
		case reopenSignal:
			r.log.Info("SIGUSR1: reopening the access log")
			if err := r.d.ReopenLogs(); err != nil {
				r.log.Error("reopening the access log", "err", err)
			}
		case syscall.SIGTERM, syscall.SIGINT, os.Interrupt, syscall.SIGQUIT:
			r.log.Info("signal received: graceful shutdown", "signal", sig.String())
			if r.tel != nil {
				r.tel.SetReady(false)
			}
			err := shutdown(r.d, sigs, r.log)
			if r.admin != nil {
				r.admin.Close()
			}
			if r.control != nil {
				r.control.Close()
			}
			if err != nil {
				return 1
			}
			return 0
		}
	}
	r.d.Close()
	return 0
}

// shutdown drains d within its grace period; a second SIGTERM or SIGINT
// meanwhile closes every connection at once (like pressing Ctrl-C twice).
func shutdown(d *daemon.Daemon, sigs <-chan os.Signal, log *slog.Logger) error {
	return drain(func() error { return d.Shutdown(context.Background()) }, func(sig os.Signal) {
		log.Warn("second signal during graceful shutdown: closing every connection now", "signal", sig.String())
		d.Close()
	}, func() {
		log.Info("SIGUSR1: reopening the access log")
		if err := d.ReopenLogs(); err != nil {
			log.Error("reopening the access log", "err", err)
		}
	}, sigs)
}

// drain returns wait's error; meanwhile admin reloads are refused, a
// second SIGTERM or SIGINT calls force, after which the error says so,
// and reopenSignal calls reopen: what drains still logs, and a rotation
// meanwhile must not leave its lines in the rotated file. SIGQUIT, the
// graceful stop of nginx, asks for no more than the drain under way.
func drain(wait func() error, force func(os.Signal), reopen func(), sigs <-chan os.Signal) error {
	done := make(chan error, 1)
	go func() { done <- wait() }()
	forced := false
	for {
		select {
		case err := <-done:
			if forced {
				err = errors.Join(err, errors.New("connections closed by a second signal"))
			}
			return err
		case sig, ok := <-sigs:
			if !ok {
				sigs = nil
				continue
			}
			switch sig := sig.(type) {
			case reloadSignal:
				sig.answer(errors.New("shutting down"))
			default:
				if sig == reopenSignal {
					reopen()
				} else if sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == os.Interrupt {
					forced = true
					force(sig)
				}
			}
		}
	}
}

// adminReloadRequests returns the channel of admin reload requests, for
// mergeReloads, and the reload function the admin and control handlers
// call with their request's context: it hands the request to the main
// loop and waits for the outcome of the reload that serves it. A caller
// whose context ends stops waiting; if that happens before its reload
// started, the reload is not made on its behalf (reloadSignal.wanted).
func adminReloadRequests() (chan reloadSignal, func(context.Context) error) {
	reqs := make(chan reloadSignal)
	return reqs, func(ctx context.Context) error {
		res := make(chan error, 1)
		select {
		case reqs <- reloadSignal{waiters: []reloadWaiter{{ctx: ctx, res: res}}}:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-res:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// onMainLoop returns a function that has fn run on the main loop through
// reqs, as an admin reload is (logged as "admin: "+what), and returns its
// result. Such steps are neither merged nor skipped.
func onMainLoop(reqs chan<- reloadSignal, what string, fn func() error) func() error {
	return func() error {
		res := make(chan error, 1)
		reqs <- reloadSignal{waiters: []reloadWaiter{{ctx: context.Background(), res: res}}, reload: fn, what: what}
		return <-res
	}
}

// mergeReloads turns admin reload requests into calls on the main loop:
// the returned channel forwards sigs, with the reload requests (admin ones
// and SIGHUP) that arrive while the main loop is busy merged into one
// reloadSignal, sent when the main loop is ready for it, so that a
// reload answers every request waiting for it: a burst of requests costs
// one reload after the one under way, not one each. A request's reload
// reads the configuration after the request came, as it would alone.
func mergeReloads(sigs <-chan os.Signal, reqs chan reloadSignal, reload func() error) <-chan os.Signal {
	out := make(chan os.Signal)
	go func() {
		defer close(out)
		var pending reloadSignal // waiters and hup of the next reload
		for {
			var send chan<- os.Signal
			var next os.Signal
			switch {
			case len(pending.waiters) > 0:
				send, next = out, pending
			case pending.hup:
				send, next = out, syscall.SIGHUP
			}
			select {
			case s, ok := <-sigs:
				if !ok {
					if send != nil {
						out <- next
					}
					return
				}
				if s == syscall.SIGHUP {
					pending.hup = true
					continue
				}
				out <- s
			case rq := <-reqs:
				if rq.reload != nil {
					out <- rq // a step of a reload
					continue
				}
				pending.reload = reload
				pending.waiters = append(pending.waiters, rq.waiters...)
			case send <- next:
				pending = reloadSignal{}
			}
		}
	}()
	return out
}

// reloadSignal is an admin reload (or a step of one: what) carried
// through the signal loop, answering every waiter with its outcome.
type reloadSignal struct {
	waiters []reloadWaiter
	reload  func() error
	what    string // "": a reload
	hup     bool   // a SIGHUP merged into the reload
}

// reloadWaiter is a request waiting for a reload's outcome.
type reloadWaiter struct {
	ctx context.Context // ends when its client left
	res chan<- error    // buffered: answering never blocks
}

// wanted reports whether the reload is still asked for: by a SIGHUP, or
// by a waiter whose client is still there. An admin client that gave up
// (closed its connection, timed out) before its reload started costs no
// reload.
func (rs reloadSignal) wanted() bool {
	if rs.hup {
		return true
	}
	for _, w := range rs.waiters {
		if w.ctx.Err() == nil {
			return true
		}
	}
	return false
}

// serve makes the reload, unless no one wants it any more, and answers
// its waiters.
func (rs reloadSignal) serve(log *slog.Logger) {
	if !rs.wanted() {
		rs.answer(errNobodyWaits)
		return
	}
	log.Info(rs.describe())
	rs.answer(rs.reload())
}

// answer gives err to every waiter.
func (rs reloadSignal) answer(err error) {
	for _, w := range rs.waiters {
		w.res <- err
	}
}

// errNobodyWaits answers the requests of a reload skipped because each
// client left before it started (no one reads it).
var errNobodyWaits = errors.New("reload not made: its clients left before it started")

// describe is the log line of the request.
func (rs reloadSignal) describe() string {
	n := ""
	if len(rs.waiters) > 1 {
		n = fmt.Sprintf(" (%d requests merged)", len(rs.waiters))
	}
	if rs.what == "" {
		return "admin: reloading configuration" + n
	}
	return "admin: " + rs.what
}

func (reloadSignal) String() string { return "admin reload" }
func (reloadSignal) Signal()        {}

// newLogger returns the program logger: format and level from the flags,
// else from the configuration. The level is a LevelVar so that a reload
// can change it.
func newLogger(w io.Writer, format, level string, lc conf.Log) (*slog.Logger, *slog.LevelVar) {
	if format == "" {
		format = lc.Format
	}
	if level == "" {
		level = lc.Level
	}
	lv := new(slog.LevelVar)
	lv.Set(parseLevel(level))
	opts := &slog.HandlerOptions{Level: lv}
	if strings.EqualFold(format, "json") {
		opts.ReplaceAttr = printableAttr
		return slog.New(slog.NewJSONHandler(w, opts)), lv
	}
	return slog.New(slog.NewTextHandler(w, opts)), lv
}

// printableAttr keeps the JSON log's strings printable. slog's text
// handler quotes a string with a character that is not (strconv.Quote),
// but its JSON handler writes C1 controls (CSI U+009B: a terminal that
// shows `tail -f` may take what follows for a command), DEL and the
// bidirectional and other format characters as they come, and the log
// names what clients send (a request's URI in a failed request's line,
// a handshake's error). Such a string is written with those characters
// as \uXXXX text; others are left as they are.
func printableAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch v := a.Value.Resolve(); v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		default:
			return a
		}
	default:
		return a
	}
	if !strings.ContainsFunc(s, unprintable) {
		return a
	}
	var b strings.Builder
	for _, r := range s {
		if unprintable(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return slog.String(a.Key, b.String())
}

// unprintable reports whether the JSON handler would write r as it is
// though a terminal or viewer may not show it as text: DEL, and any
// character beyond ASCII that is not printable (C1 controls, line and
// paragraph separators, bidirectional and zero-width format characters).
// ASCII controls the handler escapes itself.
func unprintable(r rune) bool {
	return r == 0x7f || r >= 0x80 && r != utf8.RuneError && !unicode.IsPrint(r)
}

func parseLevel(level string) slog.Level {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// startedWith is what a reload does not change, as the process started
// with it: the log format and the admin listeners' addresses.
type startedWith struct {
	logFormat, adminAddress, controlAddress string
}

// started is what cfg, the configuration at start, gives a startedWith.
func started(cfg *conf.Config) startedWith {
	return startedWith{logFormat: cfg.Log.Format, adminAddress: cfg.Admin.Address, controlAddress: cfg.ControlAddress()}
}

// applyReloaded applies what a reload changes outside the daemon, the log
// level (unless -log-level fixed it), and warns about the settings that
// only a restart applies, on every reload while next differs from what
// the process runs with: a warning given once scrolls away while the
// setting stays unapplied. The rest of the admin section (token, pprof)
// applies by the caller's adminState.
func applyReloaded(log *slog.Logger, lv *slog.LevelVar, levelFlag, formatFlag string, running startedWith, next *conf.Config) {
	if levelFlag == "" {
		if l := parseLevel(next.Log.Level); l != lv.Level() {
			lv.Set(l)
			log.Info("log level changed", "level", l.String())
		}
	}
	if formatFlag == "" && !strings.EqualFold(running.logFormat, next.Log.Format) {
		log.Warn("log.format changed: restart gmproxy to apply it", "running", running.logFormat, "configured", next.Log.Format)
	}
	if running.adminAddress != next.Admin.Address {
		log.Warn("admin.address changed: restart gmproxy to apply it", "running", running.adminAddress, "configured", next.Admin.Address)
	}
	if running.controlAddress != next.ControlAddress() {
		log.Warn("admin.control_address changed: restart gmproxy to apply it", "running", running.controlAddress, "configured", next.ControlAddress())
	}
}

// listenControl listens on a control address: host:port, or unix:PATH for
// a Unix socket that only the owner may use (a stale socket file from an
// earlier run is replaced).
func listenControl(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, conf.UnixPrefix)
	if !ok {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// A socket left by a process that ended is replaced; one that
		// answers belongs to a running gmproxy, whose control a second
		// one must not silently take.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen unix %s: another process listens on it (a gmproxy already running?)", path)
		}
		os.Remove(path)
	}
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	return ln, err
}
