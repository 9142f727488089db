// Package proxy forwards requests and streams arriving on handshake
// connections to upstream pools (HTTP/1.1, HTTP/2, raw TCP, and TLCP or
// TLS 1.3-SM re-encryption), in the shape of Caddy's reverse_proxy: handler,
// transport, health checks, selection policies, upstreams and streaming.
//
// One concern per file: config.go (the plain Go configuration the daemon
// maps its YAML onto), proxy.go (New, ServeConn/ServeHTTP1/ServeHTTP2/
// ServeStream, Shutdown, Close), handler.go (sites, routes, header edits,
// forwarded, TLS and client-certificate headers), reverseproxy.go (the
// forwarding loop, retries, 502/503/504), upstreams.go and
// selectionpolicies.go (targets, backups, round_robin, least_conn,
// ip_hash, hash), healthchecks.go (passive and active), httptransport.go
// and smdial.go (keep-alive pools; HTTP/1.1, h2c, h2, TLCP and TLS 1.3-SM
// to backends), streaming.go (body streaming, flushing, Upgrade tunnels,
// RFC 8441), tcpstream.go (TCP stream mode), proxyproto.go (PROXY protocol
// v1/v2), accesslog.go (combined, json and template formats), connstate.go
// (the handshake state in request contexts).
package proxy

import "time"

// RequestEvent describes one finished HTTP request.
type RequestEvent struct {
	Site, Route, Method string
	Status              int
	Duration            time.Duration
	Upstream, Target    string // empty for fixed responses and redirects
	UpstreamDuration    time.Duration
	UpstreamStatus      int // status the target answered; 0 when none answered
	BytesIn, BytesOut   int64
	// RateLimited: the route's rate_limit answered it (429) before any
	// target was asked.
	RateLimited bool
}

// Observer receives proxy events; metrics implements it. Implementations must
// be cheap and safe for concurrent use.
type Observer interface {
	RequestStarted(site string)
	RequestDone(ev RequestEvent)
	UpstreamHealth(upstream, target string, healthy bool)
	UpstreamRetry(upstream string)
	// StreamBytes reports bytes moved by TCP stream mode and tunnels.
	StreamBytes(site, upstream string, in, out int64)
}

// NopObserver implements Observer and does nothing.
type NopObserver struct{}

func (NopObserver) RequestStarted(string)                    {}
func (NopObserver) RequestDone(RequestEvent)                 {}
func (NopObserver) UpstreamHealth(string, string, bool)      {}
func (NopObserver) UpstreamRetry(string)                     {}
func (NopObserver) StreamBytes(string, string, int64, int64) {}

// UpstreamConnectObserver is optionally implemented by an Observer that
// wants the time each new upstream connection took to open (TCP connect
// plus the TLS or TLCP handshake), failed attempts included.
type UpstreamConnectObserver interface {
	UpstreamConnect(upstream string, d time.Duration, err error)
}

// UpstreamResolveObserver is optionally implemented by an Observer that
// follows the resolution of targets given by host name: a lookup that
// failed (the addresses in force are kept), and a target whose address a
// new resolution dropped, whose health series should go.
type UpstreamResolveObserver interface {
	UpstreamResolveFailed(upstream string)
	UpstreamTargetRemoved(upstream, target string)
}

// StreamObserver is optionally implemented by an Observer that follows
// the TCP stream sessions and tunnels (WebSocket and other Upgrades,
// extended CONNECT) open: StreamOpened is called when one starts moving
// bytes, and the function it returns once when it ended.
type StreamObserver interface {
	StreamOpened(site, upstream string) (closed func())
}

// streamOpened reports a stream session or tunnel of site to upstream
// opened to the observer, if it follows them; call the function returned
// when it ends.
func (p *Proxy) streamOpened(site, upstream string) (closed func()) {
	if so, ok := p.obs.(StreamObserver); ok {
		return so.StreamOpened(site, upstream)
	}
	return func() {}
}
