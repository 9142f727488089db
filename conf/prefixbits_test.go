package conf

import "testing"

// TestPrefixHostBitsWarned: a CIDR of trusted_proxies, proxy_protocol.trusted
// or client_ip with bits set past its length (198.51.100.10/2, a /32 or
// /24 whose length lost a digit) is read as its whole network, which
// trusts or lets in far more than the address written; it is warned at
// its position with the network it stands for, as nginx warns "low
// address bits ... are meaningless". A network written as one is not.
func TestPrefixHostBitsWarned(t *testing.T) {
	text := `
listeners:
  - address: "127.0.0.1:0"
    proxy_protocol: {enabled: true, trusted: [10.0.0.0/8, "10.1.2.3/8"]}
trusted_proxies: [192.0.2.0/24, "198.51.100.10/2", "10.0.0.1", "::ffff:10.0.0.1/104", "2001:db8::/32"]
sites:
  - server_names: [portal.example.cn]
    tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes:
      - {path_prefix: /admin/, client_ip: ["203.0.113.7/8", "2001:db8::1/64", 203.0.113.0/24], upstream: app}
      - {path_prefix: /, upstream: app}
upstreams:
  - {name: app, targets: [127.0.0.1:8080]}
`
	expectWarnings(t, "testdata/good/prefixbits.yaml", text, "host bits", []string{
		"14:44 sites[0].routes[0].client_ip[0]: 203.0.113.7/8 has host bits set: it stands for 203.0.0.0/8",
		"14:61 sites[0].routes[0].client_ip[1]: 2001:db8::1/64 has host bits set: it stands for 2001:db8::/64",
		"4:59 listeners[0].proxy_protocol.trusted[1]: 10.1.2.3/8 has host bits set: it stands for 10.0.0.0/8",
		"5:33 trusted_proxies[1]: 198.51.100.10/2 has host bits set: it stands for 192.0.0.0/2",
		"5:64 trusted_proxies[3]: ::ffff:10.0.0.1/104 has host bits set: it stands for ::ffff:10.0.0.0/104",
	})
}
