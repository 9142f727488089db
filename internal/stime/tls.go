package stime

import (
	"context"
	"crypto/tls"
	"net"
)

// TLS returns a Handshaker for ordinary TLS with crypto/tls. Give cfg a
// ClientSessionCache for -reuse; cfg is shared by all connections.
func TLS(cfg *tls.Config) Handshaker {
	return func(ctx context.Context, raw net.Conn) (net.Conn, ConnInfo, error) {
		c := tls.Client(raw, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			return nil, ConnInfo{}, err
		}
		st := c.ConnectionState()
		return c, ConnInfo{Resumed: st.DidResume, Version: tls.VersionName(st.Version), Cipher: tls.CipherSuiteName(st.CipherSuite)}, nil
	}
}
