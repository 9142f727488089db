package record

import "strconv"

// Alert is an alert description: the values of the TLS alert registry
// (RFC 5246 §7.2 and its extensions, RFC 8446 §6) and the TLCP-specific
// ones GB/T 38636 §6.3.4.2 adds from 200 on. TLCP uses the TLS numbers for
// the alerts the two share.
type Alert uint8

// Alert descriptions.
const (
	AlertCloseNotify                  Alert = 0
	AlertUnexpectedMessage            Alert = 10
	AlertBadRecordMAC                 Alert = 20
	AlertDecryptionFailed             Alert = 21 // TLS 1.2 and TLCP; reserved in TLS 1.3
	AlertRecordOverflow               Alert = 22
	AlertDecompressionFailure         Alert = 30
	AlertHandshakeFailure             Alert = 40
	AlertNoCertificate                Alert = 41
	AlertBadCertificate               Alert = 42
	AlertUnsupportedCertificate       Alert = 43
	AlertCertificateRevoked           Alert = 44
	AlertCertificateExpired           Alert = 45
	AlertCertificateUnknown           Alert = 46
	AlertIllegalParameter             Alert = 47
	AlertUnknownCA                    Alert = 48
	AlertAccessDenied                 Alert = 49
	AlertDecodeError                  Alert = 50
	AlertDecryptError                 Alert = 51
	AlertExportRestriction            Alert = 60
	AlertProtocolVersion              Alert = 70
	AlertInsufficientSecurity         Alert = 71
	AlertInternalError                Alert = 80
	AlertInappropriateFallback        Alert = 86
	AlertUserCanceled                 Alert = 90
	AlertNoRenegotiation              Alert = 100
	AlertMissingExtension             Alert = 109
	AlertUnsupportedExtension         Alert = 110
	AlertUnrecognizedName             Alert = 112
	AlertBadCertificateStatusResponse Alert = 113
	AlertUnknownPSKIdentity           Alert = 115
	AlertCertificateRequired          Alert = 116
	AlertNoApplicationProtocol        Alert = 120
	AlertUnsupportedSite2Site         Alert = 200 // GB/T 38636 §6.3.4.2 from here on
	AlertNoArea                       Alert = 201
	AlertUnsupportedAreaType          Alert = 202
	AlertBadIBCParam                  Alert = 203
	AlertUnsupportedIBCParam          Alert = 204
	AlertIdentityNeed                 Alert = 205
)

// Alert levels (RFC 5246 §7.2, GB/T 38636 §6.3.4.2; TLS 1.3 keeps the
// field but decides by the description, RFC 8446 §6).
const (
	AlertLevelWarning = 1
	AlertLevelFatal   = 2
)

// alertNames are the descriptions' names in words, as the registries spell
// them (TLS 1.3's _RESERVED values keep their TLS 1.2 names).
var alertNames = [...]string{
	AlertCloseNotify:                  "close notify",
	AlertUnexpectedMessage:            "unexpected message",
	AlertBadRecordMAC:                 "bad record MAC",
	AlertDecryptionFailed:             "decryption failed",
	AlertRecordOverflow:               "record overflow",
	AlertDecompressionFailure:         "decompression failure",
	AlertHandshakeFailure:             "handshake failure",
	AlertNoCertificate:                "no certificate",
	AlertBadCertificate:               "bad certificate",
	AlertUnsupportedCertificate:       "unsupported certificate",
	AlertCertificateRevoked:           "revoked certificate",
	AlertCertificateExpired:           "expired certificate",
	AlertCertificateUnknown:           "unknown certificate",
	AlertIllegalParameter:             "illegal parameter",
	AlertUnknownCA:                    "unknown certificate authority",
	AlertAccessDenied:                 "access denied",
	AlertDecodeError:                  "error decoding message",
	AlertDecryptError:                 "error decrypting message",
	AlertExportRestriction:            "export restriction",
	AlertProtocolVersion:              "protocol version not supported",
	AlertInsufficientSecurity:         "insufficient security level",
	AlertInternalError:                "internal error",
	AlertInappropriateFallback:        "inappropriate fallback",
	AlertUserCanceled:                 "user canceled",
	AlertNoRenegotiation:              "no renegotiation",
	AlertMissingExtension:             "missing extension",
	AlertUnsupportedExtension:         "unsupported extension",
	AlertUnrecognizedName:             "unrecognized name",
	AlertBadCertificateStatusResponse: "bad certificate status response",
	AlertUnknownPSKIdentity:           "unknown PSK identity",
	AlertCertificateRequired:          "certificate required",
	AlertNoApplicationProtocol:        "no application protocol",
	AlertUnsupportedSite2Site:         "unsupported site2site",
	AlertNoArea:                       "no area",
	AlertUnsupportedAreaType:          "unsupported area type",
	AlertBadIBCParam:                  "bad IBC parameter",
	AlertUnsupportedIBCParam:          "unsupported IBC parameter",
	AlertIdentityNeed:                 "identity needed",
}

// String returns the alert's name in words ("bad certificate"), or
// "alert(N)" for a value without one.
func (a Alert) String() string {
	if int(a) < len(alertNames) && alertNames[a] != "" {
		return alertNames[a]
	}
	return "alert(" + strconv.Itoa(int(a)) + ")"
}

// Level is the level this side sends the alert at: warning for
// close_notify (RFC 8446 §6.1; RFC 5246 §7.2.1), user_canceled (followed by
// close_notify) and no_renegotiation (RFC 5246 §7.2.2: the connection goes
// on), fatal for every error alert.
func (a Alert) Level() uint8 {
	switch a {
	case AlertCloseNotify, AlertUserCanceled, AlertNoRenegotiation:
		return AlertLevelWarning
	}
	return AlertLevelFatal
}

// IsCertificate reports whether the alert says a certificate was refused:
// bad_certificate, unsupported_certificate, certificate_revoked,
// certificate_expired, certificate_unknown, unknown_ca (RFC 5246 §7.2,
// GB/T 38636 §6.4.4.3) or TLS 1.3's certificate_required (RFC 8446 §6.2).
func (a Alert) IsCertificate() bool {
	switch a {
	case AlertBadCertificate, AlertUnsupportedCertificate, AlertCertificateRevoked,
		AlertCertificateExpired, AlertCertificateUnknown, AlertUnknownCA, AlertCertificateRequired:
		return true
	}
	return false
}

// AlertError is the error of a connection or handshake that ended with an
// alert: one this side sent (Remote false; Err, when set, says why) or one
// the peer sent (Remote true). Both stacks return it; classify failures
// with errors.As.
type AlertError struct {
	Alert  Alert
	Remote bool
	Err    error
}

func (e *AlertError) Error() string {
	if e.Remote {
		return "remote error: " + e.Alert.String()
	}
	if e.Err != nil {
		return e.Err.Error() + " (sent alert: " + e.Alert.String() + ")"
	}
	return "sent alert: " + e.Alert.String()
}

// Unwrap returns the cause of a local alert.
func (e *AlertError) Unwrap() error { return e.Err }
