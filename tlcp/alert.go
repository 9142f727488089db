package tlcp

import "github.com/gmproxy/gmproxy/internal/tlsutil"

// AlertError is a TLCP alert description (GB/T 38636 §6.3.4.2: the TLS 1.2
// values plus the GM-specific 200–205). Handshake errors wrap the alert that
// was sent, or a *PeerAlertError for an alert received, so callers can
// classify failures with errors.As.
type AlertError uint8

// Alert descriptions.
const (
	AlertCloseNotify            AlertError = 0
	AlertUnexpectedMessage      AlertError = 10
	AlertBadRecordMAC           AlertError = 20
	AlertDecryptionFailed       AlertError = 21
	AlertRecordOverflow         AlertError = 22
	AlertDecompressionFailure   AlertError = 30
	AlertHandshakeFailure       AlertError = 40
	AlertNoCertificate          AlertError = 41
	AlertBadCertificate         AlertError = 42
	AlertUnsupportedCertificate AlertError = 43
	AlertCertificateRevoked     AlertError = 44
	AlertCertificateExpired     AlertError = 45
	AlertCertificateUnknown     AlertError = 46
	AlertIllegalParameter       AlertError = 47
	AlertUnknownCA              AlertError = 48
	AlertAccessDenied           AlertError = 49
	AlertDecodeError            AlertError = 50
	AlertDecryptError           AlertError = 51
	AlertExportRestriction      AlertError = 60
	AlertProtocolVersion        AlertError = 70
	AlertInsufficientSecurity   AlertError = 71
	AlertInternalError          AlertError = 80
	AlertUserCanceled           AlertError = 90
	AlertNoRenegotiation        AlertError = 100
	AlertUnsupportedExtension   AlertError = 110
	AlertUnsupportedSite2Site   AlertError = 200
	AlertNoArea                 AlertError = 201
	AlertUnsupportedAreaType    AlertError = 202
	AlertBadIBCParam            AlertError = 203
	AlertUnsupportedIBCParam    AlertError = 204
	AlertIdentityNeed           AlertError = 205
)

const (
	alertLevelWarning = 1
	alertLevelError   = 2
)

// gmAlertText names the GM-specific alerts of GB/T 38636 §6.3.4.2; the
// others have their TLS registry names (tlsutil.AlertName).
var gmAlertText = map[AlertError]string{
	AlertUnsupportedSite2Site: "unsupported site2site",
	AlertNoArea:               "no area",
	AlertUnsupportedAreaType:  "unsupported area type",
	AlertBadIBCParam:          "bad IBC parameter",
	AlertUnsupportedIBCParam:  "unsupported IBC parameter",
	AlertIdentityNeed:         "identity needed",
}

// String returns the alert's name.
func (e AlertError) String() string {
	if s, ok := gmAlertText[e]; ok {
		return s
	}
	return tlsutil.AlertName(uint8(e))
}

// Error implements error; it describes an alert this side sent.
func (e AlertError) Error() string { return "tlcp: " + e.String() }

// PeerAlertError is an alert received from the peer.
type PeerAlertError struct {
	Alert AlertError
	Fatal bool
}

func (e *PeerAlertError) Error() string { return "tlcp: remote error: " + e.Alert.String() }

// localError carries the alert sent for a local failure with a description.
type localError struct {
	alert AlertError
	msg   string
	err   error
}

func (e *localError) Error() string {
	s := "tlcp: " + e.msg
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

// Unwrap returns the alert and the cause, so errors.As(err, &AlertError) works.
func (e *localError) Unwrap() []error {
	if e.err != nil {
		return []error{e.alert, e.err}
	}
	return []error{e.alert}
}
