// Package frontdoor is the front door of gmproxy's listeners: it accepts
// each connection, sniffs the
// first record of each connection and hands it to TLCP, TLS 1.3-SM or
// crypto/tls, picks the site by SNI, enforces handshake limits, and yields one
// connection type with a uniform state for the rest of the program. Private
// key operations run through package keyoffload.
package frontdoor

import (
	"net"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// Protocol names as they appear in logs, headers and metrics labels.
const (
	ProtoTLCP    = "NTLSv1.1"   // TLCP, GB/T 38636-2020
	ProtoTLS13SM = "TLSv1.3-SM" // TLS 1.3 with RFC 8998 suites
	// Ordinary TLS reports "TLSv1.2" or "TLSv1.3".
)

// Protocol families, the values of the metrics "protocol" label.
const (
	FamilyTLCP    = family.TLCP
	FamilyTLS13SM = family.TLS13SM
	FamilyTLS     = family.TLS
)

// ConnState describes an established connection.
type ConnState struct {
	Listener string // listener name (its address unless named)
	Family   string // FamilyTLCP, FamilyTLS13SM or FamilyTLS
	Protocol string // ProtoTLCP, ProtoTLS13SM, "TLSv1.2", "TLSv1.3"
	Cipher   string // suite name, e.g. "ECC-SM2-SM4-GCM-SM3", "TLS_SM4_GCM_SM3"
	Resumed  bool
	SNI      string
	ALPN     string
	Site     string // name of the site that served the handshake

	// ClientAuth is true when the client presented a certificate that verified.
	ClientAuth bool
	// ClientVerifyError says why the client's certificate did not verify
	// on a site that takes it anyway (Site.VerifyClient, client_auth
	// optional_no_ca), in OpenSSL's words (X509_verify_cert_error_string:
	// "certificate has expired"); "" otherwise. PeerCertificates holds
	// that certificate, and ClientAuth is false.
	ClientVerifyError string
	// PeerCertificates are the client's certificates (TLCP: sign, enc, chain…).
	PeerCertificates []*smx509.Certificate

	HandshakeStart    time.Time
	HandshakeDuration time.Duration

	// ClientAuthPolicy is the client authentication the handshake met:
	// the site's Site.ClientAuthPolicy then.
	ClientAuthPolicy string
}

// StateConn is implemented by connections that carry a ConnState.
type StateConn interface {
	net.Conn
	ConnState() ConnState
}

// HandshakeEvent reports one handshake outcome to observers.
type HandshakeEvent struct {
	State ConnState
	// Err is nil on success. Reason is a bounded label for failures:
	// one of the Reason* constants.
	Err    error
	Reason string
	// ClientCert is set when a handshake failed over the client's
	// certificate: one of ClientCertReasons (no_cert, unknown_ca, …).
	ClientCert string
}

// Why a connection was refused before its handshake, the values of
// Observer.ConnRefused's why (bounded; metrics label values).
const (
	RefuseMaxConnections = "max_connections" // listener's max_connections reached
	RefuseMaxHandshakes  = "max_handshakes"  // listener's max_handshakes reached
	// The client address (ClientKey) has max_connections_per_client open
	// connections or max_handshakes_per_client handshakes in progress.
	RefuseMaxConnectionsPerClient = "max_connections_per_client"
	RefuseMaxHandshakesPerClient  = "max_handshakes_per_client"
	// The first flights buffered by the pending handshakes reached the
	// listener's max_handshake_bytes; the hello that would have crossed it
	// is closed (its handshake also ends with ReasonRefused).
	RefuseMaxHandshakeBytes = "max_handshake_bytes"
	// A trusted source's PROXY protocol header was malformed, missing when
	// required, or not sent in time.
	RefuseProxyProtocol = "proxy_protocol"
	RefuseShutdown      = "shutdown" // the listener is closing
)

// RefuseReasons lists every value of Observer.ConnRefused's why.
var RefuseReasons = []string{
	RefuseMaxConnections, RefuseMaxHandshakes, RefuseMaxConnectionsPerClient, RefuseMaxHandshakesPerClient,
	RefuseMaxHandshakeBytes, RefuseProxyProtocol, RefuseShutdown,
}

// Why a client certificate was refused: a small fixed set, safe as metric
// label values (see ClientCertReason).
const (
	ClientCertNone         = "no_cert"        // none sent although required
	ClientCertUnknownCA    = "unknown_ca"     // chain does not lead to a configured client CA
	ClientCertExpired      = "expired"        // outside its validity period
	ClientCertBadSignature = "bad_signature"  // CertificateVerify does not verify
	ClientCertKeyUsage     = "key_usage"      // wrong key usage or extended key usage
	ClientCertRevoked      = "revoked"        // on its issuer's CRL (client_auth.crl)
	ClientCertCRLExpired   = "crl_expired"    // its issuer's CRL is past nextUpdate or not yet valid
	ClientCertNoCRL        = "no_crl"         // its issuer has no CRL
	ClientCertTooDeep      = "chain_too_long" // more intermediates than client_auth.verify_depth
	ClientCertOther        = "other"          // malformed, unsupported key, refused by policy
)

// ClientCertReasons lists every value of HandshakeEvent.ClientCert.
var ClientCertReasons = []string{ClientCertNone, ClientCertUnknownCA, ClientCertExpired,
	ClientCertBadSignature, ClientCertKeyUsage, ClientCertRevoked, ClientCertCRLExpired,
	ClientCertNoCRL, ClientCertTooDeep, ClientCertOther}

// Failure reasons: a small fixed set, safe as metric label values; those a
// TLCP or TLS 1.3-SM handshake reports itself are the record core's.
const (
	ReasonTimeout        = record.ReasonTimeout
	ReasonBadCertificate = record.ReasonBadCertificate
	ReasonNoSharedCipher = record.ReasonNoSharedCipher
	ReasonProtocolError  = record.ReasonProtocolError
	ReasonPeerAlert      = record.ReasonPeerAlert
	ReasonEOF            = record.ReasonEOF
	ReasonUnknownProto   = "unknown_protocol"
	ReasonRefused        = "refused"
	ReasonInternal       = record.ReasonInternal
)

// Observer receives handshake and connection events. Implementations must be
// cheap and safe for concurrent use (metrics implements it).
type Observer interface {
	// ConnAccepted is called for every accepted TCP connection.
	ConnAccepted(listener string)
	// ConnRefused is called when limits refuse a connection.
	ConnRefused(listener, why string)
	// ConnClosed is called once per connection that was accepted.
	ConnClosed(listener string)
	// HandshakeStarted / HandshakeDone bracket every handshake attempt.
	HandshakeStarted(listener string)
	HandshakeDone(ev HandshakeEvent)
	// Bytes reports plaintext application bytes moved and records, per cipher.
	Bytes(family, cipher string, rx, tx, rxRecords, txRecords uint64)
}

// NopObserver implements Observer and does nothing; embed it to implement a subset.
type NopObserver struct{}

func (NopObserver) ConnAccepted(string)                                  {}
func (NopObserver) ConnRefused(string, string)                           {}
func (NopObserver) ConnClosed(string)                                    {}
func (NopObserver) HandshakeStarted(string)                              {}
func (NopObserver) HandshakeDone(HandshakeEvent)                         {}
func (NopObserver) Bytes(string, string, uint64, uint64, uint64, uint64) {}

// ConnDurationObserver is optionally implemented by an Observer that wants
// the lifetime of every established connection, from accept to close; the
// server calls ConnDone just before ConnClosed.
type ConnDurationObserver interface {
	ConnDone(listener, family string, d time.Duration)
}

// SessionObserver receives session-cache and ticket events per protocol family.
type SessionObserver interface {
	SessionLookup(family string, hit bool)
	// SessionCacheSize reports the size of the family's session cache
	// and the family's cumulative count of evictions, which never goes
	// down (not even when a reload makes a new cache); concurrent reports
	// may arrive out of order.
	SessionCacheSize(family string, size int, evictions uint64)
	TicketIssued(family string)
	TicketAccepted(family string)
	TicketRejected(family string)
}

// TicketReasonObserver is optionally implemented by a SessionObserver that
// also wants the reason of a rejected session ticket. The daemon calls
// TicketRejectedReason instead of TicketRejected when the observer has it;
// reason is one of TicketRejectReasons, or "" when the protocol gave none.
type TicketReasonObserver interface {
	TicketRejectedReason(family, reason string)
}

// TicketRejectReasons is the bounded set of reasons a session ticket is
// rejected for, over both protocols (the TicketReason* constants of tlcp
// and tls13sm): disabled, undecryptable (unknown or retired ticket key,
// damaged or forged ticket), malformed, expired, identity_mismatch
// (another site's certificate or SNI), suite_mismatch, client_auth_required,
// client_cert_invalid (no longer verifies against the current ClientCAs),
// client_cert_expired, psk_mode, age_mismatch and bad_binder (TLS 1.3-SM).
var TicketRejectReasons = []string{
	tlcp.TicketReasonDisabled,
	tlcp.TicketReasonUndecryptable,
	tlcp.TicketReasonMalformed,
	tlcp.TicketReasonExpired,
	tlcp.TicketReasonIdentity,
	tlcp.TicketReasonSuite,
	tlcp.TicketReasonClientAuth,
	tlcp.TicketReasonClientCert,
	tls13sm.TicketReasonClientCertExpired,
	tls13sm.TicketReasonPSKMode,
	tls13sm.TicketReasonAgeMismatch,
	tls13sm.TicketReasonBadBinder,
}
