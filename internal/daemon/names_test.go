package daemon

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/balance"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// nearMisses are names that neither conf nor the runtime takes: spellings
// of real names and names other proxies use.
var nearMisses = []string{"https", "TLS", "Tlcp", "tls12", "tls13", "ntls", "gmtls", "h3", "http2", "grpc",
	"round-robin", "roundrobin", "random", "least_time", "iphash", "consistent_hash", "first"}

// candidates is every name the name packages list plus nearMisses.
func candidates() []string {
	all := slices.Concat(family.Names(), family.TLCPInTLSPolicies(), balance.Names(), upstreamproto.Names(), nearMisses)
	slices.Sort(all)
	return slices.Compact(all)
}

// confAccepts reports whether conf has no problem at path in the
// configuration built by yaml(name).
func confAccepts(t *testing.T, path string, yaml string) bool {
	t.Helper()
	_, err := conf.Parse("../../conf/testdata/good/names.yaml", []byte(yaml))
	var probs conf.Problems
	if err != nil && !errors.As(err, &probs) {
		t.Fatalf("%s: %v", path, err)
	}
	for _, p := range probs {
		if p.Path == path && p.Severity == conf.SeverityError {
			return false
		}
	}
	return true
}

const namesSite = `sites:
  - tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes:
      - {upstream: app}
`

// runtimeUpstream reports whether the proxy builds an upstream with the
// given balance and protocol, as the daemon maps them.
func runtimeUpstream(bal, proto string) error {
	u := conf.Upstream{Name: "app", Balance: bal, Protocol: proto, Targets: []conf.Target{{Address: "127.0.0.1:1", Weight: 1}}}
	u.HashKey.Header = "X-Key"
	u.TLS.InsecureSkipVerify = true
	px, err := proxy.New(proxy.Config{
		Sites:     []proxy.SiteConfig{{Name: "s", Routes: []proxy.RouteConfig{{Upstream: "app"}}}},
		Upstreams: []proxy.UpstreamConfig{upstreamConfig(&u)},
	}, nil, nil)
	if err == nil {
		px.Close()
	}
	return err
}

// TestNamesConfAcceptsAreImplemented checks, for every listener protocol,
// balancing policy and upstream protocol name (and near misses), that conf
// accepts the name exactly when the runtime implements it, and that the
// names are exactly those of the name packages.
func TestNamesConfAcceptsAreImplemented(t *testing.T) {
	for _, n := range candidates() {
		t.Run(n, func(t *testing.T) {
			// Listener protocols: conf against the handshake server.
			inConf := confAccepts(t, "listeners[0].protocols[0]", fmt.Sprintf("listeners:\n  - address: 127.0.0.1:0\n    protocols: [%s]\n", n)+namesSite+"upstreams:\n  - {name: app, targets: [127.0.0.1:1]}\n")
			runErr := (&frontdoor.ListenerConfig{}).EnableFamilies([]string{n})
			if inConf != (runErr == nil) || inConf != slices.Contains(family.Names(), n) {
				t.Errorf("listener protocol %q: conf accepts %v, handshake: %v, listed in family.Names: %v", n, inConf, runErr, slices.Contains(family.Names(), n))
			}

			// TLCP suites in a TLS hello: conf takes exactly the policies
			// frontdoor names (its TLCPInTLSPolicy constants are these).
			inConf = confAccepts(t, "listeners[0].tlcp_suites_in_tls_hello", fmt.Sprintf("listeners:\n  - address: 127.0.0.1:0\n    tlcp_suites_in_tls_hello: %q\n", n)+namesSite+"upstreams:\n  - {name: app, targets: [127.0.0.1:1]}\n")
			if inConf != slices.Contains(family.TLCPInTLSPolicies(), n) {
				t.Errorf("tlcp_suites_in_tls_hello %q: conf accepts %v, listed in family.TLCPInTLSPolicies: %v", n, inConf, !inConf)
			}

			// Balancing policies: conf against the proxy.
			inConf = confAccepts(t, "upstreams[0].balance", "listeners:\n  - address: 127.0.0.1:0\n"+namesSite+
				fmt.Sprintf("upstreams:\n  - {name: app, targets: [127.0.0.1:1], balance: %s, hash_key: {header: X-Key}}\n", n))
			runErr = runtimeUpstream(n, upstreamproto.HTTP)
			if inConf != (runErr == nil) || inConf != slices.Contains(balance.Names(), n) {
				t.Errorf("balance %q: conf accepts %v, proxy: %v, listed in balance.Names: %v", n, inConf, runErr, slices.Contains(balance.Names(), n))
			}

			// Upstream protocols: conf against the proxy.
			inConf = confAccepts(t, "upstreams[0].protocol", "listeners:\n  - address: 127.0.0.1:0\n"+namesSite+
				fmt.Sprintf("upstreams:\n  - {name: app, targets: [127.0.0.1:1], protocol: %s, tls: {insecure_skip_verify: true}}\n", n))
			runErr = runtimeUpstream(balance.RoundRobin, n)
			if inConf != (runErr == nil) || inConf != slices.Contains(upstreamproto.Names(), n) {
				t.Errorf("upstream protocol %q: conf accepts %v, proxy: %v, listed in upstreamproto.Names: %v", n, inConf, runErr, slices.Contains(upstreamproto.Names(), n))
			}
		})
	}
}
