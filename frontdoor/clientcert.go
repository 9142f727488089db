package frontdoor

import (
	"crypto/x509"
	"errors"
	"strings"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/tlcp"
)

// Why a client certificate did not verify on a site that takes it
// anyway (client_auth optional_no_ca), the values of
// ConnState.ClientVerifyError: OpenSSL's words for them
// (X509_verify_cert_error_string, crypto/x509/x509_txt.c), which nginx's
// $ssl_client_verify puts after "FAILED:" and backends written for nginx
// may compare. The words are OpenSSL 3's and Tongsuo's (the nginx builds
// for China's commercial cryptography); OpenSSL 1.1 spelled three of them
// otherwise (OpenSSL11VerifyErrors).
const (
	VerifyUnknownIssuer     = "unable to get local issuer certificate"       // no chain to a CA of client_auth.ca (or no ca)
	VerifySelfSigned        = "self-signed certificate"                      // X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT: the certificate issued itself, and no CA of ca is it
	VerifySelfSignedInChain = "self-signed certificate in certificate chain" // X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN: the chain the client sent ends in a root no CA of ca is
	VerifyExpired           = "certificate has expired"
	VerifyNotYetValid       = "certificate is not yet valid"
	VerifyRevoked           = "certificate revoked"             // on its issuer's CRL (client_auth.crl)
	VerifyNoCRL             = "unable to get certificate CRL"   // its issuer has no CRL
	VerifyCRLExpired        = "CRL has expired"                 // its issuer's CRL is not current
	VerifyChainTooLong      = "certificate chain too long"      // more intermediates than client_auth.verify_depth
	VerifyPurpose           = "unsuitable certificate purpose"  // X509_V_ERR_INVALID_PURPOSE: keyUsage or extKeyUsage does not allow client authentication
	VerifyInvalidCA         = "invalid CA certificate"          // a certificate of the chain may not issue
	VerifyPathLength        = "path length constraint exceeded" // X509_V_ERR_PATH_LENGTH_EXCEEDED
	VerifyUnspecified       = "unspecified certificate verification error"
)

// ClientVerifyErrors lists every value of ConnState.ClientVerifyError.
var ClientVerifyErrors = []string{VerifyUnknownIssuer, VerifySelfSigned, VerifySelfSignedInChain, VerifyExpired, VerifyNotYetValid, VerifyRevoked,
	VerifyNoCRL, VerifyCRLExpired, VerifyChainTooLong, VerifyPurpose, VerifyInvalidCA, VerifyPathLength, VerifyUnspecified}

// OpenSSL11VerifyErrors maps OpenSSL 1.1's wording of a reason to the one
// of ClientVerifyErrors gmproxy writes instead (OpenSSL 3's).
var OpenSSL11VerifyErrors = map[string]string{
	"self signed certificate":                      VerifySelfSigned,
	"self signed certificate in certificate chain": VerifySelfSignedInChain,
	"unsupported certificate purpose":              VerifyPurpose,
}

// ClientCertReason says why a server-side handshake error refused the
// client's certificate (one of ClientCertReasons), or "" when err is not
// about the client certificate. It reads the verification error in the
// chain (smx509 or crypto/x509, or an error with a ClientCertReason
// method: the revocation check's), else the alert gmproxy sent, else the
// wording of crypto/tls.
func ClientCertReason(err error) string {
	if err == nil {
		return ""
	}
	var why interface{ ClientCertReason() string }
	if errors.As(err, &why) {
		return why.ClientCertReason()
	}
	var ua smx509.UnknownAuthorityError
	var xua x509.UnknownAuthorityError
	if errors.As(err, &ua) || errors.As(err, &xua) {
		return ClientCertUnknownCA
	}
	var ci smx509.CertificateInvalidError
	if errors.As(err, &ci) {
		return invalidReason(ci.Reason == smx509.Expired, ci.Reason == smx509.IncompatibleUsage)
	}
	var xci x509.CertificateInvalidError
	if errors.As(err, &xci) {
		return invalidReason(xci.Reason == x509.Expired, xci.Reason == x509.IncompatibleUsage)
	}
	msg := strings.ToLower(err.Error())
	alert, sent := sentAlert(err)
	switch {
	case sent && (alert == 41 || alert == 116), // no_certificate, certificate_required
		strings.Contains(msg, "didn't provide a certificate"), strings.Contains(msg, "sent no certificate"):
		return ClientCertNone
	case strings.Contains(msg, "certificateverify"), strings.Contains(msg, "signature by the client certificate"):
		return ClientCertBadSignature
	case sent && alert == 45: // certificate_expired
		return ClientCertExpired
	case sent && alert == 48: // unknown_ca
		return ClientCertUnknownCA
	case sent && (alert == 42 || alert == 43 || alert == 44 || alert == 46), // bad, unsupported, revoked, unknown
		// crypto/tls's texts for a certificate it cannot parse or use
		// (it sends decode_error, unsupported_certificate or
		// bad_certificate): an SM2 certificate from a TLS client, say.
		strings.Contains(msg, "failed to parse client certificate"),
		strings.Contains(msg, "client certificate contains an unsupported public key"),
		strings.Contains(msg, "client sent certificate containing"):
		return ClientCertOther
	}
	return ""
}

func invalidReason(expired, usage bool) string {
	switch {
	case expired:
		return ClientCertExpired
	case usage:
		return ClientCertKeyUsage
	}
	return ClientCertOther
}

// sentAlert returns the alert a TLCP or TLS 1.3-SM server sent for err.
func sentAlert(err error) (uint8, bool) {
	var ae *tlcp.AlertError // the one alert error type of tlcp and tls13sm
	if errors.As(err, &ae) && !ae.Remote {
		return uint8(ae.Alert), true
	}
	return 0, false
}
