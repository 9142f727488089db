package proxy

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Request hygiene: what a client may not send to a backend. Each check is a
// small function over the request's header (or trailer) so that any
// serving path (internal/h1server for HTTP/1.1, x/net/http2 for h2) can
// call it.

// SetRequestHeaders lists, in canonical form, every request header gmproxy
// sets on the requests it forwards. It is the single source of truth for
// those names: a client's copy of any of them never reaches a backend,
// neither as a header nor as a trailer nor spelled with '_' for '-'
// (X_Ssl_Client_Verify). The X-Forwarded-* values of a trusted proxy
// (trusted_proxies) are extended instead of replaced; every other one is
// replaced or removed.
var SetRequestHeaders = []string{
	HeaderForwardedFor, HeaderForwardedProto, HeaderForwardedHost, HeaderRealIP,
	HeaderSSLProtocol, HeaderSSLCipher, HeaderSSLReused,
	HeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,
}

// HeaderForwarded (RFC 7239) is never set by gmproxy but always removed: a
// backend could believe a client's "for=" in it.
const HeaderForwarded = "Forwarded"

// alwaysStripped are removed from every incoming request: the headers
// gmproxy sets except the X-Forwarded-* ones (kept from trusted proxies),
// and Forwarded.
var alwaysStripped = []string{
	HeaderRealIP, HeaderSSLProtocol, HeaderSSLCipher, HeaderSSLReused,
	HeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,
	HeaderForwarded,
}

// TrustedOnlyRequestHeaders lists, in canonical form, request headers
// gmproxy does not set but that backends and frameworks take as what a
// proxy in front of them saw: the client's address (True-Client-IP,
// CF-Connecting-IP, Client-IP: the common PHP get_client_ip idiom reads it
// first; WL-Proxy-Client-IP: WebLogic behind its proxy plugin...), the
// client's certificate and cipher (Tomcat's SSLValve: ssl_client_cert,
// ssl_cipher...; Envoy's X-Forwarded-Client-Cert, Traefik's
// X-Forwarded-Tls-Client-Cert, IIS ARR's X-ARR-ClientCert), the original
// port, scheme or path prefix (X-Forwarded-Port: Spring, Tomcat's
// RemoteIpValve; X-Forwarded-Prefix), the URL before a rewrite
// (X-Original-URL, X-Rewrite-URL: IIS, older Symfony and Zend, which route
// by them, past the proxy's path rules). They reach a backend only from a
// trusted proxy (trusted_proxies): a client's copy is removed, as is any
// of them spelled with '_'.
var TrustedOnlyRequestHeaders = []string{
	"X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Scheme", "X-Forwarded-Ssl",
	"X-Forwarded-Prefix", "X-Forwarded-Uri", "X-Original-Url", "X-Rewrite-Url",
	"X-Forwarded", "Forwarded-For", "X-Forwarded-By",
	"True-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip", "Cf-Connecting-Ip",
	"Fastly-Client-Ip", "X-Originating-Ip", "X-Remote-Ip", "X-Remote-Addr",
	"Client-Ip", "Cluster-Client-Ip", "Proxy-Client-Ip", "Wl-Proxy-Client-Ip", "X-Proxyuser-Ip",
	"Ssl-Client-Cert", "Ssl-Cipher", "Ssl-Session-Id", "Ssl-Cipher-Usekeysize",
	"X-Forwarded-Client-Cert", "X-Forwarded-Tls-Client-Cert", "X-Forwarded-Tls-Client-Cert-Info",
	"X-Arr-Clientcert", "X-Ssl-Cert", "X-Client-Cert",
}

// setHeaderFold holds the names of SetRequestHeaders, Forwarded and
// TrustedOnlyRequestHeaders in lower case with '_' written as '-'.
var setHeaderFold = func() map[string]bool {
	m := make(map[string]bool, len(SetRequestHeaders)+1+len(TrustedOnlyRequestHeaders))
	for _, k := range SetRequestHeaders {
		m[foldName(k)] = true
	}
	m[foldName(HeaderForwarded)] = true
	for _, k := range TrustedOnlyRequestHeaders {
		m[foldName(k)] = true
	}
	return m
}()

func foldName(k string) string {
	return strings.ReplaceAll(strings.ToLower(k), "_", "-")
}

// isSetHeaderName reports whether k names a header gmproxy sets (or
// Forwarded, or one of TrustedOnlyRequestHeaders), ignoring case and the
// difference between '_' and '-'.
func isSetHeaderName(k string) bool {
	if len(k) > 64 {
		return false // longer than any of them; spares the folding
	}
	var buf [64]byte
	b := buf[:len(k)]
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_':
			c = '-'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return setHeaderFold[string(b)] // no allocation: map index by converted bytes
}

// trailerFilter decides which request trailers go to the backend. Without
// a route's allow_trailers none does. With it, a trailer passes when the
// client declared it in its Trailer header and its name is none of: the
// headers gmproxy sets or strips (also with '_' for '-'), hop-by-hop
// fields, fields that must not be trailers (RFC 9110 §6.5.1; these too
// with '_' for '-'), the fields
// the route's request_headers edit and the site's request ID (these two
// in any spelling).
func (rt *route) trailerAllowed(k string) bool {
	return rt.allowTrailers && !isSetHeaderName(k) && validTrailer(k) && !rt.reqOps.names(k) && !sameFieldName(k, rt.reqIDHeader)
}

// sameFieldName reports whether k is name ("" names nothing) to a backend
// that ignores case and reads '_' as '-' (CGI, WSGI, PHP).
func sameFieldName(k, name string) bool {
	if len(k) != len(name) || name == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		a, b := k[i], name[i]
		if a != b && foldByte(a) != foldByte(b) {
			return false
		}
	}
	return true
}

// foldByte is c lower-cased, '_' read as '-'.
func foldByte(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}

// validTrailer reports whether a trailer k may be passed on, a backend's
// response trailer to the client among them (declared or not): not a
// hop-by-hop field, and not one that must not be a trailer (RFC 9110
// §6.5.1), such as Content-Length, Host or Authorization.
func validTrailer(k string) bool {
	if strings.IndexByte(k, '_') >= 0 {
		// Judged as a backend that reads '_' as '-' (CGI, WSGI, Puma
		// before 4.3.5) reads it: Transfer_Encoding is Transfer-Encoding.
		k = strings.ReplaceAll(k, "_", "-")
	}
	if !httpguts.ValidTrailerHeader(k) {
		return false
	}
	for _, h := range hopHeaders {
		if strings.EqualFold(h, k) {
			return false
		}
	}
	return true
}

// outgoingTrailer returns the trailer map for the request sent upstream:
// nil (no trailers) unless the route allows them, else a new map holding
// the declared trailer names that trailerAllowed accepts; its values are
// filled from in when the body ends (reqBody.Read).
func (rt *route) outgoingTrailer(in http.Header) http.Header {
	if len(in) == 0 || !rt.allowTrailers {
		return nil
	}
	var out http.Header
	for k := range in {
		if rt.trailerAllowed(k) {
			if out == nil {
				out = make(http.Header, len(in))
			}
			out[k] = nil
		}
	}
	return out
}

// fillTrailer copies the values of the names out holds from in (the
// client's trailer, complete once its body reached EOF).
func fillTrailer(out, in http.Header) {
	for k := range out {
		out[k] = in[k]
	}
}

// DefaultUpgrades are the protocols a route tunnels through an HTTP/1.1
// Upgrade (or an RFC 8441 extended CONNECT) when it names none.
var DefaultUpgrades = []string{"websocket"}

// allowedUpgrade returns the protocol of an Upgrade field value that the
// route tunnels ("" for none): the first listed protocol whose name (the
// part before any "/version") the route allows. h2c is never tunnelled
// (a proxy in front of it would pass a protocol switch it cannot see into).
func (rt *route) allowedUpgrade(v string) string {
	for p := range strings.SplitSeq(v, ",") {
		p = strings.TrimSpace(p)
		name, _, _ := strings.Cut(p, "/")
		if name == "" || strings.EqualFold(name, "h2c") {
			continue
		}
		for _, a := range rt.upgrades {
			if strings.EqualFold(a, name) {
				return p
			}
		}
	}
	return ""
}
