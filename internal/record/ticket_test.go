package record

import "testing"

func TestTicketEventKindString(t *testing.T) {
	for k, want := range map[TicketEventKind]string{TicketIssued: "issued", TicketAccepted: "accepted", TicketRejected: "rejected", 0: "unknown", 4: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(k), got, want)
		}
	}
}
