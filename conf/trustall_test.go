package conf

import "testing"

// TestTrustEveryAddressWarned: a trusted_proxies or proxy_protocol.trusted
// entry that holds every address (0.0.0.0/0, ::/0, or ::ffff:0.0.0.0/96,
// read as 0.0.0.0/0) lets any client name its own address, so the
// per-client limits and rate_limit count what it chooses: warned where it
// is written. A narrower range is not.
func TestTrustEveryAddressWarned(t *testing.T) {
	text := `
listeners:
  - address: "127.0.0.1:0"
    proxy_protocol: {enabled: true, trusted: [10.0.0.0/8, "::/0"]}
trusted_proxies: [0.0.0.0/0, 192.0.2.0/24, "::ffff:0.0.0.0/96", "2001:db8::/32", "0.0.0.0/1"]
sites:
  - server_names: [portal.example.cn]
    tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes:
      - {path_prefix: /, upstream: app}
upstreams:
  - {name: app, targets: [127.0.0.1:8080]}
`
	expectWarnings(t, "testdata/good/trustall.yaml", text, "every address", []string{
		"4:59 listeners[0].proxy_protocol.trusted[1]: ::/0 trusts every address: any client can name its own address, and the per-client limits and rate_limit count the address it names",
		"5:19 trusted_proxies[0]: 0.0.0.0/0 trusts every address: any client can name its own address, and the per-client limits and rate_limit count the address it names",
		"5:44 trusted_proxies[2]: ::ffff:0.0.0.0/96 trusts every address: any client can name its own address, and the per-client limits and rate_limit count the address it names",
	})
}
