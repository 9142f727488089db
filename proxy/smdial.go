package proxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/dialable"
	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// Re-encryption to SM backends (like Tengine's proxy_enable_ntls): the
// upstream's pool dials TCP, runs our TLCP or TLS 1.3-SM client handshake
// and keeps the encrypted connection for HTTP/1.1 keep-alive reuse. Client
// sessions are cached per upstream and target so that new pooled
// connections resume.

const smClientSessionCacheSize = 256

// smDialer builds the built-in TLCP / TLS 1.3-SM dialer of an upstream.
func smDialer(uc *UpstreamConfig, d *net.Dialer) (DialFunc, error) {
	tc := uc.TLS
	if tc == nil {
		tc = &UpstreamTLSConfig{}
	}
	var roots *smx509.CertPool
	if tc.CA != "" {
		// Bounded and regular files only (stdTLSConfig's reason).
		pemData, err := namedfile.Read(tc.CA, namedfile.Max)
		if err != nil {
			return nil, fmt.Errorf("%s ca: %w", uc.Protocol, err)
		}
		roots = smx509.NewCertPool()
		if !roots.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("%s ca %s: no certificates", uc.Protocol, tc.CA)
		}
	}
	if roots == nil && !tc.InsecureSkipVerify {
		return nil, fmt.Errorf("%s upstream needs tls.ca (or insecure_skip_verify)", uc.Protocol)
	}
	switch uc.Protocol {
	case upstreamproto.TLCP:
		cfg := &tlcp.Config{
			RootCAs:                    roots,
			ServerName:                 tc.ServerName,
			InsecureSkipVerify:         tc.InsecureSkipVerify,
			NoClientExtensions:         tc.NoClientExtensions,
			ClientECDHEParamsAsVector:  tc.ClientECDHEParamsAsVector,
			ClientSignCertOnly:         tc.ClientSignCertOnly,
			ClientRawCertificateVerify: tc.ClientRawCertificateVerify,
			ClientSessionCache:         tlcp.NewLRUClientSessionCache(smClientSessionCacheSize),
			// The protocol the Transport speaks over this connection
			// (RFC 7301), as the daemon's dialer offers it: a server
			// choosing by ALPN otherwise guesses. A ClientHello without
			// extensions (NoClientExtensions) carries none.
			NextProtos: []string{"http/1.1"},
		}
		if tc.SignCert != "" || tc.EncCert != "" {
			// Bounded and regular files only (readClientFiles).
			files, err := readClientFiles(tc.SignCert, tc.SignKey, tc.EncCert, tc.EncKey)
			if err != nil {
				return nil, fmt.Errorf("tlcp client certificates: %w", err)
			}
			cert, err := tlcp.X509KeyPair(files[0], files[1], files[2], files[3], tc.KeyPassword)
			clear(files[1]) // the keys, parsed
			clear(files[3])
			if err != nil {
				return nil, fmt.Errorf("tlcp client certificates (files %s, %s, %s, %s): %w", tc.SignCert, tc.SignKey, tc.EncCert, tc.EncKey, err)
			}
			cfg.Certificates = []tlcp.Certificate{cert}
		}
		var err error
		if cfg.CipherSuites, err = parseCiphers(upstreamproto.TLCP, tc.Ciphers, tlcp.ParseCipherSuite); err != nil {
			return nil, err
		}
		return smHandshakeDialer(d, upstreamproto.TLCP, cfg, cfg.ServerName, func(c *tlcp.Config, name, addr string) *tlcp.Config {
			c = c.Clone()
			c.ServerName = name
			c.ClientSessionCache = TargetSessions[*tlcp.ClientSessionState]{Cache: c.ClientSessionCache, Target: addr}
			return c
		}, func(raw net.Conn, c *tlcp.Config) handshaker { return tlcp.Client(raw, c) }), nil
	case upstreamproto.TLS13SM:
		cfg := &tls13sm.Config{
			RootCAs:            roots,
			ServerName:         tc.ServerName,
			InsecureSkipVerify: tc.InsecureSkipVerify,
			ClientSessionCache: tls13sm.NewLRUClientSessionCache(smClientSessionCacheSize),
			// The protocol the Transport speaks over this connection
			// (RFC 7301), as the daemon's dialer offers it.
			NextProtos: []string{"http/1.1"},
		}
		if tc.Cert != "" {
			// Bounded and regular files only (readClientFiles).
			files, err := readClientFiles(tc.Cert, tc.Key)
			if err != nil {
				return nil, fmt.Errorf("tls13sm client certificate: %w", err)
			}
			cert, err := tls13sm.X509KeyPair(files[0], files[1], tc.KeyPassword)
			clear(files[1]) // the key, parsed
			if err != nil {
				return nil, fmt.Errorf("tls13sm client certificate (files %s, %s): %w", tc.Cert, tc.Key, err)
			}
			cfg.Certificates = []tls13sm.Certificate{cert}
		}
		var err error
		if cfg.CipherSuites, err = parseCiphers(upstreamproto.TLS13SM, tc.Ciphers, tls13sm.ParseCipherSuite); err != nil {
			return nil, err
		}
		return smHandshakeDialer(d, upstreamproto.TLS13SM, cfg, cfg.ServerName, func(c *tls13sm.Config, name, addr string) *tls13sm.Config {
			c = c.Clone()
			c.ServerName = name
			c.ClientSessionCache = TargetSessions[*tls13sm.ClientSessionState]{Cache: c.ClientSessionCache, Target: addr}
			return c
		}, func(raw net.Conn, c *tls13sm.Config) handshaker { return tls13sm.Client(raw, c) }), nil
	}
	return nil, fmt.Errorf("protocol %q has no built-in dialer", uc.Protocol)
}

// parseCiphers maps configured suite names to IDs (nil: the defaults).
func parseCiphers(proto string, names []string, parse func(string) (uint16, error)) ([]uint16, error) {
	var ids []uint16
	for _, name := range names {
		id, err := parse(name)
		if err != nil {
			return nil, fmt.Errorf("%s ciphers: %w", proto, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// handshaker is a client connection of tlcp or tls13sm before its handshake.
type handshaker interface {
	net.Conn
	HandshakeContext(ctx context.Context) error
}

// maxTargetConfigs bounds the configs a TargetConfigs lookup keeps: the
// addresses that names resolve to change over a configuration's life
// (re-resolution), and a config is cheap to make again.
const maxTargetConfigs = 1024

// TargetConfigs returns a lookup of the client config for a dial of the
// target address addr in ctx, made by mk with the server name
// (serverName, or else addr's host) and the address connected to,
// DialAddr(ctx, addr), which keys the target's sessions: the addresses a
// name resolves to are as many servers, that need not share session
// state, and with sessions kept per name each dial offered the session of
// the address dialled last (nginx keeps one per peer address).
func TargetConfigs[C any](mk func(name, to string) *C, serverName string) func(ctx context.Context, addr string) *C {
	var m sync.Map // addr + " " + to → *C
	var n atomic.Int64
	return func(ctx context.Context, addr string) *C {
		to := DialAddr(ctx, addr)
		key := addr + " " + to
		if c, ok := m.Load(key); ok {
			return c.(*C)
		}
		if n.Add(1) > maxTargetConfigs {
			m.Clear()
			n.Store(1)
		}
		c, _ := m.LoadOrStore(key, mk(dialable.ServerName(serverName, addr), to))
		return c.(*C)
	}
}

// smHandshakeDialer dials TCP and runs the client handshake of proto with
// the config for the target, which withTarget makes of base for the
// server name (serverName, or else the target's host) and the target's
// address; failures are dial errors.
func smHandshakeDialer[C any](d *net.Dialer, proto string, base *C, serverName string,
	withTarget func(base *C, name, addr string) *C, client func(net.Conn, *C) handshaker) DialFunc {
	configs := TargetConfigs(func(name, addr string) *C { return withTarget(base, name, addr) }, serverName)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := d.DialContext(ctx, network, DialAddr(ctx, addr))
		if err != nil {
			return nil, &dialError{err}
		}
		c := client(raw, configs(ctx, addr))
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &dialError{fmt.Errorf("%s handshake with %s: %w", proto, addr, err)}
		}
		return c, nil
	}
}

// TargetSessions is the view of an upstream's client session cache
// (tlcp.ClientSessionCache, tls13sm.ClientSessionCache,
// tls.ClientSessionCache) that the connections to one target address
// use: the three packages key sessions by server name, which all the
// targets share when tls.server_name is set, and all the addresses of a
// name, so that in one cache entry each new connection found the session
// of the target dialed last and resumed only when that was the same
// target. Keys get Target in front.
type TargetSessions[S any] struct {
	Cache interface {
		Get(key string) (S, bool)
		Put(key string, s S)
	}
	Target string
}

// Get returns the target's session for key.
func (t TargetSessions[S]) Get(key string) (S, bool) { return t.Cache.Get(t.Target + " " + key) }

// Put stores (or, as the caches do with a nil state, deletes) the
// target's session for key.
func (t TargetSessions[S]) Put(key string, s S) { t.Cache.Put(t.Target+" "+key, s) }
