package conf

import (
	"fmt"
	"slices"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/keyserver"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/balance"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// Default values, also stated in the field documentation.
const (
	DefaultListenAddress           = "127.0.0.1:8443"
	DefaultHandshakeTimeout        = 10 * time.Second
	DefaultDeferAccept             = time.Second
	DefaultMaxHandshakes           = 1024
	DefaultMaxConnections          = 16384
	DefaultMaxHandshakesPerClient  = 64
	DefaultMaxConnectionsPerClient = 1024
	DefaultMaxHandshakeBytes       = 16 << 20
	DefaultShutdownGrace           = 30 * time.Second
	DefaultSessionCacheSize        = 20480
	DefaultSessionLifetime         = 5 * time.Minute
	DefaultTicketRotation          = time.Hour
	DefaultAdminAddress            = "127.0.0.1:9100"
	DefaultOffloadQueue            = 4096
	DefaultAccessLogBuffer         = proxy.DefaultAccessLogQueue
	DefaultAccessLogFlush          = time.Second
	DefaultMaxHeaderBytes          = 64 << 10
	DefaultReadHeaderTimeout       = 30 * time.Second
	DefaultHTTPIdleTimeout         = 2 * time.Minute
	DefaultMaxStreams              = 250
	DefaultMaxRequestsPerClient    = 1024
	DefaultRequestBuffer           = 64 << 10
	MaxRequestBuffer               = 16 << 20
	// MaxHeadBytes bounds max_header_bytes and max_response_header_bytes:
	// far below HTTP/2's 32-bit SETTINGS_MAX_HEADER_LIST_SIZE, which a
	// value past 4GiB wraps, and a head one connection may hold.
	MaxHeadBytes = 16 << 20
	// MaxKeyPrefix bounds sessions.store.key_prefix (bytes).
	MaxKeyPrefix                   = 256
	DefaultBodyTimeout             = 60 * time.Second
	DefaultSendTimeout             = 60 * time.Second
	DefaultHTTP2MaxResetRate       = 100
	DefaultConnectTimeout          = 5 * time.Second
	DefaultResponseHeader          = 60 * time.Second
	DefaultUpstreamIdle            = 90 * time.Second
	DefaultUpstreamRead            = 60 * time.Second
	DefaultUpstreamWrite           = 60 * time.Second
	DefaultMaxResponseHeaderBytes  = 64 << 10
	DefaultMaxResponseHeaderFields = 256
	DefaultTunnelIdle              = 10 * time.Minute
	DefaultGRPCTimeoutMax          = 10 * time.Minute
	DefaultResolveInterval         = 30 * time.Second
	DefaultKeepaliveMaxIdle        = 32
	DefaultPassiveMaxFails         = 3
	DefaultPassiveFailWindow       = 10 * time.Second
	DefaultPassiveCoolDown         = 30 * time.Second
	DefaultActiveInterval          = 10 * time.Second
	DefaultActiveTimeout           = 2 * time.Second
	DefaultActiveRise              = 2
	DefaultActiveFall              = 3
	DefaultRetryTries              = 3
	DefaultRetryTotalTime          = 15 * time.Second
	DefaultStreamIdleTimeout       = 5 * time.Minute
	DefaultStreamConnect           = 5 * time.Second
	DefaultRespondContentType      = "text/plain; charset=utf-8"

	// DefaultAcceptRawCertificateVerify is tlcp.accept_raw_certificate_verify:
	// both client CertificateVerify forms are accepted.
	DefaultAcceptRawCertificateVerify = true

	DefaultKeyServerConnectTimeout          = 2 * time.Second
	DefaultKeyServerTimeout                 = 3 * time.Second
	DefaultKeyServerPoolSize                = 2
	DefaultKeyServerMaxInFlight             = 64
	DefaultKeyServerHealthInterval          = keyserver.DefaultHealthInterval
	DefaultKeyServerIdleTimeout             = keyserver.DefaultIdleTimeout
	DefaultKeyServerHandshake               = keyserver.DefaultHandshakeTimeout
	DefaultKeyServerMaxConnections          = keyserver.DefaultMaxConns
	DefaultKeyServerMaxHandshakes           = keyserver.DefaultMaxHandshakes
	DefaultKeyServerMaxHandshakesPerAddress = keyserver.DefaultMaxHandshakesPerAddr
	DefaultKeyServerAuditInterval           = keyserver.DefaultAuditInterval
	DefaultKeyServerShutdownGrace           = 10 * time.Second

	// MaxKeyServerPoolSize bounds key_servers[].pool_size: a key server
	// takes at most this many connections of one client by default
	// (clients[].max_connections), each worker opening pool_size.
	MaxKeyServerPoolSize = 64 // keyserver.DefaultLimits.MaxConns
)

// Default TLCP suites (Tongsuo names), in preference order.
var DefaultTLCPCiphers = []string{"ECC-SM2-SM4-GCM-SM3", "ECC-SM2-SM4-CBC-SM3", "ECDHE-SM2-SM4-GCM-SM3", "ECDHE-SM2-SM4-CBC-SM3"}

// Default TLS 1.3 SM suites, in preference order.
var DefaultTLS13SMCiphers = []string{"TLS_SM4_GCM_SM3", "TLS_SM4_CCM_SM3"}

// defaulter is implemented by structs that have defaults. The decoder calls
// setDefaults on every freshly allocated value (list elements, optional
// sections) before filling it from YAML, so YAML values override defaults
// and an explicit 0 stays 0.
type defaulter interface{ setDefaults() }

// Default returns a configuration with every default filled in and no
// listeners, sites or upstreams.
func Default() *Config {
	c := &Config{}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	c.ShutdownGrace = DefaultShutdownGrace
	c.Sessions.setDefaults()
	c.Admin.setDefaults()
	c.AccessLog.setDefaults()
	c.Log.setDefaults()
	c.Offload.setDefaults()
}

func (l *Listener) setDefaults() {
	l.Protocols = family.Names()
	l.TLCPSuitesInTLSHello = family.TLCPInTLSReject
	l.HandshakeTimeout = DefaultHandshakeTimeout
	l.DeferAccept = DefaultDeferAccept
	l.MaxHandshakes = DefaultMaxHandshakes
	l.MaxConnections = DefaultMaxConnections
	l.MaxHandshakesPerClient = DefaultMaxHandshakesPerClient
	l.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient
	l.MaxHandshakeBytes = DefaultMaxHandshakeBytes
	l.PlainHTTP = "close"
	l.HTTP.setDefaults()
}

func (h *HTTPServer) setDefaults() {
	h.MaxHeaderBytes = DefaultMaxHeaderBytes
	h.ReadHeaderTimeout = DefaultReadHeaderTimeout
	h.IdleTimeout = DefaultHTTPIdleTimeout
	h.MaxConcurrentStreams = DefaultMaxStreams
	h.BodyTimeout = DefaultBodyTimeout
	h.SendTimeout = DefaultSendTimeout
	h.HTTP2MaxResetRate = DefaultHTTP2MaxResetRate
	h.MaxRequestsPerClient = DefaultMaxRequestsPerClient
	h.RequestBuffer = DefaultRequestBuffer
}

func (s *Site) setDefaults() { s.ClientAuth.Mode = ClientAuthNone }

func (t *SiteTLS) setDefaults() { t.MinVersion = "1.2" }

func (t *SiteTLCP) setDefaults() { t.AcceptRawCertificateVerify = DefaultAcceptRawCertificateVerify }

func (r *Route) setDefaults() { r.HostHeader = "passthrough" }

func (f *Files) setDefaults() { f.Index = "index.html" }

func (a *BasicAuth) setDefaults() {
	a.Realm = "restricted"
	a.FailuresPerMinute = proxy.DefaultBasicAuthFailures
}

func (c *Compress) setDefaults() {
	c.Types = slices.Clone(proxy.DefaultCompressTypes)
	c.MinLength = proxy.DefaultCompressMinLength
	c.Level = proxy.DefaultCompressLevel
}

func (r *Respond) setDefaults() {
	r.Status = 200
	r.ContentType = DefaultRespondContentType
}

func (r *Redirect) setDefaults() { r.Status = 302 }

func (s *Stream) setDefaults() {
	s.IdleTimeout = DefaultStreamIdleTimeout
	s.ConnectTimeout = DefaultStreamConnect
}

func (u *Upstream) setDefaults() {
	u.Balance = balance.RoundRobin
	u.Protocol = upstreamproto.HTTP
	u.Keepalive.MaxIdle = DefaultKeepaliveMaxIdle
	u.Timeouts.Connect = DefaultConnectTimeout
	u.Timeouts.ResponseHeader = DefaultResponseHeader
	u.Timeouts.Idle = DefaultUpstreamIdle
	u.Timeouts.Read = DefaultUpstreamRead
	u.Timeouts.Write = DefaultUpstreamWrite
	u.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	u.MaxResponseHeaderFields = DefaultMaxResponseHeaderFields
	u.ResolveInterval = DefaultResolveInterval
	u.Timeouts.TunnelIdle = DefaultTunnelIdle
	u.Timeouts.GRPCTimeoutMax = DefaultGRPCTimeoutMax
	u.HealthChecks.Passive.setDefaults()
	u.Retries.setDefaults()
}

func (t *Target) setDefaults() { t.Weight = 1 }

func (p *PassiveHealth) setDefaults() {
	p.MaxFails = DefaultPassiveMaxFails
	p.FailWindow = DefaultPassiveFailWindow
	p.CoolDown = DefaultPassiveCoolDown
}

func (a *ActiveHealth) setDefaults() {
	a.Type = proxy.ActiveHTTP
	a.Path = "/"
	a.Interval = DefaultActiveInterval
	a.Timeout = DefaultActiveTimeout
	a.Rise = DefaultActiveRise
	a.Fall = DefaultActiveFall
}

func (r *Retries) setDefaults() {
	r.Tries = DefaultRetryTries
	r.TotalTime = DefaultRetryTotalTime
}

func (s *Sessions) setDefaults() {
	s.CacheSize = DefaultSessionCacheSize
	s.Lifetime = DefaultSessionLifetime
	s.Tickets = true
	s.TicketRotation = DefaultTicketRotation
}

func (s *SessionStore) setDefaults() {
	s.KeyPrefix = sessionstore.DefaultKeyPrefix
	s.Timeout = sessionstore.DefaultTimeout
}

func (a *Admin) setDefaults() { a.Address = DefaultAdminAddress }
func (a *AccessLog) setDefaults() {
	a.Path, a.Format = "stdout", "combined"
	a.Buffer, a.Flush = DefaultAccessLogBuffer, DefaultAccessLogFlush
}
func (l *Log) setDefaults()     { l.Level, l.Format = "info", "text" }
func (o *Offload) setDefaults() { o.Queue = DefaultOffloadQueue }

func (k *KeyServer) setDefaults() {
	k.ConnectTimeout = DefaultKeyServerConnectTimeout
	k.Timeout = DefaultKeyServerTimeout
	k.PoolSize = DefaultKeyServerPoolSize
	k.MaxInFlight = DefaultKeyServerMaxInFlight
	k.HealthCheckInterval = DefaultKeyServerHealthInterval
}

func (c *KeyServerClient) setDefaults() {
	l := keyserver.DefaultLimits
	c.Rate, c.Burst, c.MaxInFlight, c.MaxConnections = int(l.Rate), l.Burst, l.MaxInFlight, l.MaxConns
}

// finish fills the defaults that depend on other values, after decoding.
func (c *Config) finish() {
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.Name == "" {
			if len(s.ServerNames) > 0 {
				s.Name = s.ServerNames[0]
			} else {
				s.Name = fmt.Sprintf("site%d", i+1)
			}
		}
		if s.TLCP != nil && len(s.TLCP.Ciphers) == 0 {
			s.TLCP.Ciphers = append([]string(nil), DefaultTLCPCiphers...)
		}
		if t := s.TLS13SM; t != nil {
			if t.Cert == "" && t.Key == "" && s.TLCP != nil {
				t.Cert = s.TLCP.SignCert
				if t.KeyServer == "" {
					t.Key, t.KeyServer = s.TLCP.SignKey, s.TLCP.SignKeyServer
				}
				if t.KeyPasswordFile == "" && t.KeyPasswordEnv == "" {
					t.KeyPassword = s.TLCP.KeyPassword
				}
			}
			if len(t.Ciphers) == 0 {
				t.Ciphers = append([]string(nil), DefaultTLS13SMCiphers...)
			}
		}
		if s.ALPN == nil && s.Stream == nil {
			s.ALPN = []string{"h2", "http/1.1"}
		}
		for j := range s.Routes {
			if s.Routes[j].Upgrades == nil {
				// What the proxy does with none given, written out so that
				// check -dump shows it.
				s.Routes[j].Upgrades = append([]string(nil), proxy.DefaultUpgrades...)
			}
			if s.Routes[j].Name == "" {
				s.Routes[j].Name = fmt.Sprintf("route%d", j+1)
				s.Routes[j].NameByPlace = true
			}
		}
	}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Sites == nil {
			for _, s := range c.Sites {
				l.Sites = append(l.Sites, s.Name)
			}
		}
		if l.DefaultSite == "" && len(l.Sites) > 0 {
			l.DefaultSite = l.Sites[0]
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if len(u.TLS.Ciphers) == 0 {
			switch u.Protocol {
			case upstreamproto.TLCP:
				u.TLS.Ciphers = []string{"ECC-SM2-SM4-GCM-SM3", "ECC-SM2-SM4-CBC-SM3"}
				if u.TLS.SignCert != "" && u.TLS.EncCert != "" {
					u.TLS.Ciphers = append(u.TLS.Ciphers, "ECDHE-SM2-SM4-GCM-SM3", "ECDHE-SM2-SM4-CBC-SM3")
				}
			case upstreamproto.TLS13SM:
				u.TLS.Ciphers = append([]string(nil), DefaultTLS13SMCiphers...)
			}
		}
		if u.TLS.GmSSLCompat {
			u.TLS.ECDHEParamsAsVector, u.TLS.NoExtensions = true, true
		}
	}
}

func (f *KeyServerFile) setDefaults() {
	f.IdleTimeout = DefaultKeyServerIdleTimeout
	f.HandshakeTimeout = DefaultKeyServerHandshake
	f.MaxConnections = DefaultKeyServerMaxConnections
	f.MaxHandshakes = DefaultKeyServerMaxHandshakes
	f.MaxHandshakesPerAddress = DefaultKeyServerMaxHandshakesPerAddress
	f.AuditInterval = DefaultKeyServerAuditInterval
	f.ShutdownGrace = DefaultKeyServerShutdownGrace
	f.Log.setDefaults()
}
