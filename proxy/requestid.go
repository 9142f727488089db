package proxy

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Request IDs: a site with a RequestIDHeader gives each request an ID, as
// nginx's $request_id and Envoy's x-request-id do. It goes to the target
// in that header, back to the client in it (whatever answered: the
// target, a files route, the proxy's own error), into the access log
// (request_id) and into the proxy's log line of a failed request, so that
// one request can be followed from a user's report through the edge to
// the target's logs.

// maxRequestIDLen bounds an ID taken from a trusted proxy in front: a
// UUID is 36 characters, an AWS trace ID about 40.
const maxRequestIDLen = 128

// newRequestID is 128 random bits in hex (32 characters, the form of
// nginx's $request_id), from the runtime's ChaCha8 generator (math/rand/v2),
// which is seeded from the system's randomness: unique and not guessable,
// at no system call.
func newRequestID() string {
	var b [32]byte
	for i, v := range [2]uint64{rand.Uint64(), rand.Uint64()} {
		for j := range 16 {
			b[i*16+j] = hexDigits[v>>(60-4*j)&0xf]
		}
	}
	return string(b[:])
}

// requestIDOf is r's ID: the one a trusted proxy in front
// (TrustedProxies) sent in the header, when it sent one well-formed
// (validRequestID), so that the chain logs one ID; else a new one. A
// client's own is never taken: it would make its requests look like
// another's in every log that follows them.
func (s *site) requestIDOf(r *http.Request) string {
	if v := r.Header[s.reqIDHeader]; len(v) == 1 && validRequestID(v[0]) && s.p.trusted(clientAddr(r)) {
		return v[0]
	}
	return newRequestID()
}

// validRequestID reports whether v is 1 to maxRequestIDLen visible ASCII
// characters, none that a log line would quote or escape (", \).
func validRequestID(v string) bool {
	if v == "" || len(v) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// CheckRequestIDHeader reports what is wrong with name as a
// RequestIDHeader: not a field name, or one that frames, routes or
// authenticates a message, or that the proxy sets itself, whose values the
// ID would replace, or one that backends read as a proxy's account of the
// client (TrustedOnlyRequestHeaders): the ID is whatever a trusted proxy
// in front relays in that field, a client's own value among them. Each
// is judged also spelled with '_', as a backend that reads '_' as '-'
// (CGI, WSGI, PHP) reads it: X_Real_IP there is X-Real-IP.
func CheckRequestIDHeader(name string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("request ID header %q is not a field name (RFC 9110 §5.1)", name)
	}
	k := http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))
	if slices.Contains(hopHeaders, k) || slices.Contains(reservedForRequestID, k) {
		return fmt.Errorf("request ID header %q is a field HTTP or the proxy itself gives a meaning", name)
	}
	if isSetHeaderName(name) {
		return fmt.Errorf("request ID header %q is a field backends read as a proxy's account of the client", name)
	}
	return nil
}

// reservedForRequestID are the fields, beside hopHeaders, that a request
// ID must not replace.
var reservedForRequestID = []string{
	"Host", "Content-Length", "Content-Type", "Content-Encoding", "Content-Range", "Authorization",
	"Cookie", "Set-Cookie", "Location", "Vary", "Etag", "Date", "Forwarded",
	HeaderForwardedFor, HeaderForwardedProto, HeaderForwardedHost, HeaderRealIP, HeaderSSLProtocol,
	HeaderSSLCipher, HeaderSSLReused, HeaderClientVerify, HeaderClientSDN, HeaderClientIDN,
	HeaderClientSerial, HeaderClientCert,
}
