package proxy

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/asciifold"
	"github.com/gmproxy/gmproxy/internal/authority"
)

// Header names set by the proxy. Incoming copies are always removed so that
// clients cannot forge them.
const (
	HeaderForwardedFor   = "X-Forwarded-For"
	HeaderForwardedProto = "X-Forwarded-Proto"
	HeaderForwardedHost  = "X-Forwarded-Host"
	HeaderRealIP         = "X-Real-Ip" // canonical form of X-Real-IP
	HeaderSSLProtocol    = "X-Ssl-Protocol"
	HeaderSSLCipher      = "X-Ssl-Cipher"
	HeaderSSLReused      = "X-Ssl-Session-Reused" // "r" when resumed, "." otherwise (nginx style)
	HeaderClientVerify   = "X-Ssl-Client-Verify"  // SUCCESS or NONE
	HeaderClientSDN      = "X-Ssl-Client-S-Dn"
	HeaderClientIDN      = "X-Ssl-Client-I-Dn"
	HeaderClientSerial   = "X-Ssl-Client-Serial" // upper-case hex
	HeaderClientCert     = "X-Ssl-Client-Cert"   // URL-escaped PEM
)

// site is one virtual host: its routes and header policy.
type site struct {
	p      *Proxy
	name   string
	names  []string
	routes []*route
	stream *streamSite
	// errorPages are SiteConfig.ErrorPages with their types (read only).
	errorPages map[int]errorPage
	// clientAuth: the site's handshakes request or require client
	// certificates.
	clientAuth bool
	// clientAuthPolicy: SiteConfig.ClientAuthPolicy.
	clientAuthPolicy string
	// families: SiteConfig.Families; handshakes: SiteConfig.Handshakes.
	families   []string
	handshakes map[string]HandshakeParams
	// reqIDHeader: SiteConfig.RequestIDHeader in canonical form ("":
	// no request IDs).
	reqIDHeader string
}

type hostMode uint8

const (
	hostPass hostMode = iota
	hostUpstream
	hostFixed
)

// route is a compiled RouteConfig.
type route struct {
	name string
	// readTimeout, headerTimeout, bodyTimeout and sendTimeout:
	// RouteConfig's (0: the upstream's and the listener's; negative: none).
	readTimeout, headerTimeout, bodyTimeout, sendTimeout time.Duration
	hosts                                                []string
	prefix                                               string
	exact                                                string
	regex                                                *regexp.Regexp // PathRegex; nil: none
	// foldCase: prefix, exact, strip and regex match regardless of
	// letter case (SiteConfig.CaseInsensitivePaths).
	foldCase bool
	hdrs     []headerMatch // canonical names; all must match
	// clientNets: the request's client (realClient) must be in one
	// (RouteConfig.ClientIP); p answers realClient.
	clientNets []netip.Prefix
	p          *Proxy
	rate       *rateLimiter // nil: no rate_limit
	auth       *basicAuth   // nil: no basic_auth
	// tlsInfo, certHdr, certPEM: the TLS and client-certificate headers
	// this route's requests get (its own or its site's settings).
	tlsInfo, certHdr, certPEM bool
	// reqIDHeader: the site's (site.reqIDHeader): a target's copy of
	// it is not passed on.
	reqIDHeader string
	up          *Upstream
	respond     *RespondConfig
	respondCT   []string // Content-Type of respond, shared (len == cap == 1)
	respondB    []byte   // body of respond, read-only
	respondCL   []string // Content-Length of respond, for HEAD; shared
	respondMsg  string   // the grpc-message of respond to a gRPC call (grpcReply)
	redirTo     string
	redirCode   int
	// redirOnSite: redirTo is a path on this site that begins with the
	// request's own {uri}, {path} or {query} (redirectOnSite), which a
	// request must not turn into a URL of another ("//evil.example/x").
	redirOnSite bool
	strip       string
	host        hostMode
	hostValue   string
	reqOps      headerOps
	resOps      headerOps
	compress    *compressor // nil: responses go as they come
	files       *fileServer // a files route's
	maxBody     int64
	retryIdem   bool
	// retry is the route's own retry policy (RouteConfig.Retries), nil:
	// the upstream's.
	retry *RetryConfig
	flush time.Duration
	// allowTrailers passes request trailers (filtered, trailerAllowed).
	allowTrailers bool
	// upgrades are the protocols tunnelled through Upgrade (allowedUpgrade).
	upgrades []string
}

type headerOps struct {
	remove   []string
	set, add []headerKV
}

// headerKV is a canonical key and its value as a one-element slice with
// len == cap, shared by every request: header maps hold it but nobody
// writes through it (appending copies).
type headerKV struct {
	key string
	val []string
}

// compileHeaderOps compiles o, refusing a value that is no field value
// (RFC 9110 §5.5: a line break or another control byte but HTAB): sent,
// http.Transport would refuse every request (502, its target charged
// with the failure) and an HTTP/1.1 writer alter the value. It refuses
// too an edit of a field it cannot edit (CheckHeaderEdit).
func compileHeaderOps(o HeaderOps, request bool) (headerOps, error) {
	var h headerOps
	for _, m := range []map[string]string{o.Set, o.Add} {
		for k := range m {
			if err := CheckHeaderEdit(k, request); err != nil {
				return headerOps{}, err
			}
		}
	}
	for _, k := range o.Remove {
		if err := CheckHeaderEdit(k, request); err != nil {
			return headerOps{}, err
		}
	}
	for _, k := range o.Remove {
		h.remove = append(h.remove, http.CanonicalHeaderKey(k))
	}
	for _, m := range []map[string]string{o.Set, o.Add} {
		for k, v := range m {
			if !httpguts.ValidHeaderFieldValue(v) {
				return headerOps{}, fmt.Errorf("header %s: value %q has a control character", k, v)
			}
		}
	}
	for k, v := range o.Set {
		h.set = append(h.set, headerKV{http.CanonicalHeaderKey(k), []string{v}})
	}
	for k, v := range o.Add {
		h.add = append(h.add, headerKV{http.CanonicalHeaderKey(k), []string{v}})
	}
	return h, nil
}

// CheckHeaderEdit's errors: request_headers edit Host, which goes out as
// the route's host_header says, never from the header; an edit names a
// field of one hop's connection.
var (
	ErrHostHeaderEdit = errors.New("the Host sent to the target is host_header's, not an edited header field")
	ErrHopHeaderEdit  = errors.New("the fields of each hop's connection (Connection, Upgrade, Keep-Alive, Proxy-Connection, TE) are the proxy's")
)

// CheckHeaderEdit reports what is wrong with a header edit (request_headers
// when request, else response_headers) of the field name: a field that
// frames the message (Content-Length, Transfer-Encoding, Trailer), which
// the proxy writes itself (edited, a request's was ignored and a
// response's declared a length or trailers its body did not have); one of
// a hop's connection (ErrHopHeaderEdit: the edits come after the proxy's
// own, so nginx's keep-alive idiom, Connection "", took the Upgrade out of
// every WebSocket handshake, and a response's edit out of the 101); or a
// request's Host (ErrHostHeaderEdit: the edit was ignored, the target got
// the client's Host).
func CheckHeaderEdit(name string, request bool) error {
	switch k := http.CanonicalHeaderKey(name); {
	case k == "Content-Length" || k == "Transfer-Encoding" || k == "Trailer":
		return fmt.Errorf("header %s frames the message, which the proxy does itself", name)
	case k == "Connection" || k == "Upgrade" || k == "Keep-Alive" || k == "Proxy-Connection" || k == "Te":
		return ErrHopHeaderEdit
	case k == "Host" && request:
		return ErrHostHeaderEdit
	}
	return nil
}

func (o *headerOps) apply(h http.Header) {
	for _, k := range o.remove {
		delete(h, k)
	}
	for _, kv := range o.set {
		h[kv.key] = kv.val
	}
	for _, kv := range o.add {
		if old := h[kv.key]; len(old) > 0 {
			// A new slice: old may be the client's (outgoingHeader).
			h[kv.key] = append(slices.Clip(old), kv.val[0])
		} else {
			h[kv.key] = kv.val
		}
	}
}

// names reports whether the edits name the header k, in any case and
// with '_' for '-' (sameFieldName).
func (o *headerOps) names(k string) bool {
	if o.replaces(k) {
		return true
	}
	for _, kv := range o.add {
		if sameFieldName(k, kv.key) {
			return true
		}
	}
	return false
}

// replaces reports whether the edits remove or set the header k, read as
// a backend that ignores case and takes '_' for '-' reads it
// (sameFieldName): the client's value of such a field must not reach the
// backend in any spelling.
func (o *headerOps) replaces(k string) bool {
	for _, r := range o.remove {
		if sameFieldName(k, r) {
			return true
		}
	}
	for _, kv := range o.set {
		if sameFieldName(k, kv.key) {
			return true
		}
	}
	return false
}

func (o *headerOps) empty() bool { return len(o.remove)+len(o.set)+len(o.add) == 0 }

func newSite(p *Proxy, sc *SiteConfig) (*site, error) {
	s := &site{p: p, name: sc.Name, clientAuth: sc.ClientAuth, clientAuthPolicy: sc.ClientAuthPolicy,
		families: slices.Clone(sc.Families), handshakes: maps.Clone(sc.Handshakes)}
	for code, page := range sc.ErrorPages {
		if s.errorPages == nil {
			s.errorPages = make(map[int]errorPage, len(sc.ErrorPages))
		}
		s.errorPages[code] = newErrorPage(page)
	}
	if sc.RequestIDHeader != "" {
		if err := CheckRequestIDHeader(sc.RequestIDHeader); err != nil {
			return nil, fmt.Errorf("site %q: %w", sc.Name, err)
		}
		s.reqIDHeader = http.CanonicalHeaderKey(sc.RequestIDHeader)
	}
	for _, n := range sc.ServerNames {
		s.names = append(s.names, frontdoor.NormalizeName(n))
	}
	if s.name == "" && len(s.names) > 0 {
		s.name = s.names[0]
	}
	if s.name == "" {
		return nil, fmt.Errorf("site without name or server names")
	}
	if sc.Stream != nil {
		st, err := newStreamSite(p, s.name, sc.Stream)
		if err != nil {
			return nil, fmt.Errorf("site %q: %w", s.name, err)
		}
		s.stream = st
	}
	seen := map[string]int{} // routes of each key so far
	for i := range sc.Routes {
		rc := &sc.Routes[i]
		key := rc.Key
		if key == "" {
			key = RouteLabel(rc)
		}
		seen[key]++
		rt, err := compileRoute(p, rc, s.name+"\x00"+key+"\x00"+strconv.Itoa(seen[key]))
		if err != nil {
			return nil, fmt.Errorf("site %q: %w", s.name, err)
		}
		rt.foldCase = sc.CaseInsensitivePaths
		if rt.regex, err = CompilePathRegex(rc.PathRegex, rt.foldCase); err != nil {
			return nil, fmt.Errorf("site %q: route %s: %w", s.name, rt.name, err)
		}
		rt.tlsInfo = sc.TLSInfoHeaders || rc.TLSInfoHeaders
		rt.certHdr = sc.ClientCertHeaders || rc.ClientCertHeaders
		rt.certPEM = sc.ClientCertPEM || rc.ClientCertPEM
		rt.reqIDHeader = s.reqIDHeader
		s.routes = append(s.routes, rt)
	}
	return s, nil
}

// RouteLabel names a route in logs and metrics: its name, else the path it
// matches (path, else path_prefix, else "~" and path_regex, else "/").
func RouteLabel(rc *RouteConfig) string {
	switch {
	case rc.Name != "":
		return rc.Name
	case rc.Path != "":
		return rc.Path
	case rc.PathPrefix != "":
		return rc.PathPrefix
	case rc.PathRegex != "":
		return "~" + rc.PathRegex
	}
	return "/"
}

// compileRoute compiles rc; scope names it among the routes of every
// generation (its site, key (RouteConfig.Key, else its label) and rank
// among the routes of that key):
// where its rate_limit counts.
func compileRoute(p *Proxy, rc *RouteConfig, scope string) (*route, error) {
	rt := &route{
		name:      rc.Name,
		prefix:    rc.PathPrefix,
		exact:     rc.Path,
		strip:     rc.StripPrefix,
		maxBody:   rc.MaxBodyBytes,
		retryIdem: rc.RetryIdempotent,
		retry:     rc.Retries,
		flush:     rc.FlushInterval,

		allowTrailers: rc.AllowTrailers,
		upgrades:      rc.Upgrades,

		readTimeout:   rc.ReadTimeout,
		headerTimeout: rc.ResponseHeaderTimeout,
		bodyTimeout:   rc.BodyTimeout,
		sendTimeout:   rc.SendTimeout,
	}
	if rt.upgrades == nil {
		rt.upgrades = DefaultUpgrades
	}
	if rt.name == "" {
		rt.name = RouteLabel(rc)
	}
	var err error
	if rt.reqOps, err = compileHeaderOps(rc.RequestHeaders, true); err != nil {
		return nil, fmt.Errorf("route %s: request_headers: %w", rt.name, err)
	}
	if rt.resOps, err = compileHeaderOps(rc.ResponseHeaders, false); err != nil {
		return nil, fmt.Errorf("route %s: response_headers: %w", rt.name, err)
	}
	if rt.compress, err = newCompressor(rc.Compress); err != nil {
		return nil, fmt.Errorf("route %s: %w", rt.name, err)
	}
	if rt.compress != nil {
		for _, m := range []map[string]string{rc.ResponseHeaders.Set, rc.ResponseHeaders.Add} {
			for k := range m {
				if err := CheckCompressHeaderEdit(k); err != nil {
					return nil, fmt.Errorf("route %s: %w", rt.name, err)
				}
			}
		}
	}
	if rt.auth, err = p.basicAuth(scope, rc.BasicAuth); err != nil {
		return nil, fmt.Errorf("route %s: %w", rt.name, err)
	}
	if rt.prefix != "" && rt.exact != "" || rc.PathRegex != "" && (rt.prefix != "" || rt.exact != "") {
		return nil, fmt.Errorf("route %s: path_prefix, path and path_regex are exclusive", rt.name)
	}
	for _, h := range rc.Hosts {
		rt.hosts = append(rt.hosts, frontdoor.NormalizeName(h))
	}
	for _, c := range rc.ClientIP {
		pfx, err := parsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("route %s: client_ip %q: %w", rt.name, c, err)
		}
		rt.clientNets = append(rt.clientNets, pfx)
	}
	if len(rt.clientNets) > 0 {
		rt.p = p
	}
	if rl := rc.RateLimit; rl != nil {
		if rl.Interval <= 0 || rl.Burst < 0 {
			return nil, fmt.Errorf("route %s: rate_limit: interval %v, burst %d: want a positive interval and a burst of at least 0", rt.name, rl.Interval, rl.Burst)
		}
		if rt.rate, err = p.rateLimiter(scope, *rl); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.name, err)
		}
	}
	for _, m := range rc.Headers {
		if err := CheckHeaderMatch(m.Name); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.name, err)
		}
		if err := CheckHeaderMatchValue(m.Name, m.Value); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.name, err)
		}
		name := http.CanonicalHeaderKey(m.Name)
		rt.hdrs = append(rt.hdrs, headerMatch{HeaderMatch: HeaderMatch{Name: name, Value: m.Value}, tls: slices.Contains(tlsHeaders, name)})
	}
	switch rc.HostHeader {
	case "":
	case "{upstream}":
		rt.host = hostUpstream
	default:
		if !authority.Valid(rc.HostHeader) {
			// Sent as every request's Host: one that names no host
			// goes out empty or as a list.
			return nil, fmt.Errorf("route %s: host_header %q is not a host[:port]", rt.name, rc.HostHeader)
		}
		rt.host, rt.hostValue = hostFixed, rc.HostHeader
	}
	actions := 0
	if rc.Upstream != "" {
		actions++
		rt.up = p.upstreams[rc.Upstream]
		if rt.up == nil {
			return nil, fmt.Errorf("route %s: unknown upstream %q", rt.name, rc.Upstream)
		}
	}
	if rc.Respond != nil {
		actions++
		r := *rc.Respond
		if r.Status == 0 {
			r.Status = http.StatusOK
		}
		if r.Status < 200 || r.Status > 599 {
			// A final status (RFC 9110 §15): a 1xx is informational, so
			// the client would get it and then an implicit 200, or after
			// a 101 take the connection as switched to no protocol.
			return nil, fmt.Errorf("route %s: bad respond status %d: want 200 to 599", rt.name, r.Status)
		}
		if r.ContentType == "" {
			r.ContentType = "text/plain; charset=utf-8"
		}
		if !httpguts.ValidHeaderFieldValue(r.ContentType) {
			// As compileHeaderOps: an HTTP/1.1 writer would alter it,
			// HTTP/2's drop it.
			return nil, fmt.Errorf("route %s: respond content type %q has a control character", rt.name, r.ContentType)
		}
		rt.respond = &r
		rt.respondCT, rt.respondB = []string{r.ContentType}, []byte(r.Body)
		rt.respondCL = []string{strconv.Itoa(len(r.Body))}
		rt.respondMsg = strings.TrimSpace(r.Body)
		if len(rt.respondMsg) > maxGRPCMessage || strings.ContainsAny(rt.respondMsg, "\r\n") {
			rt.respondMsg = http.StatusText(r.Status) // a page, not a message
		}
	}
	if rc.Redirect != nil {
		actions++
		rt.redirTo = rc.Redirect.To
		rt.redirOnSite = redirectOnSite(rt.redirTo)
		rt.redirCode = intOr(rc.Redirect.Status, http.StatusFound)
		switch rt.redirCode {
		case 301, 302, 303, 307, 308:
		default:
			return nil, fmt.Errorf("route %s: bad redirect status %d", rt.name, rt.redirCode)
		}
		if rt.redirTo == "" {
			return nil, fmt.Errorf("route %s: redirect without target", rt.name)
		}
		if err := CheckRedirectTo(rt.redirTo); err != nil {
			return nil, fmt.Errorf("route %s: redirect to %q: %w", rt.name, rt.redirTo, err)
		}
	}
	if rc.Files != nil {
		actions++
		if rt.files, err = newFileServer(rc.Files); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.name, err)
		}
	}
	if actions != 1 {
		return nil, fmt.Errorf("route %s: needs exactly one of upstream, respond, redirect, files", rt.name)
	}
	return rt, nil
}

// RedirectPlaceholders are the placeholders of a redirect's to.
var RedirectPlaceholders = []string{"{host}", "{path}", "{query}", "{uri}"}

// nginxRedirectVars are the nginx variables "return 301" is written with
// and the placeholders that are them ("": none, write the value itself).
var nginxRedirectVars = map[string]string{
	"host": "{host}", "http_host": "", "server_name": "", "scheme": "",
	"request_uri": "{uri}", "uri": "{path}", "document_uri": "{path}",
	"args": "{query}", "query_string": "{query}", "is_args": "",
}

// CheckRedirectTo reports what is wrong with a redirect's to: a
// placeholder it does not know ("{scheme}", "{request_uri}") or an nginx
// variable ("$host$request_uri"), which would go out as written, in
// every Location, to a URL no one has; a literal '{' is no URL's either
// (RFC 3986 §2: it is written %7B).
func CheckRedirectTo(to string) error {
	// A URL has no space or control byte (RFC 3986 §2): a line break
	// (a YAML "|" block ends with one) became a space in an HTTP/1.1
	// Location and dropped it from an HTTP/2 answer, a redirect to
	// nowhere.
	if i := strings.IndexFunc(to, func(c rune) bool { return c <= ' ' || c == 0x7f }); i >= 0 {
		return fmt.Errorf("byte %q at offset %d: a URL has no spaces or control characters (a | block ends with a line break: use a quoted string; a space is written %%20)", to[i], i)
	}
	for rest := to; ; {
		i := strings.IndexAny(rest, "{$")
		if i < 0 {
			return nil
		}
		rest = rest[i:]
		if rest[0] == '$' {
			n := 1
			for n < len(rest) && (rest[n] == '_' || rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z' || rest[n] >= '0' && rest[n] <= '9') {
				n++
			}
			if ph, ok := nginxRedirectVars[rest[1:n]]; ok {
				if ph == "" {
					return fmt.Errorf("nginx's variable %s is not replaced here: write its value, or use %s", rest[:n], strings.Join(RedirectPlaceholders, ", "))
				}
				return fmt.Errorf("nginx's variable %s is not replaced here: write %s", rest[:n], ph)
			}
			rest = rest[n:]
			continue
		}
		j := strings.IndexByte(rest, '}')
		if j < 0 || !slices.Contains(RedirectPlaceholders, rest[:j+1]) {
			ph := rest
			if j >= 0 {
				ph = rest[:j+1]
			}
			return fmt.Errorf("unknown placeholder %q: the placeholders are %s (a '{' in the URL is written %%7B)", ph, strings.Join(RedirectPlaceholders, ", "))
		}
		rest = rest[j+1:]
	}
}

// redirectOnSite reports whether a redirect's to is a path on this site
// made of the request's own: it begins with {uri}, {path} or {query},
// after slashes ("/{path}", nginx's "return 301 /$uri") or backslashes,
// which browsers read as slashes. The request chooses the start of such
// a Location, which must not become a reference to another host
// ("//evil.example/x", RFC 3986 §4.2). A to that names its host
// ("//{host}{uri}") is not one.
func redirectOnSite(to string) bool {
	rest := strings.TrimLeft(to, `/\`)
	return strings.HasPrefix(rest, "{uri}") || strings.HasPrefix(rest, "{path}") || strings.HasPrefix(rest, "{query}")
}

// hostOnly strips the port from a Host value.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	// A fully qualified name's final dot names the same host
	// ("localhost." is localhost), as for SNI (frontdoor.NormalizeName):
	// kept, it matched no site and got past misdirectedHost.
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
}

// matchName matches a host against an exact or "*.suffix" pattern
// (patterns are lower-case), ignoring ASCII case only, as frontdoor picks
// a handshake's site by SNI.
func matchName(pattern, host string) bool {
	if strings.HasPrefix(pattern, "*.") {
		suf := pattern[1:]
		if len(host) <= len(suf) || !asciifold.Equal(host[len(host)-len(suf):], suf) {
			return false
		}
		return !strings.Contains(host[:len(host)-len(suf)], ".")
	}
	return asciifold.Equal(pattern, host)
}

// pathPrefix reports whether p starts with prefix, as rt matches paths,
// and the length in p of what matched.
func (rt *route) pathPrefix(p, prefix string) (int, bool) {
	if rt.foldCase {
		return foldPrefix(p, prefix)
	}
	return len(prefix), strings.HasPrefix(p, prefix)
}

// regexMatch reports whether rt's path_regex matches p. On a site with
// case-insensitive paths it matches p upper-cased too, as foldPrefix
// compares: (?i) folds by Unicode's case orbits, which miss a letter whose
// upper case is another's letter ("ı" is 'I' upper-cased, so /admın/ is
// /ADMIN/ to IIS); only a non-ASCII path can hold one.
func (rt *route) regexMatch(p string) bool {
	if rt.regex.MatchString(p) {
		return true
	}
	if !rt.foldCase {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] >= utf8.RuneSelf {
			return rt.regex.MatchString(strings.ToUpper(p))
		}
	}
	return false
}

// match reports whether rt takes r, for host and the path p.
func (rt *route) match(r *http.Request, host, p string) bool {
	if len(rt.hosts) > 0 {
		ok := false
		for _, h := range rt.hosts {
			if matchName(h, host) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if rt.exact != "" {
		if n, ok := rt.pathPrefix(p, rt.exact); !ok || n != len(p) {
			return false
		}
	}
	if rt.prefix != "" {
		if _, ok := rt.pathPrefix(p, rt.prefix); !ok {
			return false
		}
	}
	if rt.regex != nil && !rt.regexMatch(p) {
		return false
	}
	for _, m := range rt.hdrs {
		var v []string
		ok := false
		if m.tls {
			// The proxy's own value: the client's copy is never
			// the one a backend sees (alwaysStripped).
			v = tlsHeaderValue(m.Name, connInfoFrom(r.Context()))
			ok = v != nil
		} else {
			v, ok = r.Header[m.Name]
		}
		if !ok || (m.Value != "" && (len(v) == 0 || v[0] != m.Value)) {
			return false
		}
	}
	if len(rt.clientNets) > 0 {
		a, err := netip.ParseAddr(rt.p.realClient(r))
		if err != nil {
			return false
		}
		if !clientIn(rt.clientNets, a) {
			return false
		}
	}
	return true
}

func (s *site) match(r *http.Request, host, p string) *route {
	for _, rt := range s.routes {
		if rt.match(r, host, p) {
			return rt
		}
	}
	return nil
}

// reqHost is the host used for routing: the Host header, else the SNI as
// frontdoor read it choosing the site (the TLCP and TLS 1.3-SM stacks
// report a final dot the client sent).
func reqHost(r *http.Request, ci *connInfo) string {
	h := hostOnly(r.Host)
	if h == "" && ci != nil {
		h = frontdoor.NormalizeName(ci.state.SNI)
	}
	return h
}

// h2HostAgrees reports whether every Host field of r, an HTTP/2
// request, names the host of its :authority (r.Host; the first Host
// when there was no :authority), as the site choice reads a host: ASCII
// case, port and final dot aside. An empty field names none.
func h2HostAgrees(r *http.Request) bool {
	for _, v := range r.Header["Host"] {
		if v != "" && !asciifold.Equal(hostOnly(v), hostOnly(r.Host)) {
			return false
		}
	}
	return true
}

// h2LargeField is the size of a request field past which its HTTP/2
// connection is closed once the request is answered (respWriter's
// closeConn). x/net/http2's HPACK decoder gathers a field that spans
// frames in a buffer it keeps for the connection's life, as large as the
// field and a frame: without the close a client could have each of its
// connections hold up to max_header_bytes (1 MiB by default, 1 GiB over
// the default max_connections_per_client) while it idles between small
// requests, where HTTP/1.1 frees a head once read. A field within one
// frame costs at most two. The heads the handler never sees (refused by
// x/net/http2 itself) and trailer sections the HTTP/2 guard closes on by
// their encoded size (h2LargeBlock).
const h2LargeField = H2MaxReadFrameSize

// largeH2Field reports whether r, an HTTP/2 request, has a field over
// h2LargeField: a pseudo-header (:path, :authority) or a header field
// (each cookie crumb apart, RFC 9113 §8.2.3: x/net/http2 joins them).
func largeH2Field(r *http.Request) bool {
	if len(r.RequestURI) > h2LargeField || len(r.Host) > h2LargeField {
		return true
	}
	for name, vv := range r.Header {
		for _, v := range vv {
			if len(name)+len(v) <= h2LargeField {
				continue
			}
			if name != "Cookie" {
				return true
			}
			for c := range strings.SplitSeq(v, "; ") {
				if len(name)+len(c) > h2LargeField {
					return true
				}
			}
		}
	}
	return false
}

// ServeHTTP handles one request of the site.
func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := s.p
	rs := getReqState(w)
	rs.start = time.Now()
	rs.site = s
	p.obs.RequestStarted(s.name)
	defer s.finish(rs, r)

	ci := connInfoFrom(r.Context())
	rs.ci = ci
	p.initSend(rs, r)
	rs.w.closeConn = r.ProtoMajor == 2 && largeH2Field(r)
	if s.reqIDHeader != "" {
		rs.reqID = s.requestIDOf(r)
		rs.w.Header()[s.reqIDHeader] = []string{rs.reqID}
	}
	if ci != nil && ci.client.IsValid() {
		rs.client = p.requestClient(r, ci)
		if l := p.limitsOf(ci); l.MaxRequestsPerClient > 0 {
			client := rs.client
			if !l.ClientRequests.acquire(client, l.MaxRequestsPerClient) {
				s.errorResponse(rs, r, http.StatusTooManyRequests, "too many requests in progress from this address",
					"client "+client.String()+" has max_requests_per_client ("+strconv.Itoa(l.MaxRequestsPerClient)+") requests in progress")
				return
			}
			defer l.ClientRequests.release(client)
		}
	}
	host := reqHost(r, ci)
	if r.Host == "" {
		// HTTP/1.0 without Host, an empty Host, h2 without :authority:
		// the backend gets the host the request was routed by (SNI, else
		// the site's first name; RFC 9112 §3.3), never its own address.
		if host == "" {
			host = s.firstName()
		}
		r.Host = host
	}
	if r.Method == http.MethodOptions && r.URL.Path == "" && r.URL.RawQuery == "" && !r.URL.ForceQuery {
		// "OPTIONS http://h.test" asks about the server, not its "/":
		// the last proxy forwards it as OPTIONS * (RFC 9112 §3.2.4), and
		// it is routed as OPTIONS * is.
		u := *r.URL
		u.Path, u.RawPath = "*", ""
		r.URL = &u
	} else if np, changed := normalPath(r.URL.Path); changed {
		u := *r.URL
		u.Path, u.RawPath = np, ""
		r.URL = &u
	}
	rt := s.match(r, host, r.URL.Path)
	rs.route = rt
	if rt != nil && rt.sendTimeout != 0 {
		s.p.routeSend(rs, r, rt.sendTimeout)
	}
	switch {
	case strings.IndexByte(r.URL.Path, ';') >= 0 && s.match(r, host, paramlessPath(r.URL.Path)) != rt:
		// Servlet containers and Spring drop ";params" from each segment
		// ("/admin;x/", "/x/..;/admin/" are /admin/ to them): a path whose
		// route changes without them would pass a route that answers or
		// denies their path itself.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "path parameters (;) route "+strconv.Quote(r.URL.Path)+" elsewhere")
	case strings.IndexByte(r.URL.Path, '\\') >= 0 && s.routesElsewhere(r, host, backslashPath(r.URL.Path), rt):
		// IIS, ASP.NET and other Windows backends read '\' (as is or
		// %5C) as '/' ("/x/..\admin/" and "/admin\" are /admin/ to
		// them), servlet containers then drop ";params" too.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "backslashes route "+strconv.Quote(r.URL.Path)+" elsewhere")
	case rt != nil && rt.stripLeavesDotSegment(r.URL.Path):
		// "/api../admin/" under strip_prefix /api would reach the target
		// as "/../admin/", and a files route's root as admin/: past a
		// route that denies /api/admin/.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "strip_prefix "+strconv.Quote(rt.strip)+" leaves a dot segment of "+strconv.Quote(r.URL.Path))
	case r.Method == http.MethodConnect && !isExtendedConnect(r):
		// RFC 9110 §9.3.6: CONNECT asks for a tunnel to the authority, which
		// a reverse proxy does not open. Forwarded, its content would reach
		// the target unframed (net/http writes a CONNECT body as is), where
		// a target that refused it would read it as the next request.
		s.errorResponse(rs, r, http.StatusNotImplemented, "CONNECT is not supported", "CONNECT to "+r.Host+": a reverse proxy opens no tunnels")
	case r.Method == http.MethodTrace:
		// A target that honours TRACE (RFC 9110 §9.3.8; Apache's default)
		// echoes the request as it got it: with what the proxy added, a
		// secret request_headers set for the backend, the client's
		// certificate, the internal host_header. nginx refuses it too
		// (405, without the Allow field RFC 9110 §15.5.6 requires of a
		// 405). Refused for every resource of every site, it is 501 (RFC
		// 9110 §15.6.2: a method the server "is not capable of
		// supporting ... for any resource"), as CONNECT is: a 405 would
		// have to list the target resource's methods in Allow, which the
		// proxy does not know (a fixed list would tell clients a
		// read-only backend takes PUT), and the status is all a client
		// or scanner reads besides the missing echo.
		s.errorResponse(rs, r, http.StatusNotImplemented, "TRACE is not supported", "TRACE would echo the forwarded request's fields to the client")
	case !httpguts.ValidHeaderFieldName(r.Method):
		// x/net/http2 takes any :method; one with a space or a '/' would
		// write another request line to the target than the one routed.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "method "+strconv.Quote(r.Method)+" is not a token (RFC 9110 §9.1)")
	case !targetOK(r):
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "request target "+strconv.Quote(r.RequestURI)+" is not an absolute path (RFC 9112 §3.2) without NUL")
	case r.ProtoMajor == 2 && !lengthOK(r.Header["Content-Length"]):
		// x/net/http2 takes a content-length that is no number for 0: the
		// request would reach the target as one without content, the
		// client's body dropped (RFC 9113 §8.1.1: malformed). HTTP/1.1's
		// reader refuses such a value itself.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "invalid content-length "+strconv.Quote(strings.Join(r.Header["Content-Length"], ", ")))
	case r.Host == "" && rt != nil && rt.up != nil:
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "the request names no host and the site has no name to give the target")
	case r.Host != "" && !authority.Valid(r.Host):
		// A Host, absolute-form authority or h2 :authority that names no
		// host as a site could (RFC 9110 §7.2) is refused: it would
		// reach the target in Host and X-Forwarded-Host, which backends
		// route and build links from, past the site checks (misdirected
		// requests, hosts of routes) that read it another way.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "invalid host "+strconv.Quote(r.Host))
	case r.ProtoMajor == 2 && !h2HostAgrees(r):
		// RFC 9113 §8.3.1: a client must not send a Host field that
		// names another host than :authority, and a server should take
		// such a request for malformed (nginx answers 400). The request
		// is routed by :authority, which the target gets as Host; the
		// field, left among the request's, says another host.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "Host "+strconv.Quote(strings.Join(r.Header["Host"], ", "))+" names another host than :authority "+strconv.Quote(r.Host))
	case r.Header[":protocol"] != nil && r.Method != http.MethodConnect:
		// RFC 8441 §4: :protocol only on CONNECT; such a request is
		// malformed. (Copied upstream, the field name would fail every
		// attempt as if the targets were down.)
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", ":protocol pseudo-header on a "+r.Method+" request")
	case rt == nil:
		s.errorResponse(rs, r, http.StatusNotFound, "no route matches", "no route matches host "+host+" path "+r.URL.Path)
	case rt.rate != nil && s.rateLimited(rs, r, rt):
		// answered 429
	case rt.auth != nil && !s.authorized(rs, r, rt):
		// answered 401, or 429 for a client over its failures
	case rt.respond != nil && rt.respond.Status < 300 && isExtendedConnect(r):
		// A 2xx to a CONNECT opens the tunnel (RFC 9110 §9.3.6, RFC
		// 8441 §5): the route's answer would be taken for a WebSocket
		// that is not there, its body for the first bytes. Refused as a
		// protocol the route does not tunnel is (forwardExtendedConnect).
		s.errorResponse(rs, r, http.StatusNotImplemented, "protocol not supported",
			"extended CONNECT to protocol "+r.Header.Get(":protocol")+" on a route that answers "+strconv.Itoa(rt.respond.Status)+" itself and opens no tunnel")
	case rt.respond != nil && rt.respond.Status >= 400 && grpcReplyType(r) != "":
		// A route that refuses (403 to a path, 404, 429) refuses a gRPC
		// call with a gRPC status (errorResponse), its body the message.
		rt.resOps.apply(rs.w.Header())
		rs.grpcReply(r, rt.respond.Status, grpcReplyType(r), rt.respondMsg)
	case rt.respond != nil:
		h := rs.w.Header()
		h["Content-Type"] = rt.respondCT
		rt.resOps.apply(h)
		noSniff(h)
		if r.Method == http.MethodHead && rt.respond.Status != http.StatusNoContent && rt.respond.Status != http.StatusNotModified {
			// The GET's length (RFC 9110 §9.3.2, §8.6), which the server
			// counts only from a body written.
			h["Content-Length"] = rt.respondCL
		}
		rs.w.WriteHeader(rt.respond.Status)
		if r.Method != http.MethodHead {
			if len(rt.respondB) > 0 {
				rs.w.Write(rt.respondB)
			}
		}
	case r.URL.Path == "*" && rt.redirTo != "":
		// OPTIONS * (RFC 9112 §3.2.4; targetOK lets no other method
		// have it) asks about the server, not a resource: redirected it
		// went to "https://{host}*" or "/*", which name a resource.
		// Answered here as RFC 9110 §9.3.7 has it: 200, Content-Length 0
		// and Allow, the methods the route redirects. (nginx refuses the
		// asterisk-form with 400; a proxy route forwards it, as origin
		// servers answer it; a files route refuses OPTIONS with 405 and
		// Allow, a respond route gives its one answer to every request,
		// the path unread.)
		h := rs.w.Header()
		rt.resOps.apply(h)
		h["Allow"] = []string{redirectAllow}
		h["Content-Length"] = []string{"0"}
		rs.w.WriteHeader(http.StatusOK)
	case rt.files != nil:
		s.serveFile(rs, r, rt)
	case rt.redirTo != "":
		// {host} is the host without port, as it goes into a URL;
		// {path} the normalised path the route matched (escaped, as it
		// goes into a URL), {uri} the request target as sent, in origin
		// form.
		uhost := host
		if strings.Contains(uhost, ":") {
			uhost = "[" + uhost + "]" // an IPv6 literal (RFC 3986 §3.2.2)
		}
		to := strings.NewReplacer("{host}", uhost, "{path}", r.URL.EscapedPath(), "{query}", r.URL.RawQuery,
			"{uri}", originForm(r.RequestURI)).Replace(rt.redirTo)
		if rt.redirOnSite {
			// One leading slash: browsers read "//" and "/\" as the
			// start of another host.
			to = "/" + strings.TrimLeft(to, "/\\")
		}
		rt.resOps.apply(rs.w.Header())
		http.Redirect(&rs.w, r, to, rt.redirCode)
	default:
		s.forward(rs, r, rt)
	}
}

// redirectAllow is the Allow field of a redirect route's answer to
// OPTIONS * (RFC 9110 §10.2.1): it redirects every method, of which these
// are RFC 9110's (§9.3) and PATCH (RFC 5789), not CONNECT and TRACE,
// refused on every route.
const redirectAllow = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"

// stripLeavesDotSegment reports whether removing rt's strip_prefix from
// the path p leaves a dot segment first ("." or "..", read with ";params"
// dropped and '\' as '/', as backends do; RFC 3986 §5.2.4). It can when
// the prefix ends inside a segment (nginx's "location /api" passed to
// "http://b/"): "/api../admin" matched /api, not a route of /api/admin,
// but goes as "/../admin", which the target resolves to /admin (a files
// route to admin), as "/api/admin" would go. An ordinary partial segment
// is stripped ("/apiv1" is /v1).
func (rt *route) stripLeavesDotSegment(p string) bool {
	if rt.strip == "" || rt.up == nil && rt.files == nil {
		return false
	}
	n, ok := rt.pathPrefix(p, rt.strip)
	if !ok {
		return false
	}
	seg := p[n:]
	if i := strings.IndexAny(seg, `/\`); i >= 0 {
		seg = seg[:i]
	}
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	return seg == "." || seg == ".."
}

// routesElsewhere reports whether the path p, a reading of r's path by
// some backend, or p without its path parameters (paramlessPath), goes to
// another route than rt.
func (s *site) routesElsewhere(r *http.Request, host, p string, rt *route) bool {
	return s.match(r, host, p) != rt || strings.IndexByte(p, ';') >= 0 && s.match(r, host, paramlessPath(p)) != rt
}

// lengthOK reports whether each of vv, the Content-Length fields of a
// request, is a decimal number (RFC 9110 §8.6; x/net/http2 refuses fields
// that differ).
func lengthOK(vv []string) bool {
	for _, v := range vv {
		if _, err := strconv.ParseUint(v, 10, 63); err != nil {
			return false
		}
	}
	return true
}

// targetOK reports whether r's request-target may go to a target: an
// absolute path (origin-form, or absolute-form with one; RFC 9112 §3.2.1),
// or "*" for OPTIONS (§3.2.4), without a byte a request line cannot carry
// (space, controls, DEL: an h2 :path may hold them). An opaque target
// ("x:admin/secret", "http:admin") has no path to route by, and frameworks
// read it as the path the routes did not see. Nor may its decoded path
// hold a NUL (%00, refused by nginx too): backends in C and file APIs end
// the path there, so "/admin%00" would be /admin to them, past a route
// that matches /admin.
func targetOK(r *http.Request) bool {
	u := r.URL
	switch {
	case u.Opaque != "":
		return false
	case strings.IndexByte(u.Path, 0) >= 0:
		return false
	case u.Path == "*":
		if r.Method != http.MethodOptions {
			return false
		}
	case u.Path != "" && u.Path[0] != '/':
		return false
	}
	for i := 0; i < len(r.RequestURI); i++ {
		if c := r.RequestURI[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// originForm returns a request target (targetOK) as its path and query
// (RFC 9112 §3.2.1): an absolute-form target ("http://h.test/a?x",
// §3.2.2) without its scheme and authority, "/" for an empty path.
func originForm(target string) string {
	if strings.HasPrefix(target, "/") || target == "*" {
		return target
	}
	_, rest, ok := strings.Cut(target, "://")
	if !ok {
		return target
	}
	i := strings.IndexAny(rest, "/?")
	switch {
	case i < 0:
		return "/"
	case rest[i] == '?':
		return "/" + rest[i:]
	}
	return rest[i:]
}

// firstName returns the site's first exact server name, "" without one.
func (s *site) firstName() string {
	for _, n := range s.names {
		if !strings.HasPrefix(n, "*.") {
			return n
		}
	}
	return ""
}

// misdirected answers 421 to a request the connection's handshake cannot
// serve (Proxy.ServeHTTP), for the reason why.
func (s *site) misdirected(w http.ResponseWriter, r *http.Request, why string) {
	rs := getReqState(w)
	rs.start = time.Now()
	rs.site = s
	s.p.obs.RequestStarted(s.name)
	defer s.finish(rs, r)
	rs.ci = connInfoFrom(r.Context())
	if s.reqIDHeader != "" {
		rs.reqID = s.requestIDOf(r) // in the answer and the logs, as the site's others
	}
	s.errorResponse(rs, r, http.StatusMisdirectedRequest, "this connection cannot serve that host; connect with its name", why)
}

// finish reports the request to the observer and the access log.
func (s *site) finish(rs *reqState, r *http.Request) {
	rs.w.send.handlerEnds() // what the server still flushes after the handler
	if v := recover(); v != nil {
		// An aborted copy (panic(http.ErrAbortHandler)) still gets
		// logged: 502, or 499 for a client gone mid-body.
		if rs.w.status == 0 && !rs.clientGone {
			rs.w.status = 502
		}
		s.report(rs, r)
		putReqState(rs)
		panic(v)
	}
	s.report(rs, r)
	putReqState(rs)
}

func (s *site) report(rs *reqState, r *http.Request) {
	p := s.p
	status := rs.w.status
	if status == 0 {
		status = http.StatusOK
		if rs.clientGone {
			status = 499
		}
	}
	ev := RequestEvent{
		Site:             s.name,
		Method:           r.Method,
		Status:           status,
		Duration:         time.Since(rs.start),
		UpstreamDuration: rs.upDur,
		UpstreamStatus:   rs.upStatus,
		BytesIn:          rs.bytesIn,
		BytesOut:         rs.w.bytes,
		RateLimited:      rs.rateLimited,
	}
	if rs.route != nil {
		ev.Route = rs.route.name
		if rs.route.up != nil {
			ev.Upstream = rs.route.up.name
		}
	}
	if rs.target != nil {
		ev.Target = rs.target.Addr
	}
	p.obs.RequestDone(ev)
	if p.accessLog != nil {
		p.accessLog.logRequest(&ev, r, rs.ci, p.realClient(r), grpcStatusOf(rs.w.Header()), rs.reqID, rs.authUser)
	}
}

// errorPage is a site's page for a status, and the type it goes as.
type errorPage struct {
	body  []byte
	ctype string
}

// newErrorPage types page as text/html, in UTF-8 when it is: a page in
// another encoding (a portal's GBK or GB18030 page, with its own <meta
// charset>) gets no charset, which would override its own (the HTML
// standard reads the transport's first) and garble it; nginx sends it so.
func newErrorPage(page []byte) errorPage {
	if utf8.Valid(page) {
		return errorPage{page, "text/html; charset=utf-8"}
	}
	return errorPage{page, "text/html"}
}

// errorResponse writes a short error body (public, safe to show clients:
// no backend addresses or error texts) and logs why in detail.
func (s *site) errorResponse(rs *reqState, r *http.Request, code int, public, why string) {
	s.errorResponseWith(rs, r, code, "", "", public, why)
}

// errorResponseWith is errorResponse with one more header field, name:
// value (none when name is "").
func (s *site) errorResponseWith(rs *reqState, r *http.Request, code int, name, value, public, why string) {
	// A warning is for what the operator must look into: the server's
	// or a target's failures. A refused request (4xx) is the client's
	// doing, and so is a 501, which answers what it asked for and gmproxy
	// does not do (CONNECT, a protocol the route does not tunnel); over
	// HTTP/2 it may ask that on every stream at no cost.
	lvl := s.p.logger.Warn
	if code < 500 || code == http.StatusNotImplemented {
		lvl = s.p.logger.Debug
	}
	args := []any{"site", s.name, "status", code, "method", r.Method, "uri", r.RequestURI, "client", r.RemoteAddr, "reason", why}
	if rs.route != nil {
		args = append(args, "route", rs.route.name)
		if rs.route.up != nil {
			args = append(args, "upstream", rs.route.up.name)
		}
	}
	if rs.reqID != "" {
		args = append(args, "request_id", rs.reqID)
	}
	lvl("request failed", args...)
	if rs.w.wroteHeader {
		return
	}
	h := rs.w.Header()
	clear(h)
	if rs.reqID != "" {
		h[s.reqIDHeader] = []string{rs.reqID}
	}
	if name != "" {
		h.Set(name, value)
	}
	if (code == http.StatusRequestTimeout || code == http.StatusMisdirectedRequest || r.Method == http.MethodConnect) && r.ProtoMajor == 1 {
		// The rest of the body is not read; a CONNECT's client may already
		// be sending what it meant for the tunnel; a misdirected request's
		// client is to connect again.
		h.Set("Connection", "close")
	}
	if ct := grpcReplyType(r); ct != "" && code != http.StatusMisdirectedRequest {
		// A gRPC call gets a gRPC status, not a page. A 421 stays
		// HTTP's: it has the client connect again (browsers do for
		// gRPC-Web), which a gRPC status (UNKNOWN) would not.
		rs.grpcReply(r, code, ct, public)
		return
	}
	page, paged := s.errorPages[code]
	if paged {
		h.Set("Content-Type", page.ctype)
	} else {
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	rs.w.WriteHeader(code)
	if paged {
		rs.w.Write(page.body)
		return
	}
	fmt.Fprintf(&rs.w, "%d %s: %s\n", code, http.StatusText(code), public)
}

// clientAddr returns the client's IP (host part of RemoteAddr; with PROXY
// protocol this is the address from the header).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// clientIn reports whether a client address is in nets (client_ip): a
// client behind a NAT64 / SIIT-DC translator (64:ff9b::/96) also as the
// IPv4 client it embeds, as the per-client limits and rate_limit count it,
// so that an IPv4 deny list does not miss it.
func clientIn(nets []netip.Prefix, a netip.Addr) bool {
	if inPrefixes(nets, a) {
		return true
	}
	v4, nat := frontdoor.NAT64Client(a)
	return nat && inPrefixes(nets, v4)
}

// forwardedChain is the X-Forwarded-For chain of a trusted peer's fields.
// An empty field (a hop that had no address to add) is no chain: ", peer"
// would read as a first hop with no address.
func forwardedChain(fields []string) string {
	return strings.TrimSpace(strings.Join(fields, ", "))
}

// realClientIn is X-Real-IP for a trusted peer's X-Forwarded-For chain
// xff: its right-most address not from a trusted proxy (peer when xff
// holds no address).
func (p *Proxy) realClientIn(peer, xff string) string {
	real := peer
	for rest := xff; rest != ""; {
		i := strings.LastIndexByte(rest, ',')
		cand := strings.TrimSpace(rest[i+1:])
		rest = rest[:max(i, 0)]
		if cand == "" {
			continue
		}
		if _, err := netip.ParseAddr(cand); err != nil {
			// A balancer may write the client's port too (Azure's
			// Application Gateway does; nginx's realip reads it), or an
			// IPv6 address in brackets: read as no address, its clients
			// would all be the balancer.
			a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(cand, "["), "]"))
			if ap, perr := netip.ParseAddrPort(cand); perr == nil {
				a, err = ap.Addr(), nil
			}
			if err != nil || strings.HasPrefix(cand, "[") != a.Is6() {
				break // "unknown", obfuscated or forged: keep the last address we trust
			}
			cand = a.String()
		}
		real = cand
		if !p.trusted(cand) {
			break
		}
	}
	return real
}

// realClient is the client's address as X-Real-IP gives it: the peer's
// (after a trusted PROXY protocol header), or, when the peer is a trusted
// proxy, the right-most X-Forwarded-For address not from a trusted proxy.
func (p *Proxy) realClient(r *http.Request) string {
	peer := clientAddr(r)
	if fields := r.Header[HeaderForwardedFor]; len(fields) > 0 && p.trusted(peer) {
		if xff := forwardedChain(fields); xff != "" {
			return p.realClientIn(peer, xff)
		}
	}
	return peer
}

// requestClient is the key max_requests_per_client counts r by: its
// connection's (ci.client), or, from a trusted proxy, the client's that
// X-Real-IP names (realClient), IPv6 by /64. A trusted proxy's
// connections carry the requests of many clients: counted as the proxy's
// one address they would share one budget, and one client could take it
// from all the others (nginx's realip keys limit_req and limit_conn so).
// A client's own X-Forwarded-For counts for nothing: realClient reads
// only a trusted peer's.
func (p *Proxy) requestClient(r *http.Request, ci *connInfo) netip.Addr {
	if len(p.trustedNets) == 0 {
		return ci.client
	}
	a, err := netip.ParseAddr(p.realClient(r))
	if err != nil {
		return ci.client
	}
	return frontdoor.ClientKeyOf(a)
}

func (p *Proxy) trusted(ip string) bool {
	if len(p.trustedNets) == 0 {
		return false
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && inPrefixes(p.trustedNets, a)
}

// setForwarded sets the forwarded and TLS headers (those rt asks for) on h, the outgoing
// request's header from outgoingHeader (which left the client's copies of
// the headers set here out, except the X-Forwarded-* ones that a trusted
// proxy's values extend), and removes TrustedOnlyRequestHeaders unless the
// peer is a trusted proxy. It returns the client IP used for balancing
// (X-Real-IP).
func (s *site) setForwarded(rs *reqState, rt *route, h http.Header, r *http.Request) string {
	p, ci, vals := s.p, rs.ci, &rs.hdrVals
	peer := clientAddr(r)
	trusted := p.trusted(peer)
	if !trusted && rs.trustedOnly {
		for _, k := range TrustedOnlyRequestHeaders {
			delete(h, k)
		}
	}
	real := peer
	prior := h[HeaderForwardedFor]
	var xff string
	if trusted && len(prior) > 0 {
		xff = forwardedChain(prior)
	}
	if xff != "" {
		real = p.realClientIn(peer, xff)
		setHeader(h, HeaderForwardedFor, xff+", "+peer, vals[0:1:1])
	} else {
		setHeader(h, HeaderForwardedFor, peer, vals[0:1:1])
	}
	vals[1] = real
	h[HeaderRealIP] = vals[1:2:2]
	if rs.reqID != "" {
		// The client's own copies go: the ID is the proxy's.
		setHeader(h, s.reqIDHeader, rs.reqID, vals[4:5:5])
	}
	if !trusted || len(h[HeaderForwardedProto]) == 0 {
		proto := "http"
		if ci != nil && ci.hasState {
			proto = "https"
		}
		setHeader(h, HeaderForwardedProto, proto, vals[2:3:3])
	}
	if !trusted || len(h[HeaderForwardedHost]) == 0 {
		setHeader(h, HeaderForwardedHost, r.Host, vals[3:4:4])
	}
	if ci != nil && ci.hasState && (rt.tlsInfo || rt.certHdr) {
		rt.setTLSHeaders(h, ci)
	}
	return real
}

// setHeader sets a single value held in the caller's (per-request, pooled)
// storage. It never writes into the slice h held: that may be the
// client's (outgoingHeader).
func setHeader(h http.Header, k, v string, store []string) {
	store[0] = v
	h[k] = store
}

// setTLSHeaders sets the TLS information and client-certificate headers
// from the connection's precomputed values (no per-request work).
func (rt *route) setTLSHeaders(h http.Header, ci *connInfo) {
	v := ci.tls()
	if rt.tlsInfo {
		h[HeaderSSLProtocol] = v.protocol
		h[HeaderSSLCipher] = v.cipher
		h[HeaderSSLReused] = v.reused
	}
	if !rt.certHdr {
		return
	}
	h[HeaderClientVerify] = v.verify
	if v.subjectDN == nil {
		return // no client certificate
	}
	h[HeaderClientSDN] = v.subjectDN
	h[HeaderClientIDN] = v.issuerDN
	if v.serial != nil {
		h[HeaderClientSerial] = v.serial
	}
	if rt.certPEM {
		h[HeaderClientCert] = ci.certPEM()
	}
}
