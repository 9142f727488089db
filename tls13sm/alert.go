package tls13sm

import "github.com/gmproxy/gmproxy/internal/record"

// Alert is a TLS alert description (RFC 8446 §6). AlertError is the error
// a Conn returns when a handshake or connection failed with an alert:
// Remote is false for an alert this side sent (Err then says why), true for
// one received from the peer; classify failures with errors.As. Both are
// the record core's types, shared with tlcp.
type (
	Alert      = record.Alert
	AlertError = record.AlertError
)

// Alert descriptions used by TLS 1.3.
const (
	AlertCloseNotify                  = record.AlertCloseNotify
	AlertUnexpectedMessage            = record.AlertUnexpectedMessage
	AlertBadRecordMAC                 = record.AlertBadRecordMAC
	AlertRecordOverflow               = record.AlertRecordOverflow
	AlertHandshakeFailure             = record.AlertHandshakeFailure
	AlertBadCertificate               = record.AlertBadCertificate
	AlertUnsupportedCertificate       = record.AlertUnsupportedCertificate
	AlertCertificateRevoked           = record.AlertCertificateRevoked
	AlertCertificateExpired           = record.AlertCertificateExpired
	AlertCertificateUnknown           = record.AlertCertificateUnknown
	AlertIllegalParameter             = record.AlertIllegalParameter
	AlertUnknownCA                    = record.AlertUnknownCA
	AlertAccessDenied                 = record.AlertAccessDenied
	AlertDecodeError                  = record.AlertDecodeError
	AlertDecryptError                 = record.AlertDecryptError
	AlertProtocolVersion              = record.AlertProtocolVersion
	AlertInsufficientSecurity         = record.AlertInsufficientSecurity
	AlertInternalError                = record.AlertInternalError
	AlertInappropriateFallback        = record.AlertInappropriateFallback
	AlertUserCanceled                 = record.AlertUserCanceled
	AlertMissingExtension             = record.AlertMissingExtension
	AlertUnsupportedExtension         = record.AlertUnsupportedExtension
	AlertUnrecognizedName             = record.AlertUnrecognizedName
	AlertBadCertificateStatusResponse = record.AlertBadCertificateStatusResponse
	AlertUnknownPSKIdentity           = record.AlertUnknownPSKIdentity
	AlertCertificateRequired          = record.AlertCertificateRequired
	AlertNoApplicationProtocol        = record.AlertNoApplicationProtocol
)
