package daemon

import (
	"testing"

	"github.com/gmproxy/gmproxy/conf"
)

// TestZeroMeansOffOrUnlimited: every configuration value whose 0 means
// "off" or "unlimited" maps, written as an explicit 0 in YAML, onto the
// runtime value that means the same (not onto a default or onto 1). The
// proxy's and handshake server's reading of those runtime values is
// tested in their packages (TestPassiveHealthOff, TestKeepaliveOff,
// TestConnLimit...).
func TestZeroMeansOffOrUnlimited(t *testing.T) {
	cfg, err := conf.Parse("../../conf/testdata/good/zero.yaml", []byte(`listeners:
  - address: 127.0.0.1:0
    max_handshakes: 0
    max_connections: 0
    max_handshakes_per_client: 0
    max_connections_per_client: 0
    max_handshake_bytes: 0
    http: {read_timeout: 0, write_timeout: 0}
sites:
  - tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes:
      - {upstream: app, max_body: 0}
upstreams:
  - name: app
    targets: [127.0.0.1:8080]
    keepalive: {max_idle: 0, max_conns: 0}
    timeouts: {read: 0, write: 0, tunnel_idle: 0, grpc_timeout_max: 0}
    max_response_header_bytes: 8KiB
    max_response_header_fields: 50
    health_checks: {passive: {max_fails: 0}, active: {path: /, expect_status: 0}}
`))
	if err != nil {
		t.Fatal(err)
	}
	pc := proxyConfig(cfg)
	u := pc.Upstreams[0]
	l := pc.Limits
	maxHS, maxConns := handshakeLimits(&cfg.Listeners[0])
	for _, c := range []struct {
		key string
		ok  bool
		got any
	}{
		{"max_handshakes: 0 is unlimited", maxHS >= 1<<30, maxHS},
		{"max_connections: 0 is unlimited (handshake MaxConns 0)", maxConns == 0, maxConns},
		{"max_handshakes_per_client: 0 is unlimited (handshake 0)", cfg.Listeners[0].MaxHandshakesPerClient == 0, cfg.Listeners[0].MaxHandshakesPerClient},
		{"max_connections_per_client: 0 is unlimited (handshake 0)", cfg.Listeners[0].MaxConnectionsPerClient == 0, cfg.Listeners[0].MaxConnectionsPerClient},
		{"max_handshake_bytes: 0 is unlimited", handshakeBytes(&cfg.Listeners[0]) >= 1<<62, handshakeBytes(&cfg.Listeners[0])},
		{"http.read_timeout: 0 is no limit", l.ReadTimeout == 0, l.ReadTimeout},
		{"http.write_timeout: 0 is no limit", l.WriteTimeout == 0, l.WriteTimeout},
		{"max_body: 0 is unlimited", pc.Sites[0].Routes[0].MaxBodyBytes == 0, pc.Sites[0].Routes[0].MaxBodyBytes},
		{"keepalive.max_idle: 0 disables keep-alive (negative MaxIdleConns)", u.Transport.MaxIdleConns < 0, u.Transport.MaxIdleConns},
		{"timeouts.read: 0 is no limit (negative ReadTimeout)", u.Transport.ReadTimeout < 0, u.Transport.ReadTimeout},
		{"timeouts.write: 0 is no limit (negative WriteTimeout)", u.Transport.WriteTimeout < 0, u.Transport.WriteTimeout},
		{"max_response_header_bytes: 8KiB (not a zero, passed on)", u.Transport.MaxResponseHeaderBytes == 8<<10, u.Transport.MaxResponseHeaderBytes},
		{"max_response_header_fields: 50 (not a zero, passed on)", u.Transport.MaxResponseHeaderFields == 50, u.Transport.MaxResponseHeaderFields},
		{"timeouts.tunnel_idle: 0 is no limit (negative TunnelIdleTimeout)", u.Transport.TunnelIdleTimeout < 0, u.Transport.TunnelIdleTimeout},
		{"timeouts.grpc_timeout_max: 0 is grpc-timeout not honoured (negative GRPCTimeoutMax)", u.Transport.GRPCTimeoutMax < 0, u.Transport.GRPCTimeoutMax},
		{"keepalive.max_conns: 0 is unlimited", u.Transport.MaxConnsPerTarget == 0, u.Transport.MaxConnsPerTarget},
		{"passive.max_fails: 0 disables passive checks (negative MaxFails)", u.HealthCheck.Passive.MaxFails < 0, u.HealthCheck.Passive.MaxFails},
		{"active.expect_status: 0 is any 2xx or 3xx", u.HealthCheck.Active.ExpectStatus == 0, u.HealthCheck.Active.ExpectStatus},
	} {
		if !c.ok {
			t.Errorf("%s: runtime value %v", c.key, c.got)
		}
	}
}
