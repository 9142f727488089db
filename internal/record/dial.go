package record

import (
	"context"
	"net"
	"time"

	"github.com/gmproxy/gmproxy/internal/dialable"
)

// listener wraps the connections an inner listener accepts.
type listener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

// NewListener returns a listener whose Accept passes each connection of
// inner through server (a protocol's server constructor).
func NewListener(inner net.Listener, server func(net.Conn) net.Conn) net.Listener {
	return &listener{Listener: inner, wrap: server}
}

// Listen listens on network/laddr and wraps accepted connections with
// server.
func Listen(network, laddr string, server func(net.Conn) net.Conn) (net.Listener, error) {
	l, err := net.Listen(network, laddr)
	if err != nil {
		return nil, err
	}
	return NewListener(l, server), nil
}

// DialWithDialer is DialContext bounded by dialer.Timeout and
// dialer.Deadline, whichever ends first, for both the connection and the
// handshake (as crypto/tls.DialWithDialer). Without either, the handshake
// runs without a context deadline.
func DialWithDialer[C Handshaker](dialer *net.Dialer, network, addr string, client func(raw net.Conn, host string) C) (C, error) {
	ctx := context.Background()
	deadline := dialer.Deadline
	if dialer.Timeout != 0 {
		if t := time.Now().Add(dialer.Timeout); deadline.IsZero() || t.Before(deadline) {
			deadline = t
		}
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	return DialContext(ctx, dialer, network, addr, client)
}

// Handshaker is a client connection whose handshake can be run with a
// context (tlcp.Conn, tls13sm.Conn).
type Handshaker interface {
	HandshakeContext(ctx context.Context) error
}

// DialContext connects to addr with d and runs the client handshake of the
// connection client builds on the raw connection; ctx bounds both. host is
// the host part of addr, the default server name. On a handshake error the
// raw connection is closed.
func DialContext[C Handshaker](ctx context.Context, d *net.Dialer, network, addr string, client func(raw net.Conn, host string) C) (C, error) {
	var zero C
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return zero, err
	}
	// An IPv6 zone (fe80::1%eth0) names this host's interface, not the
	// peer: the name to verify is the address without it.
	c := client(raw, dialable.ServerName("", addr))
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return zero, err
	}
	return c, nil
}
