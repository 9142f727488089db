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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/handshake"
	"github.com/gmproxy/gmproxy/internal/daemon"
)

func init() {
	register("run", "serve: gmproxy run -c FILE (no -c: the embedded development setup on 127.0.0.1:8443)", func(args []string, stdout, stderr io.Writer) int {
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
		defer signal.Stop(sigs)
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
	// AdminHandler returns the admin mux; reload is mounted on it.
	AdminHandler(cfg *conf.Config, reload func() error) http.Handler
	SetReady(bool)
	Reloaded(ok bool, cfg *conf.Config)
}

func runMain(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal, hooks *runHooks) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "", "configuration `file` (YAML); without it the embedded development setup runs")
	devDir := fs.String("dev-dir", "", "development setup: folder of the throwaway PKI (default "+daemon.DefaultDevDir()+")")
	listen := fs.String("listen", daemon.DevListen, "development setup: listen `address`")
	adminAddr := fs.String("admin", "", "admin listener `address` (overrides the config's admin.address; \"off\" disables it)")
	logFormat := fs.String("log-format", "", "log format: text or json (default: the config's log.format, else text)")
	logLevel := fs.String("log-level", "", "log level: debug, info, warn, error (default: the config's log.level, else info)")
	pidFile := fs.String("pid", "", "write the process ID to `file` while running (for gmproxy reload -pid)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gmproxy run: unexpected arguments %q\n", fs.Args())
		return 2
	}

	wk, err := workerFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy run: worker: %s\n", err)
		return 1
	}
	var (
		cfg      *conf.Config
		dev      *daemon.DevSetup
		bootL, _ = newLogger(stderr, *logFormat, *logLevel, conf.Log{})
	)
	if *file != "" {
		if loadConfigFile == nil {
			fmt.Fprintln(stderr, "gmproxy run: this build cannot load configuration files")
			return 1
		}
		cfg, err = loadConfigFile(*file)
		if err != nil {
			reportUnusable(stderr, "run", *file, err)
			return 1
		}
	} else {
		dir := *devDir
		if dir == "" {
			dir = daemon.DefaultDevDir()
		}
		dev, err = daemon.NewDevSetup(dir, *listen)
		if err != nil {
			// The home folder may be read-only: fall back to ./gmproxy-dev.
			if *devDir == "" {
				bootL.Warn("dev folder not usable, trying ./gmproxy-dev", "dir", dir, "err", err)
				dev, err = daemon.NewDevSetup("gmproxy-dev", *listen)
			}
			if err != nil {
				fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
				return 1
			}
		}
		defer dev.Close()
		cfg = dev.Config
		if dev.ConfigErr != nil {
			bootL.Warn("embedded configuration not usable, running the built-in equivalent", "err", dev.ConfigErr)
		}
	}
	if *adminAddr != "" {
		cfg.Admin.Address = *adminAddr
	}
	if wk != nil {
		wk.adjust(cfg)
	}
	log, logLevelVar := newLogger(stderr, *logFormat, *logLevel, cfg.Log)
	if wk != nil {
		log = log.With("worker", wk.index)
	}
	for _, w := range cfg.Warnings {
		log.Warn("configuration", "problem", w.String())
	}
	slog.SetDefault(log)

	if *pidFile != "" && wk == nil {
		if err := os.WriteFile(*pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			fmt.Fprintf(stderr, "gmproxy run: pid file: %s\n", err)
			return 1
		}
		defer os.Remove(*pidFile)
	}
	if wk == nil && dev == nil && cfg.WorkerCount() > 1 {
		return runSupervisor(*file, args, cfg, log, logLevelVar, *logLevel, *logFormat, stdout, stderr, sigs)
	}
	env := &daemon.Env{Logger: log}
	var tel telemetry
	if newTelemetry != nil {
		tel = newTelemetry(log, env)
	}
	if env.Observer == nil {
		env.Observer = handshake.NopObserver{}
	}
	defer env.Close()

	current := cfg
	builder := func() (*daemon.Generation, error) {
		c := current
		if *file != "" && c == nil {
			var err error
			if c, err = loadConfigFile(*file); err != nil {
				return nil, err
			}
			if *adminAddr != "" {
				c.Admin.Address = *adminAddr
			}
			if wk != nil {
				wk.adjust(c)
			}
		}
		gen, err := daemon.Build(c, env)
		if err != nil {
			return nil, err
		}
		current = c
		return gen, nil
	}
	opts := daemon.Options{Logger: log, Observer: env.Observer}
	if wk != nil {
		opts.Listen = listenReusePort
	}
	d, err := daemon.New(builder, opts)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy run: %s\n", err)
		return 1
	}
	var admin *http.Server
	var adminBound string
	reload := func() error {
		if *file != "" {
			current = nil // re-read the file
		}
		prev := cfg
		err := d.Reload()
		if err != nil {
			current = prev
		} else {
			cfg = current
			for _, w := range cfg.Warnings {
				log.Warn("configuration", "problem", w.String())
			}
			applyReloaded(log, logLevelVar, *logLevel, *logFormat, prev, cfg, adminBound)
		}
		if tel != nil {
			tel.Reloaded(err == nil, cfg)
		}
		return err
	}
	// Admin listener (metrics, health, and POST /reload unless a control
	// address serves it). Admin reloads run on the main loop, like SIGHUP.
	reloadReq := make(chan chan error)
	adminReload := func() error {
		res := make(chan error, 1)
		reloadReq <- res
		return <-res
	}
	var control *http.Server
	reloads := false
	if tel != nil && cfg.Admin.Address != "" && cfg.Admin.Address != "off" {
		var onAdmin func() error
		if cfg.Admin.ControlAddress == "" {
			onAdmin = adminReload
		}
		admin = &http.Server{Handler: tel.AdminHandler(cfg, onAdmin), ReadHeaderTimeout: 10 * time.Second}
		ln, err := listenControl(cfg.Admin.Address) // a worker's is a Unix socket
		switch {
		case err != nil && dev != nil:
			log.Warn("admin listener not started", "address", cfg.Admin.Address, "err", err)
			admin = nil
		case err != nil:
			d.Close()
			fmt.Fprintf(stderr, "gmproxy run: admin listener: %s\n", err)
			return 1
		default:
			go admin.Serve(ln)
			adminBound = ln.Addr().String()
			where := "POST /reload"
			if onAdmin == nil {
				where = "at control_address"
			}
			log.Info("admin listening", "address", adminBound, "reload", where)
			reloads = reloads || onAdmin != nil
		}
	}
	if ca := cfg.Admin.ControlAddress; ca != "" {
		ln, err := listenControl(ca)
		if err != nil {
			d.Close()
			if admin != nil {
				admin.Close()
			}
			fmt.Fprintf(stderr, "gmproxy run: control listener: %s\n", err)
			return 1
		}
		mux := http.NewServeMux()
		mux.Handle("POST /reload", controlHandler(cfg, ca, adminReload))
		control = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go control.Serve(ln)
		log.Info("control listening", "address", ln.Addr().String(), "reload", "POST /reload")
		reloads = true
	}
	if reloads {
		sigs = mergeReloads(sigs, reloadReq, reload)
	}
	if tel != nil {
		tel.Reloaded(true, cfg)
		tel.SetReady(true)
	}
	addr := d.Addr(cfg.Listeners[0].Address)
	if dev != nil {
		fmt.Fprintln(stdout, dev.Instructions(addr))
	}
	if hooks != nil && hooks.ready != nil {
		hooks.ready(d, addr, adminBound)
	}

	for sig := range sigs {
		if rs, ok := sig.(reloadSignal); ok {
			log.Info("admin: reloading configuration")
			rs.res <- rs.reload()
			continue
		}
		switch sig {
		case syscall.SIGHUP:
			log.Info("SIGHUP: reloading configuration")
			if err := reload(); err == nil {
				log.Info("reload succeeded")
			}
		case syscall.SIGUSR1:
			log.Info("SIGUSR1: reopening the access log")
			if err := d.ReopenLogs(); err != nil {
				log.Error("reopening the access log", "err", err)
			}
		case syscall.SIGTERM, syscall.SIGINT, os.Interrupt:
			log.Info("signal received: graceful shutdown", "signal", sig.String())
			if tel != nil {
				tel.SetReady(false)
			}
			err := shutdown(d, sigs, log)
			if admin != nil {
				admin.Close()
			}
			if control != nil {
				control.Close()
			}
			if err != nil {
				return 1
			}
			return 0
		}
	}
	d.Close()
	return 0
}

// shutdown drains d within its grace period; a second SIGTERM or SIGINT
// meanwhile closes every connection at once (like pressing Ctrl-C twice).
func shutdown(d *daemon.Daemon, sigs <-chan os.Signal, log *slog.Logger) error {
	done := make(chan error, 1)
	go func() { done <- d.Shutdown(context.Background()) }()
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
				sig.res <- errors.New("shutting down")
			default:
				if sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == os.Interrupt {
					log.Warn("second signal during graceful shutdown: closing every connection now", "signal", sig.String())
					forced = true
					d.Close()
				}
			}
		}
	}
}

// mergeReloads turns admin reload requests into calls on the main loop:
// the returned channel forwards sigs; reloads requested over HTTP run
// reload on the signal goroutine's behalf and report the result.
func mergeReloads(sigs <-chan os.Signal, reqs chan chan error, reload func() error) <-chan os.Signal {
	out := make(chan os.Signal)
	go func() {
		defer close(out)
		for {
			select {
			case s, ok := <-sigs:
				if !ok {
					return
				}
				out <- s
			case res := <-reqs:
				out <- reloadSignal{res: res, reload: reload}
			}
		}
	}()
	return out
}

// reloadSignal is an admin reload carried through the signal loop.
type reloadSignal struct {
	res    chan error
	reload func() error
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
		return slog.New(slog.NewJSONHandler(w, opts)), lv
	}
	return slog.New(slog.NewTextHandler(w, opts)), lv
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

// applyReloaded applies what a reload changes outside the daemon: the log
// level (unless -log-level fixed it), and warns about settings that only a
// restart applies.
func applyReloaded(log *slog.Logger, lv *slog.LevelVar, levelFlag, formatFlag string, prev, next *conf.Config, adminBound string) {
	if levelFlag == "" {
		if l := parseLevel(next.Log.Level); l != lv.Level() {
			lv.Set(l)
			log.Info("log level changed", "level", l.String())
		}
	}
	if formatFlag == "" && !strings.EqualFold(prev.Log.Format, next.Log.Format) {
		log.Warn("log.format changed: restart gmproxy to apply it", "running", prev.Log.Format, "configured", next.Log.Format)
	}
	if !prev.Admin.Equal(next.Admin) {
		log.Warn("admin section changed: restart gmproxy to apply it", "running", adminBound)
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
		os.Remove(path)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	return ln, err
}
