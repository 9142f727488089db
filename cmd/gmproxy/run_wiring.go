package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/metrics"

	// RFC 8441 WebSockets over h2 on the daemon's HTTP/2 servers.
	_ "github.com/gmproxy/gmproxy/proxy/h2xconnect"
)

func init() {
	loadConfigFile = conf.Load
	newTelemetry = func(log *slog.Logger, env *daemon.Env) telemetry {
		m, err := metrics.New(nil)
		if err != nil {
			log.Error("metrics disabled", "err", err)
			return nil
		}
		gmsm := "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == "github.com/emmansun/gmsm" {
					gmsm = d.Version
				}
			}
		}
		m.SetBuildInfo(version, runtime.Version(), gmsm)
		env.Observer = m
		env.KeyOps = m
		env.Sessions = m
		env.ProxyObserver = m
		m.ObserveKeyQueue(env.KeyQueueLen)
		return &metricsTelemetry{m: m}
	}
}

// metricsTelemetry adapts the metrics package to run.
type metricsTelemetry struct{ m *metrics.Metrics }

func (t *metricsTelemetry) AdminHandler(cfg *conf.Config, reload func() error) http.Handler {
	mux := t.m.AdminMux(metrics.AdminOptions{Pprof: cfg.Admin.Pprof})
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := reload(); err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, "reload refused, the running configuration is kept:\n%s\n", err)
			return
		}
		io.WriteString(w, "reloaded\n")
	})
	return mux
}

func (t *metricsTelemetry) SetReady(ok bool) { t.m.SetReady(ok) }

func (t *metricsTelemetry) Reloaded(ok bool, cfg *conf.Config) {
	t.m.ConfigReloaded(ok, time.Now())
	if ok {
		t.certs(cfg)
	}
}

// certs publishes the expiry of every certificate in use.
func (t *metricsTelemetry) certs(cfg *conf.Config) {
	t.m.ResetCertNotAfter()
	for _, s := range cfg.Sites {
		m := s.Material
		for role, kp := range map[string]*conf.KeyPair{"sign": m.TLCPSign, "enc": m.TLCPEnc, "tls13sm": m.TLS13SM, "tls": m.TLS} {
			if l := kp.Leaf(); l != nil {
				t.m.SetCertNotAfter(s.Name, role, l.NotAfter)
			}
		}
	}
}
