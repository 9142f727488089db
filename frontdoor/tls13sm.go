package frontdoor

import (
	"context"
	"net"

	"github.com/gmproxy/gmproxy/tls13sm"
)

// TLS13SMHandshaker answers TLS 1.3 hellos offering RFC 8998 suites with the
// tls13sm package and cfg.
func TLS13SMHandshaker(cfg *tls13sm.Config) Handshaker {
	return HandshakerFunc(func(ctx context.Context, conn net.Conn, _ *ClientHello) (*Established, error) {
		c := tls13sm.Server(conn, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			return nil, Reasoned(smReason(err), err)
		}
		cs := c.ConnectionState()
		st := ConnState{
			Family:           FamilyTLS13SM,
			Protocol:         ProtoTLS13SM,
			Cipher:           tls13sm.CipherSuiteName(cs.CipherSuite),
			Resumed:          cs.DidResume,
			SNI:              cs.ServerName,
			ALPN:             cs.NegotiatedProtocol,
			ClientAuth:       len(cs.VerifiedChains) > 0 || cs.ClientVerified,
			PeerCertificates: cs.PeerCertificates,
		}
		return &Established{Conn: c, State: st}, nil // counted by recordStats
	})
}
