package tlcp

import (
	"github.com/gmproxy/gmproxy/internal/record"
)

// Session-ticket events for the server's Config.OnTicket hook, so that
// ticket resumption (which never touches the SessionStore) shows up in
// metrics like session-ID resumption does.

// TicketEventKind says what happened to a session ticket on the server
// (the same type as tls13sm.TicketEventKind).
type TicketEventKind = record.TicketEventKind

const (
	// TicketIssued: a NewSessionTicket was sent (after a full handshake, or
	// a fresh one after a ticket resumption).
	TicketIssued = record.TicketIssued
	// TicketAccepted: the client's ticket was used to resume.
	TicketAccepted = record.TicketAccepted
	// TicketRejected: the client offered a non-empty ticket and it was not
	// used; the server goes on with a full handshake (or, with tickets
	// disabled, tries the session ID).
	TicketRejected = record.TicketRejected
)

// Reasons of a TicketRejected event: a small fixed set, safe as a metric
// label. The names match tls13sm's where the cause is the same.
const (
	// TicketReasonDisabled: Config.SessionTicketsDisabled is set.
	TicketReasonDisabled = record.TicketReasonDisabled
	// TicketReasonUndecryptable: unknown or retired ticket key, a damaged or
	// forged ticket, or one not made by this service.
	TicketReasonUndecryptable = record.TicketReasonUndecryptable
	// TicketReasonMalformed: the ticket decrypted but does not hold a TLCP
	// session this version understands (bad encoding, another protocol
	// version, client certificates that no longer parse).
	TicketReasonMalformed = record.TicketReasonMalformed
	// TicketReasonExpired: older than Config.SessionLifetime, or issued
	// more than a minute in the future.
	TicketReasonExpired = record.TicketReasonExpired
	// TicketReasonIdentity: the session belongs to another server signing
	// certificate or another SNI name (a ticket key shared between sites).
	TicketReasonIdentity = record.TicketReasonIdentity
	// TicketReasonSuite: the session's cipher suite is not the one this
	// server picks for the ClientHello.
	TicketReasonSuite = record.TicketReasonSuite
	// TicketReasonClientAuth: the server requires a client certificate
	// (ClientAuth policy, or an ECDHE suite) and the session has none.
	TicketReasonClientAuth = record.TicketReasonClientAuth
	// TicketReasonClientCert: the session's client certificates no longer
	// verify (the server verifies client certificates and its ClientCAs no
	// longer trust them, or one has expired).
	TicketReasonClientCert = record.TicketReasonClientCert
)

// TicketEvent is passed to Config.OnTicket (server side). A handshake whose
// ClientHello carries a non-empty session_ticket reports exactly one
// TicketAccepted or TicketRejected; a handshake that sends a
// NewSessionTicket reports TicketIssued once the message has been written.
type TicketEvent = record.TicketEvent

// ticketEvent reports an event to the server's OnTicket hook, if any.
func (hs *serverHandshakeState) ticketEvent(kind TicketEventKind, reason string, stale bool) {
	if f := hs.config.OnTicket; f != nil {
		f(TicketEvent{Kind: kind, Reason: reason, Stale: stale})
	}
}
