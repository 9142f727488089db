package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"time"

	"github.com/gmproxy/gmproxy/internal/rateshare"
)

// Config is the whole reverse-proxy configuration of one daemon generation.
// The daemon maps its YAML (package conf) onto these plain structs; field
// names follow the YAML keys (Sites ↔ sites, Upstreams ↔ upstreams, …).
// Zero values mean "use the default" stated on each field.
type Config struct {
	// Sites are the virtual hosts. A request is given to the site named by
	// the handshake's ConnState.Site (or to the site its Host names, when
	// the client's SNI named none: SiteConfig.Families), else to the
	// first site whose ServerNames match the Host header, else to the
	// first site.
	Sites []SiteConfig
	// Upstreams are the named backend pools that routes and stream sites
	// refer to by name.
	Upstreams []UpstreamConfig
	// TrustedProxies lists the CIDRs (or single addresses) of peers whose
	// X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host values are
	// kept and extended. From anyone else those headers are replaced.
	// Default: none (incoming forwarded headers are always replaced).
	TrustedProxies []string
	// Limits are the client-facing protocol limits.
	Limits LimitsConfig
	// AccessLog configures the access log. Default: off.
	AccessLog AccessLogConfig
	// ListenerSites names the sites each listener serves, by listener
	// name (frontdoor.ConnState.Listener). A request on a connection
	// whose listener is listed here without the connection's site gets
	// 421 and the connection is closed: a reload took the site off that
	// listener, where a new handshake no longer reaches it, so a
	// kept-alive connection must not either. A request's Host (and the
	// connection's SNI) is matched against the sites of its listener
	// only: a Host naming a site of another listener is as a Host naming
	// none. Listeners not listed (nil: none), such as one a reload
	// removed whose connections drain, are not checked and match every
	// site.
	ListenerSites map[string][]string
	// SharedRates, in a worker, counts the routes' rate_limit with the
	// other workers (package rateshare); nil: this process counts alone.
	SharedRates *rateshare.View
	// Previous is the proxy this one replaces on a reload, or nil. Targets
	// that stay (same upstream name and address) keep their health state:
	// a target that was down stays down until its checks say otherwise;
	// routes that stay (same site, label or RouteConfig.Key, and
	// rate_limit) keep their clients' rate counts, and their basic_auth
	// failures and remembered passwords.
	Previous *Proxy
	// Standby keeps the new proxy's target health from the observer until
	// Activate: a reload builds the proxy before it knows whether it will
	// serve (a refused reload never does), and only the proxy in force
	// reports the targets' health. Without it, New reports every target's
	// state at once.
	Standby bool
}

// LimitsConfig holds client-side limits for HTTP serving.
type LimitsConfig struct {
	// MaxHeaderBytes caps the size of request headers. Default 64 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	// Default 0 (no limit; bodies may be very large).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response. Default 0 (no limit, so that
	// long downloads and event streams work).
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive client connections idle this long.
	// Default 75s.
	IdleTimeout time.Duration
	// MaxConcurrentStreams caps concurrent streams on one client HTTP/2
	// connection. Default 250.
	MaxConcurrentStreams uint32
	// BodyTimeout is the longest wait between two successive reads of a
	// request body (nginx client_body_timeout); a body stalled longer gets
	// 408 and the HTTP/1.1 connection closes. Default DefaultBodyTimeout
	// (60s); negative: no limit.
	BodyTimeout time.Duration
	// SendTimeout is the longest wait between two successive writes of a
	// response to the client (nginx send_timeout); past it the response is
	// cut. Default DefaultSendTimeout (60s); negative: no limit.
	SendTimeout time.Duration
	// HTTP2MaxResetRate bounds the stream resets an HTTP/2 client may send
	// per second, on average, with bursts of twice the rate or twice
	// MaxConcurrentStreams, whichever is larger; a faster client gets
	// GOAWAY (ENHANCE_YOUR_CALM) and is disconnected. Default
	// DefaultHTTP2MaxResetRate (100). Empty DATA frames in a row and
	// extension frames without requests or data have fixed bounds of
	// their own (h2MaxEmptyData, h2MaxUnknownFrames: no legitimate
	// client comes near them).
	HTTP2MaxResetRate int
	// MaxRequestsPerClient bounds the requests in progress at once from
	// one client address (frontdoor.ClientKey; from a trusted proxy, of
	// the client X-Real-IP names), over all its connections and HTTP/2
	// streams; a request beyond it gets 429 at once, before its
	// body is read. 0 (the default) means unlimited.
	MaxRequestsPerClient int
	// RequestBuffer is the largest request body of declared length
	// (Content-Length) read whole before the request goes to a target, so
	// that a slow upload holds no target connection; longer bodies and
	// bodies of undeclared length stream. Default DefaultRequestBuffer
	// (64 KiB); negative: every body streams.
	RequestBuffer int
	// ClientRequests is the table MaxRequestsPerClient counts in (shared by
	// every configuration of a listener); nil: the proxy's own.
	ClientRequests *ClientRequests
}

// SiteConfig is one virtual host.
type SiteConfig struct {
	// Name identifies the site in logs and metrics and is matched against
	// frontdoor.ConnState.Site. Default: the first server name.
	Name string
	// ServerNames are the host names of the site: exact names or
	// "*.example.cn" wildcards (one label).
	ServerNames []string
	// Routes are tried in order; the first match handles the request.
	// A request matching no route gets 404.
	Routes []RouteConfig
	// TLSInfoHeaders adds X-SSL-Protocol, X-SSL-Cipher and
	// X-SSL-Session-Reused to requests sent upstream. Default false.
	TLSInfoHeaders bool
	// ClientCertHeaders adds X-SSL-Client-Verify, X-SSL-Client-S-DN,
	// X-SSL-Client-I-DN and X-SSL-Client-Serial (mutual authentication
	// identity, like Tengine's $ssl_client_s_dn). Default false.
	ClientCertHeaders bool
	// ClientCertPEM also adds X-SSL-Client-Cert with the URL-escaped PEM of
	// the client's (signing) certificate. Default false.
	ClientCertPEM bool
	// Stream, when set, turns the site into TCP stream mode: after the
	// handshake the connection is spliced to the upstream (no HTTP).
	Stream *StreamConfig
	// ClientAuth tells that the site's handshakes request or require
	// client certificates. A request whose Host names another site than
	// the handshake's gets 421 when either of them has ClientAuth (it is
	// never served by the other site: see Families).
	ClientAuth bool
	// ErrorPages are the bodies, sent as text/html (charset=utf-8 when
	// the page is UTF-8, else none: its own <meta charset> decides), of
	// the answers the proxy itself gives with these statuses (in place of
	// a line of text); a target's answers go as they are.
	ErrorPages map[int][]byte
	// CaseInsensitivePaths matches the routes' Path and PathPrefix, and
	// removes StripPrefix, without regard to letter case (each rune
	// compared upper-cased, as Windows compares names), for backends that
	// read paths so: otherwise "/ADMIN/" passes a route for "/admin/".
	CaseInsensitivePaths bool
	// ClientAuthPolicy names the site's client authentication as
	// frontdoor.Site.ClientAuthPolicy does. With ClientAuth, a request on
	// a connection whose handshake met another policy (a reload changed
	// the mode or the CAs since) gets 421 and the connection is closed:
	// the client connects again and its certificate is checked as the
	// site now asks.
	ClientAuthPolicy string
	// Families are the handshake families the site has certificates
	// for (frontdoor.FamilyTLCP, FamilyTLS13SM, FamilyTLS). A request on
	// a connection made for another site of its listener, whose client
	// sent no SNI or one naming no site there, is served by this site
	// when its Host names it, the connection's family is among these, and
	// neither site has ClientAuth; nil: never so.
	Families []string
	// Handshakes are, by family, the protocol versions and cipher suites
	// the site's own handshakes can end with; a connection made for
	// another site (see Families) reaches this one by Host only when its
	// ConnState.Protocol and Cipher are among them: else the site's
	// handshake policy (tls min_version 1.3, its TLCP or TLS 1.3-SM
	// suites) would be passed by with a connection made without SNI. A
	// family with no entry, or an entry's nil list, allows any.
	Handshakes map[string]HandshakeParams
	// RequestIDHeader, when set, names the header that carries each
	// request's ID (e.g. X-Request-ID): 32 random hex digits, or the ID a
	// trusted proxy in front (TrustedProxies) sent in it. It goes to the
	// target in the header, back to the client in it (replacing a
	// target's), into the access log (request_id) and into the log line
	// of a request that failed. A client's own value is replaced.
	RequestIDHeader string
}

// HandshakeParams are protocol versions and cipher suites, as
// frontdoor.ConnState names them; nil: any.
type HandshakeParams struct {
	Protocols, Ciphers []string
}

// RouteConfig matches requests and says what to do with them. Exactly one
// of Upstream, Respond and Redirect must be set.
type RouteConfig struct {
	// Name labels the route in logs and metrics. Default "route<N>".
	Name string
	// Key, when not "", names the route across reloads in place of its
	// label (RouteLabel): a reload keeps the rate_limit counts of a route
	// whose site, key and rate_limit stay the same. For a route whose
	// Name is only its place among the site's routes (conf's route<N>),
	// which a route put before it would give to another.
	Key string
	// Hosts restricts the route to these Host values (exact or "*.suffix").
	// Default: any host of the site.
	Hosts []string
	// PathPrefix matches paths starting with this prefix ("/" matches all).
	PathPrefix string
	// Path matches exactly this path. PathPrefix and Path are exclusive;
	// with neither set every path matches.
	Path string
	// BasicAuth, when set, asks for a user name and password (HTTP Basic)
	// before anything else is done for a request (after RateLimit).
	BasicAuth *BasicAuthConfig
	// PathRegex matches the paths in which this regular expression (RE2
	// syntax, unanchored: ^ and $ anchor it) finds a match, as nginx's
	// location ~ (location ~* on a site with CaseInsensitivePaths).
	// Exclusive with Path and PathPrefix. At most MaxPathRegexLen bytes.
	PathRegex string
	// Headers additionally requires request headers: every one of them.
	Headers []HeaderMatch
	// RateLimit bounds how fast one client address may send requests to
	// the route (nil: no bound).
	RateLimit *RateLimitConfig
	// Files, when not nil, answers from a directory: an action, as
	// Upstream, Respond and Redirect are.
	Files *FilesConfig
	// Compress, when not nil, gzip-encodes the route's responses for the
	// clients that accept it.
	Compress *CompressConfig
	// ReadTimeout replaces the upstream's Transport.ReadTimeout for the
	// route's requests, ResponseHeaderTimeout its
	// Transport.ResponseHeaderTimeout, BodyTimeout the listener's
	// LimitsConfig.BodyTimeout and SendTimeout its LimitsConfig.SendTimeout
	// (for the route's responses from the moment the request is routed):
	// 0 keeps theirs, negative means no limit.
	ReadTimeout, ResponseHeaderTimeout, BodyTimeout, SendTimeout time.Duration
	// ClientIP additionally requires the client's address (X-Real-IP's:
	// the peer's, or behind TrustedProxies the right-most X-Forwarded-For
	// address not a trusted proxy's) in one of these IPs or CIDRs.
	ClientIP []string

	// Upstream names the upstream pool that serves this route.
	Upstream string
	// Respond answers with a fixed response (e.g. health probes).
	Respond *RespondConfig
	// Redirect answers with a redirect.
	Redirect *RedirectConfig

	// StripPrefix removes this prefix from the path before forwarding.
	StripPrefix string
	// HostHeader controls the Host sent upstream: "" (default) passes the
	// client's Host through, "{upstream}" sends the target address, any
	// other value is sent as is.
	HostHeader string
	// RequestHeaders edits the request sent upstream. A client's field
	// it removes or sets is dropped also when spelled with '_' for '-'.
	RequestHeaders HeaderOps
	// ResponseHeaders edits the response sent to the client. A field it
	// removes, sets or adds is also dropped from the backend's trailers.
	ResponseHeaders HeaderOps
	// MaxBodyBytes limits the request body; larger bodies get 413.
	// Default 0: no limit.
	MaxBodyBytes int64
	// RetryIdempotent allows retrying idempotent requests (GET, HEAD,
	// OPTIONS, TRACE, PUT, DELETE) on another target even after they were
	// sent, when the target failed without a response. Requests that were
	// never written are always retried. Default false.
	RetryIdempotent bool
	// Retries, when set, replaces the upstream's retry policy for this
	// route's requests.
	Retries *RetryConfig
	// FlushInterval is how often the response body is flushed to the
	// client while copying. 0 (default): only when buffers fill, except
	// event streams, gRPC and bodies of unknown length, which are always
	// flushed immediately. Negative: flush after every write.
	FlushInterval time.Duration
	// TLSInfoHeaders, ClientCertHeaders and ClientCertPEM add the
	// headers SiteConfig's fields of those names add, to this route's
	// requests only (a site's apply to all its routes). Default false.
	TLSInfoHeaders, ClientCertHeaders, ClientCertPEM bool
	// AllowTrailers passes the client's request trailers to the backend:
	// those it declared in its Trailer header, except the headers gmproxy
	// sets or strips (SetRequestHeaders, also spelled with '_'), hop-by-hop
	// fields, fields that cannot be trailers and fields RequestHeaders
	// edits. Default false: request trailers are dropped.
	AllowTrailers bool
	// Upgrades lists the protocols a client may switch to through an
	// HTTP/1.1 Upgrade (or an HTTP/2 extended CONNECT); other Upgrade
	// requests go to the backend as ordinary requests without it, as does
	// an Upgrade request with a body (the body is sent, then the answer
	// is an ordinary one: a tunnel would read the client's connection
	// while the body is still being copied from it). "h2c" is never
	// tunnelled. Default (nil): DefaultUpgrades, ["websocket"]; an
	// empty non-nil list allows none.
	Upgrades []string
}

// HeaderMatch requires a request header.
type HeaderMatch struct {
	// Name of the header.
	Name string
	// Value it must equal; empty means the header only has to be present.
	Value string
}

// HeaderOps edits headers. Removes run first, then sets, then adds.
type HeaderOps struct {
	// Set replaces these headers.
	Set map[string]string
	// Add appends values.
	Add map[string]string
	// Remove deletes these headers.
	Remove []string
}

// RespondConfig is a fixed response.
type RespondConfig struct {
	// Status code, that of a final response: 200 to 599. Default 200.
	Status int
	// Body text.
	Body string
	// ContentType. Default "text/plain; charset=utf-8".
	ContentType string
}

// RedirectConfig is a redirect response.
type RedirectConfig struct {
	// To is the Location. "{host}", "{path}", "{query}" and "{uri}" are
	// replaced by the request's host (without port), path, query and
	// request URI, e.g. "https://{host}{uri}" (RedirectPlaceholders;
	// others are refused, CheckRedirectTo).
	To string
	// Status code: 301, 302 (default), 303, 307 or 308.
	Status int
}

// StreamConfig puts a site in TCP stream mode.
type StreamConfig struct {
	// Upstream names the pool whose targets receive the raw stream.
	Upstream string
	// IdleTimeout closes the stream after this long without traffic in
	// either direction, or when a write to the client or to the target
	// takes no byte for this long. Default 10m.
	IdleTimeout time.Duration
	// ProxyProtocol sends a PROXY protocol header to the target: "" (off),
	// "v1" or "v2".
	ProxyProtocol string
	// ConnectTimeout bounds connecting to a target (then the upstream's
	// handshake timeout, for an encrypted upstream). Default: the
	// upstream's connect timeout.
	ConnectTimeout time.Duration
	// ClientIP, when set, admits only clients whose address (the
	// connection's, after a trusted PROXY protocol header) is in one of
	// these IPs or CIDRs; others are closed before any target is dialled.
	ClientIP []string
}

// UpstreamConfig is a named pool of targets.
type UpstreamConfig struct {
	// Name is referred to by routes.
	Name string
	// Targets are the backend addresses.
	Targets []TargetConfig
	// Balance selects targets, one of balance.Names(): "round_robin"
	// (default, smooth weighted), "least_conn", "ip_hash" (consistent hash
	// of the client address) or "hash" (consistent hash of HashHeader or
	// HashCookie).
	Balance string
	// HashHeader is the request header hashed by balance "hash".
	HashHeader string
	// HashCookie is the cookie hashed by balance "hash" (when HashHeader is
	// empty or absent). Requests without the key fall back to round robin.
	HashCookie string
	// Protocol to the backend, one of upstreamproto.Names(): "http"
	// (default, HTTP/1.1), "h2c" (HTTP/2 with prior knowledge), "h2" or
	// "tls" (crypto/tls with ALPN h2 or http/1.1), "tlcp" (TLCP
	// re-encryption) or "tls13sm" (TLS 1.3 + RFC 8998).
	Protocol string
	// TLS configures "h2", "tls", "tlcp" and "tls13sm" backends.
	TLS *UpstreamTLSConfig
	// Transport tunes the connection pool.
	Transport TransportConfig
	// HealthCheck configures passive and active health checks.
	HealthCheck HealthCheckConfig
	// Retries bounds retrying a request on another target.
	Retries RetryConfig

	// DialTLSContext, when set, dials the backend with encryption for
	// "h2", "tls", "tlcp" and "tls13sm" instead of the built-in dialers (the
	// daemon plugs TLCP/TLS 1.3-SM clients here). Not a YAML key.
	DialTLSContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// LookupNetIP resolves the targets given by host name, each into one
	// target per address (at most MaxAddrsPerName). Default: the
	// system's resolver. Not a YAML key.
	LookupNetIP LookupFunc
	// ResolveInterval is how often the targets given by host name are
	// resolved again, in the background: addresses that appear become
	// targets, those that go are removed (their requests in flight
	// finish), those that remain keep their state and pooled
	// connections, and a failed lookup keeps the addresses in force.
	// Default DefaultResolveInterval; negative: resolved at start only.
	ResolveInterval time.Duration
}

// TargetConfig is one backend address.
type TargetConfig struct {
	// Address is host:port. A host name is resolved when the upstream is
	// made (at start and at each reload) and every ResolveInterval, and
	// each address it resolves to
	// becomes a target of its own, with this weight and backup flag, its
	// own health state and pool; the requests' Host (when the upstream's)
	// and the TLS server name stay the name. Addresses that name no host
	// to connect to (0.0.0.0, ::, multicast, broadcast: a DNS filter's
	// answer for a blocked name) are left out, logged. A name that does not
	// resolve is dialled as it is.
	Address string
	// Weight for balancing, at most balance.MaxWeight. Default 1.
	Weight int
	// Backup targets receive traffic only when every primary is down.
	Backup bool
}

// UpstreamTLSConfig configures encryption towards the backend.
type UpstreamTLSConfig struct {
	// ServerName sent in SNI and verified. Default: the target's host.
	ServerName string
	// CA is a PEM file of CAs that verify the backend. Default: system
	// roots ("h2", "tls") or none ("tlcp", "tls13sm": then verification fails
	// unless InsecureSkipVerify).
	CA string
	// InsecureSkipVerify disables backend certificate verification.
	InsecureSkipVerify bool
	// Cert and Key are a client certificate ("h2", "tls", "tls13sm").
	Cert, Key string
	// RootCAs and Certificate, when set, stand for CA and Cert/Key with
	// "h2" and "tls": the certificates as already loaded (the daemon's
	// come from conf, which resolved the file names against the
	// configuration's folder and decrypted the key), so that the files
	// are not read again, relative to the working directory.
	RootCAs     *x509.CertPool
	Certificate *tls.Certificate
	// KeyPassword decrypts encrypted PKCS#8 client keys ("tlcp",
	// "tls13sm"). Not a YAML key: the daemon reads it from a file or an
	// environment variable.
	KeyPassword []byte
	// SignCert/SignKey and EncCert/EncKey are TLCP client certificates.
	SignCert, SignKey, EncCert, EncKey string
	// Ciphers lists suite names in preference order. Default: the
	// library's defaults.
	Ciphers []string
	// NoClientExtensions sends a TLCP ClientHello without extensions
	// (GmSSL compatibility).
	NoClientExtensions bool
	// ClientECDHEParamsAsVector frames the ECDHE ClientKeyExchange as
	// GmSSL does.
	ClientECDHEParamsAsVector bool
	// ClientSignCertOnly sends only the signing certificate under ECC
	// suites (GmSSL servers reject sign+enc lists).
	ClientSignCertOnly bool
	// ClientRawCertificateVerify signs the raw handshake messages in
	// CertificateVerify, as GmSSL 3.3 servers expect.
	ClientRawCertificateVerify bool
}

// TransportConfig tunes the per-target keep-alive pools.
type TransportConfig struct {
	// ConnectTimeout bounds the TCP connect. Default 5s.
	ConnectTimeout time.Duration
	// HandshakeTimeout bounds the TLS/TLCP handshake. Default 10s.
	HandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds waiting for the response headers after
	// the request is written; exceeding it gives 504. Default 60s.
	ResponseHeaderTimeout time.Duration
	// IdleTimeout closes pooled idle connections. Default 90s.
	IdleTimeout time.Duration
	// ReadTimeout is the longest wait between two successive reads of a
	// response body from a target, like nginx's proxy_read_timeout; past
	// it the response is cut (the client sees it end early; 504 when none
	// of it had left the proxy), and the target is not charged (a quiet
	// stream is no failure). Default DefaultUpstreamReadTimeout (60s);
	// negative: no limit.
	ReadTimeout time.Duration
	// WriteTimeout is the longest a target may go without taking more of
	// a request (its head or body), like nginx's proxy_send_timeout: a
	// target that stops reading a request body holds the exchange, and
	// the client gets no answer, until it passes; then the client gets
	// 504 and the target counts a failure. Default
	// DefaultUpstreamWriteTimeout (60s); negative: no limit.
	WriteTimeout time.Duration
	// MaxResponseHeaderBytes bounds a response head from a target (status
	// line and fields); a larger one is refused as malformed (502), as
	// nginx does past proxy_buffer_size. Default
	// DefaultMaxResponseHeaderBytes (64 KiB).
	MaxResponseHeaderBytes int64
	// MaxResponseHeaderFields bounds the field lines of a response head
	// from a target, and of its trailer section; more is refused as
	// malformed (502; a trailer over it cuts the response). Default
	// DefaultMaxResponseHeaderFields (256).
	MaxResponseHeaderFields int
	// H2PingTimeout: a connection to a target over HTTP/2 (h2c, h2, tls
	// when ALPN chose h2) that has received nothing for this long is
	// sent a PING, and closed when no answer comes within the same time
	// (at most 15 s). 0: none.
	H2PingTimeout time.Duration
	// TunnelIdleTimeout closes a WebSocket or other upgraded tunnel
	// (HTTP/1.1 Upgrade, HTTP/2 extended CONNECT) after this long
	// without data in either direction. Default DefaultTunnelIdleTimeout
	// (10m); negative: no limit.
	TunnelIdleTimeout time.Duration
	// GRPCTimeoutMax: a gRPC call (Content-Type application/grpc…)
	// whose grpc-timeout asks for longer than the response-head wait
	// (ResponseHeaderTimeout or the route's) is given its deadline, up
	// to this; one whose deadline is shorter, or an upstream without a
	// response-head wait, waits only until the deadline, and the call is
	// then answered DEADLINE_EXCEEDED (504 in the access log), the
	// target neither charged nor another tried. Each attempt's target
	// gets grpc-timeout as what is left of the deadline, counted from
	// the request's start. The deadline ends the whole exchange, not
	// only the wait (not capped at this): an upload or a response stream
	// still going then is cut, the target's stream reset (RST_STREAM
	// CANCEL, an HTTP/1.1 connection closed), and the client gets
	// DEADLINE_EXCEEDED, after the response head as trailers ending the
	// stream (gRPC-Web and gRPC over HTTP/1.1: the response ends
	// broken). Default DefaultGRPCTimeoutMax (10m); negative:
	// grpc-timeout is not honoured (it passes unchanged).
	GRPCTimeoutMax time.Duration
	// MaxIdleConns is the idle pool size per target. Default 64; negative
	// disables keep-alive (every request gets a new connection).
	MaxIdleConns int
	// MaxConnsPerTarget caps connections, idle and busy (and in-flight
	// requests), per target; a saturated target is skipped by balancing.
	// Over HTTP/2 the cap is on the requests in flight per target.
	// With a cap every request goes through net/http's Transport, the
	// pool that enforces it, instead of the lighter HTTP/1.1 client.
	// Active health probes have a connection of their own beside the
	// cap. Default 0: none.
	MaxConnsPerTarget int
}

// HealthCheckConfig configures both health checkers.
type HealthCheckConfig struct {
	// Passive checks watch real requests (on by default: max_fails 1).
	Passive PassiveHealthConfig
	// Active checks probe every target over HTTP (off unless Path is set
	// or Type is ActiveGRPC).
	Active ActiveHealthConfig
}

// PassiveHealthConfig marks a target down after failed requests.
type PassiveHealthConfig struct {
	// MaxFails failures within FailWindow mark the target down. Default 1,
	// at most balance.MaxFails; negative disables passive checks.
	MaxFails int
	// FailWindow is the window counting failures. Default 10s.
	FailWindow time.Duration
	// Cooldown is how long a target stays down. Default 10s.
	Cooldown time.Duration
	// UnhealthyStatus lists response codes counted as failures
	// (e.g. [502, 503, 504]). Default none: only transport failures count.
	UnhealthyStatus []int
}

// The kinds of active health check (ActiveHealthConfig.Type).
const (
	ActiveHTTP = "http" // a GET of Path (the default)
	ActiveGRPC = "grpc" // the gRPC health call, grpc.health.v1.Health/Check
)

// ActiveHealthConfig probes targets periodically over HTTP.
type ActiveHealthConfig struct {
	// Type is ActiveHTTP (default) or ActiveGRPC: the standard gRPC
	// health call (grpc.health.v1.Health/Check) for Service, for an
	// upstream of protocol "h2c" or "h2", whose gRPC targets answer a GET
	// with 415 or a reset. A target is healthy when the call ends with
	// grpc-status 0 and the answer SERVING.
	Type string
	// Service asked about by a gRPC check. Default "": the server as a
	// whole.
	Service string
	// Path to GET, e.g. "/healthz". Empty disables active checks of
	// type ActiveHTTP; a gRPC check calls its own path.
	Path string
	// Host header to send (:authority). Default: the target address.
	Host string
	// ExpectStatus is the healthy status of an HTTP check. Default: any
	// 2xx or 3xx.
	ExpectStatus int
	// Interval between probes. Default 10s; must not be negative.
	Interval time.Duration
	// Timeout of one probe. Default 5s; must not be negative.
	Timeout time.Duration
	// Rise consecutive successes mark a down target up. Default 2.
	Rise int
	// Fall consecutive failures mark an up target down. Default 3.
	Fall int
}

// RetryConfig bounds retries.
type RetryConfig struct {
	// Tries is the maximum number of targets tried per request, the first
	// included. Default 3, at most balance.MaxTries (8); 1 disables
	// retries.
	Tries int
	// Duration is how long after the first attempt began another attempt
	// may still start (an attempt in progress is bounded by the upstream's
	// timeouts; a body buffered before it is not counted). Default 0: only
	// Tries.
	Duration time.Duration
	// NonIdempotent also retries, after a failure without a response,
	// requests whose headers reached the target when their method is not
	// idempotent (POST, PATCH). Default false.
	NonIdempotent bool
}

// AccessLogConfig configures the access log.
type AccessLogConfig struct {
	// Path is a file, "stdout" or "stderr". Empty disables the log.
	Path string
	// Format is "combined" (default; nginx combined plus TLS fields),
	// "json", or "template" with Template.
	Format string
	// Template is used with format "template": text with {field}
	// placeholders, e.g. "{time} {client} {status} {tls_protocol}".
	// Fields: see AccessLogFields.
	Template string
	// BufferSize is the most written at once (whole lines). Default
	// 64 KiB.
	BufferSize int
	// QueueSize bounds the bytes of lines waiting for the writer (and
	// being written); lines that find it full are dropped and reported
	// lost, so that an output taking no writes never holds a request.
	// Default DefaultAccessLogQueue (4 MiB).
	QueueSize int
	// FlushInterval of buffered lines. Default 1s.
	FlushInterval time.Duration
	// Logger gets the failed writes (a full disk), at most one report a
	// minute with the bytes lost since the last. Default: the proxy's
	// logger (slog.Default without one).
	Logger *slog.Logger
}

func durOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func intOr[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
