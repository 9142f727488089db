package daemon

import (
	"context"
	"net"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy"
)

// connContext attaches the connection and its handshake state to the
// request context (frontdoor.ConnFromContext / StateFromContext and the
// proxy's ConnStateFrom), with the limits of the connection's listener.
func (s *httpSet) connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(frontdoor.StateConn); ok {
		ctx = frontdoor.WithConn(ctx, sc)
	}
	// The proxy keeps its per-connection record (state, first request,
	// limits) here.
	return proxy.ConnContextLimits(ctx, c, &s.proxyLim)
}
