package conf

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Config is a whole gmproxy configuration file. Every field below is one
// YAML key; its comment is the user documentation, with the default.
type Config struct {
	// Listeners are the ports gmproxy accepts connections on. At least one
	// is required.
	Listeners []Listener `yaml:"listeners"`
	// Sites are the virtual hosts, chosen by SNI. At least one is required.
	Sites []Site `yaml:"sites"`
	// Upstreams are named pools of backends that routes forward to.
	Upstreams []Upstream `yaml:"upstreams"`
	// TrustedProxies lists the addresses (IPs or CIDRs) of proxies in front
	// of gmproxy whose X-Forwarded-For / X-Forwarded-Proto / X-Forwarded-Host
	// headers are kept and appended to; from every other client those
	// headers are replaced. X-Real-IP is always set by gmproxy: the
	// right-most X-Forwarded-For address that is not a trusted proxy's
	// (the peer's address when none is trusted), never the client's own
	// X-Real-IP; an address written with its port (203.0.113.9:51234,
	// [2001:db8::9]:443, as some balancers write it) or an IPv6 address in
	// brackets counts as the address.
	// Headers that backends read as a proxy's account of the
	// client (True-Client-IP, CF-Connecting-IP, X-Client-IP,
	// X-Forwarded-Port, X-Forwarded-Prefix, X-Original-URL, X-Rewrite-URL
	// and the others of proxy.TrustedOnlyRequestHeaders) pass only from
	// these proxies; a client's copy is removed. The per-client limits
	// see through these proxies as nginx's limits do behind
	// set_real_ip_from: max_requests_per_client counts a request from one
	// by its X-Real-IP client, and their own connections are not held by
	// max_connections_per_client or max_handshakes_per_client (one
	// proxy's connections carry many clients; max_connections and
	// max_handshakes still hold them). An entry that holds every address
	// (0.0.0.0/0, ::/0) is warned: any client could then write its own
	// X-Forwarded-For and be counted as whatever address it names.
	// Default: none (always replaced or removed).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Sessions configures session resumption for TLCP and TLS 1.3-SM.
	Sessions Sessions `yaml:"sessions"`
	// Admin is the admin/metrics HTTP listener.
	Admin Admin `yaml:"admin"`
	// AccessLog is the HTTP access log.
	AccessLog AccessLog `yaml:"access_log"`
	// Log is the program log (log/slog on standard error).
	Log Log `yaml:"log"`
	// ShutdownGrace is how long SIGTERM, SIGINT or SIGQUIT waits for in-flight requests
	// before closing connections. Default 30s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Workers is how many worker processes serve the listeners: a whole
	// number from 1 to 256, or auto: one per CPU gmproxy may use (as Go
	// counts them for GOMAXPROCS: the CPU affinity and a container's CPU
	// limit). With more than one, gmproxy run becomes a supervisor that
	// serves no traffic itself: it starts the workers (each with
	// GOMAXPROCS=1; every worker binds every listener with SO_REUSEPORT, so
	// the kernel spreads connections over them), forwards SIGHUP and POST
	// /reload to every worker (a reload succeeds only when every worker
	// took it), restarts a worker that dies (with back-off), forwards
	// SIGTERM, SIGINT and SIGQUIT and waits for every worker, and serves the admin
	// listener with /metrics summed over the workers. The workers share the
	// ticket keys (the supervisor makes them once when ticket_key_file is
	// not set) and, without sessions.store, a session-ID store, so a
	// session made on one worker resumes on another: memory every worker
	// maps (1 KiB per session, cache_size sessions per worker: 21 MiB per
	// worker at the default cache_size, taken at start up to 12 workers and
	// as sessions are stored beyond; a session whose sealed state passes
	// 872 bytes, with a long client certificate chain, resumes only on its
	// own worker), or, on a kernel without memfd, a store the supervisor
	// serves on a Unix socket. A session that ends with a fatal alert on
	// one worker is forgotten by the others within 50 ms (through the same
	// memory; not with the socket store). That memory asks for 2 MiB pages, which
	// Linux gives only where transparent huge pages for shared memory are
	// allowed (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled
	// before gmproxy starts; most distributions ship never; the
	// supervisor's log line "workers: session store" says huge_pages=true):
	// with 4 KiB pages a worker's lookup of a random session ID misses the
	// TLB on most new handshakes. How much that costs depends on the
	// machine: in profiles on a paravirtualised VM the table's share of a
	// new TLCP handshake fell from about 28 µs to 7 µs with 2 MiB pages; on
	// a KVM guest it was about 3 µs with either. The per-client limits
	// (max_connections_per_client, max_handshakes_per_client) bound a
	// client over all the workers together: the workers count each client's
	// connections and handshakes in memory they share (65536 client
	// addresses with connections open at once, in 131072 slots of 8 bytes
	// plus 8 per worker: 3 MiB for 2 workers; a client beyond that, or on a kernel
	// without memfd, is counted by each worker alone), and a worker that
	// dies takes its counts with it. Other limits and pools are each
	// worker's own: a worker applies max_connections, max_handshakes,
	// max_handshake_bytes, upstream keepalive (max_idle, max_conns) and its
	// own health checks to what it serves, so with N workers the totals can
	// reach N times each figure. Divide them by N where the total matters.
	// A GOMEMLIMIT in gmproxy's environment is divided by the supervisor:
	// each worker gets 1/N of what the shared session table and
	// per-client counts leave of it (they are memory no worker's
	// collector counts).
	// 1 is one process that serves everything
	// itself with as many threads as CPUs. Default auto on Linux (where a
	// single CPU makes it 1), 1 elsewhere: the worker mode needs Linux's
	// SO_REUSEPORT. One Go process per CPU costs no more CPU per handshake
	// or request than one process with as many threads, and less for
	// resumptions and keep-alive requests (measured side by side on 2
	// CPUs, medians of 5 rounds: 0.82–1.01 of one process's CPU per
	// operation under full load, 0.95 for new TLCP handshakes paced at
	// about half the peak rate). Changing it needs a restart.
	Workers string `yaml:"workers"`
	// Offload bounds the SM2 private-key operations (sign, decrypt, key
	// agreement) that run at once and that wait for their turn.
	Offload Offload `yaml:"offload"`
	// KeyServers are remote key servers (gmproxy keyserver) that hold SM2
	// private keys of the sites' certificates, so that the keys need not be
	// stored on the edge: a site names one with sign_key_server,
	// enc_key_server (tlcp) or key_server (tls13sm) instead of a key file.
	// Default: none.
	KeyServers []KeyServer `yaml:"key_servers"`

	// File is the path the configuration was read from ("" for in-memory).
	File string `yaml:"-"`
	// Dir is the absolute folder against which relative file names in the
	// configuration resolve (the configuration file's folder); see Resolve.
	Dir string `yaml:"-"`
	// Warnings are the non-fatal problems found while loading.
	Warnings Problems `yaml:"-"`
	// decoded knows where each key stood in File (ProbeListeners).
	decoded *decoder `yaml:"-"`
	// TicketKeys are the keys read from sessions.ticket_key_file, newest
	// first (nil when the file is not set).
	TicketKeys []ticket.Key `yaml:"-"`
}

// Listener is one listening socket.
type Listener struct {
	// Address is host:port to listen on, e.g. "0.0.0.0:443", "[::]:443" or
	// "127.0.0.1:8443". Required; unique among listeners.
	Address string `yaml:"address"`
	// Protocols are the handshakes this port accepts: tlcp (TLCP / NTLS 1.1),
	// tls13sm (TLS 1.3 with the RFC 8998 SM suites) and tls (ordinary TLS via
	// crypto/tls with the site's RSA/ECDSA certificate). Default: all three.
	Protocols []string `yaml:"protocols"`
	// TLCPSuitesInTLSHello says what to do with a TLS ClientHello that lists
	// TLCP suites (E0 13 / E0 53, the 360-browser pattern) and that the site
	// cannot answer in ordinary TLS (it has no tls certificate, tls is not
	// among protocols, or the hello offers only SM suites): "reject"
	// answers handshake_failure so that the browser falls back to TLCP;
	// "tlcp" answers it in TLCP directly. Default reject.
	TLCPSuitesInTLSHello string `yaml:"tlcp_suites_in_tls_hello"`
	// HandshakeTimeout bounds the time from accept to the end of the
	// handshake (including reading a PROXY header). Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// DeferAccept has the kernel hand a new connection to gmproxy only once
	// its client has sent something (Linux TCP_DEFER_ACCEPT, rounded up to
	// the kernel's SYN-ACK retransmission times: 1s, 3s, 7s...; other
	// systems ignore it). Every protocol served
	// here starts with the client (a ClientHello, a PROXY header, an HTTP
	// request), so gmproxy then finds the first flight already there
	// instead of waiting for it: 4–7 % less CPU per resumed TLCP
	// connection was measured. Connections that send nothing stay in the
	// kernel, out of the handshake limits; one still silent after about
	// this long is handed over anyway, and handshake_timeout runs from
	// then. 0 turns it off. Default 1s.
	DeferAccept time.Duration `yaml:"defer_accept"`
	// MaxHandshakes is the number of handshakes in progress at once; further
	// connections are refused at once. 0 means unlimited. Default 1024.
	MaxHandshakes int `yaml:"max_handshakes"`
	// MaxConnections is the number of open connections on this listener;
	// further connections are refused at once. 0 means unlimited.
	// Default 16384.
	MaxConnections int `yaml:"max_connections"`
	// MaxHandshakesPerClient is the number of handshakes in progress at once
	// from one client address: the address after PROXY protocol, IPv6
	// addresses counted by /64. Further connections from that client are
	// refused at once (metric reason max_handshakes_per_client), so that one
	// address cannot take the listener's handshake slots from everyone
	// else. With several workers the limit holds over all of them together
	// (see workers). A connection from an address of trusted_proxies is
	// not counted: it carries many clients, whom max_requests_per_client
	// counts each by X-Forwarded-For. 0 means unlimited. Default 64 (1/16
	// of the default max_handshakes).
	MaxHandshakesPerClient int `yaml:"max_handshakes_per_client"`
	// MaxConnectionsPerClient is the number of open connections from one
	// client address (counted like max_handshakes_per_client, a
	// trusted_proxies address not at all); further
	// connections from it are refused at once (metric reason
	// max_connections_per_client). 0 means unlimited. Default 1024 (1/16 of
	// the default max_connections).
	MaxConnectionsPerClient int `yaml:"max_connections_per_client"`
	// MaxHandshakeBytes bounds the bytes of ClientHellos held by the
	// handshakes in progress on this listener together (each pending hello
	// holds at most 64KiB, and no more than 512 bytes or about twice what
	// its client sent, whichever is more). A hello that would cross the bound is closed (metric reason
	// max_handshake_bytes). 0 means unlimited. Default 16MiB.
	MaxHandshakeBytes ByteSize `yaml:"max_handshake_bytes"`
	// ProxyProtocol accepts a PROXY protocol v1/v2 header from trusted load
	// balancers so that the client address is the real one.
	ProxyProtocol ProxyProtocol `yaml:"proxy_protocol"`
	// PlainHTTP says what to do with a connection that starts with plain
	// HTTP: "close" closes it; "redirect" answers 308 to https:// on the same
	// host and path. Default close.
	PlainHTTP string `yaml:"plain_http"`
	// Sites are the names (sites[].name) of the sites served on this listener.
	// Default: every site.
	Sites []string `yaml:"sites"`
	// DefaultSite is the name of the site used when the client sends no SNI
	// or an unknown one. Default: the first site served on this listener.
	DefaultSite string `yaml:"default_site"`
	// HTTP holds the HTTP server limits of this listener.
	HTTP HTTPServer `yaml:"http"`
}

// ProxyProtocol configures PROXY protocol (v1 text and v2 binary) on a
// listener.
type ProxyProtocol struct {
	// Enabled turns PROXY protocol on. Default false.
	Enabled bool `yaml:"enabled"`
	// Trusted are the IPs or CIDRs allowed to send a PROXY header; a
	// connection from anywhere else that sends one is closed, and one
	// without a header is served with its socket address. Required when
	// enabled. An entry that holds every address (0.0.0.0/0, ::/0) is
	// warned: any client could then send a header naming any address.
	Trusted []string `yaml:"trusted"`
	// Required closes a connection from a trusted address that does not
	// start with a PROXY header, as nginx's and HAProxy's proxy_protocol
	// listeners do: a balancer that relays a client without one would
	// have the client counted, logged and matched by client_ip as the
	// balancer's own address. Off, such a connection is served with its
	// socket address (a balancer's own health checks without a header).
	// Default false.
	Required bool `yaml:"required"`
}

// HTTPServer holds limits of the HTTP server behind a listener.
type HTTPServer struct {
	// MaxHeaderBytes bounds the request line plus headers, each field
	// counting 32 bytes more, as in HTTP/2. Default 64KiB (Envoy's 60 KiB;
	// nginx takes 32 KiB with its default buffers), at most 16MiB. Over
	// HTTP/2 a client can name a large field it sent once in a byte per
	// request (HPACK), and the target gets each request's head whole: this
	// bounds what one request costs the target then.
	// An HTTP/2 connection whose request had a field over 16KiB (a
	// cookie counted by its crumbs) is closed gracefully once that
	// request is answered: its decoder would keep a buffer that large.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	// ReadHeaderTimeout bounds reading a request's headers. Default 30s.
	// An HTTP/2 header block of more than 8 empty CONTINUATION frames
	// (a "CONTINUATION flood": they add nothing to it) ends its
	// connection with GOAWAY ENHANCE_YOUR_CALM before then.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included; 0 means no
	// limit. Default 0.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response; 0 means no limit. Default 0.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle for this long; it
	// must be positive. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConcurrentStreams bounds the concurrent streams of one HTTP/2
	// connection. Default 250.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// BodyTimeout is the longest wait between two successive reads of a
	// request body (like nginx client_body_timeout); a body stalled longer
	// gets 408 and the connection is closed. 0 means no limit. Default 60s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// SendTimeout is the longest wait between two successive writes of a
	// response to the client (like nginx send_timeout); past it the
	// response is cut. 0 means no limit. Default 60s. body_timeout and
	// send_timeout move their deadline at most every eighth of their
	// value, so a client is cut after between the value and 9/8 of it.
	// A kept-alive HTTP/1.1 connection keeps its send deadline between
	// requests. An HTTP/2 connection that takes no byte for this long is
	// closed, with all its streams (a client that stops reading its socket
	// would otherwise hold them). It also bounds each write into the
	// client's side of an HTTP/1.1 Upgrade (WebSocket) tunnel: a client
	// that reads nothing, even while it sends now and then, is cut.
	SendTimeout time.Duration `yaml:"send_timeout"`
	// HTTP2MaxResetRate bounds the stream resets of an HTTP/2 client per
	// second, on average, with bursts of twice the rate or twice
	// max_concurrent_streams, whichever is larger: the RST_STREAMs it sends
	// (HTTP/2 "rapid reset") and those the server sends for its protocol
	// errors on a stream ("MadeYouReset": PROTOCOL_ERROR,
	// FLOW_CONTROL_ERROR, STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM;
	// not STREAM_CLOSED for a stream whose response was already sent or
	// reset, which a client's DATA frames still in flight after an early
	// answer to its upload get). A client over it gets GOAWAY with
	// ENHANCE_YOUR_CALM and is disconnected. Default 100. A client is
	// disconnected so too, whatever this rate, past 10 DATA frames in a row
	// that carry no data (padding aside) and do not end their stream (an
	// "empty frames flood"), or past 1000 frames of extension types
	// (PRIORITY_UPDATE, unknown types: HTTP/2 ignores those) between two
	// of its requests or DATA frames with data.
	HTTP2MaxResetRate int `yaml:"http2_max_reset_rate"`
	// MaxRequestsPerClient bounds the requests in progress at once from one
	// client address (counted like max_connections_per_client: the address
	// after PROXY protocol, IPv6 by /64; a request from an address of
	// trusted_proxies by the client that X-Real-IP names, so that each
	// client behind such a proxy has a budget of its own and the proxy's
	// other clients are served while one is over it; a client's own
	// X-Forwarded-For counts for nothing) over all its connections on this
	// listener and all their HTTP/2 streams, WebSocket and other upgraded
	// connections included; a request beyond it is answered 429 at once,
	// before its body is read, so that one address cannot hold the
	// upstream connections and handlers of max_connections_per_client
	// times max_concurrent_streams requests. The count survives reloads.
	// With several workers each worker counts its own (a client can then
	// have N times as many). 0 means unlimited. Default 1024 (as many as
	// the default max_connections_per_client allows over HTTP/1.1).
	MaxRequestsPerClient int `yaml:"max_requests_per_client"`
	// RequestBuffer is the largest request body read whole first: a body
	// whose length the client declares (Content-Length) and that is at most
	// this size is read whole before the request goes to a target (as nginx's proxy_request_buffering), so
	// that a slow upload, a form posted over a poor mobile link, holds no
	// target connection and no backend worker while it trickles in. Longer
	// bodies, and bodies of undeclared length (chunked; HTTP/2 without
	// content-length: streaming protocols, which a buffer would stall),
	// go to the target as they arrive. 0 turns it off. Default 64KiB, at
	// most 16MiB (memory held per request while its body arrives). The
	// bodies buffered at once in a process are bounded to 64MiB in all, of
	// which one client address (an IPv4 address, an IPv6 /64; behind a
	// proxy of trusted_proxies, the client it names, as
	// max_requests_per_client counts) may hold 4MiB, or one body of up to
	// request_buffer; past that, its bodies stream as with buffering off.
	RequestBuffer ByteSize `yaml:"request_buffer"`
}

// Site is one virtual host: certificates per protocol, client
// authentication, and what to do with the traffic (routes or a TCP stream).
type Site struct {
	// Name identifies the site in logs, metrics and listeners[].sites.
	// Default: the first server name, or "site<N>" (N counting from 1).
	// Not "other" or "none": those are label values of the metrics' own.
	Name string `yaml:"name"`
	// ServerNames are the host names (SNI) this site answers: exact names
	// ("portal.example.cn") and wildcards covering one label
	// ("*.example.cn"). Each name may belong to one site of a listener
	// only: two listeners may each have a site with it (one checking
	// client certificates, say), which their SNI and Host choose. A client
	// that sends no SNI (TLCP clients built on GmSSL; any client
	// connecting to an IP address, RFC 6066 §3) or an unknown name gets a
	// connection made for the listener's default site; its requests go to
	// the site of the listener their Host names, as with nginx, when that
	// site has a certificate for the connection's protocol, would have
	// accepted its version and cipher suite (tls.min_version, tlcp and
	// tls13sm ciphers), and neither site checks client certificates
	// (else the default site serves them,
	// or 421 when a site checks client certificates; check warns about an
	// IP address that routes nothing so). Default: none (the site is then
	// reached only as a listener's default site, or by Host).
	ServerNames []string `yaml:"server_names"`
	// TLCP holds the TLCP double certificates; absent means the site does
	// not speak TLCP.
	TLCP *SiteTLCP `yaml:"tlcp"`
	// TLS13SM holds the TLS 1.3-SM certificate; absent means the site does
	// not speak TLS 1.3-SM. An empty section ("tls13sm: {}") reuses the
	// TLCP signing certificate and key.
	TLS13SM *SiteTLS13SM `yaml:"tls13sm"`
	// TLS holds the RSA/ECDSA certificate for ordinary TLS (browsers without
	// SM support); absent means the site does not speak ordinary TLS.
	TLS *SiteTLS `yaml:"tls"`
	// ClientAuth configures client certificates (mutual authentication).
	ClientAuth ClientAuth `yaml:"client_auth"`
	// ALPN are the application protocols offered, in preference order:
	// h2 and http/1.1 for a site with routes (names compared exactly, as
	// clients send them), any for a stream site. Default [h2, http/1.1]
	// for sites with routes, none for stream sites.
	ALPN []string `yaml:"alpn"`
	// Routes are tried in order; the first match handles the request
	// (not the longest prefix, as nginx's locations: put /api/v1 before
	// /api; gmproxy check warns about a route an earlier one hides).
	// A site has either routes or stream.
	Routes []Route `yaml:"routes"`
	// CaseInsensitivePaths matches the routes' path and path_prefix (and
	// removes strip_prefix) without regard to letter case, as IIS, ASP.NET
	// and other Windows backends read paths: with it off, "/ADMIN/" passes
	// a route that denies "/admin/" and reaches such a backend as /admin/.
	// Turn it on for sites whose backends ignore case; the path reaches
	// the target as the client wrote it. Default false (paths are matched
	// as written, as nginx's location does).
	CaseInsensitivePaths bool `yaml:"case_insensitive_paths"`
	// Stream splices the decrypted connection to a TCP backend instead of
	// serving HTTP (for non-HTTP services).
	Stream *Stream `yaml:"stream"`
	// ErrorPages replace the short plain-text body of the answers gmproxy
	// itself gives (no route matches, rate_limit, no target answered, a
	// target timed out...) with a page of the site's, as nginx's
	// error_page for its own errors: an answer a target gives goes as it
	// is. A gRPC call (gRPC over HTTP/2, gRPC-Web) gets no page: those
	// answers, and a respond route's of status 400 or more, go to it as
	// Envoy's do, HTTP 200 with a gRPC status (Trailers-Only: 400
	// INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
	// UNIMPLEMENTED, 429, 502, 503, 504 UNAVAILABLE, but
	// DEADLINE_EXCEEDED once the call's grpc-timeout passed, others
	// UNKNOWN; 421 stays HTTP's), the access log keeping the HTTP status
	// and giving grpc_status. Default: none.
	ErrorPages []ErrorPage `yaml:"error_pages"`
	// RequestID names the header that carries each request's ID, e.g.
	// X-Request-ID, as nginx's $request_id: 32 random hex digits, or the
	// ID a proxy of trusted_proxies in front sent in that header (at most
	// 128 visible characters). It goes to the target in the header, back
	// to the client in it (in place of a target's), into the access log
	// (request_id) and into gmproxy's log line of a request that failed, so
	// that a user's report can be followed through the logs. A client's
	// own value is replaced. A header that frames, routes or
	// authenticates a message, one gmproxy sets or removes, and one that
	// backends read as a proxy's account of the client (True-Client-IP,
	// X-Forwarded-Port...), also spelled with '_' (X_Real_IP), is refused.
	// Default: none.
	RequestID string `yaml:"request_id"`

	// Material is what was loaded from the files named above.
	Material SiteMaterial `yaml:"-"`
}

// ErrorPage is the page of some statuses, e.g. {status: [502, 503, 504],
// file: errors/50x.html}: sent as text/html, with charset=utf-8 when the
// page is UTF-8 and else without a charset, so that the page's own <meta
// charset> (a GBK page's) decides; read when the configuration is loaded
// (and at each reload).
type ErrorPage struct {
	// Status lists the statuses, 400 to 599. Required.
	Status []int `yaml:"status"`
	// File is the page (relative paths are resolved against the folder of
	// the configuration file), at most 64KiB. Required.
	File string `yaml:"file"`
}

// MaxErrorPage bounds an error page's file: it is held in memory and sent
// in place of a few bytes.
const MaxErrorPage = 64 << 10

// Bounds of the sessions section.
const (
	MaxSessionLifetime = 7 * 24 * time.Hour
	MaxTicketRotation  = 7 * 24 * time.Hour
	// MaxTicketKeys bounds lifetime / ticket_rotation, the number of keys
	// that still open tickets: each is kept, looked up by a fleet's
	// refresh and tried by resumptions (168h allows rotations from about
	// 10 minutes).
	MaxTicketKeys = 1024
)

// KeyPassword says where the password of an encrypted private key comes
// from. It is never written in the YAML itself. A key file of the section
// that holds its key in the clear, although a password is set, is warned
// about: the password protects nothing there.
type KeyPassword struct {
	// KeyPasswordFile is a file whose one line (its trailing newline
	// removed) is the password of the encrypted private keys of this
	// section; a file of several lines is refused (gmproxy does not try
	// each line in turn as nginx's ssl_password_file does). Like the key
	// files, it should be readable by gmproxy only (check and start warn
	// when others, or a group gmproxy is not in, can read it). Default:
	// none.
	KeyPasswordFile string `yaml:"key_password_file"`
	// KeyPasswordEnv is the name of an environment variable holding the
	// password of the encrypted private keys of this section. gmproxy
	// removes the variable from its environment once read (processes it
	// starts do not inherit it; reloads use the value read). Default: none.
	KeyPasswordEnv string `yaml:"key_password_env"`
}

// SiteTLCP is a site's TLCP identity: a signing and an encryption
// certificate with their keys (PEM; keys PKCS#8, SEC 1 or encrypted PKCS#8
// including GmSSL's format). A certificate file may hold the chain after the
// leaf. GmSSL clients require identical subject, SAN and issuer on the two
// certificates. GmSSL's layout also works: name the same file for sign_cert
// and enc_cert when it holds the signing certificate, the encryption
// certificate and the chain in that order, and the same file for sign_key
// and enc_key when it holds the signing key then the encryption key.
type SiteTLCP struct {
	// SignCert is the signing certificate (keyUsage digitalSignature).
	// Required. May be the same file as enc_cert (GmSSL layout: sign, enc,
	// chain).
	SignCert string `yaml:"sign_cert"`
	// SignKey is the signing certificate's SM2 private key. Required
	// unless sign_key_server is set.
	SignKey string `yaml:"sign_key"`
	// EncCert is the encryption certificate (keyUsage keyEncipherment
	// and/or keyAgreement). Required.
	EncCert string `yaml:"enc_cert"`
	// EncKey is the encryption certificate's SM2 private key. Required
	// unless enc_key_server is set.
	EncKey string `yaml:"enc_key"`
	// SignKeyServer is the name of a key_servers entry that holds the
	// signing key, in place of sign_key; the key server finds the key by
	// the public key of sign_cert. Default: none (sign_key is used).
	SignKeyServer string `yaml:"sign_key_server"`
	// EncKeyServer is the name of a key_servers entry that holds the
	// encryption key, in place of enc_key. Default: none (enc_key is used).
	EncKeyServer string `yaml:"enc_key_server"`
	// Ciphers are the TLCP suites in preference order. Names are
	// case-insensitive in Tongsuo (ECC-SM2-SM4-GCM-SM3), GB/T
	// (ECC_SM4_GCM_SM3, TLS_ECC_SM4_GCM_SM3) or "WITH"
	// (ECC-SM2-WITH-SM4-SM3) spelling. Default [ECC-SM2-SM4-GCM-SM3,
	// ECC-SM2-SM4-CBC-SM3, ECDHE-SM2-SM4-GCM-SM3, ECDHE-SM2-SM4-CBC-SM3].
	Ciphers []string `yaml:"ciphers"`
	// AcceptRawCertificateVerify accepts a client CertificateVerify signed
	// over the raw handshake messages (GmSSL's current code) besides the
	// one signed over SM3 of them (GB/T 38636 §6.4.5.9, Tongsuo, GmSSL
	// 3.1.1). Both are signatures by the client's key over this
	// handshake's transcript. Default true; false accepts only the SM3
	// form.
	AcceptRawCertificateVerify bool `yaml:"accept_raw_certificate_verify"`
	KeyPassword                `yaml:",inline"`
}

// SiteTLS13SM is a site's TLS 1.3 + RFC 8998 identity.
type SiteTLS13SM struct {
	// Cert is the SM2 certificate (keyUsage digitalSignature). Default: the
	// TLCP sign_cert.
	Cert string `yaml:"cert"`
	// Key is its SM2 private key. Default: the TLCP sign_key.
	Key string `yaml:"key"`
	// KeyServer is the name of a key_servers entry that holds the key, in
	// place of key. Default: the TLCP sign_key_server when cert and key are
	// not set, else none.
	KeyServer string `yaml:"key_server"`
	// Ciphers are the TLS 1.3 SM suites in preference order. Default
	// [TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3].
	Ciphers []string `yaml:"ciphers"`
	// Strict answers in TLS 1.3-SM only when the client offers the complete
	// SM combination (an SM suite, sm2sig_sm3 and curveSM2), like Tongsuo's
	// enable_sm_tls13_strict; other hellos go to ordinary TLS. Default false.
	Strict      bool `yaml:"strict"`
	KeyPassword `yaml:",inline"`
}

// SiteTLS is a site's ordinary TLS identity (served by crypto/tls).
type SiteTLS struct {
	// Cert is the RSA (1024 bits or more) or ECDSA (P-256, P-384 or
	// P-521) certificate chain (PEM); a keyUsage extension in the leaf
	// must allow digitalSignature. Required.
	Cert string `yaml:"cert"`
	// Key is its private key. Required.
	Key string `yaml:"key"`
	// MinVersion is the lowest TLS version accepted: "1.2" or "1.3".
	// Default "1.2".
	MinVersion string `yaml:"min_version"`
	// OCSPFile is a DER OCSP response for the certificate, stapled to
	// every handshake whose client asks for one (nginx's
	// ssl_stapling_file). It is read again on every reload, like the
	// certificate, and must be valid then: signed by the certificate's
	// issuer (the chain's second certificate) or by a responder the issuer
	// delegated OCSP to, about the certificate's serial number, status
	// good, and between its thisUpdate and nextUpdate. Past its
	// nextUpdate it is no longer stapled: replace the file and reload.
	// Only the ordinary TLS certificate is stapled, not the TLCP and TLS
	// 1.3-SM ones. Default: none.
	OCSPFile string `yaml:"ocsp_file"`
	// OCSPFetch fetches the OCSP response to staple from the responder
	// named in the certificate's Authority Information Access extension
	// (nginx's ssl_stapling on), in the background: at start and at each
	// reload that changes the certificate, then at a random point from
	// halfway to three quarters of the way from each response's
	// thisUpdate to its nextUpdate (1 to 1.5 hours when it has none),
	// retrying a failure after 1 minute, doubling up to 1 hour, each wait
	// lengthened at random by up to half (the edges and workers that
	// fetch the same response do not ask the responder in the same
	// second). A fetch takes 10 seconds and 64KiB
	// at most. Each response is verified as ocsp_file is; one that is
	// not is logged and not stapled, and the last good response is
	// stapled until its nextUpdate. Handshakes never wait for the
	// responder (the first ones after start get no staple). The chain
	// must include the issuer's certificate. Not with ocsp_file.
	// Default false.
	OCSPFetch bool `yaml:"ocsp_fetch"`
	// OCSPResponder is the http:// or https:// URL ocsp_fetch asks in
	// place of the certificate's own responder (nginx's
	// ssl_stapling_responder): a certificate that names none, or an
	// edge that reaches the CA's responder only through an internal
	// relay. The responses are verified all the same. Only with
	// ocsp_fetch. Default: the certificate's.
	OCSPResponder string `yaml:"ocsp_responder"`
	KeyPassword   `yaml:",inline"`
}

// Client authentication modes (ClientAuth.Mode).
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "require"
	// ClientAuthOptionalNoCA is nginx's ssl_verify_client optional_no_ca.
	ClientAuthOptionalNoCA = "optional_no_ca"
)

// ClientAuth configures client certificates. A connection made for one
// site (its handshake chose it by SNI, or as the listener's default) does
// not carry requests whose Host names another site where either of the
// two authenticates clients: they get 421 Misdirected Request, and the
// client connects again with that name (as do requests for another site
// on a connection whose SNI chose its site, whatever the client
// authentication). Host
// is matched as SNI is: case and a final dot do not count, and an exact
// name wins over a wildcard. A connection made for a site a reload removed
// or renamed gets 421 too. The CA file may mix SM2 CAs (TLCP and TLS
// 1.3-SM clients) with RSA/ECDSA ones (TLS clients); TLS clients are
// verified against the latter only.
type ClientAuth struct {
	// Mode is "none" (no certificate asked for), "request" (asked for and
	// verified when given), "require" (connections without a valid one
	// fail) or "optional_no_ca" (nginx's ssl_verify_client optional_no_ca:
	// asked for, naming the CAs of ca, and any certificate is accepted,
	// whether or not it verifies, as long as the client proves it holds
	// its key by signing the handshake). TLCP ECDHE suites always require
	// the client's sign/enc pair, verified against ca when there is one,
	// under none too (not under optional_no_ca): such a site
	// authenticates its ECDHE clients, and a reload that changes its ca
	// reaches their open connections as under require. Default none.
	//
	// Under optional_no_ca the proxy verifies the certificate after each
	// handshake, resumed ones too, against ca (none: no certificate
	// verifies), crl and verify_depth, and X-Ssl-Client-Verify says the
	// result: SUCCESS, FAILED:reason (OpenSSL 3's and Tongsuo's words,
	// e.g. "FAILED:unable to get local issuer certificate",
	// "FAILED:self-signed certificate", "FAILED:certificate has expired",
	// "FAILED:certificate revoked"; OpenSSL 1.1 wrote "self signed") or
	// NONE. A result is reused for the same certificates until a reload
	// changes ca, crl or verify_depth, or a certificate or CRL expires. The client
	// certificate headers (client_cert_headers, client_cert_pem) are sent
	// for a certificate that FAILED too, as nginx sends them: they then
	// name whoever the client claims to be. The backend must check
	// X-Ssl-Client-Verify is SUCCESS before it trusts them. A route that
	// matches "X-Ssl-Client-Verify: SUCCESS", ahead of one that answers
	// 403, admits verified clients only, with a page in place of a failed
	// handshake.
	Mode string `yaml:"mode"`
	// CA is a PEM file of the CA certificates that issue client
	// certificates (SM2 and/or RSA/ECDSA). Required for request and
	// require; optional for optional_no_ca.
	// A client certificate authenticates only if its key may sign
	// (keyUsage digitalSignature, when it has a keyUsage) for client
	// authentication (extKeyUsage clientAuth, when it has one), as
	// nginx's ssl_verify_client asks.
	CA string `yaml:"ca"`
	// CRL is a file of certificate revocation lists (PEM "X509 CRL"
	// blocks, or one DER CRL), as nginx's ssl_crl: a client certificate
	// one lists is refused on TLCP, TLS 1.3-SM and TLS (alert
	// certificate_revoked, bad_certificate on TLS; for TLCP its
	// encryption certificate too). Each CRL must be signed by a CA of
	// ca, and every CA of ca needs its CRL here; a certificate between a
	// client and its CA (an intermediate the client sends) needs its
	// issuer's CRL too, or it is refused, as OpenSSL's CRL_CHECK_ALL; an
	// intermediate CA in ca is checked against its root's CRL. A
	// CRL past its nextUpdate (or before its thisUpdate) refuses every
	// certificate of its CA until a fresh one is loaded: fetch CRLs
	// before they expire and reload (SIGHUP rereads the file). After a
	// reload that changes the CRLs, connections authenticated before get
	// 421 on their next request, and a session resumes only if its
	// certificates pass the new CRLs. Refusals are counted in
	// gmproxy_client_cert_failures_total as revoked, crl_expired or
	// no_crl. Delta CRLs and CRLs whose scope is narrowed
	// (issuingDistributionPoint with onlySomeReasons, onlyContains…Certs
	// or indirectCRL) are refused; an entry whose reason is removeFromCRL
	// (a hold released) revokes nothing, as in OpenSSL. Default: none (no
	// revocation check).
	CRL string `yaml:"crl"`
	// VerifyDepth is the most CA certificates a client's chain may have
	// between its certificate and the trust anchor of ca, counted as
	// OpenSSL (nginx's ssl_verify_depth) counts them: 0 takes only
	// certificates a CA of ca issued itself, 1 one intermediate the client
	// sends, and so on. A deeper chain is refused (TLCP and TLS 1.3-SM:
	// alert unknown_ca, as OpenSSL; TLS: bad_certificate), also on a
	// resumed session, and counted in gmproxy_client_cert_failures_total as
	// chain_too_long. A reload that changes it reaches the open
	// connections as a change of ca does (421). Needs ca, 0 to 100.
	// Default: no limit (nginx's default is 1).
	VerifyDepth *int `yaml:"verify_depth"`
}

// Route is one routing rule of a site. Its matchers (host, path_prefix,
// path, header) must all match; a route without matchers matches every
// request. Exactly one of upstream, respond and redirect says what happens.
// Paths are matched percent-decoded and normalised: dot segments removed
// and runs of slashes merged ("/x/../admin/", "/./admin/" and "//admin/"
// are "/admin/"), and the upstream receives the normalised path, so a route
// that answers a path itself cannot be passed by spelling it otherwise.
type Route struct {
	// Name identifies the route in logs and metrics. Default "route<N>"
	// (N counting from 1 within the site). Not "other" or "none": those
	// are label values of the metrics' own.
	Name string `yaml:"name"`
	// NameByPlace reports that Name is the default route<N>: it says
	// where the route stands, not which route it is, so a reload that
	// puts a route before it would give its name (and its rate_limit
	// counts) to another. Such a route is known by what it matches
	// instead (path, host, header, client_ip).
	NameByPlace bool `yaml:"-"`
	// Host matches the request host (Host header, else SNI): exact names or
	// "*.example.cn" wildcards. Default: any host.
	Host []string `yaml:"host"`
	// PathPrefix matches paths starting with it, e.g. "/api/". Paths are
	// compared as a backend reads them: decoded (write "/my docs/", not
	// "/my%20docs/"), without the query, dot segments removed and runs of
	// slashes merged. Default: any.
	PathPrefix string `yaml:"path_prefix"`
	// Path matches exactly this path, compared as path_prefix. Default:
	// any.
	Path string `yaml:"path"`
	// PathRegex matches the paths in which this regular expression finds
	// a match, as nginx's location ~ (location ~* on a site with
	// case_insensitive_paths): RE2 syntax (no backreferences or
	// lookarounds; matching takes time linear in the path), unanchored, so
	// write ^ and $ to anchor it, e.g. '\.(css|js|png)$' or '^/api/v[0-9]+/'.
	// It is matched against the path as path_prefix is (decoded, with
	// . and .. segments and repeated slashes resolved), the query not
	// included. Only one of path, path_prefix and path_regex. At most 1024
	// bytes. Default: any.
	PathRegex string `yaml:"path_regex"`
	// Header matches request headers: name → value; the value "*" means the
	// header is present with any value. The TLS headers the proxy derives
	// (X-Ssl-Protocol, X-Ssl-Cipher, X-Ssl-Session-Reused,
	// X-Ssl-Client-Verify, -S-Dn, -I-Dn, -Serial, -Cert) match the proxy's
	// own values, never the client's copy: "X-Ssl-Client-Verify: SUCCESS"
	// ahead of a route that answers 403 asks for a verified client
	// certificate on some paths of a site whose client_auth is request.
	// X-Ssl-Client-Verify is SUCCESS, NONE or (client_auth optional_no_ca)
	// FAILED:reason, X-Ssl-Session-Reused r or ".": another value (none,
	// Success) would never match and is refused. -S-Dn, -I-Dn, -Serial
	// and -Cert match a certificate that verified only: under
	// optional_no_ca those of a FAILED one, which names whoever the client
	// claims to be, are forwarded but never matched.
	// The other headers the proxy sets or removes (X-Forwarded-*,
	// X-Real-IP, Forwarded, True-Client-IP and the like) are refused: a
	// matcher could only read the client's forgeable copy (client_ip
	// matches the client's address). So is Host,
	// which is no header field of a request once read (a matcher on it
	// would never match): match it with host. Default: no header
	// condition.
	Header map[string]string `yaml:"header"`
	// ClientIP matches requests from these client addresses: IPs or CIDRs,
	// e.g. [10.0.0.0/8, 192.0.2.7, "2001:db8::/32"]. The client's address
	// is the one X-Real-IP carries: the connection's (after a trusted
	// PROXY protocol header) or, from a trusted_proxies peer, the
	// right-most X-Forwarded-For address that is not a trusted proxy's.
	// A client behind a NAT64 translator (64:ff9b::/96) also matches as
	// the IPv4 address it embeds, when that is a global one (the prefix
	// never carries a private address: RFC 6052 §3.1). Like nginx's allow and deny: a route
	// with client_ip ahead of a route that answers 403 for the same paths
	// lets only these addresses in. A CIDR with bits set past its length
	// (192.0.2.7/8) stands for its network (192.0.0.0/8) and is warned,
	// here and in trusted_proxies, as nginx warns. Default: any address.
	ClientIP []string `yaml:"client_ip"`

	// Upstream is the name of the upstream that serves the request.
	// Default: none (then respond or redirect).
	Upstream string `yaml:"upstream"`
	// Respond answers directly with a fixed response.
	Respond *Respond `yaml:"respond"`
	// Redirect answers with a redirect.
	Redirect *Redirect `yaml:"redirect"`
	// Files answers from a directory's files (a site's static assets).
	Files *Files `yaml:"files"`

	// RequestHeaders edits the request before it is forwarded. A client's
	// field it removes or sets does not reach the target spelled with '_'
	// for '-' either (X_Remote_User for X-Remote-User), which backends
	// that read headers as CGI variables take as the same field.
	RequestHeaders HeaderEdits `yaml:"request_headers"`
	// ResponseHeaders edits the response before it is returned. A field
	// it removes, sets or adds is also dropped from the backend's trailers.
	ResponseHeaders HeaderEdits `yaml:"response_headers"`
	// StripPrefix removes this prefix from the path before forwarding
	// (usually equal to path_prefix without its trailing slash). Default:
	// none (the path is forwarded as matched). A request whose path
	// would begin with a dot segment once it is removed ("/api../admin"
	// under /api, which the backend would read as /admin) gets 400.
	StripPrefix string `yaml:"strip_prefix"`
	// HostHeader is the Host sent upstream: "passthrough" keeps the
	// client's, "upstream" uses the target's address, anything else (a
	// host name or IP address with an optional :port) is sent as given.
	// Default passthrough.
	HostHeader string `yaml:"host_header"`
	// MaxBody bounds the request body (e.g. 10MiB); larger requests get 413.
	// 0 means unlimited. Default 0.
	MaxBody ByteSize `yaml:"max_body"`
	// Retries overrides the upstream's retry policy for this route.
	Retries *Retries `yaml:"retries"`
	// RateLimit bounds how fast one client address may send requests to
	// this route (a login form, an API), as nginx's limit_req with burst
	// and nodelay (the same rate and burst mean the same here). Default: no bound.
	RateLimit *RateLimit `yaml:"rate_limit"`
	// BasicAuth asks for a user name and password before the route does
	// anything for a request (after rate_limit), as nginx's auth_basic.
	// Default: none.
	BasicAuth *BasicAuth `yaml:"basic_auth"`
	// Compress gzip-encodes the responses of the listed types for the
	// clients that accept it (Accept-Encoding), as nginx's gzip and
	// Caddy's encode do: a target's, or a files route's files (those
	// without a precompressed sibling). Default: off.
	Compress *Compress `yaml:"compress"`
	// Timeouts replaces, for this route's requests, the waits for a quiet
	// peer that its upstream and listener set: a route of long-lived
	// calls that stay quiet for minutes (gRPC streams, event streams,
	// long polls) gets its own without a listener or upstream of its own.
	Timeouts *RouteTimeouts `yaml:"timeouts"`
	// TLSInfoHeaders adds headers with the connection's protocol (e.g.
	// NTLSv1.1), cipher and session-reused flag to the forwarded request.
	// Default false.
	TLSInfoHeaders bool `yaml:"tls_info_headers"`
	// ClientCertHeaders adds the client certificate's subject DN, issuer DN,
	// serial and verification result to the forwarded request (like
	// Tengine's $ssl_client_s_dn: each DN in RFC 2253 form, every
	// attribute in the certificate's order, the last RDN first; the serial
	// in upper-case hex, two digits a byte, as $ssl_client_serial). Default
	// false.
	ClientCertHeaders bool `yaml:"client_cert_headers"`
	// ClientCertPEM also adds the URL-escaped PEM of the client certificate.
	// Default false.
	ClientCertPEM bool `yaml:"client_cert_pem"`
	// AllowTrailers passes the client's request trailers to the upstream:
	// those declared in its Trailer header, except the headers gmproxy sets
	// or strips (X-Forwarded-*, X-Real-IP, X-SSL-*, Forwarded, also spelled
	// with _), hop-by-hop fields and the fields request_headers edits.
	// Default false: request trailers are dropped.
	AllowTrailers bool `yaml:"allow_trailers"`
	// Upgrades lists the protocols a client may switch to through an
	// HTTP/1.1 Upgrade (or an HTTP/2 extended CONNECT), e.g. [websocket];
	// other Upgrade requests are forwarded as ordinary requests without
	// it, as is one with a request body or from an HTTP/1.0 client (RFC
	// 9110 §7.8). h2c is never tunnelled. CONNECT
	// other than an extended one is answered 501: gmproxy opens no
	// tunnels to a client's choice of host. Default [websocket]; [] tunnels
	// nothing.
	Upgrades []string `yaml:"upgrades"`
}

// Respond is a fixed response.
type Respond struct {
	// Status is the HTTP status code, that of a final response: 200 to
	// 599 (a redirect is redirect's, or needs a Location set in
	// response_headers: check warns otherwise). Default 200.
	Status int `yaml:"status"`
	// Body is the response body. Default empty.
	Body string `yaml:"body"`
	// ContentType is the Content-Type header. Default
	// "text/plain; charset=utf-8".
	ContentType string `yaml:"content_type"`
}

// Redirect is a redirect response.
type Redirect struct {
	// To is the target URL; {host}, {path}, {query} and {uri} (path and
	// query) are replaced from the request. A to that begins with {uri},
	// {path} or {query}, also after slashes ("/{path}": a path on this
	// site), keeps one leading slash, so that a request for
	// //other.example/ is not sent to another site. Another placeholder
	// ({scheme}) or an nginx variable ($host, $request_uri) is refused.
	// OPTIONS * (a question about the server, RFC 9112 §3.2.4) is not
	// redirected: it is answered 200 with Allow. Required.
	To string `yaml:"to"`
	// Status is 301, 302, 303, 307 or 308. Default 302.
	Status int `yaml:"status"`
}

// HeaderEdits changes headers: remove first, then set, then add. The
// fields that frame a message (Content-Length, Transfer-Encoding, Trailer)
// and those of each hop's connection (Connection, Upgrade, Keep-Alive,
// Proxy-Connection, TE) are gmproxy's and cannot be edited; nor can a
// request's Host, which host_header sets.
type HeaderEdits struct {
	// Set replaces headers: name → value. Default: none.
	Set map[string]string `yaml:"set"`
	// Add appends header values: name → value. Default: none.
	Add map[string]string `yaml:"add"`
	// Remove deletes headers by name. Default: none.
	Remove []string `yaml:"remove"`
}

// Stream splices a site's decrypted connections to a TCP backend.
type Stream struct {
	// Upstream is the name of an upstream whose targets receive the
	// connections (its balance and health checks apply). One of upstream and
	// target is required.
	Upstream string `yaml:"upstream"`
	// Target is a single host:port backend. Default: none (then upstream).
	Target string `yaml:"target"`
	// IdleTimeout closes a spliced connection idle in both directions for
	// this long, and one whose client or backend takes no byte of a
	// write for this long (a side that reads nothing, even while it
	// sends now and then). Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ConnectTimeout bounds connecting to the backend, also a target of
	// upstream (instead of that upstream's connect timeout; the
	// upstream's connect timeout still bounds the handshake of an
	// encrypted one). Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// SendProxyProtocol sends a PROXY header with the client address to the
	// backend: "", "v1" or "v2". Default "" (none).
	SendProxyProtocol string `yaml:"send_proxy_protocol"`
	// ClientIP admits only clients from these addresses (IPs or CIDRs, as
	// a route's client_ip: the connection's address after a trusted PROXY
	// protocol header; a NAT64 client also as the IPv4 address it embeds);
	// any other is closed after its handshake, before a backend is
	// dialled. Default: any address.
	ClientIP []string `yaml:"client_ip"`
}

// Upstream is a named pool of backend targets.
type Upstream struct {
	// Name is how routes and streams refer to the upstream. Required,
	// unique; not "other" or "none", label values of the metrics' own.
	Name string `yaml:"name"`
	// Targets are the backends. Each is either "host:port" or a mapping
	// {address, weight, backup}. At least one is required.
	Targets []Target `yaml:"targets"`
	// Balance picks a target: round_robin (weighted), least_conn, ip_hash
	// (client address) or hash (consistent hash of hash_key). Default
	// round_robin.
	Balance string `yaml:"balance"`
	// HashKey is what balance: hash hashes.
	HashKey HashKey `yaml:"hash_key"`
	// Protocol spoken to the targets: http (HTTP/1.1), h2c (HTTP/2 without
	// TLS), h2 (HTTP/2 over TLS), tls (HTTP/1.1 over TLS, with h2 by ALPN),
	// tlcp (HTTP/1.1 over TLCP) or tls13sm (HTTP/1.1 over TLS 1.3-SM).
	// Default http.
	Protocol string `yaml:"protocol"`
	// TLS configures the encrypted protocols (h2, tls, tlcp, tls13sm).
	// Sessions with the targets are resumed for every one of them (as
	// nginx's proxy_ssl_session_reuse on), in memory; a reload starts
	// the cache of tls and h2 upstreams afresh.
	TLS UpstreamTLSConfig `yaml:"tls"`
	// Keepalive configures the idle connection pool per target.
	Keepalive Keepalive `yaml:"keepalive"`
	// Timeouts for talking to the targets.
	Timeouts Timeouts `yaml:"timeouts"`
	// HealthChecks mark targets down and up again.
	HealthChecks HealthChecks `yaml:"health_checks"`
	// Retries is the retry policy.
	Retries Retries `yaml:"retries"`
	// MaxResponseHeaderBytes bounds a target's response head (status line
	// and fields); a larger one is refused as malformed: the client gets
	// 502 and the target counts a failure (nginx: "upstream sent too big
	// header"). Default 64KiB, at least 1KiB, at most 16MiB.
	MaxResponseHeaderBytes ByteSize `yaml:"max_response_header_bytes"`
	// MaxResponseHeaderFields bounds the field lines of a target's
	// response head, and of its trailer section; more is refused as
	// malformed (502; a trailer over it cuts the response). Default 256.
	MaxResponseHeaderFields int `yaml:"max_response_header_fields"`
	// ResolveInterval is how often the targets given by host name are
	// resolved again, in the background, as nginx's resolve with valid=:
	// an address that appears becomes a target, one that goes is removed
	// (its requests in flight finish), those that remain keep their health
	// and pooled connections, and a failed lookup keeps the addresses in
	// force (logged, and counted in gmproxy_upstream_resolve_failures_total).
	// Default 30s, at least 1s.
	ResolveInterval time.Duration `yaml:"resolve_interval"`

	// Material is what was loaded from the files named in tls.
	Material UpstreamMaterial `yaml:"-"`
}

// Target is one backend. In YAML it is "host:port" or a mapping.
type Target struct {
	// Address is host:port. Required. A host name (a Kubernetes headless
	// service, app.internal) is resolved when the configuration is
	// loaded, at each reload and every resolve_interval, and becomes one
	// target per address it resolves to (at most 64; lookups time out
	// after 5s), each with this weight and backup flag, its own health
	// checks, connection pool and health series (labelled
	// name:port/address:port); requests keep the name as Host
	// (host_header {upstream}) and TLS server name. A name that does not
	// resolve at start is dialled by name (every connection then goes to
	// the first address the system resolver gives) and a warning is
	// logged; one that resolves only to 0.0.0.0, ::, multicast or
	// broadcast addresses (a DNS filter's answer for a blocked name) is
	// not dialled until it resolves to others. No connection is made to
	// such an address (a connect to 0.0.0.0 reaches this host on Linux),
	// whatever the system resolver answers, and a target written as one
	// is refused: write 127.0.0.1 for this host.
	Address string `yaml:"address"`
	// Weight is the share of requests for round_robin. Default 1.
	Weight int `yaml:"weight"`
	// Backup targets receive requests only when every other target is down.
	// Default false.
	Backup bool `yaml:"backup"`
}

// HashKey is the input of balance: hash. Exactly one of header and cookie.
type HashKey struct {
	// Header is a request header whose value is hashed. Default: none.
	Header string `yaml:"header"`
	// Cookie is a cookie whose value is hashed. Default: none.
	Cookie string `yaml:"cookie"`
}

// UpstreamTLSConfig configures encryption towards the targets.
type UpstreamTLSConfig struct {
	// CA is a PEM file of CA certificates that verify the targets. Default:
	// the system roots for h2/tls; required for tlcp and tls13sm unless
	// insecure_skip_verify.
	CA string `yaml:"ca"`
	// ServerName is the SNI and the name checked in the target's
	// certificate. Default: the target's host.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify does not verify the target's certificate (tests
	// only). Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// Cert is the client certificate for h2, tls and tls13sm targets that
	// require one. Default none.
	Cert string `yaml:"cert"`
	// Key is the private key of cert. Required with cert.
	Key string `yaml:"key"`
	// SignCert is the TLCP client signing certificate, for tlcp targets
	// that require client authentication (always needed for ECDHE suites).
	// Default none.
	SignCert string `yaml:"sign_cert"`
	// SignKey is the private key of sign_cert. Required with sign_cert.
	SignKey string `yaml:"sign_key"`
	// EncCert is the TLCP client encryption certificate (with sign_cert).
	// Default none.
	EncCert string `yaml:"enc_cert"`
	// EncKey is the private key of enc_cert. Required with enc_cert.
	EncKey string `yaml:"enc_key"`
	// Ciphers are the suites offered: TLCP names for tlcp, TLS 1.3 SM names
	// for tls13sm. Default: for tlcp [ECC-SM2-SM4-GCM-SM3,
	// ECC-SM2-SM4-CBC-SM3] plus the two ECDHE suites when sign/enc client
	// certificates are set; for tls13sm [TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3].
	Ciphers []string `yaml:"ciphers"`
	// GmSSLCompat makes the TLCP client talk to GmSSL servers: the
	// 71-byte ECDHE ClientKeyExchange and a ClientHello without extensions.
	// Default false.
	GmSSLCompat bool `yaml:"gmssl_compat"`
	// ECDHEParamsAsVector sends only the 71-byte (GmSSL) ECDHE
	// ClientKeyExchange. Default false (Tongsuo's 69 bytes).
	ECDHEParamsAsVector bool `yaml:"ecdhe_params_as_vector"`
	// NoExtensions sends a TLCP ClientHello without extensions (no SNI, no
	// ALPN). Default false.
	NoExtensions bool `yaml:"no_extensions"`
	KeyPassword  `yaml:",inline"`
}

// Keepalive configures the idle connection pool towards each target.
type Keepalive struct {
	// MaxIdle is the number of idle connections kept per target; 0 disables
	// keep-alive. Default 32.
	MaxIdle int `yaml:"max_idle"`
	// MaxConns bounds the connections per target (idle and busy); 0 means
	// unlimited. A target at the bound is skipped by balancing. Over HTTP/2
	// (protocol h2, h2c, or tls when the target picks h2) one connection
	// carries many requests, and the bound is on the requests in progress
	// per target, as HAProxy's server maxconn is. With a bound every
	// request to the upstream goes through
	// net/http's Transport, the pool that enforces it, which costs more CPU
	// per request than gmproxy's own HTTP/1.1 pool. Active health probes
	// have a connection of their own beside the bound, so that a target
	// busy at it is not taken for down. Default 0.
	MaxConns int `yaml:"max_conns"`
}

// Timeouts bound the waits towards upstream targets.
type Timeouts struct {
	// Connect bounds connecting to a target and then, for an encrypted
	// protocol, its TLS/TLCP handshake again (as nginx's
	// proxy_connect_timeout): a target that accepts and never answers
	// holds a request for twice this at most. Default 5s.
	Connect time.Duration `yaml:"connect"`
	// ResponseHeader bounds the wait for the response headers after the
	// request was written; exceeded → 504. Default 60s. A pooled
	// connection keeps its deadline while it is recent, so the wait
	// allowed is between the value and 9/8 of it.
	ResponseHeader time.Duration `yaml:"response_header"`
	// Idle closes pooled connections idle for this long; it must be
	// positive. Default 90s.
	Idle time.Duration `yaml:"idle"`
	// Read is the longest wait between two successive reads of a response
	// body from a target (like nginx proxy_read_timeout); past it the
	// response is cut, so the client sees it end early (504 when none of
	// it had left the proxy). The target is not charged a failure, as
	// nginx's max_fails does not count it: a quiet stream (a gRPC watch,
	// an event stream) is no sign of a failing target. 0 means no limit. Default 60s. The wait allowed
	// is between the value and 9/8 of it.
	Read time.Duration `yaml:"read"`
	// Write is the longest a target may go without taking more of a
	// request, its head or body (like nginx proxy_send_timeout): a target
	// that stops reading a request body would otherwise hold the exchange
	// with no answer to the client. Past it the client gets 504 and the
	// target counts a failure. It runs between two writes, so a client's
	// own pauses and a target taking bytes slowly but steadily are not
	// charged; it also bounds writes into a WebSocket tunnel's target (as
	// nginx's does). 0 means no limit. Default 60s.
	Write time.Duration `yaml:"write"`
	// TunnelIdle closes a WebSocket or other upgraded tunnel (HTTP/1.1
	// Upgrade, HTTP/2 extended CONNECT) after this long without data in
	// either direction. 0 means no limit. Default 10m. Half-closes go
	// through an HTTP/1.1 tunnel in either direction; over HTTP/2 the
	// target's end of sending ends the tunnel both ways (the stream ends
	// when the proxy stops reading it), so bytes the client sends after
	// that do not reach the target.
	TunnelIdle time.Duration `yaml:"tunnel_idle"`
	// H2Ping sends an HTTP/2 PING on a connection to a target (protocol
	// h2c, h2, or tls when ALPN chose h2) that has received nothing for
	// this long, and closes the connection when the answer does not come
	// within the same time (at most 15s), as Envoy's connection_keepalive:
	// a target that froze, or a network path that dropped it, otherwise
	// holds the connection and every request multiplexed on it until
	// response_header passes (TCP keep-alive does not probe while data
	// waits to be acknowledged). At least 1s. 0 means none. Default 0:
	// gRPC servers by default close a connection pinged more often than
	// every 5 minutes (GOAWAY too_many_pings) unless their keepalive
	// enforcement allows it, so set it to what the targets permit.
	H2Ping time.Duration `yaml:"h2_ping"`
	// GRPCTimeoutMax lets a gRPC call (gRPC or gRPC-Web: a Content-Type
	// of application/grpc…) whose grpc-timeout field asks for longer
	// than response_header (or the route's) wait that long for its
	// response head, up to this: a unary call's answer comes with its
	// head, so a call its client allowed minutes was cut at
	// response_header with 504, which gRPC clients take for UNAVAILABLE
	// and retry. A call with a shorter grpc-timeout, or on an upstream
	// without response_header, waits only until its deadline, and is
	// then answered DEADLINE_EXCEEDED (504 in the access log), the
	// target neither charged nor another tried (a client's deadline
	// says nothing of a target's health). Each attempt's target gets
	// grpc-timeout as what is left of the call's deadline, counted from
	// the request's start (Envoy's rewrite), so that a backend does not
	// work on past the client's end after time spent queueing, on a
	// buffered body or on failed attempts. The deadline ends the whole
	// call, not only that wait (as Envoy's max_stream_duration with
	// grpc_timeout_header_max, but not capped at this): an upload or a
	// response stream still going then is cut, the target's stream reset
	// (RST_STREAM CANCEL; over HTTP/1.1 its connection closed), and the
	// client gets DEADLINE_EXCEEDED, before the response head as above,
	// after it as trailers (grpc-status 4, grpc-message "deadline
	// exceeded") that end the stream (gRPC-Web, whose trailers are in its
	// body, and gRPC over HTTP/1.1: the response ends broken). 0 means
	// grpc-timeout is not honoured (it passes unchanged). Default 10m.
	GRPCTimeoutMax time.Duration `yaml:"grpc_timeout_max"`
}

// HealthChecks configures passive and active health checking.
type HealthChecks struct {
	// Passive health checks watch real requests; on by default.
	Passive PassiveHealth `yaml:"passive"`
	// Active health checks probe the targets; off unless this section is
	// present.
	Active *ActiveHealth `yaml:"active"`
}

// PassiveHealth marks a target down after repeated failures of real
// requests.
type PassiveHealth struct {
	// MaxFails failures (connect errors, timeouts, 5xx listed in
	// unhealthy_status, a response body broken off) within fail_window mark
	// the target down; 0 disables passive checks. At most 1000. Default 3.
	// A client's fault is never counted: a request body that stalls (408),
	// is malformed (400) or is cut short by the client (logged 499) does
	// not charge the target; nor does a response body quiet for longer
	// than timeouts.read (a gRPC watch, an event stream), as nginx's
	// max_fails does not count it.
	MaxFails int `yaml:"max_fails"`
	// FailWindow is the window in which failures are counted. Default 10s.
	FailWindow time.Duration `yaml:"fail_window"`
	// CoolDown is how long a target stays down before it is tried again.
	// While no target of the upstream is available, the one whose
	// cool-down ends first is tried anyway (not one an active check says
	// is down), so that a lone target that restarted, or targets a client
	// made fail, do not turn into 503 for everyone. With active checks
	// (health_checks.active), a probe that passes ends the cool-down at once:
	// a target whose health path answers while its application fails
	// comes back within one interval of each trip. Default 30s.
	CoolDown time.Duration `yaml:"cool_down"`
	// UnhealthyStatus are response codes counted as failures, for example
	// [502, 504]. Default none, as in nginx: a response is the
	// application's answer (a 503 of a rate limit or of maintenance, a 504
	// of a service behind the target), and counting it lets a client that
	// asks for such a URL again and again mark every target down.
	UnhealthyStatus []int `yaml:"unhealthy_status"`
}

// ActiveHealth probes every target with an HTTP request, or a gRPC health
// call. Present means enabled.
type ActiveHealth struct {
	// Type of check: http (a GET of path, healthy on expect_status) or
	// grpc, the standard gRPC health call (grpc.health.v1.Health/Check)
	// for service, as grpc_health_probe and Kubernetes' grpc probe make
	// it, for an upstream of protocol h2c or h2: a gRPC server answers a
	// GET with 415 or a reset, and an http check marks every target down.
	// A target passes a grpc check when the call ends with grpc-status 0
	// and the answer SERVING. Default http.
	Type string `yaml:"type"`
	// Service is the service a grpc check asks about, such as
	// helloworld.Greeter. Default "": the server as a whole.
	Service string `yaml:"service"`
	// Path requested by an http check. Default "/".
	Path string `yaml:"path"`
	// Host header (:authority) of the probe. Default: the target's
	// address.
	Host string `yaml:"host"`
	// ExpectStatus is the healthy status code of an http check; 0 means
	// any 2xx or 3xx. Default 0.
	ExpectStatus int `yaml:"expect_status"`
	// Interval between probes of one target. Default 10s.
	Interval time.Duration `yaml:"interval"`
	// Timeout of one probe. Default 2s.
	Timeout time.Duration `yaml:"timeout"`
	// Rise consecutive successes mark a down target up. Default 2.
	Rise int `yaml:"rise"`
	// Fall consecutive failures mark an up target down. Default 3.
	Fall int `yaml:"fall"`
}

// RouteTimeouts holds a route's own waits for a quiet peer, as nginx's
// proxy_read_timeout / grpc_read_timeout, client_body_timeout and
// send_timeout in a location (nginx's read timeout covers the response head too: here that
// is response_header). A key left out keeps the upstream's or the listener's value;
// 0 means no limit.
type RouteTimeouts struct {
	// Read replaces the upstream's timeouts.read: the longest wait between
	// two reads of a response body from a target (a server-streaming or
	// bidirectional gRPC call, an event stream, between two messages).
	Read *time.Duration `yaml:"read"`
	// Body replaces the listener's http.body_timeout: the longest wait
	// between two reads of the client's request body (a client-streaming
	// or bidirectional gRPC call between two messages, a slow upload);
	// past it the client gets 408.
	Body *time.Duration `yaml:"body"`
	// ResponseHeader replaces the upstream's timeouts.response_header: the
	// longest wait for the response head once the request is written (a
	// long poll whose target answers only when it has news, a report
	// that takes minutes to start); past it the client gets 504 and the
	// target counts a failure.
	ResponseHeader *time.Duration `yaml:"response_header"`
	// Send replaces the listener's http.send_timeout for the route's
	// responses, as nginx's send_timeout in a location: the longest wait
	// between two successive writes of a response to the client (large
	// downloads to clients on slow networks, an event stream whose client
	// reads in bursts); past it the response is cut. It applies to a
	// route that serves files as well.
	Send *time.Duration `yaml:"send"`
}

// Files holds a route that serves a directory, as nginx's root and
// Caddy's file_server do: GET and HEAD (other methods get 405), with
// ranges, If-Modified-Since and If-None-Match against a strong ETag made
// of the file's modification time and size. The request's path (after
// strip_prefix) names a file under root; a path ending in / serves the
// directory's index file, a directory without one is 404 (no listings),
// and a directory's path without its / is redirected (301) to it. The
// Content-Type follows the file's extension (the built-in table and
// types; application/octet-stream when it has none known; never guessed
// from the content). Nothing outside
// root is served: ".." and symbolic links that lead out are 404. A file
// the process may not read is 403; a root that is gone, or the server out
// of descriptors, 500. Root is
// looked up for each request, as nginx's: a root that is a symbolic link a
// deploy moves (current -> releases/N) serves the new files at once.
type Files struct {
	// Root is the directory served (relative paths are resolved against
	// the folder of the configuration file). It must exist when the
	// configuration is loaded, and must not hold the configuration file's
	// folder (root: . would serve the keys beside it), nor a key, password
	// or token file the configuration names, but under a hidden name the
	// route does not serve.
	Root string `yaml:"root"`
	// Index is the file served for a path ending in /. Default index.html.
	Index string `yaml:"index"`
	// Hidden serves the files and directories whose names start with "."
	// (.git, .env, .htpasswd). Default false: they are 404, but for
	// /.well-known/ (RFC 8615: ACME challenges, security.txt).
	Hidden bool `yaml:"hidden"`
	// Precompressed serves a file's name.gz sibling, when there is one not
	// older than the file, as its gzip encoding to the clients that accept
	// it (nginx's gzip_static on), with Vary: Accept-Encoding on both:
	// compressed once at deploy time (gzip -k), at no CPU per request. A
	// .gz older than its file (the file changed since) is not served.
	// Default false.
	Precompressed bool `yaml:"precompressed"`
	// Fallback is the file served in place of one that does not exist, a
	// path under root such as index.html: a single-page application whose
	// own router owns its paths gets its page for any of them, as nginx's
	// try_files $uri $uri/ /index.html. A hidden name stays 404, a file the
	// process may not read 403. Default none (404).
	Fallback string `yaml:"fallback"`
	// Charset is added to the Content-Type of text files (text/*,
	// JavaScript, JSON, XML, SVG), as nginx's charset: e.g. utf-8 or gbk.
	// Default none: the type goes without a charset, as nginx sends it,
	// and a page's own <meta charset> decides (a charset in the header
	// overrides the page's and would garble a GBK page).
	Charset string `yaml:"charset"`
	// Types adds media types by file name extension to the built-in
	// table, or overrides its entries, as nginx's types: e.g. {wasm:
	// application/wasm, apk: application/octet-stream} (the dot is
	// optional, letter case does not matter). The built-in table holds
	// the usual web types (pages, scripts, styles, images, fonts, audio
	// and video, documents and archives, OFD, certificates and CRLs as
	// RFC 2585 names them); the host's /etc/mime.types is not read, so a
	// file gets the same type on every machine. Default none.
	Types map[string]string `yaml:"types"`
}

// Compress holds a route's response compression. A response is sent
// gzip-encoded when the client accepts gzip, its type is listed and it is
// not shorter than min_length; not a response to an HTTP/1.0 request
// (whose caches ignore Vary), a 204, 205, 206 or 304,
// one the target already encoded, one marked Cache-Control:
// no-transform, or one with a digest of its bytes (Content-Digest,
// Repr-Digest, Digest, Content-MD5), which encoded would not match them.
// A route whose response_headers set or add Content-Encoding (a .svgz or
// a gzip file served as its content) cannot compress: those responses
// would be encoded twice under one label.
// On a files route, a file's whole content (200) is
// compressed as it is sent, unless precompressed serves its .gz; a range
// of it goes as it is. The encoded response has no Content-Length (it is sent
// chunked over HTTP/1.1), no Accept-Ranges and a weak ETag; both variants
// carry Vary: Accept-Encoding. A response to HEAD gets the fields its GET
// would (RFC 9110 §9.3.2): encoded, without the Content-Length of the
// uncompressed body. A 304 carries Vary: Accept-Encoding unless its
// fields rule the encoding out, and the encoding's weak ETag when the
// client accepts gzip and did not name the strong one in If-None-Match
// (RFC 9110 §15.4.5: the fields its 200 would have). A stream (no
// Content-Length) is flushed through as it comes; an event stream
// (text/event-stream) and a gRPC answer (application/grpc, whose
// messages are compressed on their own) never are. Each response being compressed holds about 1 MiB; past 128
// at once in a process, or 4 on one client connection, responses go
// uncompressed. Do not
// compress responses that mix a secret with text an attacker can put in
// the same response (BREACH): the compressed length reveals it.
type Compress struct {
	// Types lists the media types compressed: the Content-Type without
	// parameters, type/* for all of a type, or "*/*" for every type, as
	// nginx's gzip_types * (quoted in YAML; also images and archives
	// compressed already, for CPU and no gain). Default: text/html,
	// text/plain, text/css, text/xml, text/javascript,
	// application/javascript, application/json, application/xml,
	// application/manifest+json, application/ld+json, image/svg+xml.
	Types []string `yaml:"types"`
	// MinLength is the shortest response compressed: a response declaring a
	// shorter Content-Length goes as it is. Default 1KiB.
	MinLength ByteSize `yaml:"min_length"`
	// Level is gzip's, 1 (fastest) to 9 (smallest). Default 5.
	Level int `yaml:"level"`
}

// BasicAuth protects a route with HTTP Basic authentication (RFC 7617), as
// nginx's auth_basic and auth_basic_user_file: a request without a user
// and password of the users file gets 401 with a WWW-Authenticate
// challenge (the site's error page for 401, if any). Serve it over TLCP
// or TLS only: the password travels in every request. The Authorization
// header goes on to the target, as nginx sends it (remove it with
// request_headers). Each password check costs bcrypt's tens of
// milliseconds: a password that passed is remembered (a hash of it, in
// memory) for 5 minutes, at most 2 checks run at once in a process, and a
// client address (its /64 for IPv6) that fails failures_per_minute times
// gets 429 with Retry-After, checked for nothing, until its allowance
// comes back (counted in each worker). A reload keeps the remembered
// passwords and the failures of a route it keeps, as rate_limit counts.
type BasicAuth struct {
	// Realm names the protected area in the browser's prompt. Default
	// restricted.
	Realm string `yaml:"realm"`
	// UsersFile is an htpasswd file of user:hash lines with bcrypt hashes
	// ($2y$, as htpasswd -B writes; MD5 $apr1$, {SHA} and crypt hashes
	// are refused) of cost at most 14 (about a second a check), read when the configuration is loaded and at each
	// reload; blank lines and lines starting with # are skipped. Keep it
	// readable by gmproxy only. Required.
	UsersFile string `yaml:"users_file"`
	// FailuresPerMinute is how many failed attempts a client address may
	// make a minute (all at once after a pause, then one every
	// minute/failures_per_minute). A check counts as a failure from when
	// it starts until it passes, so that guesses sent at once cost no
	// more checks: raise it for many users behind one address who log in
	// at the same moment. Default 10.
	FailuresPerMinute int `yaml:"failures_per_minute"`

	// Users are the users of UsersFile and their hashes, as loaded.
	Users map[string][]byte `yaml:"-"`
}

// MaxUsersFile bounds a basic_auth users file: it is held in memory.
const MaxUsersFile = 1 << 20

// RateLimit bounds a client's requests: it may send burst requests beyond
// the rate at once (1 + burst after a pause), then one at the rate; a
// request beyond that is answered 429 Too Many Requests with
// Retry-After, before anything else is done for it (the target never sees
// it). The client is the address X-Real-IP carries (see client_ip), an
// IPv6 address counted by its /64 as the per-client limits count. Each
// route counts for itself, unless it names a zone: the routes of one zone
// (in any site) count together, as the locations that use one nginx
// limit_req_zone do. A reload keeps the counts of a route whose site,
// name (else what it matches: path, host, header and client_ip) and
// rate_limit stay the same, and of a zone whose rate
// and burst stay the same, and starts the others afresh. With workers (Linux) the workers count together, in
// memory they share: a client whose connections the kernel spreads over
// them has one allowance, as with one process. That memory (4.2 MiB)
// holds 65536 counts of routes and clients at once (a count leaves once its
// client has its whole burst back); where it is full, the count nearest
// to its whole burst is forgotten, and its client finds its whole burst
// again. One process keeps the counts of at most 65536 client addresses
// per route (or zone), and forgets the least recently seen beyond that;
// all its rate_limit and basic_auth failure counts together share room
// for 262144 addresses (about 50 MB): with more than four such routes,
// each keeps an equal part of it (at least 256).
type RateLimit struct {
	// Rate is the steady rate: a number of requests per second, minute or
	// hour, e.g. 10/s, 30/m or 500/h (nginx's 10r/s reads the same).
	// Required.
	Rate Rate `yaml:"rate"`
	// Burst is the number of requests a client may send beyond the rate,
	// as nginx's burst with nodelay: after a pause of (1 + burst) times
	// the interval between requests, 1 + burst requests pass at once.
	// Default 0: one request, then one per interval.
	Burst int `yaml:"burst"`
	// Zone is the name of an allowance the routes that name it share: a
	// client's requests to any of them count against one (a login form
	// and its API behind two routes). Every route of a zone must give it
	// the same rate and burst. Default: the route's own.
	Zone string `yaml:"zone"`
}

// Retries is a retry policy. A request that never reached a target (connect
// failure, or the connection failed before the request was written), or that
// an HTTP/2 target refused unprocessed (RST_STREAM REFUSED_STREAM, or a
// GOAWAY that leaves its stream out), is always retried on another target
// within the limits below. A request body read whole first
// (http.request_buffer) is sent again, whole, on a retry; one that streamed
// is not retried once part of it went to a target.
type Retries struct {
	// Tries is the total number of attempts, the first included; 1 disables
	// retries. At most 8. Default 3.
	Tries int `yaml:"tries"`
	// TotalTime is how long after the first attempt began another attempt
	// may still start, as nginx's proxy_next_upstream_timeout: no retry
	// begins after it; an attempt in progress is bounded by the upstream's
	// timeouts, not by it. A body read whole first (request_buffer) is not
	// counted. Default 15s.
	TotalTime time.Duration `yaml:"total_time"`
	// RetryNonIdempotent also retries requests that may have reached the
	// target when their method is not idempotent (POST, PATCH). Requests
	// with idempotent methods (GET, HEAD, OPTIONS, PUT, DELETE, TRACE) are
	// retried after such failures regardless. Default false.
	RetryNonIdempotent bool `yaml:"retry_non_idempotent"`
}

// Sessions configures resumption.
type Sessions struct {
	// CacheSize is the number of sessions kept per protocol for session-ID
	// resumption; 0 disables the cache. Default 20480. The cache keeps the
	// sessions' states in 128-byte pieces of memory that grows with use up
	// to 1 KiB per session of cache_size (20 MiB at the default) and that
	// the Go garbage collector does not scan, so a large cache costs no
	// collector time. A session without client certificates takes one
	// piece; one with a client certificate chain takes several (a chain of
	// 2 KiB, 17), so when most sessions carry chains the memory bound, not
	// the count, decides how many are kept: the least recently used make
	// room. A state over 16 KiB is not kept. At most 16777216.
	CacheSize int `yaml:"cache_size"`
	// Lifetime bounds how long a session can be resumed. Default 5m, at
	// most 168h (7 days, the cap RFC 8446 §4.6.1 sets on a ticket).
	Lifetime time.Duration `yaml:"lifetime"`
	// Tickets enables session tickets (TLCP RFC 5077 style and TLS 1.3 PSK
	// tickets). Default true.
	Tickets bool `yaml:"tickets"`
	// TicketKeyFile holds ticket keys shared by several instances: one or
	// more 32-byte secrets (newest first), or one nginx-style 48/80-byte
	// key. A key that is one byte repeated (all zeros, a placeholder) is
	// refused; keep the file readable by gmproxy only (check warns when
	// others, or a group gmproxy is not in, can read it). Default: random in-memory keys rotated every
	// ticket_rotation.
	TicketKeyFile string `yaml:"ticket_key_file"`
	// TicketRotation is the lifetime of a random ticket key before a new one
	// encrypts (old ones still decrypt for a while); with ticket_keys, how
	// long each fleet key encrypts. Default 1h, at most 168h, and at least
	// lifetime / 1024 (every key that still opens a ticket is kept).
	TicketRotation time.Duration `yaml:"ticket_rotation"`
	// Store is a store shared by the instances of a fleet: a TLCP session
	// made on one instance resumes by session ID on any other. The
	// in-process cache (cache_size) stays in front of it: a session seen
	// here resumes with no round trip, one made elsewhere with one (GET),
	// and a full handshake writes its session once (SET). Sessions are
	// sealed with the ticket keys before they leave the process, so the
	// store needs keys shared by the fleet: ticket_keys or
	// ticket_key_file. A slow or down store never fails a handshake: after
	// timeout it goes on as a full one. Default none.
	Store *SessionStore `yaml:"store"`
	// TicketKeys makes the fleet agree on rotating ticket keys through the
	// store, instead of a ticket_key_file copied to every instance: the
	// newest key encrypts, older ones decrypt until their tickets expire.
	// Used for TLCP tickets, TLS 1.3-SM PSK tickets and the sessions in
	// the store. Default none.
	TicketKeys *FleetTicketKeys `yaml:"ticket_keys"`
}

// SessionStore is the shared session store (sessions.store).
type SessionStore struct {
	// Type is the store's kind: redis (a server, a Sentinel group with
	// master_name, or a Cluster). Required.
	Type string `yaml:"type"`
	// Addresses are host:port of the Redis server, of the Sentinels (with
	// master_name) or of some Cluster nodes. In Kubernetes use the
	// name of the Redis service, e.g. redis.gmproxy.svc:6379. Required.
	Addresses []string `yaml:"addresses"`
	// MasterName is the name of the master that the Sentinels at addresses
	// watch. Default none (no Sentinel).
	MasterName string `yaml:"master_name"`
	// Cluster says the store is a Redis Cluster also when addresses has
	// one entry (a configuration endpoint such as ElastiCache's, or a
	// Kubernetes service in front of the nodes): gmproxy then learns the nodes from
	// it and follows MOVED and ASK redirections. Two or more addresses
	// without master_name are taken for a Cluster anyway. Not with
	// master_name. Default false.
	Cluster bool `yaml:"cluster"`
	// Username is the Redis ACL user; needs password_file. Default none
	// (the default user).
	Username string `yaml:"username"`
	// PasswordFile holds the password (a trailing newline is ignored).
	// Default none.
	PasswordFile string `yaml:"password_file"`
	// SentinelUsername is the user of the Sentinels (with master_name)
	// when they require AUTH as a user of their own (Redis 6.2 and
	// later); needs sentinel_password_file. Default none (the default
	// user).
	SentinelUsername string `yaml:"sentinel_username"`
	// SentinelPasswordFile holds the password the Sentinels require
	// (their requirepass, or sentinel_username's), apart from the one of
	// the Redis servers (password_file); a trailing newline is ignored.
	// Only with master_name. Default none (the Sentinels take no AUTH).
	SentinelPasswordFile string `yaml:"sentinel_password_file"`
	// TLS connects over TLS when present. Default none (plain TCP).
	TLS *StoreTLS `yaml:"tls"`
	// KeyPrefix starts every key gmproxy writes, so that fleets (or other
	// programs) can share one Redis; at most 256 bytes. Fleets that share a
	// store and a wrap key still keep their ticket keys apart by it (each
	// sealed key names its prefix). Default "gmproxy:".
	KeyPrefix string `yaml:"key_prefix"`
	// Timeout bounds one round trip to the store; past it the handshake
	// goes on as a full one. After 5 failures in a row the store is not
	// asked for 1s (circuit breaker). Default 5ms.
	Timeout time.Duration `yaml:"timeout"`
	// PoolSize bounds the open connections per Redis node. Default 0
	// (10 per CPU).
	PoolSize int `yaml:"pool_size"`

	// Password is the content of password_file.
	Password string `yaml:"-"`
	// SentinelPassword is the content of sentinel_password_file.
	SentinelPassword string `yaml:"-"`
}

// StoreTLS is the client side of TLS to the store.
type StoreTLS struct {
	// CA is a PEM file of the CA certificates that verify the store's
	// certificate. Default: the system roots.
	CA string `yaml:"ca"`
	// Cert is a client certificate (PEM) for stores that ask for one.
	// Default none.
	Cert string `yaml:"cert"`
	// Key is the private key of cert. Required with cert.
	Key string `yaml:"key"`
	// ServerName is the name checked in the store's certificate. Default:
	// the host of each address.
	ServerName string `yaml:"server_name"`

	// Config is the TLS configuration made from the fields above.
	Config *tls.Config `yaml:"-"`
}

// FleetTicketKeys agrees on the ticket keys through the store
// (sessions.ticket_keys).
type FleetTicketKeys struct {
	// Store is where the keys live: redis (sessions.store). Required.
	Store string `yaml:"store"`
	// WrapKeyFile is a secret shared by the fleet (32 random bytes, e.g.
	// head -c 32 /dev/urandom; in Kubernetes a Secret) that seals the
	// ticket keys in the store, so that reading the store opens no ticket
	// and no session. Required.
	WrapKeyFile string `yaml:"wrap_key_file"`

	// WrapKeys are the keys read from wrap_key_file.
	WrapKeys []ticket.Key `yaml:"-"`
}

// Admin is the admin HTTP listener (/metrics, /healthz, /readyz) and the
// control endpoint POST /reload. The control endpoint refuses requests
// carrying an Origin header (browsers) and requests whose Host, whatever
// its port, is not an IP address, localhost or the host name written in
// the listener's own address (DNS rebinding: a name an attacker controls
// is refused; on a unix: control_address the Host is not checked).
type Admin struct {
	// Address is host:port, or "off" to disable the admin listener.
	// Changing it needs a restart (each reload warns until then).
	// Default 127.0.0.1:9100. Its connections, as the control address's:
	// at most 64 at once, 10s for a request's head, 1m for its answer (a
	// profile or trace its seconds more), 1m idle. It may not take a
	// listener's address (nor control_address its own or a listener's).
	Address string `yaml:"address"`
	// Pprof serves /debug/pprof/ (with workers, the supervisor's own, and
	// worker N's under /workers/N/debug/pprof/). A reload applies it.
	// As POST /reload, it refuses a Host other than an IP address,
	// localhost or the host name of address (DNS rebinding), and requests
	// a browser marks as sent by another site's page (Sec-Fetch-Site).
	// Default false.
	Pprof bool `yaml:"pprof"`
	// ControlAddress is the address that, when set, serves POST /reload
	// (host:port, or unix:/path for a Unix socket) in place of address, so
	// that whoever may scrape /metrics cannot reload. Default: POST /reload
	// on address. A relative unix: path is resolved against the
	// configuration file's folder; Linux's abstract sockets (unix:@name),
	// which have no file permissions, are refused. Changing it needs a restart (each reload warns until
	// then).
	ControlAddress string `yaml:"control_address"`
	// TokenFile names a file holding a secret that POST /reload must carry
	// as "Authorization: Bearer <secret>": at least 16 characters of
	// printable ASCII without spaces, e.g. head -c 32 /dev/urandom |
	// base64 (surrounding white space is ignored). Every reload reads it again, and its token applies from
	// the next request: to replace a leaked token, write the new one and
	// reload with the old one (or SIGHUP), which is refused from then on.
	// Default: no token.
	TokenFile string `yaml:"token_file"`
	// Token is the content of TokenFile, read when the configuration is
	// loaded.
	Token []byte `yaml:"-"`
}

// Equal reports whether a and b configure the same admin listener.
func (a Admin) Equal(b Admin) bool {
	return a.Address == b.Address && a.Pprof == b.Pprof && a.ControlAddress == b.ControlAddress &&
		a.TokenFile == b.TokenFile && string(a.Token) == string(b.Token)
}

// UnixPrefix marks a Unix socket path in ControlAddress.
const UnixPrefix = "unix:"

// AccessLog configures the access log.
type AccessLog struct {
	// Path is a file, "stdout", "stderr" or "off". Default stdout. The
	// lines go through a queue (buffer) that one writer drains, so an
	// output that takes no writes (a FIFO whose reader stalls, a hung NFS
	// mount, stdout into a blocked logging driver) holds no request: the
	// lines that find the queue full are dropped and reported as lost
	// (the error "access log: write failed, lines lost", at most once a
	// minute, with bytes_lost and lines_lost), as those of a failed write
	// are. Reopening (SIGUSR1) and shutting down write the queued lines
	// first, waiting 5s at most for a stalled output.
	Path string `yaml:"path"`
	// Buffer bounds the bytes of lines queued for the writer (nginx's
	// access_log buffer=, which is a write buffer only): the memory an
	// output that takes no writes holds, and the seconds of lines a slow
	// disk may fall behind by before lines are lost. Between 64KiB and
	// 1GiB; default 4MiB (some seconds of a busy proxy's lines).
	Buffer ByteSize `yaml:"buffer"`
	// Flush is the longest a line waits in the queue before the writer
	// writes it (nginx's flush=; 64 KiB queued, or half the buffer when
	// that is less, are written at once).
	// Between 10ms and 1m; default 1s.
	Flush time.Duration `yaml:"flush"`
	// Format is combined (nginx-like plus TLS fields), json, or template.
	// Default combined.
	Format string `yaml:"format"`
	// Template is the line template for format: template, with {field}
	// placeholders, e.g. "{time} {client} {status} {grpc_status}". The
	// fields (also the keys of format json): time, time_local, client
	// (the client's address as X-Real-IP gives it, the one client_ip,
	// rate_limit and the per-client limits judge: behind a proxy of
	// trusted_proxies the one its X-Forwarded-For names, as nginx's
	// $remote_addr behind set_real_ip_from),
	// site, route, host, method, uri, proto, status, bytes_in, bytes_out,
	// request_time, upstream, upstream_addr, upstream_time, tls_protocol,
	// cipher, session_reused (r or . in text, true or false in JSON; - or
	// null without TLS), handshake_ms (the first request of a
	// connection only), sni, client_s_dn (the subject of a client
	// certificate that verified; empty for one that FAILED under
	// client_auth optional_no_ca), referer, user_agent,
	// grpc_status (a gRPC response's grpc-status, from its trailers: gRPC
	// calls fail with HTTP status 200; status gives gmproxy's own HTTP
	// status of a call it failed itself, see error_pages), request_id (see
	// sites[].request_id; empty where a site gives none), remote_user
	// (the user a route's basic_auth let in; empty for others, also for a
	// name it refused) and peer (the connection's address, after a
	// trusted PROXY protocol header: the proxy in front where client is
	// the address it names; nginx's $realip_remote_addr). Combined is nginx's combined with remote_user.
	// A value is written as nginx escapes it (a quote, a backslash, a
	// control or invalid UTF-8 as \xHH); a field outside double quotes
	// has its spaces written \x20 too, so a client's value (an SNI) is
	// one field.
	// A stream site's session is a line with method STREAM and proto
	// TCP whose status is nginx stream's: 200 spliced to its end, 403
	// refused by client_ip, 502 no target reached, 503 refused because
	// gmproxy is shutting down. Required with format template; default
	// none.
	Template string `yaml:"template"`
}

// Log configures the program log.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// Offload configures the private-key worker pool.
type Offload struct {
	// Workers is the number of private-key operations that run at once
	// (each in its handshake's goroutine; the others wait in line); 0
	// means one per CPU the process computes on (GOMAXPROCS; one in each
	// process of the worker mode). Default 0.
	Workers int `yaml:"workers"`
	// Queue bounds waiting operations; a full queue fails the handshake
	// fast. Default 4096.
	Queue int `yaml:"queue"`
}

// KeyServer is a remote key server: a gmproxy keyserver process (or
// anything speaking its protocol) that holds SM2 private keys and runs
// their operations (sign, decrypt, SM2 key agreement) for gmproxy. Keys
// are found by the public key of the certificate that names the key
// server; the certificates stay on the edge. Operations on remote keys
// go through the offload engine like local ones (same metrics, with
// location="remote", and the same fail-fast backpressure) without
// taking one of its workers' turns. A TLCP ECDHE handshake sends its ephemeral
// private key to the key server: use mutual TLS or a Unix socket only.
type KeyServer struct {
	// Name is how sites refer to the key server. Required, unique; not
	// "other" or "none", label values of the metrics' own.
	Name string `yaml:"name"`
	// Addresses are the key server's endpoints: host:port, reached over
	// mutual TLS, or unix:/path/to/socket for a Unix socket (no TLS;
	// protect it with the socket's file permissions). Operations go to the
	// healthy ones in turn; one that fails is retried on the next, and a
	// failed address is checked again with exponential back-off (up to
	// 10s). An operation answered "unknown key", "busy", "internal" or
	// "unavailable" is retried on the next too (a key server not yet
	// reloaded with a new key); a refusal of the request or of this client
	// (the ciphertext does not decrypt, forbidden, wrong role, rate
	// limited) is final. All should serve the same keys. Required (or
	// address).
	Addresses []string `yaml:"addresses"`
	// Address is a single endpoint, the same as addresses with one entry.
	// Default: none (addresses is used).
	Address string `yaml:"address"`
	// Cert is gmproxy's client certificate (PEM, RSA or ECDSA, with
	// extendedKeyUsage clientAuth if it has any) presented to the key
	// server. Required for host:port addresses.
	Cert string `yaml:"cert"`
	// Key is the private key of cert. Required with cert.
	Key string `yaml:"key"`
	// CA is a PEM file of the CA certificates that verify the key server's
	// certificate. Required for host:port addresses.
	CA string `yaml:"ca"`
	// ServerName is the name checked in the key server's certificate.
	// Default: the host of address.
	ServerName string `yaml:"server_name"`
	// ConnectTimeout bounds opening a connection, TLS handshake included.
	// Default 2s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// Timeout bounds one key operation, connecting and failing over to
	// another address included (the handshake's own deadline applies too);
	// on expiry the handshake fails. Default 3s.
	Timeout time.Duration `yaml:"timeout"`
	// PoolSize is the number of connections kept open to each address;
	// each carries many operations at once. Default 2, at most 64 (what
	// a key server takes from one client by default, max_connections).
	PoolSize int `yaml:"pool_size"`
	// MaxInFlight bounds the operations sent to the key server at once;
	// further operations wait for one to finish, within timeout. 0 means
	// unlimited. Default 64.
	MaxInFlight int `yaml:"max_in_flight"`
	// HealthCheckInterval is how often every address is pinged (a silent
	// or dead one is found before handshakes wait on it). Default 2s.
	HealthCheckInterval time.Duration `yaml:"health_check_interval"`
	KeyPassword         `yaml:",inline"`

	// Material is what was loaded from the files named above.
	Material KeyServerMaterial `yaml:"-"`
}

// KeyServerFile is the configuration file of gmproxy keyserver (gmproxy
// keyserver -c FILE), a separate program from the proxy: it holds SM2
// private keys and answers the key operations of gmproxy instances whose
// key_servers entry points at it. Run it on a host that only the edge
// proxies can reach. SIGHUP re-reads the file and its files and replaces
// the served keys, the clients and the TLS certificate and client CA
// (the connections of a removed client, and those beyond a lowered
// clients[].max_connections, are closed at once; the others are checked
// against the new clients and CA before their next request), and the
// server's timeouts and connection limits (for the connections accepted
// after it); listen, listen_group, metrics_address, audit_interval,
// shutdown_grace and log need a restart (a reload logs a warning naming
// them; one that moves listen between host:port and unix: is refused).
type KeyServerFile struct {
	// Listen is host:port to accept gmproxy's connections on, over mutual
	// TLS, or unix:/path/to/socket for a Unix socket (created with mode
	// 0600, so that only the key server's user may connect, unless
	// listen_group is set; no TLS). Required.
	Listen string `yaml:"listen"`
	// ListenGroup is a group (name or number) whose members may connect
	// too, with a unix: listen: the socket gets that group and mode 0660.
	// The key server's user must be a member, and so must gmproxy's: with
	// the systemd units, whose users are made at start (DynamicUser),
	// create the group (groupadd gmproxy-keys) and add
	// SupplementaryGroups=gmproxy-keys to both units. Default: none.
	ListenGroup string `yaml:"listen_group"`
	// TLS is the server side of mutual TLS. Required for host:port.
	TLS KeyServerTLS `yaml:"tls"`
	// Keys are the SM2 private keys served; gmproxy finds each by the
	// public key of its certificate. At least one is required.
	Keys []ServedKey `yaml:"keys"`
	// Clients are the gmproxy instances allowed to use the keys, each
	// identified by its client certificate, with the keys it may use and
	// its limits. A TLS peer that matches no entry is refused. Required
	// for host:port; ignored on a Unix socket (every local client may use
	// every key, with the default limits).
	Clients []KeyServerClient `yaml:"clients"`
	// IdleTimeout closes a gmproxy connection idle for this long.
	// Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// HandshakeTimeout bounds the TLS handshake and the protocol greeting
	// of a new connection. Default 5s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// MaxConnections bounds open connections; further ones are closed at
	// once. Default 1024.
	MaxConnections int `yaml:"max_connections"`
	// MaxHandshakes bounds the connections whose client is not yet
	// identified (TLS handshake and greeting, handshake_timeout at most
	// each), within max_connections: peers that never present an allowed
	// certificate cannot hold more than this many, and the rest stay for
	// the clients. Further ones are closed at once. Default 256 (at most
	// max_connections).
	MaxHandshakes int `yaml:"max_handshakes"`
	// MaxHandshakesPerAddress bounds those handshakes from one IP
	// address, so that one host cannot take all of max_handshakes; raise
	// it when many edges reach the key server through one NAT address.
	// Default 32.
	MaxHandshakesPerAddress int `yaml:"max_handshakes_per_address"`
	// AuditInterval is the period of the audit log: one info line per
	// client and key that was used, with its counts by operation and
	// result. Default 1m.
	AuditInterval time.Duration `yaml:"audit_interval"`
	// MetricsAddress is host:port of an HTTP listener serving Prometheus
	// metrics at /metrics (operations by client, key, operation and result,
	// latency, in-flight operations, connections), and the probes of a
	// load balancer or an orchestrator: /healthz (200 while the process
	// runs) and /readyz (200 while it serves, 503 from the start of a
	// shutdown). Default: none.
	MetricsAddress string `yaml:"metrics_address"`
	// ShutdownGrace is how long SIGTERM, SIGINT or SIGQUIT waits for operations in
	// progress before closing connections. Default 10s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Log is the program log (log/slog on standard error).
	Log Log `yaml:"log"`

	// File is the path the configuration was read from.
	File string `yaml:"-"`
	// Warnings are the non-fatal problems found while loading.
	Warnings Problems `yaml:"-"`
	// Material is what was loaded from the files named above.
	Material KeyServerFileMaterial `yaml:"-"`
	// decoded knows where each key stood in File (ProbeListen).
	decoded *decoder `yaml:"-"`
}

// KeyServerTLS is the key server's side of mutual TLS (ordinary TLS 1.3,
// RSA or ECDSA certificates).
type KeyServerTLS struct {
	// Cert is the key server's certificate chain (PEM). Required.
	Cert string `yaml:"cert"`
	// Key is its private key. Required.
	Key string `yaml:"key"`
	// ClientCA is a PEM file of the CA certificates that issue the client
	// certificates of the gmproxy instances allowed to use the keys.
	// Required.
	ClientCA    string `yaml:"client_ca"`
	KeyPassword `yaml:",inline"`
}

// ServedKey is one key file served by the key server.
type ServedKey struct {
	// Name identifies the key in clients[].keys, the audit log and the
	// metrics. Not "unknown": that is the name they give a key ID the
	// server does not hold; nor "other" or "none", label values of the
	// metrics' own. Default: the key file's name without folder and
	// extension.
	Name string `yaml:"name"`
	// Key is a PEM file of one SM2 private key (PKCS#8, SEC 1 or encrypted
	// PKCS#8). A file of several keys is refused: the roles given here
	// would be every key's, and a signing key beside an encryption key
	// would decrypt. Required.
	Key string `yaml:"key"`
	// Cert is the certificate of the key, checked to match when given.
	// Default: none.
	Cert string `yaml:"cert"`
	// Roles are the operations the key may run: sign, decrypt,
	// key_agreement. A TLCP signing key is [sign] (TLS 1.3-SM uses it too),
	// a TLCP encryption key [decrypt, key_agreement]; the key server
	// refuses any other operation, so that the signing key never decrypts
	// and the encryption key never signs. decrypt answers TLCP pre-master
	// secrets only: other data encrypted to the key is not decrypted for
	// a client; key_agreement answers the agreement of a TLCP ECDHE server
	// only: a client cannot run SM2 key exchange as the site with another
	// system's IDs or key length. Default: from cert's key usage
	// (digitalSignature: sign; keyEncipherment or dataEncipherment:
	// decrypt; keyAgreement: key_agreement); required without cert.
	Roles       []string `yaml:"roles"`
	KeyPassword `yaml:",inline"`
}

// KeyServerClient is a gmproxy instance (or a group sharing a
// certificate identity) allowed to use some keys.
type KeyServerClient struct {
	// Name identifies the client in the audit log and the metrics.
	// Required, unique; not "other" or "none", label values of the
	// metrics' own.
	Name string `yaml:"name"`
	// Subject matches the client certificate's subject, written in RFC 2253
	// form from every attribute of the subject: the last RDN first, no spaces,
	// types other than C, CN, L, O, OU, POSTALCODE, SERIALNUMBER, ST and
	// STREET as dotted OIDs (for example "CN=edge-1,O=Example,C=CN"; gmproxy
	// keyserver logs the subject of refused clients in this form, and a
	// subject in another form, such as OpenSSL's "C = CN, O = ...", is refused
	// as one that matches no certificate). A certificate whose subject has
	// another attribute, such as a second CN, does not match. Set subject,
	// spki_sha256 or both (then both must match). The first entry that matches
	// a certificate applies: put a narrower entry (subject and spki_sha256)
	// before a broader one (the same subject alone); an entry that only
	// matches what an earlier one matches is refused. Default: none (any
	// subject, when spki_sha256 is set).
	Subject string `yaml:"subject"`
	// SPKISHA256 matches the SHA-256 of the client certificate's
	// SubjectPublicKeyInfo, in hex (openssl x509 -pubkey -noout | openssl
	// pkey -pubin -outform der | sha256sum); it survives re-issuing the
	// certificate with the same key. Default: none (any key, when subject
	// is set).
	SPKISHA256 string `yaml:"spki_sha256"`
	// Keys are the names of the keys (keys[].name) the client may use.
	// Required.
	Keys []string `yaml:"keys"`
	// Rate is the client's sustained operations per second; beyond it
	// operations are refused (rate_limited). 0 means unlimited.
	// Default 10000.
	Rate int `yaml:"rate"`
	// Burst is how many operations above rate the client may send at
	// once. Default 1000.
	Burst int `yaml:"burst"`
	// MaxInFlight bounds the client's operations in progress, over all its
	// connections; beyond it operations are refused (busy). 0 means
	// unlimited. Default 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxConnections bounds the client's open connections, so that one
	// client cannot take all of the key server's max_connections; one
	// more is refused (busy) and closed. An edge opens pool_size
	// connections per key server address in each worker. 0 means
	// unlimited. Default 64.
	MaxConnections int `yaml:"max_connections"`
}

// ControlAddress returns admin.control_address as gmproxy listens on it:
// a unix: socket's relative path joined to c.Dir, as every file named in
// the configuration is (the working directory of a service is not the
// operator's).
func (c *Config) ControlAddress() string {
	if path, ok := strings.CutPrefix(c.Admin.ControlAddress, UnixPrefix); ok && path != "" {
		return UnixPrefix + c.Resolve(path)
	}
	return c.Admin.ControlAddress
}

// Resolve returns the file name p as gmproxy uses it: unchanged when
// absolute, empty or one of the access-log words stdout, stderr and off;
// otherwise joined to c.Dir. Certificates and keys are already loaded into
// Material and the ticket keys into TicketKeys; use Resolve for other files
// named in the configuration (such as access_log.path).
func (c *Config) Resolve(p string) string {
	switch p {
	case "", "stdout", "stderr", "off":
		return p
	}
	if filepath.IsAbs(p) || c.Dir == "" {
		return p
	}
	return filepath.Join(c.Dir, p)
}
