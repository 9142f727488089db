package proxy

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/gmproxy/gmproxy/handshake"
)

// connInfo is what the proxy keeps per client connection in the request
// context: the handshake state and whether a request was already logged
// (the handshake time is reported on the first request only).
type connInfo struct {
	state     handshake.ConnState
	hasState  bool
	requested atomic.Bool
}

type connInfoKey struct{}

// WithConnState returns a context carrying the handshake state of a
// connection. The daemon calls it from http.Server.ConnContext (see
// ConnContext); the proxy reads it for forwarded/TLS headers and the access
// log.
func WithConnState(ctx context.Context, st handshake.ConnState) context.Context {
	return context.WithValue(ctx, connInfoKey{}, &connInfo{state: st, hasState: true})
}

// ConnStateFrom returns the handshake state stored by WithConnState.
func ConnStateFrom(ctx context.Context) (handshake.ConnState, bool) {
	ci, _ := ctx.Value(connInfoKey{}).(*connInfo)
	if ci == nil || !ci.hasState {
		return handshake.ConnState{}, false
	}
	return ci.state, true
}

// ConnContext is an http.Server.ConnContext function: connections that
// implement handshake.StateConn get their state attached; others get an
// empty per-connection record so that first-request logic still works.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(handshake.StateConn); ok {
		return WithConnState(ctx, sc.ConnState())
	}
	return context.WithValue(ctx, connInfoKey{}, &connInfo{})
}

func connInfoFrom(ctx context.Context) *connInfo {
	ci, _ := ctx.Value(connInfoKey{}).(*connInfo)
	return ci
}
