package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminOptions configure the admin HTTP handler.
type AdminOptions struct {
	// Pprof mounts net/http/pprof under /debug/pprof/. Off by default: the
	// profiles reveal internals and cost CPU while running.
	Pprof bool
	// Reload, when set, is mounted as POST /reload (guarded by
	// GuardControl with Control): it answers 200 "reloaded" when Reload
	// returns nil and 500 with the error otherwise.
	Reload func(context.Context) error
	// Control guards POST /reload.
	Control ControlOptions
}

// SetReady sets what /readyz answers: 200 when ready, 503 otherwise. A new
// Metrics is not ready; the daemon sets it once its listeners are up, and
// clears it while shutting down.
func (m *Metrics) SetReady(ready bool) { m.ready.Store(ready) }

// Ready reports the value last given to SetReady.
func (m *Metrics) Ready() bool { return m.ready.Load() }

// handleProbes adds the liveness and readiness probes to mux: GET /healthz
// answers 200 "ok" while the process runs, GET /readyz 200 "ready" while
// ready reports true, else 503 "not ready".
func handleProbes(mux *http.ServeMux, ready func() bool) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
}

// AdminMux returns a new mux serving:
//
//	GET /metrics        Prometheus exposition of the gatherer
//	GET /healthz        200 "ok" while the process runs
//	GET /readyz         200 "ready" or 503 "not ready" (SetReady)
//	/debug/pprof/...    only when opts.Pprof
//	POST /reload        only when opts.Reload is set
//
// The daemon may add its own routes (for example "POST /reload") to the
// returned mux before serving it.
func (m *Metrics) AdminMux(opts AdminOptions) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	}))
	handleProbes(mux, m.Ready)
	if opts.Reload != nil {
		reload := opts.Reload
		mux.Handle("POST /reload", GuardControl(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if err := reload(r.Context()); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, "reload failed: "+err.Error()+"\n")
				return
			}
			io.WriteString(w, "reloaded\n")
		}), opts.Control))
	}
	if opts.Pprof {
		pp := http.NewServeMux()
		MountPprof(pp)
		mux.Handle("/debug/pprof/", GuardDebug(pp, opts.Control.HostName))
	}
	return mux
}

// MountPprof serves net/http/pprof under /debug/pprof/ on mux.
func MountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
