package proxy

import (
	"github.com/gmproxy/gmproxy/internal/rawsock"

	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// dialError marks a failure to establish a connection to a target
// (TCP connect or TLS/TLCP handshake): nothing of the request was sent, so
// it is always safe to retry elsewhere.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// DialFunc dials a backend connection.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DefaultMaxResponseHeaderBytes and DefaultMaxResponseHeaderFields are
// the defaults of TransportConfig.MaxResponseHeaderBytes and
// MaxResponseHeaderFields: a client's head is bounded too, and a backend
// head of a million empty fields (1 MiB) cost tens of MiB of heap per
// response. Envoy's are 60 KiB and 100 fields, nginx's 4 or 8 KiB.
const (
	DefaultMaxResponseHeaderBytes  = 64 << 10
	DefaultMaxResponseHeaderFields = 256
)

// h2UpstreamStreamWindow is the receive window of a stream to an HTTP/2
// target: what the target may send ahead of the client, which the proxy
// then holds. Go's default, 4 MiB, let a client that reads nothing make the
// proxy hold 4 MiB per stream, up to max_requests_per_client streams per
// address, until send_timeout. 256 KiB still covers a target's bandwidth
// at a data-centre round trip (256 MB/s at 1 ms); the connection's window
// stays Go's large default, so that one stalled stream never stalls the
// others sharing the target connection.
const h2UpstreamStreamWindow = 256 << 10

// newTransport builds the keep-alive pool of an upstream. One
// http.Transport per upstream keeps one pool per target address (it keys
// connections by host:port), with MaxIdleConnsPerHost, IdleConnTimeout and
// MaxConnsPerHost applying per target.
// connected, when not nil, is told how long each new connection took to
// open.
func newTransport(uc *UpstreamConfig, connected func(time.Duration, error)) (*http.Transport, string, DialFunc, error) {
	tc := uc.Transport
	connectTimeout := durOr(tc.ConnectTimeout, 5*time.Second)
	d := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second, ControlContext: RefuseUnusable}
	t := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, DialAddr(ctx, addr))
			if err != nil {
				return nil, &dialError{err}
			}
			return rawsock.Wrap(c), nil
		},
		MaxIdleConns:           0, // no global cap; per target below
		MaxIdleConnsPerHost:    intOr(tc.MaxIdleConns, 64),
		MaxConnsPerHost:        tc.MaxConnsPerTarget,
		IdleConnTimeout:        durOr(tc.IdleTimeout, 90*time.Second),
		ResponseHeaderTimeout:  durOr(tc.ResponseHeaderTimeout, 60*time.Second),
		TLSHandshakeTimeout:    durOr(tc.HandshakeTimeout, 10*time.Second),
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: max(intOr(tc.MaxResponseHeaderBytes, DefaultMaxResponseHeaderBytes), 1<<10),
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream: h2UpstreamStreamWindow,
			// A frozen target, or a path that dropped it: TCP
			// keep-alive does not probe while data waits to be
			// acknowledged, so without pings the connection, and the
			// requests multiplexed on it, would wait for
			// response_header (or 15 minutes of retransmissions).
			SendPingTimeout: max(tc.H2PingTimeout, 0),
			PingTimeout:     min(max(tc.H2PingTimeout, 0), 15*time.Second),
		},
	}
	if tc.MaxIdleConns < 0 {
		t.DisableKeepAlives = true
	}
	scheme := "http"
	dial := DialFunc(t.DialContext)
	wt := max(durOr(tc.WriteTimeout, DefaultUpstreamWriteTimeout), 0)
	var ownTLS DialFunc // the Transport's TLS connections (alpnDialer), if the proxy makes them
	switch uc.Protocol {
	case "", upstreamproto.HTTP:
		t.Protocols = new(http.Protocols)
		t.Protocols.SetHTTP1(true)
	case upstreamproto.H2C:
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	case upstreamproto.H2, upstreamproto.TLS:
		scheme = "https"
		cfg, err := stdTLSConfig(uc.TLS)
		if err != nil {
			return nil, "", nil, err
		}
		t.TLSClientConfig = cfg
		t.ForceAttemptHTTP2 = true
		if uc.DialTLSContext != nil {
			t.DialTLSContext = handshakeDialer(uc.DialTLSContext, tc)
		} else {
			dial = handshakeDialer(tlsDialer(d, cfg), tc) // stream mode's
			ownTLS = handshakeDialer(alpnDialer(d, cfg, wt), tc)
		}
	case upstreamproto.TLCP, upstreamproto.TLS13SM:
		scheme = "https"
		dial = uc.DialTLSContext
		if dial == nil {
			var err error
			if dial, err = smDialer(uc, d); err != nil {
				return nil, "", nil, err
			}
		}
		t.DialTLSContext = handshakeDialer(dial, tc)
	default:
		return nil, "", nil, fmt.Errorf("unknown protocol %q (want one of %s)", uc.Protocol, strings.Join(upstreamproto.Names(), ", "))
	}
	if t.DialTLSContext != nil {
		t.DialTLSContext = timedDial(t.DialTLSContext, connected)
		dial = t.DialTLSContext
	} else {
		t.DialContext = timedDial(t.DialContext, connected)
		dial = timedDial(dial, connected)
	}
	if wt > 0 {
		// write_timeout on every connection the Transport writes
		// (h1Client's and stream mode's, dial, have their own).
		if t.DialTLSContext != nil {
			// A hook's connection for tls or h2 may be the *tls.Conn
			// the Transport must see to speak HTTP/2: left as it is
			// (sendWatch bounds its bodies).
			if scansHeads(uc.Protocol) {
				t.DialTLSContext = sendTimeouts(t.DialTLSContext, wt)
			}
		} else {
			t.DialContext = sendTimeouts(t.DialContext, wt)
		}
	}
	if scansHeads(uc.Protocol) {
		// The Transport speaks HTTP/1.1 on connections this dials (not
		// under its own TLS): they keep the Connection fields it drops.
		// h1Client's (dial) scan with their own reader.
		if t.DialTLSContext != nil {
			t.DialTLSContext = scanning(t.DialTLSContext)
		} else {
			t.DialContext = scanning(t.DialContext)
		}
	} else if uc.DialTLSContext != nil && ownTLS == nil {
		// A tls or h2 hook's connections: those that speak HTTP/1.1
		// are scanned as alpnDialer's are; a *tls.Conn that negotiated
		// h2 is left for the Transport to see.
		t.DialTLSContext = scanning(t.DialTLSContext)
	}
	if ownTLS != nil {
		// Set last: alpnDialer bounds writes and scans heads itself,
		// under TLS and for HTTP/1.1 only.
		t.DialTLSContext = timedDial(ownTLS, connected)
	}
	return t, scheme, dial, nil
}

// http1Only marks the context of a request that needs HTTP/1.1 (a
// WebSocket upgrade): net/http's Transport dials a connection of its own
// for it, with the request's context values, which alpnDialer offers
// http/1.1 only, as the Transport does when it makes the TLS connection.
type http1Only struct{}

// alpnDialer makes the TLS connections of net/http's Transport for the
// tls and h2 protocols (which it would otherwise make itself, out of the
// proxy's sight), offering h2 and http/1.1 as it does: a connection that
// speaks HTTP/2 is returned as the *tls.Conn the Transport needs to see
// to speak it; one that speaks HTTP/1.1 as a scanConn, so that its heads
// keep the Connection fields http.ReadResponse drops. Writes go through
// sendTimed (write_timeout d, 0: none) under TLS.
func alpnDialer(d *net.Dialer, base *tls.Config, wt time.Duration) DialFunc {
	offer := func(protos ...string) func(ctx context.Context, addr string) *tls.Config {
		cfg := base.Clone()
		cfg.NextProtos = protos
		return TargetConfigs(func(name, to string) *tls.Config { return targetTLS(cfg, name, to) }, cfg.ServerName)
	}
	both, h1 := offer("h2", "http/1.1"), offer("http/1.1")
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		configs := both
		if ctx.Value(http1Only{}) != nil {
			configs = h1
		}
		raw, err := d.DialContext(ctx, network, DialAddr(ctx, addr))
		if err != nil {
			return nil, &dialError{err}
		}
		var c net.Conn = rawsock.Wrap(raw)
		if wt > 0 {
			c = newSendTimedConn(c, wt)
		}
		tc := tls.Client(c, configs(ctx, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &dialError{fmt.Errorf("tls handshake with %s: %w", addr, err)}
		}
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return tc, nil
		}
		return &scanConn{Conn: tc}, nil
	}
}

// tlsDialer makes the TLS connections of stream mode (tls and h2), as
// tls.Dialer does but connecting to DialAddr: a target resolved from a
// name is dialled with the name as server name.
func tlsDialer(d *net.Dialer, base *tls.Config) DialFunc {
	configs := TargetConfigs(func(name, to string) *tls.Config { return targetTLS(base, name, to) }, base.ServerName)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := d.DialContext(ctx, network, DialAddr(ctx, addr))
		if err != nil {
			return nil, err
		}
		c := tls.Client(raw, configs(ctx, addr))
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return c, nil
	}
}

// targetTLS returns base for the server name and the target address to
// connect to: crypto/tls keys its sessions by server name, which the
// targets of an upstream with tls.server_name, and the addresses of a
// name, share; in one entry each dial found the session of the target
// dialled last, which another server cannot resume.
func targetTLS(base *tls.Config, name, to string) *tls.Config {
	c := base.Clone()
	c.ServerName = name
	if c.ClientSessionCache != nil {
		c.ClientSessionCache = TargetSessions[*tls.ClientSessionState]{Cache: c.ClientSessionCache, Target: to}
	}
	return c
}

// scansHeads reports whether the Transport of an upstream speaking proto
// reads HTTP/1.1 response heads from connections the proxy dials, which
// newTransport wraps in scanConn: plain HTTP and the SM protocols. Over
// tls and h2, alpnDialer wraps those that speak HTTP/1.1; h2c has no
// Connection field.
func scansHeads(proto string) bool {
	switch proto {
	case "", upstreamproto.HTTP, upstreamproto.TLCP, upstreamproto.TLS13SM:
		return true
	}
	return false
}

// timedDial reports how long each dial took to connected.
func timedDial(dial DialFunc, connected func(time.Duration, error)) DialFunc {
	if connected == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		start := time.Now()
		c, err := dial(ctx, network, addr)
		connected(time.Since(start), err)
		return c, err
	}
}

// handshakeDialer bounds a TLS-style dial by the handshake timeout and
// marks its failures as dial errors.
func handshakeDialer(dial DialFunc, tc TransportConfig) DialFunc {
	timeout := durOr(tc.ConnectTimeout, 5*time.Second) + durOr(tc.HandshakeTimeout, 10*time.Second)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c, err := dial(ctx, network, addr)
		if err != nil {
			var de *dialError
			if errors.As(err, &de) {
				return nil, err
			}
			return nil, &dialError{err}
		}
		return c, nil
	}
}

// upstreamTLSSessions bounds the sessions an upstream of protocol tls or
// h2 keeps to resume (one per target address and server name).
const upstreamTLSSessions = 256

func stdTLSConfig(u *UpstreamTLSConfig) (*tls.Config, error) {
	// Sessions are resumed (nginx's proxy_ssl_session_reuse, on by
	// default): a target that closes its connections costs one full
	// handshake, not one per connection. The cache is this configuration's,
	// so that a reload with other CAs or certificates starts afresh.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(upstreamTLSSessions)}
	if u == nil {
		return cfg, nil
	}
	cfg.ServerName = u.ServerName
	cfg.InsecureSkipVerify = u.InsecureSkipVerify
	cfg.RootCAs = u.RootCAs
	if u.Certificate != nil {
		cfg.Certificates = []tls.Certificate{*u.Certificate}
	}
	if u.CA != "" && u.RootCAs == nil {
		// Bounded and regular files only, as conf reads it: a library
		// caller's path is not checked by conf, and a FIFO there would
		// block New (and a reload) for good.
		pem, err := namedfile.Read(u.CA, namedfile.Max)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca %s: no certificates", u.CA)
		}
		cfg.RootCAs = pool
	}
	if (u.Cert != "" || u.Key != "") && u.Certificate == nil {
		files, err := readClientFiles(u.Cert, u.Key)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		kp, err := tls.X509KeyPair(files[0], files[1])
		clear(files[1]) // the key, parsed
		if err != nil {
			return nil, fmt.Errorf("tls client certificate (files %s, %s): %w", u.Cert, u.Key, err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}

// readClientFiles reads the files of an upstream's client certificate
// (certificates, then keys) as the CA file is read and for the same
// reason: bounded and regular files only, for a library caller's paths
// are not checked by conf. Errors name the file.
func readClientFiles(names ...string) ([][]byte, error) {
	files := make([][]byte, len(names))
	for i, name := range names {
		b, err := namedfile.Read(name, namedfile.Max)
		if err != nil {
			return nil, err
		}
		files[i] = b
	}
	return files, nil
}
