package frontdoor

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/gmproxy/gmproxy/internal/record"
)

// ReasonError attaches a bounded failure reason (one of the Reason*
// constants) to a handshake error.
type ReasonError struct {
	Reason string
	Err    error
}

func (e *ReasonError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *ReasonError) Unwrap() error { return e.Err }

// Reasoned wraps err with a reason; nil stays nil.
func Reasoned(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &ReasonError{Reason: reason, Err: err}
}

// Classify maps a handshake error to one of the Reason* constants.
func Classify(err error) string {
	if err == nil {
		return ""
	}
	var re *ReasonError
	if errors.As(err, &re) && re.Reason != "" {
		return re.Reason
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return ReasonEOF
	case errors.Is(err, context.Canceled):
		return ReasonTimeout
	case errors.Is(err, errBadHello), errors.Is(err, errBadRecord), errors.Is(err, errNotHello),
		errors.Is(err, errHelloTooLarge):
		return ReasonProtocolError
	}
	var ae tls.AlertError
	if errors.As(err, &ae) {
		return alertReason(uint8(ae))
	}
	// crypto/tls reports peer alerts as "remote error: tls: …" and a few
	// local failures only as text.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "remote error"):
		return ReasonPeerAlert
	case isTLSKeyFailure(msg):
		return ReasonInternal
	case strings.Contains(msg, "no cipher suite supported"), strings.Contains(msg, "no mutually supported"),
		strings.Contains(msg, "no shared"), strings.Contains(msg, "unsupported versions"),
		isTLSNegotiationFailure(msg):
		return ReasonNoSharedCipher
	case strings.Contains(msg, "certificate"):
		return ReasonBadCertificate
	}
	return ReasonProtocolError
}

// alertReason maps a sent alert description to a reason.
func alertReason(desc uint8) string {
	switch desc {
	case 40, 70, 71, 86, 109, 120: // handshake_failure, protocol_version, insufficient_security, inappropriate_fallback, missing_extension, no_application_protocol
		return ReasonNoSharedCipher
	case 42, 43, 44, 45, 46, 48, 116: // certificate alerts, unknown_ca, certificate_required
		return ReasonBadCertificate
	case 80:
		return ReasonInternal
	}
	return ReasonProtocolError
}

// tlsKeyFailures are crypto/tls's texts for a server key that cannot do what
// the handshake needs (it sends internal_error): a key of an unsupported
// type, or a signature or decryption that failed (the offload engine busy,
// a key server unreachable).
var tlsKeyFailures = []string{
	"unsupported decryption key type",
	"unsupported signing key type",
	"does not implement crypto.",
	"failed to sign",
}

// tlsNegotiationFailures are crypto/tls's texts for a hello that has
// nothing in common with the site besides the suites: no key exchange
// group, no signature algorithm the certificate can sign with (it sends
// handshake_failure), no application protocol (no_application_protocol).
// They are checked before the word "certificate", which the second holds.
var tlsNegotiationFailures = []string{
	"no key exchanges supported by both",
	"doesn't support any of the certificate's signature algorithms",
	"unsupported application protocols",
}

func isTLSNegotiationFailure(msg string) bool {
	for _, f := range tlsNegotiationFailures {
		if strings.Contains(msg, f) {
			return true
		}
	}
	return false
}

func isTLSKeyFailure(msg string) bool {
	for _, f := range tlsKeyFailures {
		if strings.Contains(msg, f) {
			return true
		}
	}
	return false
}

// smReason classifies a TLCP or TLS 1.3-SM handshake error (both stacks
// return the record core's one AlertError): a timeout or end of stream as
// Classify does, an alert received as peer_alert, an alert sent by its
// description, anything else as Classify does.
func smReason(err error) string {
	if r := Classify(err); r == ReasonTimeout || r == ReasonEOF {
		return r
	}
	var ae *record.AlertError
	if errors.As(err, &ae) {
		if ae.Remote {
			return ReasonPeerAlert
		}
		return alertReason(uint8(ae.Alert))
	}
	return Classify(err)
}

// recordStats is a connection that counts its records (tlcp.Conn and
// tls13sm.Conn, with the record core's Stats): a Conn over one reports
// those counts, without a Stats function per connection.
type recordStats interface{ Stats() record.Stats }
