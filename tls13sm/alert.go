package tls13sm

import "github.com/gmproxy/gmproxy/internal/tlsutil"

// Alert is a TLS alert description (RFC 8446 §6).
type Alert uint8

// Alert descriptions used by TLS 1.3.
const (
	AlertCloseNotify                  Alert = 0
	AlertUnexpectedMessage            Alert = 10
	AlertBadRecordMAC                 Alert = 20
	AlertRecordOverflow               Alert = 22
	AlertHandshakeFailure             Alert = 40
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
	AlertProtocolVersion              Alert = 70
	AlertInsufficientSecurity         Alert = 71
	AlertInternalError                Alert = 80
	AlertInappropriateFallback        Alert = 86
	AlertUserCanceled                 Alert = 90
	AlertMissingExtension             Alert = 109
	AlertUnsupportedExtension         Alert = 110
	AlertUnrecognizedName             Alert = 112
	AlertBadCertificateStatusResponse Alert = 113
	AlertUnknownPSKIdentity           Alert = 115
	AlertCertificateRequired          Alert = 116
	AlertNoApplicationProtocol        Alert = 120
)

// String returns the RFC name of the alert in words.
func (a Alert) String() string { return tlsutil.AlertName(uint8(a)) }

// Error makes an Alert usable as an error.
func (a Alert) Error() string { return "tls13sm: " + a.String() }

// AlertError is the error a Conn returns when a handshake or connection
// failed with an alert: Remote is false for an alert this side sent (Err
// then says why), true for one received from the peer. Use errors.As to
// classify failures.
type AlertError struct {
	Alert  Alert
	Remote bool
	Err    error
}

func (e *AlertError) Error() string {
	if e.Remote {
		return "tls13sm: peer sent alert: " + e.Alert.String()
	}
	if e.Err != nil {
		return "tls13sm: " + e.Err.Error() + " (sent alert: " + e.Alert.String() + ")"
	}
	return "tls13sm: sent alert: " + e.Alert.String()
}

// Unwrap returns the underlying cause (for local alerts).
func (e *AlertError) Unwrap() error { return e.Err }
