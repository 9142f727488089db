package conf

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/dialable"
	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/internal/sessioncache"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/staple"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/balance"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// now is the clock used for certificate validity checks (tests replace it).
var now = time.Now

// expiryWarning: certificates expiring within this period get a warning.
const expiryWarning = 30 * 24 * time.Hour

type validator struct {
	*decoder
	cfg   *Config
	dir   string // folder against which relative paths resolve
	files map[string]*loadedFile
	now   time.Time
	// keyServers are the usable key_servers entries by name; keyServerNames
	// all names (usable or not), keyServerUsed those named by a site.
	keyServers     map[string]*KeyServer
	keyServerNames map[string]bool
	keyServerUsed  map[string]bool
	// secretChecked are the secret files whose mode was checked (one
	// warning per file).
	secretChecked map[string]bool
	// zones are the rate_limit zones met so far, by name: where each was
	// first given and with what.
	zones map[string]zoneUse
	// secrets are the key, password and token files named, by resolved
	// path; filesRoots the files routes' roots, checked against them once
	// all are known (filesRootSecrets).
	secrets    map[string]secretUse
	filesRoots []filesRootUse
}

// secretUse is where a secret file was named, as written, and what it is.
type secretUse struct{ path, file, what string }

// filesRootUse is a files route's root and where it was given.
type filesRootUse struct {
	path string
	f    *Files
}

// zoneUse is where a rate_limit zone was first given, and its rate_limit.
type zoneUse struct {
	path string
	rl   RateLimit
}

type loadedFile struct {
	certs []*smx509.Certificate
	ok    bool
}

func (d *decoder) posOf(path string) pos {
	for p := path; p != ""; {
		if ps, ok := d.valPos[p]; ok {
			return ps
		}
		if ps, ok := d.keyPos[p]; ok {
			return ps
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return pos{}
}

func (v *validator) errf(path, fix, format string, args ...any) {
	if v.failed[path] {
		return // already reported while decoding
	}
	v.addAt(SeverityError, v.posOf(path), path, fmt.Sprintf(format, args...), fix)
}

func (v *validator) warnf(path, fix, format string, args ...any) {
	v.addAt(SeverityWarning, v.posOf(path), path, fmt.Sprintf(format, args...), fix)
}

// has reports whether the key path was written in the file.
func (v *validator) has(path string) bool { _, ok := v.valPos[path]; return ok }

func (v *validator) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(v.dir, p)
}

const relFix = "check the path (relative paths are resolved against the folder of the configuration file)"

func (v *validator) oneOf(path, val string, allowed ...string) bool {
	if slices.Contains(allowed, val) {
		return true
	}
	fix := "use one of: " + strings.Join(allowed, ", ")
	if c := closest(val, allowed); c != "" {
		fix = fmt.Sprintf("did you mean %q? (%s)", c, fix)
	}
	v.errf(path, fix, "invalid value %q", val)
	return false
}

func (v *validator) hostPort(path, addr string, allowEmptyHost bool) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.errf(path, "write host:port, e.g. 0.0.0.0:443, [::1]:443 or backend.local:8080", "invalid address %q: %s", addr, strings.TrimPrefix(err.Error(), "address "+addr+": "))
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.errf(path, "the port must be a number from 1 to 65535", "invalid port %q in %q", port, addr)
		return false
	}
	if host == "" && !allowEmptyHost {
		v.errf(path, "write the host, e.g. 127.0.0.1:"+port, "address %q has no host", addr)
		return false
	}
	return true
}

var hostLabelRE = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)(\.[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)*\.?$`)

// asciiName returns the ASCII form (A-labels, "xn--...") of a server name
// written with Unicode labels, as clients send it (RFC 5890, RFC 6066
// §3), and whether n is such a name.
func asciiName(n string) (string, bool) {
	rest, wild := strings.CutPrefix(n, "*.")
	if isASCII(rest) {
		return "", false
	}
	a, err := idna.Lookup.ToASCII(rest)
	if err != nil || !validHostName(a) {
		return "", false
	}
	if wild {
		a = "*." + a
	}
	return a, true
}

// hostNameFix says how to write n, a server name or a route's host that
// is not valid: in its ASCII form when it is an internationalised name
// (a Unicode name would match no client's SNI or Host), as the names
// nginx's ".example.cn" stands for, else as a name or wildcard.
func hostNameFix(n string) string {
	d, dotted := strings.CutPrefix(n, ".")
	if a, ok := asciiName(d); ok {
		if !dotted {
			return fmt.Sprintf("write it as %q: clients send an internationalised name in its ASCII form (A-labels, RFC 5890) in SNI and Host", a)
		}
		d = a // nginx's ".例子.cn"
	}
	if dotted && validHostName(d) && !strings.HasPrefix(d, ".") && !strings.HasPrefix(d, "*") {
		return fmt.Sprintf("list %q and \"*.%s\" (nginx's %q also covers deeper names; a wildcard here covers one label)", d, d, n)
	}
	return "write a host name such as portal.example.cn or a wildcard such as *.example.cn"
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func validHostName(s string) bool {
	if net.ParseIP(s) != nil {
		return true
	}
	return len(s) <= 253 && hostLabelRE.MatchString(s)
}

// validHostPort reports whether s is a host name or IP address (IPv6 in
// brackets) with an optional ":port", as a Host field holds (RFC 9110
// §7.2).
func validHostPort(s string) bool {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		if port = s[end+1:]; port != "" {
			if port[0] != ':' {
				return false
			}
			port = port[1:]
			if port == "" {
				return false
			}
		}
	} else {
		if i := strings.IndexByte(s, ':'); i >= 0 {
			host, port = s[:i], s[i+1:]
			if port == "" {
				return false
			}
		}
		if !validHostName(host) || strings.HasPrefix(host, "*") {
			return false // a wildcard names no host
		}
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return false
		}
	}
	return true
}

var tokenRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (v *validator) prefixes(path string, list []string) {
	for i, s := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		if strings.Contains(s, "/") {
			pfx, err := netip.ParsePrefix(s)
			switch {
			case err != nil:
				v.errf(p, "write an IP address or CIDR such as 10.0.0.0/8", "invalid CIDR %q", s)
			case pfx != pfx.Masked():
				// Read as its network, as nginx reads it (with a
				// warning): 198.51.100.10/2, a /32 that lost a digit,
				// trusts or lets in a quarter of the IPv4 Internet.
				v.warnf(p, fmt.Sprintf("write the network (%s), or the address alone (%s) for one host", pfx.Masked(), pfx.Addr()),
					"%s has host bits set: it stands for %s", s, pfx.Masked())
			}
		} else if _, err := netip.ParseAddr(s); err != nil {
			v.errf(p, "write an IP address or CIDR such as 10.0.0.0/8", "invalid IP address %q", s)
		}
	}
}

// trustsEveryone warns about an entry of a list of trusted sources
// (trusted_proxies, proxy_protocol.trusted) that holds every address
// (0.0.0.0/0, ::/0, or the IPv4-mapped ::ffff:0.0.0.0/96, which the proxy
// reads as 0.0.0.0/0): any client could then name its own address in
// X-Forwarded-For or a PROXY header, and the per-client limits,
// rate_limit and basic_auth's failures would count the address it chose
// (a new one per request). nginx takes set_real_ip_from 0.0.0.0/0 as
// given; it is warned here because it is easy to copy from a guide.
func (v *validator) trustsEveryone(path string, list []string, fix string) {
	for i, s := range list {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			continue // an address, or reported by prefixes
		}
		bits := pfx.Bits()
		if pfx.Addr().Is4In6() && bits >= 96 {
			bits -= 96
		}
		if bits == 0 {
			v.warnf(fmt.Sprintf("%s[%d]", path, i), fix,
				"%s trusts every address: any client can name its own address, and the per-client limits and rate_limit count the address it names", s)
		}
	}
}

// validate checks the decoded, defaulted configuration and loads its files.
func (v *validator) validate() {
	c := v.cfg
	v.validateListeners()
	upstreamUsed := map[string]bool{}
	v.validateKeyServers()
	v.validateSites(upstreamUsed)
	v.keyServersUsed()
	v.validateUpstreams(upstreamUsed)
	v.reachability()
	v.prefixes("trusted_proxies", c.TrustedProxies)
	v.trustsEveryone("trusted_proxies", c.TrustedProxies, "list only the proxies in front of gmproxy, e.g. 10.0.0.0/8")

	// sessions
	s := &c.Sessions
	if s.CacheSize < 0 {
		v.errf("sessions.cache_size", "use 0 to disable the cache", "cache_size must not be negative")
	}
	if s.CacheSize > sessioncache.MaxCapacity {
		v.errf("sessions.cache_size", fmt.Sprintf("use at most %d", sessioncache.MaxCapacity), "cache_size %d is more sessions than one cache holds", s.CacheSize)
	}
	if s.Lifetime <= 0 {
		v.errf("sessions.lifetime", "write a duration such as 5m", "lifetime must be positive")
	}
	if s.Lifetime > MaxSessionLifetime {
		v.errf("sessions.lifetime", "use at most 168h (RFC 8446 §4.6.1 caps a ticket's lifetime at 7 days; RFC 5246 advises 24h for session IDs)", "lifetime %v is longer than 7 days", s.Lifetime)
	}
	if s.TicketRotation <= 0 {
		v.errf("sessions.ticket_rotation", "write a duration such as 1h", "ticket_rotation must be positive")
	}
	if s.TicketRotation > MaxTicketRotation {
		v.errf("sessions.ticket_rotation", "use at most 168h: a key that encrypts longer exposes more recorded sessions when it leaks (RFC 5077 §5.5)", "ticket_rotation %v is longer than 7 days", s.TicketRotation)
	}
	if s.TicketRotation > 0 && s.Lifetime > 0 && s.Lifetime/s.TicketRotation >= MaxTicketKeys {
		least := (s.Lifetime + MaxTicketKeys - 1) / MaxTicketKeys
		v.errf("sessions.ticket_rotation", fmt.Sprintf("use at least %v (lifetime / %d), or a shorter lifetime", least.Round(time.Second)+time.Second, MaxTicketKeys),
			"ticket_rotation %v keeps %d ticket keys for a lifetime of %v (every key that still opens a ticket is kept and tried)", s.TicketRotation, s.Lifetime/s.TicketRotation+1, s.Lifetime)
	}
	if s.TicketKeyFile != "" {
		b, err := readNamed(v.resolve(s.TicketKeyFile), maxNamedFile)
		switch {
		case err != nil:
			v.errf("sessions.ticket_key_file", relFix, "cannot read ticket key file %q: %s", s.TicketKeyFile, errText(err))
		default:
			v.secretMode("sessions.ticket_key_file", s.TicketKeyFile, "ticket key file")
			keys, err := ticket.ParseKeyFile(b, v.now)
			clear(b)
			if err != nil {
				v.errf("sessions.ticket_key_file", "create one with: head -c 32 /dev/urandom > ticket.key", "%s", err)
			} else {
				c.TicketKeys = keys
			}
		}
		if !s.Tickets {
			v.warnf("sessions.ticket_key_file", "remove it or set tickets: true", "ticket_key_file is ignored because tickets is false")
		}
	}
	v.validateSessionStore()

	v.validateAdmin()
	v.filesRootSecrets()

	// access_log, log, offload
	if c.AccessLog.Path == "" {
		v.errf("access_log.path", "write stdout, stderr, off or a file name", "access_log path is empty")
	}
	if v.oneOf("access_log.format", c.AccessLog.Format, "combined", "json", "template") {
		if c.AccessLog.Format == "template" && c.AccessLog.Template == "" {
			v.errf("access_log.template", "write a template such as '"+accessLogTemplateExample+"'", "format template needs a template")
		} else if c.AccessLog.Format == "template" {
			if err := proxy.CheckAccessLogTemplate(c.AccessLog.Template); err != nil {
				v.errf("access_log.template", "write fields in braces, such as '"+accessLogTemplateExample+"'", "%s", err)
			}
		} else if c.AccessLog.Format != "template" && c.AccessLog.Template != "" {
			v.warnf("access_log.template", "set format: template to use it", "template is ignored with format %s", c.AccessLog.Format)
		}
	}
	if b := c.AccessLog.Buffer; b < 64<<10 || b > 1<<30 {
		v.errf("access_log.buffer", "use for example 4MiB (the default)", "buffer %d is not between 64KiB and 1GiB", b)
	}
	if f := c.AccessLog.Flush; f < 10*time.Millisecond || f > time.Minute {
		v.errf("access_log.flush", "use for example 1s (the default)", "flush %s is not between 10ms and 1m", f)
	}
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")
	v.validateWorkers()
	if c.Offload.Workers < 0 {
		v.errf("offload.workers", "use 0 for one worker per CPU", "workers must not be negative")
	}
	if c.Offload.Queue < 1 {
		v.errf("offload.queue", "use a queue of at least 1 (default 4096)", "queue must be at least 1")
	}
}

// accessLogTemplateExample is the template the errors suggest.
const accessLogTemplateExample = "{time} {client} {method} {uri} {status} {tls_protocol} {cipher}"

func (v *validator) validateListeners() {
	c := v.cfg
	if len(c.Listeners) == 0 {
		v.errf("listeners", "add for example:\n  listeners:\n    - address: 0.0.0.0:443", "no listeners configured")
	}
	siteNames := map[string]*Site{}
	for i := range c.Sites {
		siteNames[c.Sites[i].Name] = &c.Sites[i]
	}
	seen := map[string]int{}
	byPort := map[string][]int{} // port → listeners on it
	for i := range c.Listeners {
		l := &c.Listeners[i]
		p := fmt.Sprintf("listeners[%d]", i)
		v.listenerAddress(l, p, i, seen, byPort)
		protoSeen := v.listenerProtocols(l, p)
		v.listenerLimits(l, p)
		v.oneOf(p+".plain_http", l.PlainHTTP, "close", "redirect")
		v.listenerProxyProtocol(l, p)
		v.listenerHTTP(&l.HTTP, p+".http")
		v.listenerSites(l, p, siteNames, protoSeen)
	}
}

// listenerAddress checks listeners[i].address and that it neither repeats nor
// overlaps an earlier listener's address; seen and byPort record the
// addresses checked so far.
func (v *validator) listenerAddress(l *Listener, p string, i int, seen map[string]int, byPort map[string][]int) {
	if l.Address == "" {
		v.errf(p+".address", "add address: host:port", "listener has no address")
		return
	}
	if !v.hostPort(p+".address", l.Address, true) {
		return
	}
	host, port, _ := net.SplitHostPort(l.Address)
	if wildcardHost(host) {
		host = "*" // the wildcard addresses overlap
	}
	key := net.JoinHostPort(strings.ToLower(host), port)
	if prev, dup := seen[key]; dup {
		v.errf(p+".address", "remove one of them or change the port", "duplicate listener address %s (also listeners[%d])", l.Address, prev)
		return
	}
	seen[key] = i
	// A wildcard address and a specific one on the same port
	// overlap: the second bind fails (EADDRINUSE).
	listeners := v.cfg.Listeners
	for _, j := range byPort[port] {
		oh, _, _ := net.SplitHostPort(listeners[j].Address)
		if wildcardHost(oh) != (host == "*") && port != "0" {
			v.errf(p+".address", "listen on the wildcard address alone, or give each listener its own port",
				"listener address %s overlaps listeners[%d] (%s): a wildcard address already covers every address on port %s", l.Address, j, listeners[j].Address, port)
			break
		}
	}
	byPort[port] = append(byPort[port], i)
}

// listenerProtocols checks the listener's protocols and the TLCP-in-TLS
// policy, and returns the set of valid protocols listed.
func (v *validator) listenerProtocols(l *Listener, p string) map[string]bool {
	if len(l.Protocols) == 0 {
		v.errf(p+".protocols", "list at least one of "+strings.Join(family.Names(), ", "), "no protocols")
	}
	protoSeen := map[string]bool{}
	for j, pr := range l.Protocols {
		pp := fmt.Sprintf("%s.protocols[%d]", p, j)
		if !v.oneOf(pp, pr, family.Names()...) {
			continue
		}
		if protoSeen[pr] {
			v.warnf(pp, "remove the repetition", "protocol %s listed twice", pr)
		}
		protoSeen[pr] = true
	}
	if v.oneOf(p+".tlcp_suites_in_tls_hello", l.TLCPSuitesInTLSHello, family.TLCPInTLSPolicies()...) && l.TLCPSuitesInTLSHello == family.TLCPInTLSAnswer && !protoSeen[family.TLCP] {
		v.warnf(p+".tlcp_suites_in_tls_hello", "add tlcp to protocols", "tlcp_suites_in_tls_hello: tlcp has no effect without protocol tlcp")
	}
	return protoSeen
}

// listenerLimits checks the handshake timeout and the handshake, connection
// and byte limits, overall and per client.
func (v *validator) listenerLimits(l *Listener, p string) {
	if l.HandshakeTimeout <= 0 {
		v.errf(p+".handshake_timeout", "write a duration such as 10s", "handshake_timeout must be positive")
	}
	if l.DeferAccept < 0 {
		v.errf(p+".defer_accept", "use 0 to turn it off or a duration such as 1s", "defer_accept must not be negative")
	} else if l.DeferAccept > time.Minute {
		v.errf(p+".defer_accept", "use a few seconds, e.g. 1s", "defer_accept (%v) would hold silent connections in the kernel for over a minute", l.DeferAccept)
	}
	if l.MaxHandshakes < 0 {
		v.errf(p+".max_handshakes", "use 0 for unlimited", "max_handshakes must not be negative")
	}
	if l.MaxConnections < 0 {
		v.errf(p+".max_connections", "use 0 for unlimited", "max_connections must not be negative")
	}
	if l.MaxConnections > 0 && l.MaxHandshakes > l.MaxConnections {
		v.warnf(p+".max_handshakes", "make max_handshakes at most max_connections", "max_handshakes (%d) exceeds max_connections (%d)", l.MaxHandshakes, l.MaxConnections)
	}
	if l.MaxHandshakesPerClient < 0 {
		v.errf(p+".max_handshakes_per_client", "use 0 for unlimited", "max_handshakes_per_client must not be negative")
	} else if l.MaxHandshakes > 0 && l.MaxHandshakesPerClient > l.MaxHandshakes {
		v.warnf(p+".max_handshakes_per_client", "make it a small share of max_handshakes, e.g. 1/16", "max_handshakes_per_client (%d) exceeds max_handshakes (%d): one client can take every handshake slot", l.MaxHandshakesPerClient, l.MaxHandshakes)
	}
	if l.MaxConnectionsPerClient < 0 {
		v.errf(p+".max_connections_per_client", "use 0 for unlimited", "max_connections_per_client must not be negative")
	} else if l.MaxConnections > 0 && l.MaxConnectionsPerClient > l.MaxConnections {
		v.warnf(p+".max_connections_per_client", "make it a small share of max_connections, e.g. 1/16", "max_connections_per_client (%d) exceeds max_connections (%d): one client can take every connection", l.MaxConnectionsPerClient, l.MaxConnections)
	}
	if l.MaxHandshakeBytes < 0 {
		v.errf(p+".max_handshake_bytes", "use 0 for unlimited or a size such as 16MiB", "max_handshake_bytes must not be negative")
	} else if l.MaxHandshakeBytes > 0 && l.MaxHandshakeBytes < 64<<10 {
		v.errf(p+".max_handshake_bytes", "use at least 64KiB, e.g. 16MiB", "max_handshake_bytes (%d) is below the size of one largest ClientHello (64KiB)", l.MaxHandshakeBytes)
	}
}

// listenerProxyProtocol checks that PROXY protocol headers are accepted only
// from listed sources.
func (v *validator) listenerProxyProtocol(l *Listener, p string) {
	if l.ProxyProtocol.Enabled && len(l.ProxyProtocol.Trusted) == 0 {
		v.errf(p+".proxy_protocol.trusted", "list the load balancers' addresses, e.g. trusted: [10.0.0.0/8]", "proxy_protocol is enabled but no trusted sources are listed")
	}
	if !l.ProxyProtocol.Enabled && len(l.ProxyProtocol.Trusted) > 0 {
		v.warnf(p+".proxy_protocol.trusted", "set enabled: true", "proxy_protocol.trusted is ignored because proxy_protocol is not enabled")
	}
	if !l.ProxyProtocol.Enabled && l.ProxyProtocol.Required {
		v.warnf(p+".proxy_protocol.required", "set enabled: true", "proxy_protocol.required is ignored because proxy_protocol is not enabled")
	}
	v.prefixes(p+".proxy_protocol.trusted", l.ProxyProtocol.Trusted)
	v.trustsEveryone(p+".proxy_protocol.trusted", l.ProxyProtocol.Trusted, "list only the load balancers' addresses, e.g. 10.0.0.0/8")
}

// listenerHTTP checks a listener's http section at path p.
func (v *validator) listenerHTTP(h *HTTPServer, p string) {
	if h.MaxHeaderBytes <= 0 {
		v.errf(p+".max_header_bytes", "use for example 1MiB", "max_header_bytes must be positive")
	} else if h.MaxHeaderBytes > MaxHeadBytes {
		v.errf(p+".max_header_bytes", "use for example 1MiB", "max_header_bytes %s is over %s (the head of one request, which one connection holds)", h.MaxHeaderBytes, ByteSize(MaxHeadBytes))
	}
	if h.MaxConcurrentStreams < 1 {
		v.errf(p+".max_concurrent_streams", "use for example 250", "max_concurrent_streams must be at least 1")
	}
	if h.ReadHeaderTimeout <= 0 {
		v.errf(p+".read_header_timeout", "write a duration such as 30s", "read_header_timeout must be positive")
	}
	// 0 is not "no limit" here: the proxy would put its own default in its
	// place, neither the documented 2m nor unbounded.
	if h.IdleTimeout <= 0 {
		v.errf(p+".idle_timeout", "write a duration such as 2m", "idle_timeout must be positive")
	}
	if h.BodyTimeout < 0 {
		v.errf(p+".body_timeout", "write a duration such as 60s, or 0 for no limit", "body_timeout must not be negative")
	}
	if h.SendTimeout < 0 {
		v.errf(p+".send_timeout", "write a duration such as 60s, or 0 for no limit", "send_timeout must not be negative")
	}
	if h.HTTP2MaxResetRate < 1 {
		v.errf(p+".http2_max_reset_rate", "use for example 100", "http2_max_reset_rate must be at least 1")
	}
	if h.MaxRequestsPerClient < 0 {
		v.errf(p+".max_requests_per_client", "use 0 for unlimited", "max_requests_per_client must not be negative")
	}
	if h.RequestBuffer < 0 || h.RequestBuffer > MaxRequestBuffer {
		v.errf(p+".request_buffer", "use for example 64KiB, or 0 to stream every body", "request_buffer %d is not between 0 and 16MiB", h.RequestBuffer)
	}
}

// listenerSites checks the sites served on a listener and warns about listed
// protocols that no served site has a certificate for.
func (v *validator) listenerSites(l *Listener, p string, siteNames map[string]*Site, protoSeen map[string]bool) {
	have := map[string]bool{}
	for j, name := range l.Sites {
		s, ok := siteNames[name]
		if !ok {
			fix := "use one of the site names: " + strings.Join(mapKeys(siteNames), ", ")
			if cl := closest(name, mapKeys(siteNames)); cl != "" {
				fix = fmt.Sprintf("did you mean %q?", cl)
			}
			v.errf(fmt.Sprintf("%s.sites[%d]", p, j), fix, "unknown site %q", name)
			continue
		}
		have[family.TLCP] = have[family.TLCP] || s.TLCP != nil
		have[family.TLS13SM] = have[family.TLS13SM] || s.TLS13SM != nil
		have[family.TLS] = have[family.TLS] || s.TLS != nil
	}
	if l.DefaultSite != "" && !slices.Contains(l.Sites, l.DefaultSite) {
		v.errf(p+".default_site", "name one of the sites served on this listener", "default_site %q is not served on this listener", l.DefaultSite)
	}
	if len(v.cfg.Sites) > 0 && v.has(p+".protocols") {
		for j, pr := range l.Protocols {
			if protoSeen[pr] && !have[pr] {
				v.warnf(fmt.Sprintf("%s.protocols[%d]", p, j), fmt.Sprintf("add a %s section to a site or remove %s from protocols", pr, pr), "no site served on %s has a %s certificate; %s handshakes will fail", l.Address, pr, pr)
			}
		}
	}
}

// reachability warns about sites no client can reach.
func (v *validator) reachability() {
	c := v.cfg
	served, deflt := map[string]bool{}, map[string]bool{}
	for _, l := range c.Listeners {
		for _, n := range l.Sites {
			served[n] = true
		}
		deflt[l.DefaultSite] = true
	}
	for i, s := range c.Sites {
		p := fmt.Sprintf("sites[%d]", i)
		switch {
		case len(c.Listeners) == 0 || v.failed[p+".name"]:
		case !served[s.Name]:
			v.warnf(p, "add it to a listener's sites or remove it", "site %q is not served on any listener", s.Name)
		case len(s.ServerNames) == 0 && !deflt[s.Name]:
			v.warnf(p, "add server_names or make it a listener's default_site", "site %q has no server_names and is no listener's default_site, so no client reaches it", s.Name)
		}
		v.addressNames(&c.Sites[i], p)
	}
}

// addressNames warns about the IP addresses among the server_names of
// site s (at path p) on a listener where s is not the default site and
// the name routes nothing. A client sends no SNI for an address (RFC 6066
// §3), so its connection is made for the listener's default site; the
// proxy gives its requests to s by their Host, as nginx does with
// "server_name 10.0.0.5;", only when s could have made that connection
// and neither site checks client certificates (why not, else "").
func (v *validator) addressNames(s *Site, p string) {
	var other *Listener
	var why string
	for i := range v.cfg.Listeners {
		l := &v.cfg.Listeners[i]
		if l.DefaultSite != s.Name && slices.Contains(l.Sites, s.Name) {
			if why = v.notByHost(s, l.DefaultSite); why != "" {
				other = l
				break
			}
		}
	}
	if other == nil {
		return
	}
	for j, n := range s.ServerNames {
		np := fmt.Sprintf("%s.server_names[%d]", p, j)
		if net.ParseIP(n) == nil || v.failed[np] {
			continue
		}
		v.warnf(np, fmt.Sprintf("make site %q the default_site of %s (or serve it on a listener of its own), or remove the name", s.Name, other.Address),
			"server name %q is an IP address, which clients never send as SNI (RFC 6066 §3): on %s their connections are made for site %q, which serves their requests whatever their Host: %s", n, other.Address, other.DefaultSite, why)
	}
}

// notByHost says why a request on a connection made without SNI for
// site def does not go to site s by its Host ("" when it does, as the
// proxy decides: a stream site serves no HTTP; a site checking client
// certificates is never reached past the handshake's check, nor left
// from; a connection def makes in a protocol s has no certificate for
// stays def's).
func (v *validator) notByHost(s *Site, def string) string {
	var d *Site
	for i := range v.cfg.Sites {
		if v.cfg.Sites[i].Name == def {
			d = &v.cfg.Sites[i]
		}
	}
	switch {
	case d == nil:
		return ""
	case s.Stream != nil:
		return fmt.Sprintf("site %q is a stream site", s.Name)
	case checksClients(s):
		return fmt.Sprintf("site %q checks client certificates", s.Name)
	case checksClients(d):
		return fmt.Sprintf("site %q checks client certificates", d.Name)
	case d.TLCP != nil && s.TLCP == nil:
		return fmt.Sprintf("site %q has no tlcp certificates for its TLCP connections", s.Name)
	case d.TLS13SM != nil && s.TLS13SM == nil:
		return fmt.Sprintf("site %q has no tls13sm certificate for its TLS 1.3-SM connections", s.Name)
	case d.TLS != nil && s.TLS == nil:
		return fmt.Sprintf("site %q has no tls certificate for its TLS connections", s.Name)
	}
	return ""
}

// checksClients reports whether site s may check client certificates:
// client_auth request or require, or a ca, which TLCP ECDHE handshakes
// verify clients against under mode none too.
func checksClients(s *Site) bool {
	return (s.ClientAuth.Mode != "" && s.ClientAuth.Mode != ClientAuthNone) || s.ClientAuth.CA != ""
}

func mapKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// serverName is one of the server_names of sites[site], at path.
type serverName struct {
	site       int
	path, name string
}

// duplicateNames refuses a server name that two sites served on the same
// listener share: the listener could choose only one of them by SNI or
// Host. On different listeners they may (nginx's server_name in a server
// on 443 and in another, checking client certificates, on 8443): each
// listener chooses among its own sites.
func (v *validator) duplicateNames(names map[string][]serverName) {
	for _, places := range names {
		for k, b := range places[1:] {
			for _, a := range places[:k+1] {
				if l := v.sharedListener(a.site, b.site); l != "" {
					v.errf(b.path, "each server name may belong to one site of a listener only: remove it, or serve the two sites on different listeners (listeners[].sites)",
						"duplicate server name %q on listener %s (also in sites[%d])", b.name, l, a.site)
					break
				}
			}
		}
	}
}

// sharedListener returns the address of a listener serving both
// sites[i] and sites[j], "" when none does; with no listeners, "(any)".
func (v *validator) sharedListener(i, j int) string {
	c := v.cfg
	if len(c.Listeners) == 0 {
		return "(any)"
	}
	for _, l := range c.Listeners {
		if slices.Contains(l.Sites, c.Sites[i].Name) && slices.Contains(l.Sites, c.Sites[j].Name) {
			return l.Address
		}
	}
	return ""
}

func (v *validator) validateSites(upstreamUsed map[string]bool) {
	c := v.cfg
	if len(c.Sites) == 0 {
		v.errf("sites", "add a site with certificates and routes (see deploy/examples/edge.yaml)", "no sites configured")
	}
	upstreams := map[string]bool{}
	for _, u := range c.Upstreams {
		upstreams[u.Name] = true
	}
	names := map[string][]serverName{} // lower-cased server name → its places
	siteNames := map[string]string{}   // site name → path
	for i := range c.Sites {
		s := &c.Sites[i]
		p := fmt.Sprintf("sites[%d]", i)
		if prev, dup := siteNames[s.Name]; dup {
			v.errf(p+".name", "give every site a distinct name", "duplicate site name %q (also %s)", s.Name, prev)
		} else {
			v.unreservedName(p+".name", s.Name, "site")
		}
		siteNames[s.Name] = p
		for j, n := range s.ServerNames {
			np := fmt.Sprintf("%s.server_names[%d]", p, j)
			ln := strings.ToLower(strings.TrimSuffix(n, "."))
			if !validHostName(n) || strings.Count(n, "*") > 1 || (strings.Contains(n, "*") && !strings.HasPrefix(n, "*.")) {
				v.errf(np, hostNameFix(n), "invalid server name %q", n)
				continue
			}
			names[ln] = append(names[ln], serverName{site: i, path: np, name: n})
		}
		if s.TLCP == nil && s.TLS13SM == nil && s.TLS == nil {
			v.errf(p, "add a tlcp, tls13sm or tls section with certificates", "site %q has no certificates", s.Name)
		}
		v.siteTLCP(s, p)
		v.siteTLS13SM(s, p)
		v.siteTLS(s, p)
		v.clientAuth(s, p)
		v.checkCoverage(s, p)
		v.siteALPN(s, p)

		switch {
		case s.Stream != nil && len(s.Routes) > 0:
			v.errf(p+".stream", "a site either serves HTTP (routes) or splices TCP (stream); move one of them to another site", "site has both routes and stream")
		case s.Stream == nil && len(s.Routes) == 0:
			v.errf(p, "add routes, e.g.\n  routes:\n    - {path_prefix: /, upstream: app}", "site %q has no routes and no stream", s.Name)
		}
		if s.Stream != nil {
			v.stream(s.Stream, p+".stream", upstreams, upstreamUsed)
		}
		v.errorPages(s, p)
		if s.RequestID != "" {
			if err := proxy.CheckRequestIDHeader(s.RequestID); err != nil {
				v.errf(p+".request_id", "name a header of its own, such as X-Request-ID", "%v", err)
			} else if s.Stream != nil {
				v.warnf(p+".request_id", "remove it", "request_id has no effect on a stream site")
			}
		}
		catchAll := -1
		routeNames := map[string]bool{}
		for j := range s.Routes {
			r := &s.Routes[j]
			rp := fmt.Sprintf("%s.routes[%d]", p, j)
			if routeNames[r.Name] {
				v.warnf(rp+".name", "give every route of a site a distinct name", "duplicate route name %q", r.Name)
			}
			v.unreservedName(rp+".name", r.Name, "route")
			routeNames[r.Name] = true
			if catchAll >= 0 {
				v.warnf(rp, "move it before the catch-all route or add matchers to that one", "route never matches: routes[%d] before it matches every request", catchAll)
			} else if i, by := shadowedBy(s.Routes[:j], r); i >= 0 {
				v.warnf(rp, "routes are tried in order, not by the longest prefix as nginx's locations are: move it before routes["+strconv.Itoa(i)+"]", "route never matches: routes[%d] before it (%s) matches every request it would", i, by)
			}
			if v.route(r, rp, upstreams, upstreamUsed) && catchAll < 0 {
				catchAll = j
			}
			v.verifyNoneUnderOptionalNoCA(s, r, rp)
		}
	}
	v.duplicateNames(names)
}

// verifyNoneUnderOptionalNoCA warns of route r (at p) of site s matching
// "X-Ssl-Client-Verify: NONE" when s's client_auth is optional_no_ca.
// Under request or require a client on the connection either verified
// (SUCCESS) or sent no certificate (NONE), so a route answering 403 to
// NONE ahead of the others admitted verified clients only; under
// optional_no_ca a certificate that does not verify is FAILED:reason,
// not NONE, and such a route lets it through.
func (v *validator) verifyNoneUnderOptionalNoCA(s *Site, r *Route, p string) {
	if s.ClientAuth.Mode != ClientAuthOptionalNoCA {
		return
	}
	for name, val := range r.Header {
		if http.CanonicalHeaderKey(name) == proxy.HeaderClientVerify && val == "NONE" {
			v.warnf(p+".header."+name, "match X-Ssl-Client-Verify: SUCCESS on a route ahead of the one that answers 403 to admit verified clients only",
				"under client_auth optional_no_ca X-Ssl-Client-Verify is NONE only for a client without a certificate: one whose certificate does not verify is FAILED:reason and does not match")
		}
	}
}

// httpALPN are the application protocols an HTTP site (one with routes)
// speaks: the proxy serves a connection that chose h2 as HTTP/2 and any
// other as HTTP/1.1.
var httpALPN = []string{"h2", "http/1.1"}

// siteALPN checks site s's alpn list at path p. ALPN names are octet
// strings compared exactly (RFC 7301 §3.1): an HTTP site offering
// "HTTP/1.1", "h2c" (never sent over TLS, RFC 9113 §3.1) or "h3" (QUIC
// only) shares none of them with a browser, which offers h2 and
// http/1.1, and every handshake of a client that sends ALPN fails with
// no_application_protocol (§3.2). A stream site may name any protocol.
func (v *validator) siteALPN(s *Site, p string) {
	for j, a := range s.ALPN {
		ap := fmt.Sprintf("%s.alpn[%d]", p, j)
		switch {
		case a == "" || len(a) > 255:
			v.errf(ap, "use h2 or http/1.1", "invalid ALPN protocol %q", a)
		case s.Stream == nil && !slices.Contains(httpALPN, a):
			fix := "use h2 and/or http/1.1"
			if cl := closest(a, httpALPN); cl != "" {
				fix = fmt.Sprintf("did you mean %q? (ALPN names are compared exactly, case included)", cl)
			}
			v.errf(ap, fix, "ALPN protocol %q is not one an HTTP site speaks (h2, http/1.1): a browser offering those shares none with it, or the site answers it in HTTP/1.1", a)
		}
	}
}

// shadowedBy returns the first of the routes before r that takes every
// request r matches, and the matcher by which, or -1: a route that matches
// on its path alone, an exact path equal to r's, or a prefix r's path or
// prefix starts with. Matching is by plain prefix, so this holds on a site
// with case_insensitive_paths too.
func shadowedBy(before []Route, r *Route) (int, string) {
	for i := range before {
		e := &before[i]
		if len(e.Host) > 0 || len(e.Header) > 0 || len(e.ClientIP) > 0 || e.PathRegex != "" {
			continue
		}
		switch {
		case e.Path != "" && e.PathPrefix == "" && r.Path == e.Path:
			return i, "path " + e.Path
		case e.PathPrefix != "" && e.Path == "" && (r.Path != "" && strings.HasPrefix(r.Path, e.PathPrefix) ||
			r.PathPrefix != "" && strings.HasPrefix(r.PathPrefix, e.PathPrefix)):
			return i, "path_prefix " + e.PathPrefix
		}
	}
	return -1, ""
}

// route validates r and reports whether it matches every request.
func (v *validator) route(r *Route, p string, upstreams, used map[string]bool) bool {
	v.routeAction(r, p, upstreams, used)
	v.routeMatch(r, p)
	if r.BasicAuth != nil {
		v.basicAuth(r.BasicAuth, p+".basic_auth")
	}
	v.routeRewrites(r, p)
	v.routeForwarding(r, p)
	anyRequest := len(r.Host) == 0 && len(r.Header) == 0 && len(r.ClientIP) == 0 && r.PathRegex == ""
	return anyRequest && r.Path == "" && (r.PathPrefix == "" || r.PathPrefix == "/")
}

// routeAction checks that the route has exactly one valid action: an
// upstream (recorded in used), a fixed response or a redirect.
func (v *validator) routeAction(r *Route, p string, upstreams, used map[string]bool) {
	actions := 0
	if r.Upstream != "" {
		actions++
		used[r.Upstream] = true
		if !upstreams[r.Upstream] && !v.failed["upstreams"] {
			fix := "define it under upstreams: or fix the name"
			if cl := closest(r.Upstream, mapKeys(upstreams)); cl != "" {
				fix = fmt.Sprintf("did you mean %q?", cl)
			}
			v.errf(p+".upstream", fix, "unknown upstream %q", r.Upstream)
		}
	}
	if r.Respond != nil {
		actions++
		// A final status (RFC 9110 §15): a 1xx is informational; the
		// client would get it and then an implicit 200, or after a 101
		// take the connection as switched to no protocol.
		if r.Respond.Status < 200 || r.Respond.Status > 599 {
			v.errf(p+".respond.status", "use the status code of a final response, 200 to 599", "invalid status %d", r.Respond.Status)
		}
		// RFC 9110 §15.3.5, §15.4.5: these carry no content; the body
		// would never be sent, with no word why.
		if !httpguts.ValidHeaderFieldValue(r.Respond.ContentType) {
			v.errf(p+".respond.content_type", "remove the line break or control character (a | block ends with one: use a quoted string)", "invalid content type %q", r.Respond.ContentType)
		}
		// nginx's "return 301 URL" sends URL as the Location; a respond
		// with the status (the URL in its body) sends the client nowhere.
		if slices.Contains([]int{301, 302, 303, 307, 308}, r.Respond.Status) && !setsLocation(r.ResponseHeaders) {
			v.warnf(p+".respond.status", fmt.Sprintf("use redirect: {to: URL, status: %d} (nginx's return %d URL), or set Location in response_headers", r.Respond.Status, r.Respond.Status),
				"a %d response without Location redirects nowhere", r.Respond.Status)
		}
		if (r.Respond.Status == 204 || r.Respond.Status == 304) && r.Respond.Body != "" {
			v.warnf(p+".respond.body", "remove the body, or answer 200", "a %d response has no body: this one is never sent", r.Respond.Status)
		}
	}
	if r.Redirect != nil {
		actions++
		if r.Redirect.To == "" {
			v.errf(p+".redirect", "add to: https://example.cn{uri}", "redirect has no target")
		} else if err := proxy.CheckRedirectTo(r.Redirect.To); err != nil {
			v.errf(p+".redirect.to", "for example to: https://{host}{uri}", "%s", err)
		}
		if !slices.Contains([]int{301, 302, 303, 307, 308}, r.Redirect.Status) {
			v.errf(p+".redirect.status", "use 301, 302, 303, 307 or 308", "invalid redirect status %d", r.Redirect.Status)
		}
	}
	if f := r.Files; f != nil {
		actions++
		v.filesRoute(f, p+".files")
	}
	switch {
	case actions == 0:
		v.errf(p, "add upstream: NAME, respond: {status: 200}, redirect: {to: URL} or files: {root: DIR}", "route has no action")
	case actions > 1:
		v.errf(p, "keep only one of upstream, respond, redirect and files", "route has more than one action")
	}
}

// routePathFix says what is wrong with path, a route's path (or, with
// prefix, a path_prefix or strip_prefix), and how to write it, "" when
// nothing is. Routes compare the request's path as a backend reads it
// (proxy.NormalPath): decoded, without its query, its dot segments
// removed and runs of slashes merged. A path written with an escape
// ("/admin%20panel/") would match only the path that escapes it twice,
// one with a query or dot segments none: a route that denies it would
// let every request past.
func routePathFix(p string, prefix bool) (fix, why string) {
	if !strings.HasPrefix(p, "/") {
		return "", "" // reported as it is
	}
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return "write the path alone, " + strconv.Quote(p[:i]) + " (no route matches a query)",
			"has a query or fragment, which is no part of the path routes match"
	}
	if d, err := url.PathUnescape(p); err == nil && d != p {
		return "write it decoded, " + strconv.Quote(d), "is compared with the request's decoded path, where %XX is the byte it escapes"
	}
	// A prefix's last segment may be a part of one ("/y/.." of "/y/..x").
	tail := ""
	if prefix {
		tail = "x"
	}
	if n := proxy.NormalPath(p + tail); n != p+tail {
		return "write it as " + strconv.Quote(strings.TrimSuffix(n, tail)), "has dot segments or a run of slashes, which requests' paths lose before routes match them (RFC 3986 §5.2.4)"
	}
	return "", ""
}

// routeMatch checks the route's request matchers: path, path prefix, hosts
// and header names.
func (v *validator) routeMatch(r *Route, p string) {
	if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
		v.errf(p+".path_prefix", "write it as /"+r.PathPrefix, "path_prefix must start with /")
	}
	if r.Path != "" && !strings.HasPrefix(r.Path, "/") {
		v.errf(p+".path", "write it as /"+r.Path, "path must start with /")
	}
	if r.Path != "" && r.PathPrefix != "" {
		v.errf(p+".path", "keep only one of path and path_prefix", "path and path_prefix both set")
	}
	for _, m := range []struct {
		key, path string
		prefix    bool
	}{{"path", r.Path, false}, {"path_prefix", r.PathPrefix, true}, {"strip_prefix", r.StripPrefix, true}} {
		if fix, why := routePathFix(m.path, m.prefix); why != "" {
			v.errf(p+"."+m.key, fix, "%s %q %s", m.key, m.path, why)
		}
	}
	if r.PathRegex != "" {
		if r.Path != "" || r.PathPrefix != "" {
			v.errf(p+".path_regex", "keep only one of path, path_prefix and path_regex", "path_regex with path or path_prefix")
		} else if _, err := proxy.CompilePathRegex(r.PathRegex, false); err != nil {
			v.errf(p+".path_regex", "write an RE2 expression, e.g. '\\.(css|js)$' (no backreferences or lookarounds)", "%v", err)
		}
	}
	for j, h := range r.Host {
		if !validHostName(h) {
			v.errf(fmt.Sprintf("%s.host[%d]", p, j), hostNameFix(h), "invalid host %q", h)
		}
	}
	v.prefixes(p+".client_ip", r.ClientIP)
	if rl := r.RateLimit; rl != nil {
		valid := true
		if rl.Rate <= 0 {
			v.errf(p+".rate_limit.rate", "write a rate such as 10/s, 30/m or 500/h", "rate_limit without a rate")
			valid = false
		}
		if rl.Burst < 0 || rl.Burst > maxRate {
			v.errf(p+".rate_limit.burst", fmt.Sprintf("write a number from 0 to %d", maxRate), "burst %d out of range", rl.Burst)
			valid = false
		}
		// A zone's rate and burst are those of its first valid
		// declaration: an invalid one is reported where it is, and the
		// routes after it are not told to copy it.
		if rl.Zone != "" {
			if !tokenRE.MatchString(rl.Zone) {
				v.errf(p+".rate_limit.zone", "write a name such as login, without spaces", "invalid zone name %q", rl.Zone)
			} else if first, ok := v.zones[rl.Zone]; !ok && valid {
				if v.zones == nil {
					v.zones = map[string]zoneUse{}
				}
				v.zones[rl.Zone] = zoneUse{p, *rl}
			} else if ok && valid && (first.rl.Rate != rl.Rate || first.rl.Burst != rl.Burst) {
				v.errf(p+".rate_limit", fmt.Sprintf("give every route of zone %s the rate and burst of %s (rate: %s, burst: %d), or name another zone", rl.Zone, first.path, first.rl.Rate, first.rl.Burst),
					"zone %q with rate %s, burst %d, where %s gave it rate %s, burst %d", rl.Zone, rl.Rate, rl.Burst, first.path, first.rl.Rate, first.rl.Burst)
			}
		}
	}
	for name := range r.Header {
		if !tokenRE.MatchString(name) {
			v.errf(p+".header."+name, "header names are letters, digits and -", "invalid header name %q", name)
		} else if err := proxy.CheckHeaderMatch(name); errors.Is(err, proxy.ErrHostHeaderMatch) {
			v.errf(p+".header."+name, "match the host with the route's host: [name]", "%v", err)
		} else if err != nil {
			v.errf(p+".header."+name, "match on X-Ssl-Client-Verify: SUCCESS for verified client certificates; match client addresses with client_ip", "%v", err)
		} else if val := r.Header[name]; val != "*" {
			if err := proxy.CheckHeaderMatchValue(name, val); err != nil {
				v.errf(p+".header."+name, "write the value as the proxy does (upper case SUCCESS or NONE; r or . for reused), or \"*\" for any", "%v", err)
			}
		}
	}
}

// routeRewrites checks the header edits, strip_prefix and host_header
// applied to a matched request.
func (v *validator) routeRewrites(r *Route, p string) {
	v.headerEdits(&r.RequestHeaders, p+".request_headers", true)
	v.headerEdits(&r.ResponseHeaders, p+".response_headers", false)
	if r.StripPrefix != "" {
		if !strings.HasPrefix(r.StripPrefix, "/") {
			v.errf(p+".strip_prefix", "write it as /"+r.StripPrefix, "strip_prefix must start with /")
		} else if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, r.StripPrefix) {
			v.warnf(p+".strip_prefix", "make strip_prefix a prefix of path_prefix", "strip_prefix %q is not a prefix of path_prefix %q, so it never applies to all matched requests", r.StripPrefix, r.PathPrefix)
		}
	}
	switch r.HostHeader {
	case "":
		v.errf(p+".host_header", "use passthrough, upstream or a host name", "host_header is empty")
	case "passthrough", "upstream":
	default:
		// Sent as every request's Host: one that names no host would
		// go out empty or as a list.
		if !validHostPort(r.HostHeader) {
			v.errf(p+".host_header", "use passthrough, upstream or a host name with an optional :port", "invalid host_header %q", r.HostHeader)
		}
	}
}

// routeForwarding checks retries and upgrades, and warns about forwarding
// settings on a route that has no upstream.
func (v *validator) routeForwarding(r *Route, p string) {
	if r.Retries != nil {
		v.retries(r.Retries, p+".retries")
		if r.Upstream == "" {
			v.warnf(p+".retries", "remove it", "retries has no effect on a route without upstream")
		}
	}
	if c := r.Compress; c != nil {
		v.compress(c, p+".compress")
		if r.Upstream == "" && r.Files == nil {
			v.warnf(p+".compress", "remove it", "compress has no effect on a route without upstream or files")
		}
		for _, edits := range []struct {
			key string
			m   map[string]string
		}{{"set", r.ResponseHeaders.Set}, {"add", r.ResponseHeaders.Add}} {
			for _, name := range slices.Sorted(maps.Keys(edits.m)) {
				if errors.Is(proxy.CheckCompressHeaderEdit(name), proxy.ErrCompressedEncodingEdit) {
					v.errf(p+".compress", "remove compress from this route (nginx's gzip off beside add_header Content-Encoding), or the "+name+" edit",
						"response_headers.%s labels the responses %s: %s, and compress would gzip them again", edits.key, name, edits.m[name])
				}
			}
		}
	}
	if t := r.Timeouts; t != nil && r.Upstream == "" && (r.Files == nil || t.Read != nil || t.Body != nil || t.ResponseHeader != nil) {
		// A route that answers itself waits for no target and reads no
		// body: its timeouts would look in force and never apply (but
		// send's to a route that serves files).
		v.warnf(p+".timeouts", "remove it", "timeouts has no effect on a route without upstream (but send on one that serves files)")
	}
	for i, up := range r.Upgrades {
		kp := fmt.Sprintf("%s.upgrades[%d]", p, i)
		switch {
		case strings.EqualFold(up, "h2c"):
			v.errf(kp, "remove it; clients speak HTTP/2 to gmproxy through ALPN h2", "h2c upgrades are never tunnelled")
		case !tokenRE.MatchString(up):
			v.errf(kp, "write a protocol name such as websocket", "invalid upgrade protocol %q", up)
		}
	}
	if r.Upstream == "" && (r.TLSInfoHeaders || r.ClientCertHeaders || r.ClientCertPEM || r.StripPrefix != "" && r.Files == nil || len(r.RequestHeaders.Set)+len(r.RequestHeaders.Add)+len(r.RequestHeaders.Remove) > 0) {
		v.warnf(p, "remove them or forward the route to an upstream", "request headers, strip_prefix and client/TLS headers have no effect on a route without upstream")
	}
}

// errorPages checks a site's error_pages and loads them into its
// material.
func (v *validator) errorPages(s *Site, p string) {
	for i, ep := range s.ErrorPages {
		kp := fmt.Sprintf("%s.error_pages[%d]", p, i)
		if s.Stream != nil {
			v.warnf(kp, "remove it", "error_pages has no effect on a stream site")
		}
		if len(ep.Status) == 0 {
			v.errf(kp+".status", "list the statuses, e.g. status: [502, 503, 504]", "error page without a status")
		}
		var page []byte
		switch fi, err := os.Stat(v.resolve(ep.File)); {
		case ep.File == "":
			v.errf(kp+".file", "write the page's file, e.g. file: errors/50x.html", "error page without a file")
		case err != nil:
			v.errf(kp+".file", relFix, "error page %q: %v", ep.File, errors.Unwrap(err))
		case !fi.Mode().IsRegular():
			v.errf(kp+".file", "name a file", "%s is not a file", ep.File)
		case fi.Size() > MaxErrorPage:
			v.errf(kp+".file", "keep the page under 64KiB (link its images and styles)", "%s is %d bytes, over 64KiB", ep.File, fi.Size())
		default:
			if page, err = readNamed(v.resolve(ep.File), MaxErrorPage); err != nil {
				v.errf(kp+".file", relFix, "%v", err)
			}
		}
		for j, st := range ep.Status {
			sp := fmt.Sprintf("%s.status[%d]", kp, j)
			switch {
			case st < 400 || st > 599:
				v.errf(sp, "use an error status, 400 to 599", "status %d is not an error", st)
			case s.Material.ErrorPages[st] != nil:
				v.errf(sp, "give each status one page", "status %d has a page already", st)
			case page != nil:
				if s.Material.ErrorPages == nil {
					s.Material.ErrorPages = map[int][]byte{}
				}
				s.Material.ErrorPages[st] = page
			}
		}
	}
}

// filesRoute checks a files route: a root that is a directory, an index that
// is a file name.
func (v *validator) filesRoute(f *Files, p string) {
	if f.Root == "" {
		v.errf(p+".root", "write the directory to serve, e.g. root: /var/www/static", "files without a root")
	} else if fi, err := os.Stat(v.resolve(f.Root)); err != nil {
		v.errf(p+".root", relFix, "root %q: %v", f.Root, errors.Unwrap(err))
	} else if !fi.IsDir() {
		v.errf(p+".root", "write the directory that holds the files", "root %q is not a directory", f.Root)
	} else if v.dir != "" && within(v.dir, v.resolve(f.Root)) {
		// root: . (or /etc, or /) would serve this file, and the keys
		// and passwords beside it, to anyone.
		v.errf(p+".root", "serve a directory of its own, e.g. /srv/www/portal", "root %q holds the folder of this configuration file, whose keys and passwords it would serve", f.Root)
	} else {
		v.filesRoots = append(v.filesRoots, filesRootUse{p + ".root", f})
	}
	if f.Index == "" || f.Index == "." || f.Index == ".." || strings.ContainsAny(f.Index, `/\`) {
		v.errf(p+".index", "write a file name such as index.html", "index %q is not a file name", f.Index)
	}
	if f.Fallback != "" {
		if err := proxy.CheckFilesFallback(f.Fallback); err != nil {
			v.errf(p+".fallback", "write the path of a file under root, such as index.html", "%v", err)
		} else if fi, err := os.Stat(filepath.Join(v.resolve(f.Root), strings.TrimPrefix(f.Fallback, "/"))); f.Root != "" && (err != nil || !fi.Mode().IsRegular()) {
			v.warnf(p+".fallback", "deploy it, or correct the path", "fallback %q is not a file under root now: the paths it stands for are 404 until it is", f.Fallback)
		}
	}
	if f.Charset != "" && !proxy.ValidCharset(f.Charset) {
		v.errf(p+".charset", "write a charset name such as utf-8 or gbk", "charset %q is not a charset name", f.Charset)
	}
	seen := make(map[string]string, len(f.Types))
	for _, ext := range slices.Sorted(maps.Keys(f.Types)) {
		key := strings.ToLower(strings.TrimPrefix(ext, "."))
		if err := proxy.CheckMediaType(ext, f.Types[ext]); err != nil {
			v.errf(p+".types."+ext, "map an extension to a media type, e.g. wasm: application/wasm", "types: %v", err)
		} else if other, dup := seen[key]; dup {
			v.errf(p+".types."+ext, "keep one of them", "types: %q and %q name the same extension", other, ext)
		}
		seen[key] = ext
	}
}

// filesRootSecrets refuses a files root that holds a key, password or
// token file of this configuration under a name the route serves: a GET
// would hand it to anyone. Keys kept apart from the configuration file
// (/srv/www/portal/certs/) escape the check on its folder.
func (v *validator) filesRootSecrets() {
	files := slices.Sorted(maps.Keys(v.secrets))
	for _, fr := range v.filesRoots {
		root, err := filepath.EvalSymlinks(v.resolve(fr.f.Root))
		if err != nil {
			continue
		}
		for _, full := range files {
			// Where the file really is: a link to it from under the root
			// leads out, which the route does not follow.
			file, err := filepath.EvalSymlinks(full)
			if err != nil {
				continue
			}
			rel, err := filepath.Rel(root, file)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				continue
			}
			if !fr.f.Hidden && hiddenRel(filepath.ToSlash(rel)) {
				continue // 404 on a route without hidden
			}
			s := v.secrets[full]
			v.errf(fr.path, "move the keys and passwords out of the directory served, or serve one without them",
				"root %q holds the %s %q (%s), which the route would serve", fr.f.Root, s.what, s.file, s.path)
		}
	}
}

// hiddenRel reports whether the slash-separated relative path rel has a
// name starting with "." that a files route without hidden does not serve
// (all but a leading .well-known, as the proxy's hiddenPath).
func hiddenRel(rel string) bool {
	for i, seg := range strings.Split(rel, "/") {
		if strings.HasPrefix(seg, ".") && seg != "." && !(i == 0 && seg == ".well-known") {
			return true
		}
	}
	return false
}

// within reports whether the directory dir is the directory root or one
// under it, symbolic links followed.
func within(dir, root string) bool {
	d, err1 := filepath.EvalSymlinks(dir)
	r, err2 := filepath.EvalSymlinks(root)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(r, d)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// compress checks a route's compress: a level gzip has and media types
// as a Content-Type names them.
func (v *validator) compress(c *Compress, p string) {
	if c.Level < 1 || c.Level > 9 {
		v.errf(p+".level", "write a level from 1 (fastest) to 9 (smallest)", "level %d out of range", c.Level)
	}
	if len(c.Types) == 0 {
		v.errf(p+".types", "list media types such as text/html, or leave types out for the default list", "types is empty")
	}
	for i, t := range c.Types {
		main, sub, ok := strings.Cut(t, "/")
		switch {
		case t == "*":
			// nginx's gzip_types * (every type) is written */* here, as
			// a media range is (RFC 9110 §12.5.1).
			v.errf(fmt.Sprintf("%s.types[%d]", p, i), `write "*/*" for every type (nginx's gzip_types *)`, "invalid media type %q", t)
		case t == "*/*":
		case !ok || main == "*" || !tokenRE.MatchString(main) || sub != "*" && !tokenRE.MatchString(sub):
			v.errf(fmt.Sprintf("%s.types[%d]", p, i), `write a media type such as text/html, text/* for all text or "*/*" for every type`, "invalid media type %q", t)
		}
	}
}

// setsLocation reports whether h sets or adds a Location.
func setsLocation(h HeaderEdits) bool {
	for _, m := range []map[string]string{h.Set, h.Add} {
		for k := range m {
			if strings.EqualFold(k, "Location") {
				return true
			}
		}
	}
	return false
}

func (v *validator) headerEdits(h *HeaderEdits, p string, request bool) {
	check := func(kp, name string) {
		if !tokenRE.MatchString(name) {
			v.errf(kp, "header names are letters, digits and -", "invalid header name %q", name)
		} else if err := proxy.CheckHeaderEdit(name, request); errors.Is(err, proxy.ErrHostHeaderEdit) {
			v.errf(kp, "set the route's host_header: NAME instead (nginx's proxy_set_header Host)", "%v", err)
		} else if errors.Is(err, proxy.ErrHopHeaderEdit) {
			v.errf(kp, "remove it: gmproxy keeps target connections alive and passes WebSocket upgrades itself (nginx's proxy_set_header Connection and Upgrade are not needed)", "%v", err)
		} else if err != nil {
			v.errf(kp, "remove it: gmproxy writes each message's length and trailers itself", "%v", err)
		}
	}
	// A value with a line break or another control byte (but HTAB) is
	// no field value (RFC 9110 §5.5): the proxy would fail or alter every
	// request or response it is set on.
	checkValue := func(kp, value string) {
		if !httpguts.ValidHeaderFieldValue(value) {
			v.errf(kp, "remove the line break or control character (a | block ends with one: use a quoted string)", "invalid header value %q", value)
		}
	}
	for name, value := range h.Set {
		check(p+".set."+name, name)
		checkValue(p+".set."+name, value)
	}
	for name, value := range h.Add {
		check(p+".add."+name, name)
		checkValue(p+".add."+name, value)
	}
	for i, name := range h.Remove {
		check(fmt.Sprintf("%s.remove[%d]", p, i), name)
	}
}

func (v *validator) stream(st *Stream, p string, upstreams, used map[string]bool) {
	v.prefixes(p+".client_ip", st.ClientIP)
	switch {
	case st.Upstream == "" && st.Target == "":
		v.errf(p, "add target: host:port or upstream: NAME", "stream has no target")
	case st.Upstream != "" && st.Target != "":
		v.errf(p, "keep only one of upstream and target", "stream has both upstream and target")
	case st.Upstream != "":
		used[st.Upstream] = true
		if !upstreams[st.Upstream] {
			fix := "define it under upstreams: or fix the name"
			if cl := closest(st.Upstream, mapKeys(upstreams)); cl != "" {
				fix = fmt.Sprintf("did you mean %q?", cl)
			}
			v.errf(p+".upstream", fix, "unknown upstream %q", st.Upstream)
		}
	default:
		v.hostPort(p+".target", st.Target, false)
	}
	if st.IdleTimeout <= 0 {
		v.errf(p+".idle_timeout", "write a duration such as 5m", "idle_timeout must be positive")
	}
	if st.ConnectTimeout <= 0 {
		v.errf(p+".connect_timeout", "write a duration such as 5s", "connect_timeout must be positive")
	}
	if st.SendProxyProtocol != "" {
		v.oneOf(p+".send_proxy_protocol", st.SendProxyProtocol, "v1", "v2")
	}
}

func (v *validator) retries(r *Retries, p string) {
	if r.Tries < 1 {
		v.errf(p+".tries", "use 1 to disable retries", "tries must be at least 1")
	} else if r.Tries > balance.MaxTries {
		v.errf(p+".tries", fmt.Sprintf("use at most %d tries", balance.MaxTries), "tries %d is too large", r.Tries)
	}
	if r.TotalTime <= 0 {
		v.errf(p+".total_time", "write a duration such as 15s", "total_time must be positive")
	}
}

// password returns the key password of a section (nil when none is set).
func (v *validator) password(kp KeyPassword, p string) ([]byte, bool) {
	if kp.KeyPasswordFile != "" && kp.KeyPasswordEnv != "" {
		v.errf(p+".key_password_env", "keep only one of key_password_file and key_password_env", "both key_password_file and key_password_env are set")
		return nil, false
	}
	if kp.KeyPasswordFile != "" {
		b, err := readNamed(v.resolve(kp.KeyPasswordFile), maxNamedFile)
		if err != nil {
			v.errf(p+".key_password_file", relFix, "cannot read password file %q: %s", kp.KeyPasswordFile, errText(err))
			return nil, false
		}
		v.secretMode(p+".key_password_file", kp.KeyPasswordFile, "password file")
		pw := bytes.TrimRight(b, "\r\n")
		if len(pw) == 0 {
			v.errf(p+".key_password_file", "write the keys' password in it (one line)", "password file %q is empty", kp.KeyPasswordFile)
			return nil, false
		}
		if bytes.ContainsAny(pw, "\r\n") {
			// nginx's ssl_password_file tries each line in turn, and
			// openssl -passin file: reads the first; taken whole, the
			// lines would be reported as a wrong password at each key.
			clear(b)
			v.errf(p+".key_password_file", "write the one password of these keys in it, alone on its line (gmproxy does not try each line as nginx's ssl_password_file does)",
				"password file %q has more than one line", kp.KeyPasswordFile)
			return nil, false
		}
		return pw, true
	}
	if kp.KeyPasswordEnv != "" {
		pw, ok := envPassword(kp.KeyPasswordEnv)
		switch {
		case !ok:
			v.errf(p+".key_password_env", "export the variable before starting gmproxy, or use key_password_file", "environment variable %s is not set", kp.KeyPasswordEnv)
			return nil, false
		case len(pw) == 0:
			v.errf(p+".key_password_env", "set it to the keys' password", "environment variable %s is empty", kp.KeyPasswordEnv)
			return nil, false
		}
		return pw, true
	}
	return nil, true
}

// wildcardHost reports whether host is an address that listens on every
// interface.
func wildcardHost(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// errText says why a file could not be read, with the absolute path it was
// looked for at and, for a permission problem, what to do.
func errText(err error) string {
	at := ""
	var pe *fs.PathError
	if errors.As(err, &pe) {
		abs, aerr := filepath.Abs(pe.Path)
		if aerr != nil {
			abs = pe.Path
		}
		at = " (" + abs + ")"
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file" + at
	case errors.Is(err, fs.ErrPermission):
		return "permission denied" + at + ": the file and every folder above it must be readable by the user gmproxy runs as " +
			"(ls -l shows owner and mode; chown or chmod g+r, or run check as that user; under systemd DynamicUser pass keys with LoadCredential=)"
	}
	if pe != nil {
		return pe.Err.Error() + at
	}
	return err.Error()
}

// certs loads a certificate file once; later calls for the same file reuse
// the result without reporting its problems again.
// pairCert returns the chain of one certificate of a sign/enc pair: when
// sign_cert and enc_cert name the same file (certIdx 0 or 1), certs holds
// sign, enc, then the chain, and the result is certs[certIdx] followed by
// the chain; certIdx < 0 returns certs as they are. It reports and returns
// nil when the shared file holds fewer than two certificates.
func (v *validator) pairCert(path, certFile string, certs []*smx509.Certificate, certIdx int) []*smx509.Certificate {
	if certIdx < 0 {
		return certs
	}
	if len(certs) < 2 {
		v.errf(path, "put the signing certificate first and the encryption certificate second in the file, or name separate files", "sign_cert and enc_cert name the same file %q, which holds %d certificate(s), not 2", certFile, len(certs))
		return nil
	}
	return append([]*smx509.Certificate{certs[certIdx]}, certs[2:]...)
}

func (v *validator) certs(path, file string) []*smx509.Certificate {
	full := v.resolve(file)
	if lf, ok := v.files[full]; ok {
		return lf.certs
	}
	lf := &loadedFile{}
	v.files[full] = lf
	b, err := readNamed(full, maxNamedFile)
	if err != nil {
		v.errf(path, relFix, "cannot read certificate file %q: %s", file, errText(err))
		return nil
	}
	certs, err := smkey.ParseCertificatesPEM(b)
	if err != nil {
		v.errf(path, "the file must hold PEM \"BEGIN CERTIFICATE\" blocks, leaf first", "cannot parse certificate file %q: %s", file, err)
		return nil
	}
	lf.certs, lf.ok = certs, true
	return certs
}

// pair loads a certificate and its key, checking that they match.
func (v *validator) pair(p, certKey, keyKey, certFile, keyFile string, pw KeyPassword) *KeyPair {
	return v.pairAt(p, certKey, keyKey, certFile, keyFile, pw, -1, -1)
}

// pairAt is pair for GmSSL-style combined files: certIdx (keyIdx) 0 or 1
// picks the signing or encryption certificate (key) from a file holding
// "sign, enc, CA chain…" (keys "sign, enc"); -1 means an ordinary file
// whose first certificate (key) is the one.
func (v *validator) pairAt(p, certKey, keyKey, certFile, keyFile string, pw KeyPassword, certIdx, keyIdx int) *KeyPair {
	ok := true
	if certFile == "" {
		v.errf(p+"."+certKey, "add "+certKey+": FILE", "%s is required", certKey)
		ok = false
	}
	if keyFile == "" {
		v.errf(p+"."+keyKey, "add "+keyKey+": FILE", "%s is required", keyKey)
		ok = false
	}
	if !ok {
		return nil
	}
	certs := v.certs(p+"."+certKey, certFile)
	password, pwOK := v.password(pw, p)
	if !pwOK {
		return nil
	}
	defer clear(password)
	keyPath := p + "." + keyKey
	b, err := readNamed(v.resolve(keyFile), maxNamedFile)
	if err != nil {
		v.errf(keyPath, relFix, "cannot read private key file %q: %s", keyFile, errText(err))
		return nil
	}
	defer clear(b) // the key, possibly unencrypted
	v.secretMode(keyPath, keyFile, "private key file")
	v.passwordUnused(keyPath, keyFile, b, password, "section")
	var key crypto.Signer
	if keyIdx < 0 {
		key, err = smkey.ParsePrivateKeyPEM(b, password)
	} else {
		var keys []crypto.Signer
		keys, err = smkey.ParseAllPrivateKeysPEM(b, password)
		if err == nil && len(keys) <= keyIdx {
			v.errf(p+"."+keyKey, "put the signing key first and the encryption key second in the file, or name separate files", "sign_key and enc_key name the same file %q, which holds %d key(s), not 2", keyFile, len(keys))
			return nil
		}
		if err == nil {
			key = keys[keyIdx]
		}
	}
	switch {
	case errors.Is(err, smkey.ErrNeedPassword):
		v.errf(keyPath, "set key_password_file or key_password_env in this section", "private key %q is encrypted and no password is configured", keyFile)
		return nil
	case err != nil && password != nil:
		v.errf(keyPath, "check the password and that the file is PEM PKCS#8, SEC 1 or encrypted PKCS#8", "cannot read private key %q: %s", keyFile, err)
		return nil
	case err != nil:
		v.errf(keyPath, "the file must be PEM PKCS#8 (BEGIN PRIVATE KEY), SEC 1 (BEGIN EC PRIVATE KEY) or encrypted PKCS#8", "cannot read private key %q: %s", keyFile, err)
		return nil
	}
	if certs == nil {
		return nil
	}
	if certs = v.pairCert(p+"."+certKey, certFile, certs, certIdx); certs == nil {
		return nil
	}
	if !smkey.PublicKeysEqual(key, certs[0].PublicKey) {
		v.errf(keyPath, fmt.Sprintf("use the private key that belongs to %s", certFile), "private key %q does not match certificate %q (%s)", keyFile, certFile, certs[0].Subject.CommonName)
		return nil
	}
	return &KeyPair{Chain: certs, Key: key, CertFile: v.resolve(certFile), KeyFile: v.resolve(keyFile)}
}

// passwordUnused warns that a password is configured for the key file
// keyFile (PEM text pemData) although it holds a key in the clear: the
// operator believes the key encrypted at rest, and it is not. where
// names the place of the password setting in the fix.
func (v *validator) passwordUnused(keyPath, keyFile string, pemData, password []byte, where string) {
	if len(password) == 0 || !smkey.HasUnencryptedKey(pemData) {
		return
	}
	v.warnf(keyPath, "encrypt the key (openssl pkcs8 -topk8 -v2 sm4-cbc -v2prf hmacWithSM3, or GmSSL's sm2keygen -pass) or remove key_password_file / key_password_env from this "+where,
		"private key %q is stored unencrypted: the configured password protects nothing", keyFile)
}

func isSM2(kp *KeyPair) bool {
	if r, ok := kp.Key.(*RemoteKeyRef); ok {
		return isSM2Public(r.PublicKey)
	}
	_, ok := kp.Key.(*sm2.PrivateKey)
	return ok
}

// validity checks the leaf's dates.
func (v *validator) validity(kp *KeyPair, path string) {
	leaf := kp.Leaf()
	days := int(leaf.NotAfter.Sub(v.now).Hours() / 24)
	switch {
	case v.now.After(leaf.NotAfter):
		v.errf(path, "renew the certificate", "certificate %q expired on %s", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.DateOnly))
	case leaf.NotAfter.Sub(v.now) < expiryWarning:
		v.warnf(path, "renew the certificate soon", "certificate %q expires in %d days (%s)", leaf.Subject.CommonName, days, leaf.NotAfter.UTC().Format(time.DateOnly))
	}
	if v.now.Before(leaf.NotBefore) {
		v.warnf(path, "check the system clock or wait", "certificate %q is not valid before %s", leaf.Subject.CommonName, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	// The CA certificates sent with it: clients refuse a chain through
	// an expired one (one they do not need, a cross-signed root they
	// hold anyway, is harmless: a warning).
	for _, ca := range kp.Chain[1:] {
		if v.now.After(ca.NotAfter) {
			v.warnf(path, "put the CA's current certificate in the file, or remove it if clients do not need it", "the chain's CA certificate %q expired on %s; clients that build the chain through it refuse the certificate", ca.Subject.CommonName, ca.NotAfter.UTC().Format(time.DateOnly))
		}
	}
}

// serial warns about serial numbers GmSSL rejects.
func (v *validator) serial(kp *KeyPair, path string) {
	if len(kp.Leaf().SerialNumber.Bytes()) < 4 {
		v.warnf(path, "reissue it with a random serial of at least 4 bytes (gmproxy certs does)", "certificate serial number %x is shorter than 4 bytes; GmSSL peers reject it", kp.Leaf().SerialNumber.Bytes())
	}
}

// signUsage checks a signing certificate's key usage.
func (v *validator) signUsage(kp *KeyPair, path, what string) {
	ku := kp.Leaf().KeyUsage
	switch {
	case ku == 0:
		v.warnf(path, "reissue it with keyUsage digitalSignature", "%s has no keyUsage extension; GmSSL peers require digitalSignature", what)
	case ku&smx509.KeyUsageDigitalSignature == 0:
		v.errf(path, "use a certificate with keyUsage digitalSignature (is it the encryption certificate?)", "%s lacks keyUsage digitalSignature (has %s)", what, usageNames(ku))
	}
	if ku&(smx509.KeyUsageCertSign|smx509.KeyUsageCRLSign) != 0 {
		v.warnf(path, "use a leaf certificate without keyCertSign/cRLSign", "%s has keyCertSign or cRLSign; GmSSL peers reject it", what)
	}
}

// encUsage checks an encryption certificate's key usage.
func (v *validator) encUsage(kp *KeyPair, path, what string) {
	ku := kp.Leaf().KeyUsage
	switch {
	case ku == 0:
		v.warnf(path, "reissue it with keyUsage keyEncipherment, dataEncipherment, keyAgreement", "%s has no keyUsage extension; GmSSL peers require keyEncipherment", what)
	case ku&(smx509.KeyUsageKeyEncipherment|smx509.KeyUsageKeyAgreement) == 0:
		v.errf(path, "use a certificate with keyUsage keyEncipherment and keyAgreement (is it the signing certificate?)", "%s lacks keyUsage keyEncipherment and keyAgreement (has %s)", what, usageNames(ku))
	case ku&smx509.KeyUsageKeyEncipherment == 0:
		v.warnf(path, "reissue it with keyEncipherment", "%s lacks keyUsage keyEncipherment; GmSSL peers reject it", what)
	}
	if ku&(smx509.KeyUsageCertSign|smx509.KeyUsageCRLSign) != 0 {
		v.warnf(path, "use a leaf certificate without keyCertSign/cRLSign", "%s has keyCertSign or cRLSign; GmSSL peers reject it", what)
	}
}

func usageNames(ku smx509.KeyUsage) string {
	names := []string{"digitalSignature", "contentCommitment", "keyEncipherment", "dataEncipherment", "keyAgreement", "keyCertSign", "cRLSign", "encipherOnly", "decipherOnly"}
	var out []string
	for i, n := range names {
		if ku&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func (v *validator) eku(kp *KeyPair, path, what string, want smx509.ExtKeyUsage) {
	ekus := kp.Leaf().ExtKeyUsage
	if len(ekus) == 0 && len(kp.Leaf().UnknownExtKeyUsage) == 0 {
		return
	}
	if slices.Contains(ekus, want) || slices.Contains(ekus, smx509.ExtKeyUsageAny) {
		return
	}
	name := "serverAuth"
	if want == smx509.ExtKeyUsageClientAuth {
		name = "clientAuth"
	}
	v.warnf(path, "reissue it with extendedKeyUsage "+name, "%s lacks extendedKeyUsage %s; peers may reject it", what, name)
}

// tlcpPair checks a TLCP sign/enc pair: key types, usages and the identical
// subject/SAN/issuer that GmSSL demands.
func (v *validator) tlcpPair(sign, enc *KeyPair, p, signCert, encCert string, want smx509.ExtKeyUsage) {
	for _, x := range []struct {
		kp   *KeyPair
		path string
		what string
	}{{sign, p + "." + signCert, "the signing certificate"}, {enc, p + "." + encCert, "the encryption certificate"}} {
		if x.kp == nil {
			continue
		}
		if !isSM2(x.kp) {
			v.errf(x.path, "TLCP needs SM2 certificates; put RSA/ECDSA certificates under tls", "%s's key is %s, not SM2", x.what, keyType(x.kp))
			continue
		}
		v.validity(x.kp, x.path)
		v.serial(x.kp, x.path)
		v.eku(x.kp, x.path, x.what, want)
	}
	if sign != nil && isSM2(sign) {
		v.signUsage(sign, p+"."+signCert, "the signing certificate")
	}
	if enc != nil && isSM2(enc) {
		v.encUsage(enc, p+"."+encCert, "the encryption certificate")
	}
	if sign == nil || enc == nil {
		return
	}
	a, b := sign.Leaf(), enc.Leaf()
	if a.Equal(b) {
		v.errf(p+"."+encCert, "use the separate encryption certificate issued with the signing certificate", "sign and enc certificates are the same certificate")
		return
	}
	if bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo) {
		// TLCP's double certificates are two key pairs: the encryption
		// key may be escrowed by a key management centre, the signing
		// key never.
		v.warnf(p+"."+encCert, "issue the encryption certificate for a key pair of its own", "sign and enc certificates certify the same key pair: TLCP needs two, one that signs and one that decrypts")
	}
	if !bytes.Equal(a.RawSubject, b.RawSubject) {
		who := "GmSSL peers reject the pair"
		if want == smx509.ExtKeyUsageServerAuth {
			// A server's pair: the tlcp client refuses an encryption
			// certificate of another subject (another entity's key).
			who = "GmSSL clients and gmproxy's own TLCP client (upstreams, get, s_time) refuse the pair"
		}
		v.warnf(p+"."+encCert, "issue both certificates for the same subject", "sign and enc certificates have different subjects (%q vs %q); %s", a.Subject.String(), b.Subject.String(), who)
	}
	if !bytes.Equal(a.RawIssuer, b.RawIssuer) {
		v.warnf(p+"."+encCert, "issue both certificates from the same CA", "sign and enc certificates have different issuers; GmSSL peers reject the pair")
	}
	if !slices.Equal(a.DNSNames, b.DNSNames) || !slices.EqualFunc(a.IPAddresses, b.IPAddresses, net.IP.Equal) {
		v.warnf(p+"."+encCert, "issue both certificates with the same subjectAltName", "sign and enc certificates have different subjectAltName; GmSSL peers reject the pair")
	}
}

func keyType(kp *KeyPair) string {
	var k any = kp.Key
	if r, ok := k.(*RemoteKeyRef); ok {
		if isSM2Public(r.PublicKey) {
			return "SM2"
		}
		k = r.PublicKey
	}
	switch k.(type) {
	case *sm2.PrivateKey:
		return "SM2"
	}
	t := fmt.Sprintf("%T", k)
	t = strings.TrimPrefix(t, "*")
	t, _, _ = strings.Cut(t, ".")
	return strings.ToUpper(t)
}

func (v *validator) tlcpSuites(list []string, p string) []uint16 {
	return v.suiteList(list, p, "TLCP", TLCPSuite, func(name string) string {
		if cl := closest(name, suiteNames(tlcpSuites)); cl != "" {
			return fmt.Sprintf("did you mean %q?", cl)
		}
		return "use " + strings.Join(suiteNames(tlcpSuites), ", ")
	})
}

func (v *validator) tls13Suites(list []string, p string) []uint16 {
	return v.suiteList(list, p, "TLS 1.3 SM", TLS13SMSuite, func(name string) string {
		if _, _, isTLCP := TLCPSuite(name); isTLCP {
			return "that is a TLCP suite; list it under tlcp: ciphers"
		}
		return "use " + strings.Join(suiteNames(tls13SMSuites), ", ")
	})
}

// suiteList checks a cipher suite list of protocol proto, canonicalising
// the names in place: unknown names are errors (with fix(name) as the
// fix), repeats are warnings, an empty list is an error. It returns the
// suite IDs in order.
func (v *validator) suiteList(list []string, p, proto string, lookup func(string) (uint16, string, bool), fix func(string) string) []uint16 {
	var ids []uint16
	for i, name := range list {
		id, canon, ok := lookup(name)
		ip := fmt.Sprintf("%s[%d]", p, i)
		if !ok {
			v.errf(ip, fix(name), "unknown %s cipher suite %q", proto, name)
			continue
		}
		if slices.Contains(ids, id) {
			v.warnf(ip, "remove the repetition", "cipher suite %s listed twice", canon)
			continue
		}
		list[i] = canon
		ids = append(ids, id)
	}
	if len(list) == 0 {
		v.errf(p, "list at least one suite or remove the key for the default", "no cipher suites")
	}
	return ids
}

func (v *validator) siteTLCP(s *Site, p string) {
	t := s.TLCP
	if t == nil {
		return
	}
	p += ".tlcp"
	if v.swapped(t) {
		v.errf(p+".sign_key", "swap the values of sign_key and enc_key", "sign_key and enc_key are swapped (sign_key belongs to enc_cert and enc_key to sign_cert)")
		s.Material.TLCPSuites = v.tlcpSuites(t.Ciphers, p+".ciphers")
		return
	}
	sign, enc := v.tlcpPairFiles(p, t.SignCert, t.SignKey, t.EncCert, t.EncKey, t.KeyPassword, t.SignKeyServer, t.EncKeyServer)
	v.tlcpPair(sign, enc, p, "sign_cert", "enc_cert", smx509.ExtKeyUsageServerAuth)
	s.Material.TLCPSign, s.Material.TLCPEnc = sign, enc
	s.Material.TLCPSuites = v.tlcpSuites(t.Ciphers, p+".ciphers")
}

// tlcpPairFiles loads a sign/enc pair, from separate files or from
// GmSSL-style combined files (the same file named for sign and enc).
func (v *validator) tlcpPairFiles(p, signCert, signKey, encCert, encKey string, pw KeyPassword, signServer, encServer string) (sign, enc *KeyPair) {
	ci, ki := -1, -1
	if signCert != "" && v.resolve(signCert) == v.resolve(encCert) {
		ci = 0
	}
	if signKey != "" && v.resolve(signKey) == v.resolve(encKey) {
		ki = 0
	}
	sign = v.pairFrom(p, "sign_cert", "sign_key", signCert, signKey, signServer, pw, ci, ki)
	if ci == 0 {
		ci = 1
	}
	if ki == 0 {
		ki = 1
	}
	enc = v.pairFrom(p, "enc_cert", "enc_key", encCert, encKey, encServer, pw, ci, ki)
	return sign, enc
}

// swapped reports whether sign_key belongs to enc_cert and enc_key to
// sign_cert (reading the files quietly; pair reports their problems).
func (v *validator) swapped(t *SiteTLCP) bool {
	if t.SignCert == "" || t.EncCert == "" || t.SignKey == "" || t.EncKey == "" {
		return false
	}
	sc, err := smkey.LoadCertificatesFile(v.resolve(t.SignCert))
	if err != nil {
		return false
	}
	ec, err := smkey.LoadCertificatesFile(v.resolve(t.EncCert))
	if err != nil {
		return false
	}
	var pw []byte
	if t.KeyPasswordFile != "" {
		b, _ := readNamed(v.resolve(t.KeyPasswordFile), maxNamedFile)
		pw = bytes.TrimRight(b, "\r\n")
		defer clear(b)
	} else if t.KeyPasswordEnv != "" {
		// As pair reads it: gmproxy took the variable out of its
		// environment at the first load, and keeps it for reloads.
		pw, _ = envPassword(t.KeyPasswordEnv)
		defer clear(pw)
	}
	sk, err1 := smkey.LoadPrivateKeyFile(v.resolve(t.SignKey), pw)
	ek, err2 := smkey.LoadPrivateKeyFile(v.resolve(t.EncKey), pw)
	return err1 == nil && err2 == nil && !smkey.PublicKeysEqual(sk, sc[0].PublicKey) &&
		smkey.PublicKeysEqual(sk, ec[0].PublicKey) && smkey.PublicKeysEqual(ek, sc[0].PublicKey)
}

func (v *validator) siteTLS13SM(s *Site, p string) {
	t := s.TLS13SM
	if t == nil {
		return
	}
	p += ".tls13sm"
	if !v.has(p+".cert") && s.TLCP != nil && t.Cert == s.TLCP.SignCert && t.Key == s.TLCP.SignKey && t.KeyServer == s.TLCP.SignKeyServer {
		// Reused from tlcp: report problems there, once.
		if s.Material.TLCPSign != nil {
			s.Material.TLS13SM = s.Material.TLCPSign
		}
		s.Material.TLS13SMSuites = v.tls13Suites(t.Ciphers, p+".ciphers")
		return
	}
	if t.Cert == "" && t.Key == "" && t.KeyServer == "" {
		v.errf(p, "add cert: and key: (an SM2 certificate with digitalSignature), or add a tlcp section whose signing certificate is reused", "tls13sm has no certificate")
		return
	}
	kp := v.pairFrom(p, "cert", "key", t.Cert, t.Key, t.KeyServer, t.KeyPassword, -1, -1)
	if kp != nil {
		if !isSM2(kp) {
			v.errf(p+".cert", "TLS 1.3-SM needs an SM2 certificate; put RSA/ECDSA certificates under tls", "the certificate's key is %s, not SM2", keyType(kp))
			kp = nil
		} else {
			v.validity(kp, p+".cert")
			v.signUsage(kp, p+".cert", "the TLS 1.3-SM certificate")
			v.eku(kp, p+".cert", "the TLS 1.3-SM certificate", smx509.ExtKeyUsageServerAuth)
		}
	}
	s.Material.TLS13SM = kp
	s.Material.TLS13SMSuites = v.tls13Suites(t.Ciphers, p+".ciphers")
}

func (v *validator) siteTLS(s *Site, p string) {
	t := s.TLS
	if t == nil {
		return
	}
	p += ".tls"
	switch t.MinVersion {
	case "1.2":
		s.Material.TLSMinVersion = tls.VersionTLS12
	case "1.3":
		s.Material.TLSMinVersion = tls.VersionTLS13
	default:
		v.oneOf(p+".min_version", t.MinVersion, "1.2", "1.3")
	}
	kp := v.pair(p, "cert", "key", t.Cert, t.Key, t.KeyPassword)
	if kp == nil {
		return
	}
	if isSM2(kp) {
		v.errf(p+".cert", "ordinary TLS clients cannot use SM2; move this certificate to tls13sm and put an RSA/ECDSA certificate here", "the tls certificate has an SM2 key")
		return
	}
	if why := tlsKeyUnusable(kp.Leaf().PublicKey); why != "" {
		v.errf(p+".cert", "issue the certificate for an RSA key of 2048 bits or more, or an ECDSA P-256 or P-384 key", "crypto/tls cannot sign handshakes with the tls certificate's key (%s): every TLS handshake would fail", why)
		return
	}
	// crypto/tls signs every handshake with the key (it offers no RSA key
	// transport), so a keyUsage extension must allow digitalSignature
	// (RFC 8446 §4.4.2.2, RFC 5246 §7.4.2); OpenSSL refuses an ECDSA
	// certificate without it in TLS 1.2.
	if ku := kp.Leaf().KeyUsage; ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 {
		v.errf(p+".cert", "reissue it with keyUsage digitalSignature", "the tls certificate lacks keyUsage digitalSignature (has %s): TLS servers sign with it", usageNames(ku))
	}
	v.validity(kp, p+".cert")
	v.eku(kp, p+".cert", "the TLS certificate", smx509.ExtKeyUsageServerAuth)
	s.Material.TLS = kp
	v.siteOCSP(s, p)
}

// siteOCSP checks tls.ocsp_file and tls.ocsp_fetch: the chain must hold
// the certificate's issuer, which signs or delegates the responses; a
// response file must hold a response that can be stapled now.
func (v *validator) siteOCSP(s *Site, p string) {
	t, kp := s.TLS, s.Material.TLS
	if t.OCSPResponder != "" && !t.OCSPFetch {
		v.errf(p+".ocsp_responder", "add ocsp_fetch: true, or remove ocsp_responder", "ocsp_responder is only used by ocsp_fetch, which is not set")
		return
	}
	if t.OCSPFile == "" && !t.OCSPFetch {
		return
	}
	if t.OCSPFile != "" && t.OCSPFetch {
		v.errf(p+".ocsp_fetch", "remove ocsp_fetch to staple the file, or ocsp_file to fetch responses", "ocsp_file and ocsp_fetch both set")
		return
	}
	key := p + ".ocsp_fetch"
	if t.OCSPFile != "" {
		key = p + ".ocsp_file"
	}
	leaf, err := x509.ParseCertificate(kp.Leaf().Raw)
	if err != nil {
		v.errf(p+".cert", "reissue the certificate", "crypto/x509 cannot parse the tls certificate: %v", err)
		return
	}
	var issuer *x509.Certificate
	if len(kp.Chain) > 1 {
		issuer, _ = x509.ParseCertificate(kp.Chain[1].Raw)
	}
	if issuer == nil || leaf.CheckSignatureFrom(issuer) != nil {
		v.errf(key, "append the certificate of the CA that issued it to the cert file, after it", "OCSP stapling needs the tls certificate's issuer, and the chain's second certificate is not it")
		return
	}
	s.Material.TLSOCSPIssuer = issuer
	if t.OCSPFetch && t.OCSPResponder != "" {
		u, err := url.Parse(t.OCSPResponder)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
			v.errf(p+".ocsp_responder", "write an absolute URL such as http://ocsp.example.cn/ or https://relay.internal:8443/ocsp", "ocsp_responder %q is not an http:// or https:// URL with a host", t.OCSPResponder)
			return
		}
		s.Material.TLSOCSPURL = t.OCSPResponder
		return
	}
	if t.OCSPFetch {
		if len(leaf.OCSPServer) == 0 {
			v.errf(key, "set ocsp_responder to the CA's responder, use ocsp_file with a response obtained otherwise, or a certificate whose CA runs an OCSP responder", "the tls certificate names no OCSP responder (no OCSP URL in its Authority Information Access extension)")
			return
		}
		s.Material.TLSOCSPURL = leaf.OCSPServer[0]
		return
	}
	fi, err := os.Stat(v.resolve(t.OCSPFile))
	switch {
	case err != nil:
		v.errf(key, relFix, "OCSP response file %q: %v", t.OCSPFile, errors.Unwrap(err))
		return
	case !fi.Mode().IsRegular():
		v.errf(key, "name a file", "%s is not a file", t.OCSPFile)
		return
	case fi.Size() > staple.MaxResponse:
		v.errf(key, "name a DER OCSP response (openssl ocsp -respout)", "%s is %d bytes, over %d", t.OCSPFile, fi.Size(), staple.MaxResponse)
		return
	}
	der, err := readNamed(v.resolve(t.OCSPFile), staple.MaxResponse)
	if err != nil {
		v.errf(key, relFix, "%v", err)
		return
	}
	if bytes.HasPrefix(bytes.TrimSpace(der), []byte("-----BEGIN")) {
		v.errf(key, "convert it to DER (openssl base64 -d), or save the response with openssl ocsp -respout", "%s is PEM; the OCSP response must be DER", t.OCSPFile)
		return
	}
	resp, err := staple.Verify(der, leaf, issuer, v.now)
	if err != nil {
		v.errf(key, "fetch a current response for this certificate from its CA's responder (openssl ocsp -issuer CA -cert CERT -url URL -respout FILE) and reload", "OCSP response %s cannot be stapled: %v", t.OCSPFile, err)
		return
	}
	s.Material.TLSOCSP = &staple.Staple{DER: der, ThisUpdate: resp.ThisUpdate, NextUpdate: resp.NextUpdate}
}

// tlsKeyUnusable says why crypto/tls cannot sign a handshake with the key
// of a certificate for pub ("" when it can): an RSA key under 1024 bits,
// which crypto/rsa refuses to use, or an ECDSA key on a curve that no TLS
// signature scheme names (RFC 8446 §4.2.3 has P-256, P-384 and P-521).
func tlsKeyUnusable(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < 1024 {
			return fmt.Sprintf("a %d-bit RSA key; crypto/rsa refuses keys under 1024 bits", n)
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return fmt.Sprintf("an ECDSA key on %s, a curve no TLS signature scheme uses", k.Curve.Params().Name)
		}
	}
	return ""
}

func (v *validator) clientAuth(s *Site, p string) {
	ca := &s.ClientAuth
	p += ".client_auth"
	if !v.oneOf(p+".mode", ca.Mode, ClientAuthNone, ClientAuthRequest, ClientAuthRequire, ClientAuthOptionalNoCA) {
		return
	}
	if ca.CA != "" {
		certs := v.certs(p+".ca", ca.CA)
		for _, c := range certs {
			if !c.IsCA {
				v.warnf(p+".ca", "list CA certificates (basicConstraints CA:TRUE) here", "certificate %q in the client CA file is not a CA", c.Subject.CommonName)
			}
		}
		s.Material.ClientCAs = certs
		names := make([][]byte, len(certs))
		for i, c := range certs {
			names[i] = c.RawSubject
		}
		// Under mode none the TLCP ECDHE suites still ask for the client's
		// certificates, with these names (ecdheClientsVerified).
		if (ca.Mode != ClientAuthNone || ecdheClientsVerified(s)) && s.TLCP != nil && !tlcp.CANamesFit(names) ||
			ca.Mode != ClientAuthNone && s.TLS13SM != nil && !tls13sm.CANamesFit(names) {
			v.warnf(p+".ca", "keep only the CAs that issue this site's client certificates in the file",
				"the %d CAs' names do not fit a CertificateRequest (64 KiB): TLCP sends an empty list (any CA) and TLS 1.3-SM none, and clients that choose their certificate by the list (GmSSL's) may send none", len(certs))
		}
		// crypto/tls sends the names of every CA of its pool, whatever
		// their size: past 64 KiB each TLS handshake that asks for a
		// certificate fails (TLS 1.3: the server cannot write the
		// CertificateRequest, internal_error; TLS 1.2: Go clients refuse
		// it), as OpenSSL (nginx) fails too.
		if pool, n := X509Pool(certs); n > 0 && ca.Mode != ClientAuthNone && s.TLS != nil && !tlsCANamesFit(pool) {
			v.errf(p+".ca", "keep only the CAs that issue this site's client certificates in the file",
				"the %d RSA/ECDSA CAs' names do not fit a CertificateRequest (64 KiB): every TLS handshake of this site would fail", n)
		}
		if _, n := X509Pool(certs); n == 0 && ca.Mode != ClientAuthNone && s.TLS != nil && len(certs) > 0 {
			v.warnf(p+".ca", "add the RSA/ECDSA CA that issues the TLS clients' certificates to this file, or remove the site's tls section", "the client CA file holds SM2 CAs only: no TLS (RSA/ECDSA) client certificate can authenticate on this site")
		}
		// TLCP and TLS 1.3-SM clients present SM2 certificates, which only
		// an SM2 CA verifies: without one each of them fails (unknown_ca),
		// under mode none every TLCP ECDHE handshake (ecdheClientsVerified).
		if !slices.ContainsFunc(certs, func(c *smx509.Certificate) bool { return isSM2Public(c.PublicKey) }) &&
			(ca.Mode != ClientAuthNone && (s.TLCP != nil || s.TLS13SM != nil) || ecdheClientsVerified(s)) && len(certs) > 0 {
			v.warnf(p+".ca", "add the SM2 CA that issues the TLCP and TLS 1.3-SM clients' certificates to this file", "the client CA file holds no SM2 CA: no TLCP or TLS 1.3-SM client certificate can authenticate on this site")
		}
	} else if ca.Mode != ClientAuthNone && ca.Mode != ClientAuthOptionalNoCA {
		v.errf(p+".ca", "add ca: FILE with the CA certificates that issue client certificates", "client_auth mode %s needs a ca", ca.Mode)
	}
	if ca.CRL != "" {
		v.clientCRL(s, p)
	}
	if d := ca.VerifyDepth; d != nil {
		switch {
		case *d < 0 || *d > MaxVerifyDepth:
			v.errf(p+".verify_depth", fmt.Sprintf("give the most intermediate CAs a client chain may have, 0 to %d (1 is nginx's default)", MaxVerifyDepth), "verify_depth %d is out of range", *d)
		case ca.CA == "":
			v.errf(p+".verify_depth", "add ca: FILE with the CAs that issue client certificates, or remove verify_depth", "verify_depth needs a ca: client certificates are not verified without one")
		case ca.Mode == ClientAuthNone && !ecdheClientsVerified(s):
			v.errf(p+".mode", "set mode: request or require, or remove verify_depth", "client_auth mode none asks for no client certificate: verify_depth would limit none")
		}
	}
}

// MaxVerifyDepth bounds client_auth.verify_depth: OpenSSL's default
// limit, which no real PKI comes near.
const MaxVerifyDepth = 100

// clientCRL loads client_auth.crl into s.Material.ClientCRLs. Every CRL
// must come from a CA of ca and every such CA needs one: the handshake
// refuses a certificate whose issuer has no CRL, so a missing one would
// refuse all that CA's clients.
func (v *validator) clientCRL(s *Site, p string) {
	ca := &s.ClientAuth
	cp := p + ".crl"
	if ca.CA == "" {
		v.errf(cp, "add ca: FILE with the CAs whose CRLs these are, or remove crl", "crl needs a ca: client certificates are not verified without one")
		return
	}
	if ca.Mode == ClientAuthNone && !ecdheClientsVerified(s) {
		v.errf(p+".mode", "set mode: request or require, or remove crl", "client_auth mode none asks for no client certificate: crl would check none")
		return
	}
	b, err := readNamed(v.resolve(ca.CRL), maxNamedFile)
	if err != nil {
		v.errf(cp, relFix, "cannot read CRL file %q: %s", ca.CRL, errText(err))
		return
	}
	crls, err := revocation.ParseFile(b)
	if err != nil {
		v.errf(cp, `the file must hold PEM "BEGIN X509 CRL" blocks (openssl crl -outform PEM) or one DER CRL`, "cannot parse CRL file %q: %s", ca.CRL, err)
		return
	}
	cas := s.Material.ClientCAs
	if len(cas) == 0 {
		return // the ca file's own error says why
	}
	covered := make([]bool, len(cas))
	signed := make([]revocation.Signed, 0, len(crls))
	ok := true
	for i, rl := range crls {
		issuer, noCRLSign := -1, ""
		for j, c := range cas {
			if !bytes.Equal(c.RawSubject, rl.RawIssuer) {
				continue
			}
			if c.KeyUsage != 0 && c.KeyUsage&smx509.KeyUsageCRLSign == 0 {
				// CheckSignatureFrom refuses such a signer whatever
				// signed: say so, not that the signature is wrong.
				noCRLSign = c.Subject.String()
				continue
			}
			if rl.CheckSignatureFrom(c) == nil {
				issuer = j
				break
			}
		}
		switch {
		case issuer < 0 && noCRLSign != "":
			v.errf(cp, "use a CA certificate whose keyUsage has cRLSign, or a CRL of another CA of client_auth.ca", "CRL %d (issuer %q): the CA %q in %q may not sign CRLs (its keyUsage has no cRLSign)", i+1, rl.Issuer.String(), noCRLSign, ca.CA)
			ok = false
			continue
		case issuer < 0:
			v.errf(cp, "list only CRLs of the CAs in client_auth.ca (or add their CA there)", "CRL %d (issuer %q) is not signed by a CA of %q", i+1, rl.Issuer.String(), ca.CA)
			ok = false
			continue
		}
		covered[issuer] = true
		signed = append(signed, revocation.Signed{List: rl, Issuer: cas[issuer]})
		if why := revocation.Unsupported(rl); why != "" {
			v.errf(cp, "give the CA's complete CRL, covering all its certificates", "CRL %d (issuer %q) cannot be used: %s", i+1, rl.Issuer.String(), why)
			ok = false
			continue
		}
		switch {
		case !rl.NextUpdate.IsZero() && v.now.After(rl.NextUpdate):
			v.warnf(cp, "fetch the CA's current CRL and reload", "CRL %d (issuer %q) expired at %s: clients will be refused until a fresh CRL is loaded", i+1, rl.Issuer.String(), rl.NextUpdate.UTC().Format(time.RFC3339))
		case v.now.Before(rl.ThisUpdate):
			v.warnf(cp, "check the clock, or load the CA's current CRL", "CRL %d (issuer %q) is not valid before %s: clients will be refused until a fresh CRL is loaded", i+1, rl.Issuer.String(), rl.ThisUpdate.UTC().Format(time.RFC3339))
		}
	}
	for j, c := range cas {
		if !covered[j] {
			v.errf(cp, "add the CRL of this CA to the file (every CA of client_auth.ca needs one)", "no CRL of CA %q", c.Subject.String())
			ok = false
		}
	}
	if ok {
		s.Material.ClientCRLs = revocation.NewIndex(signed)
	}
}

// tlsCANamesFit reports whether the subject names of pool fit the
// CertificateRequest crypto/tls makes of them: each with its 2-byte
// length, and room left for the message's other fields (certificate
// types, signature algorithms, headers) within 64 KiB.
func tlsCANamesFit(pool *x509.CertPool) bool {
	n := 0
	for _, dn := range pool.Subjects() { //nolint:staticcheck // a pool of the file's CAs, not the system's
		n += 2 + len(dn)
	}
	return n <= 1<<16-256
}

// ecdheClientsVerified reports whether site s verifies client certificates
// under client_auth mode none: its TLCP ECDHE suites (the tlcp package's
// default list has them) take the client's sign/enc pair and verify it
// against ca.
func ecdheClientsVerified(s *Site) bool {
	if s.TLCP == nil || s.ClientAuth.CA == "" {
		return false
	}
	suites := s.Material.TLCPSuites
	return len(suites) == 0 || slices.ContainsFunc(suites, IsECDHE)
}

// checkCoverage warns when a server name is not in a certificate's SAN.
func (v *validator) checkCoverage(s *Site, p string) {
	m := &s.Material
	for j, name := range s.ServerNames {
		if v.failed[fmt.Sprintf("%s.server_names[%d]", p, j)] {
			continue
		}
		for _, x := range []struct {
			kp   *KeyPair
			role string
		}{{m.TLCPSign, "tlcp sign_cert"}, {m.TLS13SM, "tls13sm cert"}, {m.TLS, "tls cert"}} {
			if x.kp == nil || (x.role == "tls13sm cert" && x.kp == m.TLCPSign) {
				continue
			}
			if !covers(x.kp.Leaf(), name) {
				v.warnf(fmt.Sprintf("%s.server_names[%d]", p, j), "reissue the certificate with this name in subjectAltName, or remove the name", "server name %q is not covered by the %s (names: %s)", name, x.role, strings.Join(certNames(x.kp.Leaf()), ", "))
			}
		}
	}
}

func covers(c *smx509.Certificate, name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if strings.HasPrefix(name, "*.") {
		for _, d := range c.DNSNames {
			if strings.EqualFold(d, name) {
				return true
			}
		}
		return false
	}
	return c.VerifyHostname(name) == nil
}

func certNames(c *smx509.Certificate) []string {
	out := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

func (v *validator) validateUpstreams(used map[string]bool) {
	seen := map[string]string{}
	for i := range v.cfg.Upstreams {
		u := &v.cfg.Upstreams[i]
		p := fmt.Sprintf("upstreams[%d]", i)
		v.upstreamName(u, p, seen, used)
		v.upstreamTargets(u, p)
		v.upstreamBalance(u, p)
		if v.oneOf(p+".protocol", u.Protocol, upstreamproto.Names()...) {
			v.upstreamTLS(u, p)
		}
		v.upstreamConnections(u, p)
		v.passiveHealth(&u.HealthChecks.Passive, p+".health_checks.passive")
		if a := u.HealthChecks.Active; a != nil {
			v.activeHealth(a, u.Protocol, p+".health_checks.active")
		}
		v.retries(&u.Retries, p+".retries")
	}
}

// upstreamName checks that the upstream has a name no earlier upstream has
// (seen maps names to their paths) and warns when no route uses it.
func (v *validator) upstreamName(u *Upstream, p string, seen map[string]string, used map[string]bool) {
	if u.Name == "" {
		v.errf(p, "add name: NAME", "upstream has no name")
	} else if prev, dup := seen[u.Name]; dup {
		v.errf(p+".name", "give every upstream a distinct name", "duplicate upstream name %q (also %s)", u.Name, prev)
	} else if v.unreservedName(p+".name", u.Name, "upstream") {
		seen[u.Name] = p
		if !used[u.Name] {
			v.warnf(p+".name", "route to it or remove it", "upstream %q is not used by any route or stream", u.Name)
		}
	}
}

// upstreamTargets checks the targets' addresses and weights and that at
// least one target is a primary.
func (v *validator) upstreamTargets(u *Upstream, p string) {
	if len(u.Targets) == 0 {
		v.errf(p+".targets", "add targets: [host:port]", "upstream has no targets")
	}
	primaries := 0
	for j, t := range u.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", p, j)
		if t.Address == "" {
			v.errf(tp+".address", "add address: host:port", "target has no address")
		} else if v.hostPort(tp+".address", t.Address, false) {
			// The dialers refuse these (proxy.RefuseUnusable): a connect
			// to 0.0.0.0 or :: reaches this host on Linux, and to a
			// multicast or broadcast address no host.
			if ap, err := netip.ParseAddrPort(t.Address); err == nil {
				if dialable.Unusable(ap.Addr()) {
					v.errf(tp+".address", fmt.Sprintf("write the backend's address; for this host 127.0.0.1:%d", ap.Port()), "target %s names no host to connect to", t.Address)
				}
			}
		}
		if t.Weight < 1 {
			v.errf(tp+".weight", "use a weight of 1 or more (mark spare targets with backup: true)", "weight must be at least 1")
		} else if t.Weight > balance.MaxWeight {
			v.errf(tp+".weight", fmt.Sprintf("use a weight of at most %d (weights count relative to each other)", balance.MaxWeight), "weight %d is too large", t.Weight)
		}
		if !t.Backup {
			primaries++
		}
	}
	if len(u.Targets) > 0 && primaries == 0 {
		v.warnf(p+".targets", "make at least one target a primary (backup: false)", "every target is a backup")
	}
}

// upstreamBalance checks the balance policy and the hash key it needs.
func (v *validator) upstreamBalance(u *Upstream, p string) {
	if !v.oneOf(p+".balance", u.Balance, balance.Names()...) {
		return
	}
	hk := u.HashKey
	switch {
	case u.Balance == balance.Hash && hk.Header == "" && hk.Cookie == "":
		v.errf(p+".hash_key", "add hash_key: {header: X-User} or {cookie: session}", "balance hash needs hash_key")
	case u.Balance == balance.Hash && hk.Header != "" && hk.Cookie != "":
		v.errf(p+".hash_key", "keep only one of header and cookie", "hash_key has both header and cookie")
	case u.Balance != balance.Hash && (hk.Header != "" || hk.Cookie != ""):
		v.warnf(p+".hash_key", "set balance: hash to use it", "hash_key is ignored with balance %s", u.Balance)
	}
}

// upstreamConnections checks the keep-alive pool, the connect and
// response header timeouts and the bounds of a response head.
func (v *validator) upstreamConnections(u *Upstream, p string) {
	if u.Keepalive.MaxIdle < 0 {
		v.errf(p+".keepalive.max_idle", "use 0 to disable keep-alive", "max_idle must not be negative")
	}
	if u.Keepalive.MaxConns < 0 {
		v.errf(p+".keepalive.max_conns", "use 0 for unlimited", "max_conns must not be negative")
	}
	if u.Timeouts.Connect <= 0 {
		v.errf(p+".timeouts.connect", "write a duration such as 5s", "connect timeout must be positive")
	}
	if u.Timeouts.ResponseHeader <= 0 {
		v.errf(p+".timeouts.response_header", "write a duration such as 60s", "response_header timeout must be positive")
	}
	// As for a listener's idle_timeout: the transport reads 0 as its own
	// default (90s), not as "no limit".
	if u.Timeouts.Idle <= 0 {
		v.errf(p+".timeouts.idle", "write a duration such as 90s", "idle timeout must be positive")
	}
	if h := u.Timeouts.H2Ping; h != 0 && h < time.Second {
		v.errf(p+".timeouts.h2_ping", "write a duration of at least 1s such as 5m, or 0 for none", "h2_ping %s is under 1s: a quiet target would be pinged more than once a second", h)
	} else if h != 0 && !slices.Contains([]string{upstreamproto.H2C, upstreamproto.H2, upstreamproto.TLS}, u.Protocol) {
		v.warnf(p+".timeouts.h2_ping", "remove it, or use protocol h2c, h2 or tls", "h2_ping has no effect on protocol %s, which is not HTTP/2", u.Protocol)
	}
	if u.MaxResponseHeaderBytes < 1<<10 {
		v.errf(p+".max_response_header_bytes", "write a size such as 64KiB", "max_response_header_bytes must be at least 1KiB")
	} else if u.MaxResponseHeaderBytes > MaxHeadBytes {
		v.errf(p+".max_response_header_bytes", "write a size such as 64KiB", "max_response_header_bytes %s is over %s (the head of one response, which one request holds)", u.MaxResponseHeaderBytes, ByteSize(MaxHeadBytes))
	}
	if u.MaxResponseHeaderFields < 1 {
		v.errf(p+".max_response_header_fields", "write a count such as 256", "max_response_header_fields must be positive")
	}
	if u.ResolveInterval < time.Second {
		// Each round looks up every name of the upstream.
		v.errf(p+".resolve_interval", "write a duration such as 30s", "resolve_interval must be at least 1s")
	}
}

// passiveHealth checks the passive health check section at path pp.
func (v *validator) passiveHealth(ph *PassiveHealth, pp string) {
	if ph.MaxFails < 0 {
		v.errf(pp+".max_fails", "use 0 to disable passive health checks", "max_fails must not be negative")
	} else if ph.MaxFails > balance.MaxFails {
		v.errf(pp+".max_fails", fmt.Sprintf("use at most %d failures within fail_window", balance.MaxFails), "max_fails %d is too large", ph.MaxFails)
	}
	if ph.MaxFails > 0 && ph.FailWindow <= 0 {
		v.errf(pp+".fail_window", "write a duration such as 10s", "fail_window must be positive")
	}
	if ph.MaxFails > 0 && ph.CoolDown <= 0 {
		v.errf(pp+".cool_down", "write a duration such as 30s", "cool_down must be positive")
	}
	for j, st := range ph.UnhealthyStatus {
		if st < 100 || st > 599 {
			v.errf(fmt.Sprintf("%s.unhealthy_status[%d]", pp, j), "use HTTP status codes such as 502", "invalid status %d", st)
		}
	}
}

// activeHealth checks the active health check section at path ap of an
// upstream of protocol proto.
func (v *validator) activeHealth(a *ActiveHealth, proto, ap string) {
	v.oneOf(ap+".type", a.Type, proxy.ActiveHTTP, proxy.ActiveGRPC)
	if a.Type == proxy.ActiveGRPC {
		// gRPC runs over HTTP/2 only: over another protocol no check
		// could pass, and every target would be marked down.
		if proto != upstreamproto.H2C && proto != upstreamproto.H2 && slices.Contains(upstreamproto.Names(), proto) {
			v.errf(ap+".type", "set the upstream's protocol: h2c (HTTP/2 in clear) or h2 (HTTP/2 over TLS), as a gRPC target speaks, or use type: http", "a grpc health check needs protocol h2c or h2, not %s", proto)
		}
		// The call has its own path and answer: these keys would be
		// ignored.
		for _, k := range []string{"path", "expect_status"} {
			if v.has(ap + "." + k) {
				v.errf(ap+"."+k, "remove it: a grpc check calls /grpc.health.v1.Health/Check and passes on SERVING", "%s is not used by a grpc health check", k)
			}
		}
	} else if v.has(ap + ".service") {
		v.errf(ap+".service", "set type: grpc to ask a gRPC health service, or remove it", "service is used by a grpc health check only")
	}
	// The probe's request line and Host field are made of these: a path
	// net/url cannot parse, or a host net/http does not send (it sends an
	// empty Host instead), failed every probe or probed another virtual
	// host, and the checks took every target out.
	switch {
	case a.Type == proxy.ActiveGRPC:
		// The call's own path.
	case !strings.HasPrefix(a.Path, "/"):
		v.errf(ap+".path", "write a path such as /healthz", "path must start with /")
	case !validProbeTarget(a.Path):
		v.errf(ap+".path", "write a path such as /healthz, with % only in a percent-encoding (%25 for itself) and no control character or #fragment", "invalid path %q", a.Path)
	}
	if a.Host != "" && !validHostPort(a.Host) {
		v.errf(ap+".host", "write a host name with an optional :port, such as backend.example.cn", "invalid host %q", a.Host)
	}
	if a.ExpectStatus != 0 && (a.ExpectStatus < 100 || a.ExpectStatus > 599) {
		v.errf(ap+".expect_status", "use 0 for any 2xx/3xx, or a status such as 200", "invalid status %d", a.ExpectStatus)
	}
	if a.Interval <= 0 {
		v.errf(ap+".interval", "write a duration such as 10s", "interval must be positive")
	}
	if a.Timeout <= 0 {
		v.errf(ap+".timeout", "write a duration such as 2s", "timeout must be positive")
	} else if a.Interval > 0 && a.Timeout > a.Interval {
		v.warnf(ap+".timeout", "make timeout shorter than interval", "timeout (%s) is longer than interval (%s)", formatDuration(a.Timeout), formatDuration(a.Interval))
	}
	if a.Rise < 1 {
		v.errf(ap+".rise", "use 1 or more", "rise must be at least 1")
	}
	if a.Fall < 1 {
		v.errf(ap+".fall", "use 1 or more", "fall must be at least 1")
	}
}

// validProbeTarget reports whether the probe's URL, made as the checker
// makes it, parses and keeps all of path: net/url refuses a bad
// percent-encoding or a control character, and drops a #fragment.
func validProbeTarget(path string) bool {
	_, err := url.Parse("http://target" + path)
	return err == nil && !strings.Contains(path, "#")
}

func (v *validator) upstreamTLS(u *Upstream, p string) {
	t := &u.TLS
	tp := p + ".tls"
	m := &u.Material
	hasTLCPCerts := t.SignCert != "" || t.SignKey != "" || t.EncCert != "" || t.EncKey != ""
	hasCert := t.Cert != "" || t.Key != ""
	switch u.Protocol {
	case upstreamproto.HTTP, upstreamproto.H2C:
		if v.has(tp) {
			v.warnf(tp, "use protocol tls, h2, tlcp or tls13sm to encrypt", "tls settings are ignored with protocol %s", u.Protocol)
		}
		return
	}
	if t.InsecureSkipVerify {
		v.warnf(tp+".insecure_skip_verify", "set ca: to the CA that issues the targets' certificates", "the targets' certificates are not verified")
	}
	if t.CA != "" {
		m.RootCAs = v.certs(tp+".ca", t.CA)
	} else if !t.InsecureSkipVerify && (u.Protocol == upstreamproto.TLCP || u.Protocol == upstreamproto.TLS13SM) {
		v.errf(tp+".ca", "add ca: FILE with the SM2 CA that issues the targets' certificates", "protocol %s needs tls.ca (there are no system SM2 roots)", u.Protocol)
	}
	if u.Protocol != upstreamproto.TLCP && (t.GmSSLCompat || t.ECDHEParamsAsVector || t.NoExtensions) {
		v.warnf(tp, "remove them or use protocol tlcp", "gmssl_compat, ecdhe_params_as_vector and no_extensions only apply to protocol tlcp")
	}
	switch u.Protocol {
	case upstreamproto.TLCP:
		if hasCert {
			v.warnf(tp+".cert", "for TLCP client certificates use sign_cert, sign_key, enc_cert and enc_key", "cert/key are ignored with protocol tlcp")
		}
		if hasTLCPCerts {
			m.Sign, m.Enc = v.tlcpPairFiles(tp, t.SignCert, t.SignKey, t.EncCert, t.EncKey, t.KeyPassword, "", "")
			v.tlcpPair(m.Sign, m.Enc, tp, "sign_cert", "enc_cert", smx509.ExtKeyUsageClientAuth)
		}
		m.Suites = v.tlcpSuites(t.Ciphers, tp+".ciphers")
		if !hasTLCPCerts {
			for i, id := range m.Suites {
				if IsECDHE(id) {
					v.errf(fmt.Sprintf("%s.ciphers[%d]", tp, i), "add sign_cert/sign_key/enc_cert/enc_key or remove the ECDHE suites", "ECDHE suites need client certificates")
					break
				}
			}
		}
	case upstreamproto.TLS13SM:
		if hasTLCPCerts {
			v.warnf(tp+".sign_cert", "use cert and key for TLS 1.3-SM", "sign_cert/enc_cert are ignored with protocol tls13sm")
		}
		if hasCert {
			m.ClientCert = v.pair(tp, "cert", "key", t.Cert, t.Key, t.KeyPassword)
			if m.ClientCert != nil && !isSM2(m.ClientCert) {
				v.errf(tp+".cert", "use an SM2 client certificate", "the client certificate's key is %s, not SM2", keyType(m.ClientCert))
				m.ClientCert = nil
			}
		}
		m.Suites = v.tls13Suites(t.Ciphers, tp+".ciphers")
	default: // tls, h2
		if hasTLCPCerts {
			v.warnf(tp+".sign_cert", "use cert and key for TLS", "sign_cert/enc_cert are ignored with protocol %s", u.Protocol)
		}
		if len(t.Ciphers) > 0 {
			v.warnf(tp+".ciphers", "remove it", "ciphers is ignored with protocol %s (crypto/tls chooses)", u.Protocol)
		}
		// crypto/tls speaks to these targets: it skips SM2 certificates
		// in the CA file, and cannot sign with an SM2 key, so either
		// would fail every handshake, long after gmproxy check passed.
		if _, n := X509Pool(m.RootCAs); len(m.RootCAs) > 0 && n == 0 {
			v.errf(tp+".ca", "name the RSA or ECDSA CA that issues the targets' certificates (for SM2 targets use protocol tls13sm or tlcp)", "the CA file holds no certificate crypto/tls can use (SM2 only): no target of protocol %s would verify", u.Protocol)
		}
		if hasCert {
			m.ClientCert = v.pair(tp, "cert", "key", t.Cert, t.Key, t.KeyPassword)
		}
		if kp := m.ClientCert; kp != nil {
			why := tlsKeyUnusable(kp.Leaf().PublicKey)
			if isSM2(kp) {
				why = "an SM2 key"
			}
			if why != "" {
				v.errf(tp+".cert", "use an RSA or ECDSA client certificate (for SM2 targets use protocol tls13sm)", "crypto/tls cannot sign with the client certificate's key (%s): every handshake with a target asking for it would fail", why)
				m.ClientCert = nil
			}
		}
	}
	if m.ClientCert != nil {
		v.validity(m.ClientCert, tp+".cert")
	}
	if t.ServerName != "" && !validHostName(t.ServerName) {
		v.errf(tp+".server_name", "write a host name", "invalid server_name %q", t.ServerName)
	}
}

// validateAdmin checks the admin listener and its control endpoint: POST
// /reload must not be reachable from the network without a token.
func (v *validator) validateAdmin() {
	a := &v.cfg.Admin
	if a.TokenFile != "" {
		b, err := readNamed(v.resolve(a.TokenFile), maxNamedFile)
		switch tok := bytes.TrimSpace(b); {
		case err != nil:
			v.errf("admin.token_file", "create it, e.g. head -c 32 /dev/urandom | base64 > FILE; "+relFix, "cannot read token file %q: %s", a.TokenFile, errText(err))
		case len(tok) < 16:
			v.errf("admin.token_file", "put at least 16 random characters in it, e.g. head -c 32 /dev/urandom | base64", "the token in %q is shorter than 16 characters", a.TokenFile)
		case !visibleASCII(tok):
			// Raw random bytes (urandom without base64) hold control
			// bytes that no client can send in a header: gmproxy
			// reload would fail only once this configuration runs.
			// RFC 6750 §2.1 (b64token) is stricter still.
			v.errf("admin.token_file", "write the token as text, e.g. head -c 32 /dev/urandom | base64 > FILE",
				"the token in %q holds white space, control characters or non-ASCII bytes, which an Authorization header cannot carry", a.TokenFile)
		default:
			a.Token = tok
			// Whoever reads it may reload the configuration.
			v.secretMode("admin.token_file", a.TokenFile, "admin token file")
		}
	}
	exposed := NetworkReachable
	reloadHere := a.ControlAddress == ""
	adminOK := a.Address != "off" && v.hostPort("admin.address", a.Address, true)
	if adminOK {
		v.notListenerAddress("admin.address", a.Address, DefaultAdminAddress)
	}
	if adminOK && exposed(a.Address) {
		if reloadHere && a.TokenFile == "" {
			v.warnf("admin.address", "set control_address: 127.0.0.1:9101 (or a unix: socket) for POST /reload, or a token_file, or bind address to 127.0.0.1", "POST /reload is reachable from the network without a token")
		}
		// Whatever guards /reload: the token does not guard pprof.
		if a.Pprof {
			v.warnf("admin.pprof", "bind address to 127.0.0.1 or turn pprof off", "the admin endpoint with pprof is reachable from the network")
		}
	}
	if a.Pprof && a.Address == "off" {
		v.warnf("admin.pprof", "", "pprof is ignored because the admin listener is off")
	}
	switch ca := a.ControlAddress; {
	case ca == "":
		if a.Address == "off" && a.TokenFile != "" {
			v.warnf("admin.token_file", "remove it", "token_file is ignored because the admin listener is off")
		}
	case strings.HasPrefix(ca, UnixPrefix):
		switch path := strings.TrimPrefix(ca, UnixPrefix); {
		case path == "":
			v.errf("admin.control_address", "write unix:/run/gmproxy/control.sock", "the Unix socket path is empty")
		case path[0] == '@' || path[0] == 0:
			// Go listens on Linux's abstract namespace for these.
			v.errf("admin.control_address", "write a path, e.g. unix:/run/gmproxy/control.sock",
				"%q is an abstract socket, which has no file permissions: every local user could reach POST /reload, where a unix: socket is its owner's only", path)
		case len(v.resolve(path)) > maxUnixPath:
			v.errf("admin.control_address", "use a shorter path, e.g. unix:/run/gmproxy/control.sock",
				"the socket path is %d bytes long (relative paths are resolved against the folder of the configuration file); a Unix socket's address holds at most %d", len(v.resolve(path)), maxUnixPath)
		}
	case v.hostPort("admin.control_address", ca, true):
		if exposed(ca) && a.TokenFile == "" {
			v.warnf("admin.control_address", "bind it to 127.0.0.1, use a unix: socket, or set token_file", "POST /reload is reachable from the network without a token")
		}
		if ca == a.Address || adminOK && addressesOverlap(ca, a.Address) {
			v.errf("admin.control_address", "use another port, e.g. 127.0.0.1:9101", "control_address is the admin address")
		} else {
			v.notListenerAddress("admin.control_address", ca, "127.0.0.1:9101")
		}
	}
}

// notListenerAddress refuses an admin or control address (p) that a
// listener's address takes: the second bind of gmproxy run would fail
// (EADDRINUSE) once check had said the configuration was good.
func (v *validator) notListenerAddress(p, addr, example string) {
	for i, l := range v.cfg.Listeners {
		if addressesOverlap(addr, l.Address) {
			v.errf(p, "use a port no listener has, e.g. "+example, "%s is also the address of listeners[%d] (%s): one of the two cannot listen", addr, i, l.Address)
			return
		}
	}
}

// addressesOverlap reports whether TCP listeners on host:port a and b
// cannot both listen: the same port (not 0, which picks a free one) on
// the same host, or on a wildcard host and any other.
func addressesOverlap(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp || ap == "0" {
		return false
	}
	return wildcardHost(ah) || wildcardHost(bh) || strings.EqualFold(ah, bh)
}

// NetworkReachable reports whether a listener on addr (host:port) may be
// reached from other hosts: its host is not a loopback address or
// localhost (an empty host listens on every address).
func NetworkReachable(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	return !isLoopbackHost(host)
}

// maxUnixPath is the longest path a Unix socket may listen on: Linux's
// sun_path holds 108 bytes, the path's NUL included (bind fails past it).
const maxUnixPath = 107

// visibleASCII reports whether b is printable ASCII without spaces.
func visibleASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// isLoopbackHost reports whether host is a loopback address or the name
// localhost (RFC 6761 §6.3); any other host name may resolve to a network
// address.
func isLoopbackHost(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// basicAuth checks a route's basic_auth and loads its users file.
func (v *validator) basicAuth(a *BasicAuth, p string) {
	if err := proxy.CheckBasicAuthRealm(a.Realm); err != nil {
		v.errf(p+".realm", "write a name without quotes, backslashes or control characters", "%v", err)
	}
	if a.FailuresPerMinute < 1 || a.FailuresPerMinute > 6000 {
		v.errf(p+".failures_per_minute", "write a number from 1 to 6000", "failures_per_minute %d out of range", a.FailuresPerMinute)
	}
	fp := p + ".users_file"
	if a.UsersFile == "" {
		v.errf(fp, "write the htpasswd file, e.g. users_file: /etc/gmproxy/admin.htpasswd (htpasswd -B -c FILE USER)", "basic_auth without a users_file")
		return
	}
	v.secretMode(fp, a.UsersFile, "users file")
	full := v.resolve(a.UsersFile)
	fi, err := os.Stat(full)
	switch {
	case err != nil:
		v.errf(fp, relFix, "users file %q: %v", a.UsersFile, errors.Unwrap(err))
		return
	case !fi.Mode().IsRegular():
		v.errf(fp, "name a file", "%s is not a file", a.UsersFile)
		return
	case fi.Size() > MaxUsersFile:
		v.errf(fp, "keep it under 1MiB", "%s is %d bytes, over 1MiB", a.UsersFile, fi.Size())
		return
	}
	data, err := readNamed(full, MaxUsersFile)
	if err != nil {
		v.errf(fp, relFix, "%v", err)
		return
	}
	users, bad := map[string][]byte{}, false
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, " \t\r") // a hash ends in none of them
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		where := fmt.Sprintf("%s line %d", a.UsersFile, i+1)
		switch {
		case !ok:
			v.errf(fp, "write user:hash lines (htpasswd -B FILE USER)", "%s: not user:hash", where)
			bad = true
		case users[user] != nil:
			v.errf(fp, "keep one line per user", "%s: user %q again", where, user)
			bad = true
		default:
			if err := proxy.CheckBasicAuthUser(user, []byte(hash)); err != nil {
				v.errf(fp, "regenerate the line with htpasswd -B FILE USER", "%s: %v", where, err)
				bad = true
				continue
			}
			users[user] = []byte(hash)
		}
	}
	if len(users) == 0 && !bad {
		v.errf(fp, "add a user with htpasswd -B FILE USER", "%s has no users", a.UsersFile)
	}
	a.Users = users
}
