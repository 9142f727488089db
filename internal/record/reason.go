package record

// Handshake failure reasons both stacks report in HandshakeResult.Reason:
// a small fixed set, safe as metric label values (frontdoor's reasons for
// the same causes are these).
const (
	ReasonTimeout        = "timeout"
	ReasonEOF            = "eof"
	ReasonPeerAlert      = "peer_alert"
	ReasonBadCertificate = "bad_certificate"
	ReasonNoSharedCipher = "no_shared_cipher"
	ReasonProtocolError  = "protocol_error"
	ReasonInternal       = "internal_error"
)
