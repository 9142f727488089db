package conf

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

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
	cfg, err := Parse("testdata/good/trustall.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range cfg.Warnings {
		if strings.Contains(w.Message, "every address") {
			got = append(got, fmt.Sprintf("%d:%d %s", w.Line, w.Column, w.Path))
		}
	}
	want := []string{
		"4:59 listeners[0].proxy_protocol.trusted[1]",
		"5:19 trusted_proxies[0]",
		"5:44 trusted_proxies[2]",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("warnings for trusting every address:\n%s\nwant:\n%s\nall: %v", strings.Join(got, "\n"), strings.Join(want, "\n"), cfg.Warnings)
	}
}
