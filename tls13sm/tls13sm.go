package tls13sm

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/gmproxy/gmproxy/internal/record"
)

// Server returns a server-side Conn over conn. The handshake runs on the
// first Read, Write or Handshake call.
func Server(conn net.Conn, config *Config) *Conn {
	return &Conn{core: newCore(conn), config: config}
}

// Client returns a client-side Conn over conn. config must set ServerName
// or InsecureSkipVerify.
func Client(conn net.Conn, config *Config) *Conn {
	return &Conn{core: newCore(conn), config: config, isClient: true}
}

// newCore is the connection core over conn. A handshake interrupted by its
// context keeps its own failure in the error it latches.
func newCore(conn net.Conn) record.Conn {
	return record.Conn{Raw: conn, Name: "tls13sm", KeepInterruptCause: true}
}

// NewListener wraps inner so that accepted connections are server Conns.
func NewListener(inner net.Listener, config *Config) net.Listener {
	return record.NewListener(inner, func(c net.Conn) net.Conn { return Server(c, config) })
}

// Listen listens on network/laddr and returns a TLS 1.3-SM listener.
func Listen(network, laddr string, config *Config) (net.Listener, error) {
	if config == nil || (len(config.Certificates) == 0 && config.GetCertificate == nil && config.GetConfigForClient == nil) {
		return nil, errors.New("tls13sm: neither Certificates, GetCertificate, nor GetConfigForClient set in Config")
	}
	return record.Listen(network, laddr, func(c net.Conn) net.Conn { return Server(c, config) })
}

// DialWithDialer dials addr and performs the client handshake, honouring
// dialer.Timeout and dialer.Deadline for the whole operation.
func DialWithDialer(dialer *net.Dialer, network, addr string, config *Config) (*Conn, error) {
	return record.DialWithDialer(dialer, network, addr, func(raw net.Conn, host string) *Conn {
		if config == nil {
			config = &Config{}
		}
		if config.ServerName == "" {
			config = config.Clone()
			config.ServerName = host
		}
		return Client(raw, config)
	})
}

// Dial connects to addr and performs the client handshake.
func Dial(network, addr string, config *Config) (*Conn, error) {
	return DialWithDialer(new(net.Dialer), network, addr, config)
}

// Handshake runs the handshake if it has not run yet.
func (c *Conn) Handshake() error { return c.HandshakeContext(context.Background()) }

// HandshakeContext runs the handshake; if ctx ends first, the connection
// is closed and ctx's error returned (record.Conn.Handshake has the rule).
// The context also reaches the private key (smkey.ContextSigner).
func (c *Conn) HandshakeContext(ctx context.Context) error {
	if c.core.HandshakeComplete() {
		return nil
	}
	return c.core.Handshake(ctx, c.runHandshake, c.endHandshake)
}

// runHandshake runs the handshake (record.Conn.Handshake holds the locks).
func (c *Conn) runHandshake(ctx context.Context) error {
	c.hsStart = time.Now()
	if c.isClient {
		return c.clientHandshake(ctx)
	}
	return c.serverHandshake(ctx)
}

// endHandshake completes the handshake or ends its flight.
func (c *Conn) endHandshake(err error) error {
	if len(c.core.Hand) == 0 {
		// The reassembly buffer grew to the largest message the peer
		// sent (a padded ClientHello, a certificate chain: up to 64 KiB);
		// an established connection, idle most of its life, keeps none.
		// Post-handshake messages (KeyUpdate, NewSessionTicket) are small.
		c.core.Hand = nil
	}
	c.core.Rd.ReleaseIdle(c.core.Input, c.core.Hand)
	if err == nil {
		c.core.SetHandshakeComplete()
	} else {
		c.buffering = false
	}
	if c.config.OnHandshake != nil {
		c.config.OnHandshake(c.handshakeResult(err, time.Since(c.hsStart)))
	}
	return err
}

func (c *Conn) handshakeResult(err error, d time.Duration) HandshakeResult {
	r := HandshakeResult{State: c.connectionStateLocked(), Err: err, Duration: d}
	if err == nil {
		return r
	}
	if c.lastAlertSet {
		r.Alert, r.HasAlert, r.Remote = c.lastAlert, true, c.lastAlertPeer
	}
	r.Reason = failureReason(err, r)
	return r
}

func failureReason(err error, r HandshakeResult) string {
	switch {
	case record.IsTimeout(err):
		return record.ReasonTimeout
	case r.HasAlert && r.Remote:
		return record.ReasonPeerAlert
	case r.HasAlert:
		switch a := r.Alert; {
		case a == AlertHandshakeFailure, a == AlertProtocolVersion, a == AlertNoApplicationProtocol, a == AlertInsufficientSecurity:
			return record.ReasonNoSharedCipher
		case a.IsCertificate():
			return record.ReasonBadCertificate
		case a == AlertInternalError:
			return record.ReasonInternal
		}
		return record.ReasonProtocolError
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return record.ReasonEOF
	case errors.Is(err, context.Canceled):
		return record.ReasonTimeout
	}
	return record.ReasonInternal
}

// ConnectionState returns the negotiated parameters.
func (c *Conn) ConnectionState() ConnectionState {
	c.core.LockHandshake()
	defer c.core.UnlockHandshake()
	return c.connectionStateLocked()
}

func (c *Conn) connectionStateLocked() ConnectionState {
	return ConnectionState{
		Version: VersionTLS13, HandshakeComplete: c.core.HandshakeComplete(), DidResume: c.didResume,
		CipherSuite: c.cipherSuite, NegotiatedProtocol: c.alpn, ServerName: c.serverName, Group: c.group,
		HelloRetry: c.didHRR, PeerCertificates: c.peerCertificates, VerifiedChains: c.verifiedChains,
		ClientCertificate: c.client.presented, ClientVerified: c.client.verified, ClientLeafHash: c.client.leafHash,
	}
}
