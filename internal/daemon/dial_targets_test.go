package daemon

import (
	"net"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestUpstreamSessionsPerTarget: an upstream with tls.server_name and two
// targets that share no session state (their own ticket keys), dialed in
// turn. Each target's client sessions are kept apart, so every new
// connection after the first to a target resumes; with one session per
// server name each dial offered the other target's and made a full
// handshake, every time.
func TestUpstreamSessionsPerTarget(t *testing.T) {
	p := testPKI(t)
	tlcpTarget := func(secret byte) string {
		cfg := &tlcp.Config{Certificates: []tlcp.Certificate{{
			SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
			EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
		}}, TicketKeys: testpeer.TicketKeys(t, secret), SessionCacheDisabled: true}
		return testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tlcp.Server(c, cfg) })
	}
	smTarget := func(secret byte) string {
		cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{{
			Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: p.ServerSign.Key,
		}}, TicketKeys: testpeer.TicketKeys(t, secret)}
		return testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tls13sm.Server(c, cfg) })
	}
	for _, tc := range []struct {
		proto   string
		target  func(secret byte) string
		resumed func(net.Conn) bool
	}{
		{upstreamproto.TLCP, tlcpTarget, func(c net.Conn) bool { return c.(*tlcp.Conn).ConnectionState().DidResume }},
		{upstreamproto.TLS13SM, smTarget, func(c net.Conn) bool { return c.(*tls13sm.Conn).ConnectionState().DidResume }},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			a, b := tc.target(1), tc.target(2)
			cfg := &conf.Config{Upstreams: []conf.Upstream{{
				Name: "gm", Protocol: tc.proto,
				Targets:  []conf.Target{{Address: a, Weight: 1}, {Address: b, Weight: 1}},
				TLS:      conf.UpstreamTLSConfig{ServerName: "localhost"},
				Material: conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{p.CA.Cert}},
			}}}
			pc := &proxy.Config{Upstreams: []proxy.UpstreamConfig{{Name: "gm"}}}
			if err := wireUpstreamDialers(&Env{}, 1, cfg, pc); err != nil {
				t.Fatal(err)
			}
			testpeer.DialInTurn(t, pc.Upstreams[0].DialTLSContext, a, b, tc.resumed)
		})
	}
}
