package frontdoor

import (
	"context"
	"crypto/tls"
	"net"
	"strings"

	"github.com/emmansun/gmsm/smx509"
)

// TLSHandshaker answers ordinary TLS hellos with crypto/tls and cfg (the
// site's RSA/ECDSA certificates, ALPN, client auth, session tickets).
func TLSHandshaker(cfg *tls.Config) Handshaker {
	return HandshakerFunc(func(ctx context.Context, conn net.Conn, _ *ClientHello) (*Established, error) {
		tc := tls.Server(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		cs := tc.ConnectionState()
		st := ConnState{
			Family:   FamilyTLS,
			Protocol: tlsVersionName(cs.Version),
			Cipher:   tls.CipherSuiteName(cs.CipherSuite),
			Resumed:  cs.DidResume,
			SNI:      cs.ServerName,
			ALPN:     cs.NegotiatedProtocol,
		}
		// PeerCertificates[0] is the client's identity (the proxy's
		// X-Ssl-Client-* headers, the access log), so the list is the
		// leading run of certificates smx509 parses: one it cannot (a
		// subject attribute crypto/x509 reads and smx509 does not) ends
		// it. Skipping it would move up the next certificate the client
		// sent, which crypto/tls only offered as an intermediate and
		// which may be one the client made itself.
		for _, c := range cs.PeerCertificates {
			sc, err := smx509.ParseCertificate(c.Raw)
			if err != nil {
				break
			}
			st.PeerCertificates = append(st.PeerCertificates, sc)
		}
		// A verified leaf the proxy cannot read names no one (the
		// headers say NONE): the handshake metric and the access log
		// say no client authentication either.
		st.ClientAuth = len(st.PeerCertificates) > 0 && len(cs.VerifiedChains) > 0
		return &Established{Conn: tc, State: st}, nil
	})
}

// tlsVersionName returns "TLSv1.2" style names (OpenSSL's spelling, as in logs
// and the access log).
func tlsVersionName(v uint16) string {
	// tls.VersionName gives "TLS 1.3".
	return strings.Replace(tls.VersionName(v), "TLS ", "TLSv", 1)
}
