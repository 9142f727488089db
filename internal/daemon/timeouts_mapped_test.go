package daemon

import (
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
)

// TestTimeoutsMapped: a route's timeouts.send and an upstream's
// timeouts.h2_ping and grpc_timeout_max reach the proxy's configuration.
func TestTimeoutsMapped(t *testing.T) {
	cfg := tlcpSiteConfig(t, "timeouts.yaml", `      - {path_prefix: /iso/, upstream: app, timeouts: {send: 2h}}
      - {upstream: app}
upstreams:
  - name: app
    protocol: h2c
    targets: [127.0.0.1:8080]
    timeouts: {h2_ping: 5m, grpc_timeout_max: 1h}
`)
	pc := proxyConfig(cfg)
	if got := pc.Sites[0].Routes[0].SendTimeout; got != 2*time.Hour {
		t.Errorf("routes[0].timeouts.send: proxy SendTimeout %v, want 2h", got)
	}
	if got := pc.Sites[0].Routes[1].SendTimeout; got != 0 {
		t.Errorf("a route without timeouts.send: proxy SendTimeout %v, want 0 (the listener's)", got)
	}
	if got := pc.Upstreams[0].Transport.H2PingTimeout; got != 5*time.Minute {
		t.Errorf("timeouts.h2_ping: proxy H2PingTimeout %v, want 5m", got)
	}
	if got := pc.Upstreams[0].Transport.GRPCTimeoutMax; got != time.Hour {
		t.Errorf("timeouts.grpc_timeout_max: proxy GRPCTimeoutMax %v, want 1h", got)
	}
}

// tlcpSiteConfig parses, as the file name in conf's testdata/good, a
// configuration of one listener and one TLCP site of the test PKI whose
// routes (and what follows them) are rest.
func tlcpSiteConfig(t *testing.T, name, rest string) *conf.Config {
	t.Helper()
	cfg, err := conf.Parse("../../conf/testdata/good/"+name, []byte(`listeners:
  - address: 127.0.0.1:0
sites:
  - tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes:
`+rest))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
