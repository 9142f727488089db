package main

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
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
)

// adminReadHeaderTimeout bounds a request's head.
const adminReadHeaderTimeout = 10 * time.Second

// adminServer returns the server of one such listener.
func adminServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: adminReadHeaderTimeout, IdleTimeout: adminIdleTimeout}
}

// serveAdmin serves srv on ln, at most adminMaxConns connections at once,
// until srv is closed.
func serveAdmin(srv *http.Server, ln net.Listener) {
	go srv.Serve(netutil.LimitListener(ln, adminMaxConns))
}
