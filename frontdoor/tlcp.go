package frontdoor

import (
	"context"
	"net"

	"github.com/gmproxy/gmproxy/tlcp"
)

// TLCPHandshaker answers TLCP hellos with the tlcp package and cfg (the
// site's sign/enc certificates, suites, client auth, session store and
// ticket keys). For the 360-browser policy use a cfg with
// AllowTLSRecordHello set.
func TLCPHandshaker(cfg *tlcp.Config) Handshaker {
	return HandshakerFunc(func(ctx context.Context, conn net.Conn, _ *ClientHello) (*Established, error) {
		c := tlcp.Server(conn, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			return nil, Reasoned(smReason(err), err)
		}
		cs := c.ConnectionState()
		st := ConnState{
			Family:           FamilyTLCP,
			Protocol:         ProtoTLCP,
			Cipher:           tlcp.CipherSuiteName(cs.CipherSuite),
			Resumed:          cs.DidResume,
			SNI:              cs.ServerName,
			ALPN:             cs.NegotiatedProtocol,
			ClientAuth:       len(cs.VerifiedChains) > 0,
			PeerCertificates: cs.PeerCertificates,
		}
		return &Established{Conn: c, State: st}, nil // counted by recordStats
	})
}
