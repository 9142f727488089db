package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// headerMatch is a compiled HeaderMatch.
type headerMatch struct {
	HeaderMatch
	// tls: Name is one of tlsHeaders, matched against the value the
	// proxy derives from the connection, not against the client's copy.
	tls bool
}

// tlsHeaders are the headers the proxy derives from the connection's
// handshake (tls_info_headers, client_cert_headers). A route may match on
// them: "X-Ssl-Client-Verify: SUCCESS" on a route, after a route that
// answers 403, asks for a verified client certificate on some paths of a
// site whose client_auth is "request", as nginx's
// "if ($ssl_client_verify != SUCCESS)" in a location does.
var tlsHeaders = []string{
	HeaderSSLProtocol, HeaderSSLCipher, HeaderSSLReused,
	HeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,
}

// CheckHeaderMatch reports whether a route may match on request header
// name. The TLS headers (tlsHeaders) match the proxy's own values. Any
// other header the proxy sets, or removes from clients (X-Forwarded-*,
// X-Real-IP, Forwarded, TrustedOnlyRequestHeaders, and any of them
// spelled with '_'), is refused: a matcher would read the client's copy,
// which the client writes as it likes (a route for "X-Real-IP: 10.0.0.1"
// would let anyone in), and which the backend never sees. So is Host,
// which the server takes out of the header fields (Request.Host; h2's
// :authority): a matcher on it would never match, and a route that denies
// a host so would deny nothing. A route's host condition matches it.
func CheckHeaderMatch(name string) error {
	switch k := http.CanonicalHeaderKey(name); {
	case k == "Host":
		return ErrHostHeaderMatch
	case slices.Contains(tlsHeaders, k):
		return nil
	}
	if isSetHeaderName(name) {
		return fmt.Errorf("header %s is set or removed by the proxy: a matcher would read the client's own copy, which it may forge", name)
	}
	return nil
}

// CheckHeaderMatchValue reports what is wrong with matching header name
// on value ("" for any value): the TLS headers whose value the proxy takes
// from a closed set, X-Ssl-Client-Verify (SUCCESS, NONE or, under
// client_auth optional_no_ca, FAILED:reason with one of
// frontdoor.ClientVerifyErrors, as nginx's $ssl_client_verify spells
// them) and X-Ssl-Session-Reused (r or .), never hold another. A matcher on another value would never match, and
// a route that answers 403 to "X-Ssl-Client-Verify: none" would let
// every client without a certificate through.
func CheckHeaderMatchValue(name, value string) error {
	var want []string
	switch http.CanonicalHeaderKey(name) {
	case HeaderClientVerify:
		want = []string{verifyOK[0], verifyNone[0]}
		if r, ok := strings.CutPrefix(value, "FAILED:"); ok && slices.Contains(frontdoor.ClientVerifyErrors, r) {
			return nil
		}
	case HeaderSSLReused:
		want = []string{reusedYes[0], reusedNo[0]}
	}
	if want == nil || value == "" || slices.Contains(want, value) {
		return nil
	}
	if r, ok := strings.CutPrefix(value, "FAILED:"); ok && frontdoor.OpenSSL11VerifyErrors[r] != "" {
		return fmt.Errorf("header %s is never %q, OpenSSL 1.1's wording: the proxy words the reasons as OpenSSL 3 and Tongsuo do (FAILED:%s)", name, value, frontdoor.OpenSSL11VerifyErrors[r])
	}
	if strings.HasPrefix(value, "FAILED:") {
		return fmt.Errorf("header %s is FAILED: followed by one of %q, never %q: the matcher would never match", name, frontdoor.ClientVerifyErrors, value)
	}
	return fmt.Errorf("header %s is one of %q, never %q: the matcher would never match", name, want, value)
}

// ErrHostHeaderMatch is CheckHeaderMatch's error for Host.
var ErrHostHeaderMatch = errors.New("header Host is not among a request's header fields (the request's host is): a matcher on it never matches")

// tlsHeaderValue returns the value of TLS header k (one of tlsHeaders) the
// proxy derives for ci's connection, whatever the route's
// tls_info_headers and client_cert_headers say; nil when it has none (no
// TLS, no verified client certificate).
//
// The identity headers (-S-Dn, -I-Dn, -Serial, -Cert) of a certificate
// that did not verify (client_auth optional_no_ca, X-Ssl-Client-Verify
// FAILED:reason) are forwarded as nginx forwards them, but never matched:
// they name whoever the client claims to be (any self-signed certificate
// says "CN=admin"), and a route for "X-Ssl-Client-S-Dn: CN=admin" or for
// a serial must admit that verified client only, as it does under the
// other modes.
func tlsHeaderValue(k string, ci *connInfo) []string {
	if ci == nil || !ci.hasState {
		return nil
	}
	v := ci.tls()
	if !ci.state.ClientAuth {
		switch k {
		case HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert:
			return nil
		}
	}
	switch k {
	case HeaderSSLProtocol:
		return v.protocol
	case HeaderSSLCipher:
		return v.cipher
	case HeaderSSLReused:
		return v.reused
	case HeaderClientVerify:
		return v.verify
	case HeaderClientSDN:
		return v.subjectDN
	case HeaderClientIDN:
		return v.issuerDN
	case HeaderClientSerial:
		return v.serial
	case HeaderClientCert:
		return ci.certPEM()
	}
	return nil
}
