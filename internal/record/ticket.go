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
