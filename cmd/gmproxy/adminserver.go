package main

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/metrics"
)

// The HTTP servers of gmproxy's own listeners (admin, control, a
// worker's admin socket, the key server's metrics) are for operators and
// monitoring, not for clients: their connections are few and bounded, so
// that a program holding connections open cannot take the process's file
// descriptors from the traffic it serves.
var (
	// adminIdleTimeout closes a kept-alive connection that stays idle
	// (the supervisor's client to its workers gives its own up sooner:
	// workerIdleConnTimeout).
	adminIdleTimeout = time.Minute
	// adminMaxConns bounds the connections served at once; further ones
	// wait in the listen queue.
	adminMaxConns = 64
	// adminWriteTimeout bounds the writing of an answer, from the end of
	// its request's head: a scraper that stops reading /metrics gives its
	// connection back instead of holding one of adminMaxConns for good
	// (a profile or trace gets its seconds more: boundSeconds).
	adminWriteTimeout = time.Minute
)

// adminReadHeaderTimeout bounds a request's head.
const adminReadHeaderTimeout = 10 * time.Second

// adminReadTimeout bounds a request's head and body together. Without
// it a request that declared a body (Content-Length, or chunked) and
// sent none held its connection for good: net/http reads an unread body
// of up to 256 KiB before it answers, with no deadline. Its clients send
// no body, or a pprof form's few bytes. (net/http lifts the deadline
// once the body is read: a long reload or profile is not cut by it.)
var adminReadTimeout = 20 * time.Second

// adminMaxHeaderBytes bounds a request's head: its clients send a few
// hundred bytes (net/http's default, 1 MiB, would let each connection
// hold that much while its head arrives).
const adminMaxHeaderBytes = 16 << 10

// adminServer returns the server of one such listener.
func adminServer(h http.Handler) *http.Server {
	return &http.Server{Handler: writeBounded(h), ReadHeaderTimeout: adminReadHeaderTimeout, ReadTimeout: adminReadTimeout, IdleTimeout: adminIdleTimeout, MaxHeaderBytes: adminMaxHeaderBytes}
}

// adminMaxBodyBytes bounds what a handler reads of a request's body: the
// only body these listeners take is a pprof form's few bytes, which
// net/http would otherwise read up to 10 MB of (some 32 MiB allocated
// to parse it) on each of adminMaxConns connections.
const adminMaxBodyBytes = 64 << 10

// writeBounded gives each request of h adminWriteTimeout to be answered,
// and at most adminMaxBodyBytes of body to read. Per request, not
// http.Server.WriteTimeout, so that a profile may extend its own
// (boundSeconds).
func writeBounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(adminWriteTimeout))
		r.Body = http.MaxBytesReader(w, r.Body, adminMaxBodyBytes)
		h.ServeHTTP(w, r)
	})
}

// writeFromNow gives the answer of a request whose work took long
// adminWriteTimeout from now to be written: a reload answers when it is
// done, which may be minutes after its request (reloadTimeout), and the
// supervisor reads a worker's reload steps to commit or abort.
func writeFromNow(w http.ResponseWriter) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(adminWriteTimeout))
}

// serveAdmin serves srv on ln, at most adminMaxConns connections at once,
// until srv is closed.
func serveAdmin(srv *http.Server, ln net.Listener) {
	go srv.Serve(netutil.LimitListener(ln, adminMaxConns))
}

// adminState is the admin section in force, which the admin and control
// handlers read on every request: a reload applies its token and pprof
// to the next request (a leaked token is refused from then on), while its
// addresses need a restart (see startedWith). The zero value is no token
// and no pprof.
type adminState struct{ a atomic.Pointer[conf.Admin] }

// set makes a the admin section in force.
func (s *adminState) set(a conf.Admin) { s.a.Store(&a) }

// token is the bearer token POST /reload must carry, nil for none.
func (s *adminState) token() []byte {
	if a := s.a.Load(); a != nil {
		return a.Token
	}
	return nil
}

// pprof reports whether /debug/pprof/ is served.
func (s *adminState) pprof() bool {
	a := s.a.Load()
	return a != nil && a.Pprof
}

// hostName is the host of admin.address, which GuardDebug accepts as
// the Host when it is a name.
func (s *adminState) hostName() string {
	a := s.a.Load()
	if a == nil {
		return ""
	}
	host, _, _ := net.SplitHostPort(a.Address)
	return host
}

// whilePprof serves h while admin.pprof is on, else 404 as though it
// were not mounted; and only to requests metrics.GuardDebug lets through
// (no page of another site, no rebound Host), the host name it accepts
// being admin.address's.
func (s *adminState) whilePprof(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.pprof() {
			http.NotFound(w, r)
			return
		}
		metrics.GuardDebug(h, s.hostName()).ServeHTTP(w, r)
	})
}

// mountPprof serves net/http/pprof under /debug/pprof/ on mux while
// admin.pprof is on, a profile or trace of at most maxProfileSeconds.
func (s *adminState) mountPprof(mux *http.ServeMux) {
	pp := http.NewServeMux()
	metrics.MountPprof(pp)
	mux.Handle("/debug/pprof/", s.whilePprof(boundSeconds(pp)))
}

// maxProfileSeconds bounds the seconds of a CPU profile, a trace or a
// delta profile.
const maxProfileSeconds = 600

// boundSeconds refuses a pprof request whose seconds exceed
// maxProfileSeconds: net/http/pprof bounds them only by the server's
// WriteTimeout, which the admin server has none of (a profile may take
// long), so one request could keep the tracer on for days. They are read
// as pprof reads them, from the query or a form body (FormValue), and as
// the laxest of its parsers (the trace's float). A request with seconds
// has them on top of adminWriteTimeout to be answered.
func boundSeconds(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A form that cannot be read (over adminMaxBodyBytes) would
		// read as no seconds, which pprof takes for its default.
		if err := r.ParseForm(); err != nil {
			code := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				code = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "form: "+err.Error(), code)
			return
		}
		if v := r.FormValue("seconds"); v != "" {
			sec, err := strconv.ParseFloat(v, 64)
			if err == nil && !(sec <= maxProfileSeconds) {
				http.Error(w, "seconds: want at most "+strconv.Itoa(maxProfileSeconds), http.StatusBadRequest)
				return
			}
			if err == nil && sec > 0 {
				http.NewResponseController(w).SetWriteDeadline(time.Now().Add(adminWriteTimeout + time.Duration(sec*float64(time.Second))))
			}
		}
		h.ServeHTTP(w, r)
	})
}
