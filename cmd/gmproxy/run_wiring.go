package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/proxy"
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
		env.OCSP = m
		m.ObserveKeyQueue(env.KeyQueueLen)
		return &metricsTelemetry{m: m}
	}
}

// metricsTelemetry adapts the metrics package to run.
type metricsTelemetry struct{ m *metrics.Metrics }

func (t *metricsTelemetry) AdminHandler(addr string, live *adminState, reload func(context.Context) error) http.Handler {
	mux := t.m.AdminMux(metrics.AdminOptions{})
	live.mountPprof(mux)
	if reload != nil {
		mux.Handle("POST /reload", controlHandler(live, addr, reload))
	}
	return mux
}

// controlHandler is POST /reload for the listener at addr, guarded by
// metrics.GuardControl (no Origin, a local Host, the token in force if
// any).
func controlHandler(live *adminState, addr string, reload func(context.Context) error) http.Handler {
	host, _, _ := net.SplitHostPort(addr)
	return metrics.GuardControl(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		err := reload(r.Context())
		writeFromNow(w)
		if err != nil {
			var split *splitReloadError
			switch {
			case errors.As(err, &split):
				// The new configuration is in force; a worker's
				// refusal is reported as a server error.
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, "reload made in part, the new configuration is in force:\n%s\n", err)
			case errors.Is(err, errReloadAbandoned):
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "%s\n", err)
			default:
				w.WriteHeader(http.StatusUnprocessableEntity)
				fmt.Fprintf(w, "reload refused, the running configuration is kept:\n%s\n", err)
			}
			return
		}
		io.WriteString(w, "reloaded\n")
	}), metrics.ControlOptions{Token: live.token, HostName: host})
}

func (t *metricsTelemetry) SetReady(ok bool) { t.m.SetReady(ok) }

func (t *metricsTelemetry) Reloaded(ok bool, cfg *conf.Config) {
	t.m.ConfigReloaded(ok, time.Now())
	if ok {
		t.m.Retain(configNames(cfg))
		t.certs(cfg)
	}
}

// configNames are the label values cfg gives listeners, sites, routes,
// upstreams (a stream site's own for its single target too), targets and
// key servers, with the routes and the stream upstreams of each site.
func configNames(cfg *conf.Config) metrics.ConfigNames {
	n := metrics.ConfigNames{Upstreams: daemon.UpstreamTargets(cfg), SiteRoutes: map[string][]string{},
		SiteUpstreams: daemon.SiteUpstreams(cfg)}
	for _, l := range cfg.Listeners {
		n.Listeners = append(n.Listeners, l.Address)
	}
	for _, s := range cfg.Sites {
		n.Sites = append(n.Sites, s.Name)
		for _, r := range s.Routes {
			label := proxy.RouteLabel(&proxy.RouteConfig{Name: r.Name, Path: r.Path, PathPrefix: r.PathPrefix, PathRegex: r.PathRegex})
			n.Routes = append(n.Routes, label)
			n.SiteRoutes[s.Name] = append(n.SiteRoutes[s.Name], label)
		}
	}
	for _, k := range cfg.KeyServers {
		n.KeyServers = append(n.KeyServers, k.Name)
	}
	return n
}

// certs publishes the expiry of every certificate in use: the sites'
// certificates and the earliest of their client CAs, the certificates
// presented to upstreams and the CAs that verify them, and the client
// certificates for key servers.
func (t *metricsTelemetry) certs(cfg *conf.Config) {
	t.m.ResetCertNotAfter()
	for _, s := range cfg.Sites {
		m := s.Material
		for role, kp := range map[string]*conf.KeyPair{"sign": m.TLCPSign, "enc": m.TLCPEnc, "tls13sm": m.TLS13SM, "tls": m.TLS} {
			if l := kp.Leaf(); l != nil {
				t.m.SetCertNotAfter(s.Name, role, l.NotAfter)
			}
		}
		if at, ok := earliest(m.ClientCAs); ok {
			t.m.SetCertNotAfter(s.Name, "client_ca", at)
		}
	}
	for _, u := range cfg.Upstreams {
		m := u.Material
		for role, kp := range map[string]*conf.KeyPair{"client": m.ClientCert, "client_sign": m.Sign, "client_enc": m.Enc} {
			if l := kp.Leaf(); l != nil {
				t.m.SetUpstreamCertNotAfter(u.Name, role, l.NotAfter)
			}
		}
		if at, ok := earliest(m.RootCAs); ok {
			t.m.SetUpstreamCertNotAfter(u.Name, "ca", at)
		}
	}
	for _, k := range cfg.KeyServers {
		if c := k.Material.ClientCert; c != nil && len(c.Certificate) > 0 {
			if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
				t.m.SetKeyServerCertNotAfter(k.Name, "client", leaf.NotAfter)
			}
		}
	}
}

// earliest returns the earliest NotAfter among certs.
func earliest(certs []*smx509.Certificate) (time.Time, bool) {
	var at time.Time
	for _, c := range certs {
		if at.IsZero() || c.NotAfter.Before(at) {
			at = c.NotAfter
		}
	}
	return at, !at.IsZero()
}
