package tlcp

import (
	"fmt"

	"github.com/gmproxy/gmproxy/internal/record"
)

// Alert is an alert description (GB/T 38636 §6.3.4.2: the TLS 1.2 values
// plus the TLCP-specific 200–205). AlertError is the error of a handshake
// or connection that ended with an alert: sent by this side (Remote false,
// Err says why) or received from the peer (Remote true); classify failures
// with errors.As. Both are the record core's types, shared with tls13sm.
type (
	Alert      = record.Alert
	AlertError = record.AlertError
)

// Alert descriptions of GB/T 38636 §6.3.4.2.
const (
	AlertCloseNotify            = record.AlertCloseNotify
	AlertUnexpectedMessage      = record.AlertUnexpectedMessage
	AlertBadRecordMAC           = record.AlertBadRecordMAC
	AlertDecryptionFailed       = record.AlertDecryptionFailed
	AlertRecordOverflow         = record.AlertRecordOverflow
	AlertDecompressionFailure   = record.AlertDecompressionFailure
	AlertHandshakeFailure       = record.AlertHandshakeFailure
	AlertNoCertificate          = record.AlertNoCertificate
	AlertBadCertificate         = record.AlertBadCertificate
	AlertUnsupportedCertificate = record.AlertUnsupportedCertificate
	AlertCertificateRevoked     = record.AlertCertificateRevoked
	AlertCertificateExpired     = record.AlertCertificateExpired
	AlertCertificateUnknown     = record.AlertCertificateUnknown
	AlertIllegalParameter       = record.AlertIllegalParameter
	AlertUnknownCA              = record.AlertUnknownCA
	AlertAccessDenied           = record.AlertAccessDenied
	AlertDecodeError            = record.AlertDecodeError
	AlertDecryptError           = record.AlertDecryptError
	AlertExportRestriction      = record.AlertExportRestriction
	AlertProtocolVersion        = record.AlertProtocolVersion
	AlertInsufficientSecurity   = record.AlertInsufficientSecurity
	AlertInternalError          = record.AlertInternalError
	AlertUserCanceled           = record.AlertUserCanceled
	AlertNoRenegotiation        = record.AlertNoRenegotiation
	AlertNoApplicationProtocol  = record.AlertNoApplicationProtocol
	AlertUnsupportedExtension   = record.AlertUnsupportedExtension
	AlertUnrecognizedName       = record.AlertUnrecognizedName
	AlertUnsupportedSite2Site   = record.AlertUnsupportedSite2Site
	AlertNoArea                 = record.AlertNoArea
	AlertUnsupportedAreaType    = record.AlertUnsupportedAreaType
	AlertBadIBCParam            = record.AlertBadIBCParam
	AlertUnsupportedIBCParam    = record.AlertUnsupportedIBCParam
	AlertIdentityNeed           = record.AlertIdentityNeed
)

// errorf builds the error of a local failure that sends alert a.
func errorf(a Alert, format string, args ...any) error {
	return &AlertError{Alert: a, Err: fmt.Errorf("tlcp: "+format, args...)}
}

// wrapErr builds the error of a local failure with a cause that sends alert a.
func wrapErr(a Alert, msg string, err error) error {
	return &AlertError{Alert: a, Err: fmt.Errorf("tlcp: %s: %w", msg, err)}
}
