package proxy

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestSMDialerOffersHTTP11: the library's TLCP and TLS 1.3-SM dialer
// offers the upstream the protocol its Transport speaks over them,
// http/1.1 (ALPN, RFC 7301), as the daemon's dialer does: a server that
// serves h2 or http/1.1 by ALPN, or refuses a client that names none,
// otherwise took it for what it is not. A TLCP upstream with
// no_client_extensions sends no extension, ALPN included.
func TestSMDialerOffersHTTP11(t *testing.T) {
	p := func(n string) string { return pkiPath(t, n) }
	tlcpCert, err := tlcp.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), p("server_enc.crt"), p("server_enc.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	smCert, err := tls13sm.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, proto  string
		noExtensions bool
		want         []string
	}{
		{"tlcp", upstreamproto.TLCP, false, []string{"http/1.1"}},
		{"tlcp-no-extensions", upstreamproto.TLCP, true, nil},
		{"tls13sm", upstreamproto.TLS13SM, false, []string{"http/1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offered := make(chan []string, 1)
			var addr string
			switch tc.proto {
			case upstreamproto.TLCP:
				cfg := &tlcp.Config{Certificates: []tlcp.Certificate{tlcpCert}, GetConfigForClient: func(h *tlcp.ClientHelloInfo) (*tlcp.Config, error) {
					offered <- slices.Clone(h.SupportedProtos)
					return nil, nil
				}}
				addr = testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tlcp.Server(c, cfg) })
			case upstreamproto.TLS13SM:
				cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{smCert}, GetConfigForClient: func(h *tls13sm.ClientHelloInfo) (*tls13sm.Config, error) {
					offered <- slices.Clone(h.SupportedProtos)
					return nil, nil
				}}
				addr = testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tls13sm.Server(c, cfg) })
			}
			tlsc := &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost", NoClientExtensions: tc.noExtensions}
			dial, err := smDialer(&UpstreamConfig{Name: "gm", Protocol: tc.proto, TLS: tlsc}, &net.Dialer{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := dial(context.Background(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := <-offered; !slices.Equal(got, tc.want) {
				t.Errorf("the upstream saw ALPN %q offered, want %q", got, tc.want)
			}
		})
	}
}
