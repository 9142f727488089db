package record

// TicketEventKind says what happened to a session ticket on a server; the
// tlcp and tls13sm packages re-export it (and its values) for their
// Config.OnTicket hooks, which document what each kind means there.
type TicketEventKind uint8

const (
	// TicketIssued: a NewSessionTicket was sent.
	TicketIssued TicketEventKind = iota + 1
	// TicketAccepted: an offered ticket was used to resume.
	TicketAccepted
	// TicketRejected: the client offered a ticket and it was not used.
	TicketRejected
)

func (k TicketEventKind) String() string {
	switch k {
	case TicketIssued:
		return "issued"
	case TicketAccepted:
		return "accepted"
	case TicketRejected:
		return "rejected"
	}
	return "unknown"
}

// TicketEvent is what a server's Config.OnTicket hook receives, in both
// stacks (tlcp.TicketEvent and tls13sm.TicketEvent are this type; each
// documents when it reports which event).
type TicketEvent struct {
	Kind TicketEventKind
	// Reason is one of the TicketReason constants for TicketRejected, ""
	// otherwise.
	Reason string
	// Stale is true for TicketAccepted when the ticket was sealed with an
	// older ticket key than the one currently issuing (rotation).
	Stale bool
	// DidHRR is true when the event belongs to a TLS 1.3 handshake that
	// sent a HelloRetryRequest (never for TLCP).
	DidHRR bool
}

// Reasons of a TicketRejected event: a small fixed set, safe as a metric
// label, one name per cause for both stacks (each documents the ones it
// reports).
const (
	TicketReasonDisabled          = "disabled"
	TicketReasonPSKMode           = "psk_mode" // TLS 1.3 only
	TicketReasonUndecryptable     = "undecryptable"
	TicketReasonMalformed         = "malformed"
	TicketReasonExpired           = "expired"
	TicketReasonAgeMismatch       = "age_mismatch" // TLS 1.3 only
	TicketReasonIdentity          = "identity_mismatch"
	TicketReasonSuite             = "suite_mismatch"
	TicketReasonClientAuth        = "client_auth_required"
	TicketReasonClientCert        = "client_cert_invalid"
	TicketReasonClientCertExpired = "client_cert_expired" // TLS 1.3 only
	TicketReasonBadBinder         = "bad_binder"          // TLS 1.3 only
)
