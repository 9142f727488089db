package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/keyserver"
	"github.com/gmproxy/gmproxy/metrics"
)

func init() {
	register("keyserver", "serve SM2 private keys to gmproxy instances over mutual TLS: gmproxy keyserver -c FILE", func(args []string, stdout, stderr io.Writer) int {
		sigs := make(chan os.Signal, 4)
		// SIGQUIT, nginx's graceful stop, as SIGTERM (gmproxy run too).
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP)
		defer signal.Stop(sigs)
		return keyserverMain(args, stdout, stderr, sigs, nil)
	})
}

// keyserverMain runs gmproxy keyserver until SIGTERM, SIGINT or SIGQUIT on sigs; ready,
// when set, is called with the bound address once it serves.
func keyserverMain(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal, ready func(addr string)) int {
	fs := newFlags("keyserver", stderr,
		"usage: gmproxy keyserver -c FILE [-check [-no-bind]] [-log-format text|json] [-log-level LEVEL]",
		"",
		"Serves the SM2 private keys named in FILE (see conf/README.md, section keyserver) to",
		"gmproxy instances whose key_servers entry points here: sign, decrypt and SM2 key",
		"agreement over mutual TLS (or a Unix socket). SIGHUP reloads the keys, the clients, the",
		"TLS certificate and client CA and the limits; SIGTERM, SIGINT and SIGQUIT stop it gracefully.",
		"")
	file := fs.String("c", "", "configuration `file` (YAML)")
	checkOnly := fs.Bool("check", false, "check the configuration and the keys, and that listen and metrics_address can be bound, then exit")
	noBind := fs.Bool("no-bind", false, "with -check: do not try to bind the addresses (on a machine other than the one that will run it)")
	logFormat := fs.String("log-format", "", "log format: text or json (default: the config's log.format)")
	logLevel := fs.String("log-level", "", "log level: debug, info, warn, error (default: the config's log.level)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *file == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *noBind && !*checkOnly {
		fmt.Fprintln(stderr, "gmproxy keyserver: -no-bind goes with -check only (a server that starts binds its addresses)")
		return 2
	}
	if err := checkLogFlags(*logFormat, *logLevel); err != nil {
		fmt.Fprintf(stderr, "gmproxy keyserver: %s\n", err)
		return 2
	}
	cfg, err := conf.LoadKeyServer(*file)
	if err != nil {
		reportUnusable(stderr, "keyserver", *file, err)
		return 1
	}
	// The names the metrics will not show as they are, as gmproxy check
	// warns of its own (labelProblems).
	labelProbs := keyServerLabelProblems(cfg)
	if *checkOnly {
		probs := slices.Concat(cfg.Warnings, labelProbs)
		if !*noBind {
			// As gmproxy check: an address that cannot be bound fails
			// the start, not only the check.
			probs = append(probs, cfg.ProbeListen()...)
		}
		for _, p := range probs {
			fmt.Fprintln(stderr, p.String())
		}
		if probs.HasErrors() {
			return 1
		}
		fmt.Fprintf(stdout, "%s: configuration OK, %s\n", *file, plural(len(cfg.Material.Keys), "key"))
		return 0
	}
	log, _ := newLogger(stderr, *logFormat, *logLevel, cfg.Log)
	for _, w := range slices.Concat(cfg.Warnings, labelProbs) {
		log.Warn("configuration", "problem", w.String())
	}
	ks, err := newKeyServer(log, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy keyserver: %v\n", err)
		return 1
	}
	setReady, stopMetrics, err := keyServerMetrics(log, cfg.MetricsAddress, ks)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy keyserver: metrics: %v\n", err)
		return 1
	}
	defer stopMetrics()
	var tlsCfg atomic.Pointer[tls.Config]
	tlsCfg.Store(keyServerTLS(&cfg.Material))
	ln, err := keyServerListen(&cfg.Material, &tlsCfg)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy keyserver: %v\n", err)
		return 1
	}
	return serveKeyServer(log, *file, cfg, ks, ln, sigs, ready, setReady, &tlsCfg)
}

// newKeyServer builds the key server for cfg and logs the keys it serves.
func newKeyServer(log *slog.Logger, cfg *conf.KeyServerFile) (*keyserver.Server, error) {
	ks := &keyserver.Server{Logger: log, AuditInterval: cfg.AuditInterval}
	ks.SetServerLimits(keyServerLimits(cfg))
	if err := ks.SetPolicy(&cfg.Material.Policy); err != nil {
		return nil, err
	}
	for _, k := range cfg.Material.Policy.Keys {
		id, _ := keyserver.KeyID(k.Private.Public())
		// The ID is the SM3 of the public key: safe to log.
		log.Info("serving key", "name", k.Name, "roles", k.Roles.String(), "id", hex.EncodeToString(id[:8]))
	}
	return ks, nil
}

// serveKeyServer serves ln until the listener fails or a shutdown signal
// arrives on sigs, reloading the keys, the clients and the TLS material
// (into tlsCfg, which ln's handshakes read) from file on SIGHUP, and
// returns the exit status.
func serveKeyServer(log *slog.Logger, file string, cfg *conf.KeyServerFile, ks *keyserver.Server, ln net.Listener, sigs <-chan os.Signal, ready func(addr string), setReady func(bool), tlsCfg *atomic.Pointer[tls.Config]) int {
	served := make(chan error, 1)
	go func() { served <- ks.Serve(ln) }()
	addr := ln.Addr().String()
	log.Info("key server listening", "address", addr, "network", cfg.Material.Network, "keys", ks.Len())
	setReady(true)
	defer setReady(false)
	if ready != nil {
		ready(addr)
	}
	for {
		select {
		case err := <-served:
			// The listener failed (not a shutdown).
			log.Error("key server stopped", "err", err)
			return 1
		case sig, ok := <-sigs:
			if !ok {
				sigs = nil
				continue
			}
			if sig == syscall.SIGHUP {
				reloadKeys(log, file, cfg, ks, tlsCfg)
				continue
			}
			log.Info("signal received: graceful shutdown", "signal", sig.String(), "grace", cfg.ShutdownGrace)
			setReady(false) // /readyz: 503 from now on
			return shutdownKeyServer(log, cfg, ks, served)
		}
	}
}

// shutdownKeyServer stops ks, giving open connections cfg.ShutdownGrace to
// finish, waits until Serve has returned on served and removes the Unix
// socket. It returns the exit status: 1 when connections had to be closed.
func shutdownKeyServer(log *slog.Logger, cfg *conf.KeyServerFile, ks *keyserver.Server, served <-chan error) int {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	err := ks.Shutdown(ctx)
	cancel()
	<-served
	if cfg.Material.Network == "unix" {
		os.Remove(cfg.Material.Addr)
	}
	if err != nil {
		log.Warn("shutdown grace period over; remaining connections closed", "err", err)
		return 1
	}
	log.Info("shutdown complete")
	return 0
}

// reloadKeys re-reads the configuration file and replaces the served keys
// (SIGHUP), the allowed clients with their roles and limits, and the TLS
// certificate and client CAs (the files are read again: a CA replaced in
// the same file is applied, to open connections too), and the server's
// timeouts and connection limits (for the connections accepted after).
// An invalid file keeps the running ones, as does a listen moved between
// TCP and a Unix socket; listen, metrics_address and audit_interval need
// a restart.
func reloadKeys(log *slog.Logger, file string, running *conf.KeyServerFile, ks *keyserver.Server, tlsCfg *atomic.Pointer[tls.Config]) {
	log.Info("SIGHUP: reloading the keys")
	cfg, err := conf.LoadKeyServer(file)
	if err != nil {
		var probs conf.Problems
		if errors.As(err, &probs) {
			for _, p := range probs {
				log.Error("configuration", "problem", p.String())
			}
		}
		log.Error("reload refused: configuration invalid, keeping the running keys", "err", err)
		return
	}
	if cfg.Material.Network != running.Material.Network {
		// A Unix socket's policy (a local grant, no clients or TLS)
		// does not fit a TCP listener's connections, nor the reverse.
		log.Error("reload refused: listen moved between a TCP address and a Unix socket, whose clients differ; restart the key server to apply it, keeping the running keys", "listen", cfg.Listen, "running", running.Listen)
		return
	}
	if err := ks.SetPolicy(&cfg.Material.Policy); err != nil {
		log.Error("reload refused, keeping the running keys", "err", err)
		return
	}
	if cfg.Material.Network == "tcp" {
		tlsCfg.Store(keyServerTLS(&cfg.Material))
	}
	ks.SetServerLimits(keyServerLimits(cfg))
	// The warnings of the file now served, as at the start (and as
	// gmproxy run's reload): a problem brought in by an edit would
	// otherwise show only at the next restart or keyserver -check.
	for _, w := range slices.Concat(cfg.Warnings, keyServerLabelProblems(cfg)) {
		log.Warn("configuration", "problem", w.String())
	}
	if changed := restartOnlyChanges(running, cfg); len(changed) > 0 {
		log.Warn("settings of the key server that a reload does not apply changed: restart it to apply them", "settings", strings.Join(changed, ", "))
	}
	log.Info("keys reloaded", "keys", ks.Len(), "clients", len(cfg.Material.Policy.Clients))
}

// restartOnlyChanges names the settings that differ between the running
// key server file and next and that only a restart applies (the sockets,
// the audit loop, shutdown and logging are set up once).
func restartOnlyChanges(running, next *conf.KeyServerFile) []string {
	var out []string
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"listen", next.Listen != running.Listen},
		{"listen_group", next.ListenGroup != running.ListenGroup},
		{"metrics_address", next.MetricsAddress != running.MetricsAddress},
		{"audit_interval", next.AuditInterval != running.AuditInterval},
		{"shutdown_grace", next.ShutdownGrace != running.ShutdownGrace},
		{"log", next.Log != running.Log},
	} {
		if f.changed {
			out = append(out, f.name)
		}
	}
	return out
}

// keyServerLimits are the timeouts and connection limits of cfg.
func keyServerLimits(cfg *conf.KeyServerFile) keyserver.ServerLimits {
	return keyserver.ServerLimits{IdleTimeout: cfg.IdleTimeout, HandshakeTimeout: cfg.HandshakeTimeout,
		MaxConns: cfg.MaxConnections, MaxHandshakes: cfg.MaxHandshakes, MaxHandshakesPerAddr: cfg.MaxHandshakesPerAddress}
}

// keyServerTLS is the TLS configuration of a key server on TCP: mutual
// TLS 1.3, clients verified against m's client CAs (nil on a Unix socket).
func keyServerTLS(m *conf.KeyServerFileMaterial) *tls.Config {
	if m.Network != "tcp" {
		return nil
	}
	return &tls.Config{
		Certificates: []tls.Certificate{*m.Cert},
		ClientCAs:    m.Policy.ClientCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// keyServerListen opens the key server's socket: mutual TLS 1.3 on TCP
// with the configuration in tlsCfg when each handshake starts (a reload
// replaces it), or a Unix socket with mode 0600, or 0660 with
// listen_group's group (a stale socket file is replaced).
func keyServerListen(m *conf.KeyServerFileMaterial, tlsCfg *atomic.Pointer[tls.Config]) (net.Listener, error) {
	if m.Network == "unix" {
		if fi, err := os.Lstat(m.Addr); err == nil {
			if fi.Mode()&fs.ModeSocket == 0 {
				return nil, fmt.Errorf("listen %s: the file exists and is not a socket", m.Addr)
			}
			os.Remove(m.Addr)
		}
		old := umask(0o177)
		ln, err := net.Listen("unix", m.Addr)
		umask(old)
		if err != nil {
			return nil, err
		}
		if gid := m.SocketGID; gid != nil {
			// Made 0600 above, opened to the group only once it has it.
			if err := os.Chown(m.Addr, -1, *gid); err != nil {
				ln.Close()
				return nil, fmt.Errorf("listen_group: giving the socket group %d: %w (the key server's user must be a member of the group)", *gid, err)
			}
			if err := os.Chmod(m.Addr, 0o660); err != nil {
				ln.Close()
				return nil, fmt.Errorf("listen_group: %w", err)
			}
		}
		return ln, nil
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return tlsCfg.Load(), nil
		},
	}
	// The server runs the TLS handshakes itself, within its
	// handshake_timeout.
	return tls.Listen("tcp", m.Addr, tc)
}

// keyServerMetrics serves the key server's Prometheus metrics and its
// probes on addr (none when empty) and sets them as ks's observer;
// setReady sets what /readyz answers, stop closes the listener.
func keyServerMetrics(log *slog.Logger, addr string, ks *keyserver.Server) (setReady func(bool), stop func(), err error) {
	if addr == "" {
		return func(bool) {}, func() {}, nil
	}
	m, err := metrics.NewKeyServer()
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	ks.Observer = m
	m.Retain(ks.Names()) // and SetPolicy on every reload
	srv := adminServer(m.Handler())
	serveAdmin(srv, ln)
	log.Info("key server metrics listening", "address", ln.Addr().String())
	return m.SetReady, func() { srv.Close() }, nil
}
