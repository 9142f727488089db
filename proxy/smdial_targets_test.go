package proxy

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// sessionServer starts, for one SM protocol, upstream servers with their
// own ticket keys (secret), which share no session state.
type sessionServer struct {
	proto   string
	target  func(secret byte) string
	resumed func(net.Conn) bool
}

func sessionServers(t *testing.T) []sessionServer {
	p := func(n string) string { return pkiPath(t, n) }
	tlcpCert, err := tlcp.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), p("server_enc.crt"), p("server_enc.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	smCert, err := tls13sm.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return []sessionServer{
		{upstreamproto.TLCP, func(secret byte) string {
			cfg := &tlcp.Config{Certificates: []tlcp.Certificate{tlcpCert}, TicketKeys: testpeer.TicketKeys(t, secret), SessionCacheDisabled: true}
			return testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tlcp.Server(c, cfg) })
		}, func(c net.Conn) bool { return c.(*tlcp.Conn).ConnectionState().DidResume }},
		{upstreamproto.TLS13SM, func(secret byte) string {
			cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{smCert}, TicketKeys: testpeer.TicketKeys(t, secret)}
			return testpeer.ServeHandshakes(t, func(c net.Conn) testpeer.ServerConn { return tls13sm.Server(c, cfg) })
		}, func(c net.Conn) bool { return c.(*tls13sm.Conn).ConnectionState().DidResume }},
	}
}

// TestSMDialerSessionsPerTarget: an upstream with a fixed server_name
// and two targets that do not share session state (their own ticket
// keys), dialed in turn. Each target's sessions are kept apart, so that
// every new connection after the first to a target resumes; one session
// per server name made each dial offer the other target's session and
// fall back to a full handshake, every time.
func TestSMDialerSessionsPerTarget(t *testing.T) {
	for _, tc := range sessionServers(t) {
		t.Run(tc.proto, func(t *testing.T) {
			a, b := tc.target(1), tc.target(2)
			tlsc := &UpstreamTLSConfig{CA: pkiPath(t, "ca.crt"), ServerName: "localhost"}
			dial, err := smDialer(&UpstreamConfig{Name: "gm", Protocol: tc.proto, TLS: tlsc}, &net.Dialer{})
			if err != nil {
				t.Fatal(err)
			}
			testpeer.DialInTurn(t, dial, a, b, tc.resumed)
		})
	}
}

// TestSMDialerSessionsPerResolvedAddress: a target given by name that
// resolves to two addresses whose servers do not share session state.
// The proxy dials the name (byName), the address in the context
// (DialAddr): sessions keyed by the name made each dial offer the other
// address's session, so that with the addresses taken in turn no
// connection ever resumed. Each address now has its own, as nginx keeps
// one per upstream peer (proxy_ssl_session_reuse).
func TestSMDialerSessionsPerResolvedAddress(t *testing.T) {
	for _, tc := range sessionServers(t) {
		t.Run(tc.proto, func(t *testing.T) {
			a, b := tc.target(1), tc.target(2)
			tlsc := &UpstreamTLSConfig{CA: pkiPath(t, "ca.crt"), ServerName: "localhost"}
			dial, err := smDialer(&UpstreamConfig{Name: "gm", Protocol: tc.proto, TLS: tlsc}, &net.Dialer{})
			if err != nil {
				t.Fatal(err)
			}
			byName := func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dial(context.WithValue(ctx, dialTo{}, addr), network, "app.test:443")
			}
			testpeer.DialInTurn(t, byName, a, b, tc.resumed)
		})
	}
}

// TestTargetConfigsCap: a TargetConfigs lookup keeps the configs of up to
// 1024 target addresses (a config made once per address while they fit)
// and starts afresh at the 1025th, so that addresses re-resolution keeps
// bringing do not grow it without end.
func TestTargetConfigsCap(t *testing.T) {
	const capacity = 1024
	made := 0
	configs := TargetConfigs(func(name, to string) *string { made++; return &to }, "")
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(1+i)) }
	ctx := context.Background()
	for i := range capacity {
		if c := configs(ctx, addr(i)); *c != addr(i) {
			t.Fatalf("config for %s made for %s", addr(i), *c)
		}
	}
	// All 1024 are kept: none is made again.
	for i := range capacity {
		configs(ctx, addr(i))
	}
	if made != capacity {
		t.Fatalf("%d configs made for %d addresses looked up twice, want %d: the lookup forgot some under its cap", made, capacity, capacity)
	}
	// The 1025th address starts afresh: the first one's config is made again.
	configs(ctx, addr(capacity))
	configs(ctx, addr(0))
	if made != capacity+2 {
		t.Fatalf("%d configs made after a 1025th address and the first again, want %d: the lookup kept more than %d", made, capacity+2, capacity)
	}
}

// TestTargetConfigsServerName: without a server_name, a dial's name (SNI,
// and what the certificate is verified against) is the target's host;
// an IPv6 link-local target's zone (fe80::1%eth0) names the local
// interface, not the peer, and is left out: the certificate's IP SAN
// has no zone. No link-local network is needed: the name is computed.
func TestTargetConfigsServerName(t *testing.T) {
	for _, tc := range []struct{ serverName, addr, want string }{
		{"", "[fe80::1%eth0]:443", "fe80::1"},
		{"", "[::1]:443", "::1"},
		{"", "127.0.0.1:443", "127.0.0.1"},
		{"", "app.example:443", "app.example"},
		{"", "app.example", "app.example"},
		{"backend.example", "[fe80::1%eth0]:443", "backend.example"},
	} {
		var got string
		configs := TargetConfigs(func(name, to string) *string { got = name; return &to }, tc.serverName)
		configs(context.Background(), tc.addr)
		if got != tc.want {
			t.Errorf("server_name %q, target %s: name %q, want %q", tc.serverName, tc.addr, got, tc.want)
		}
	}
}
