package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyNoneUnderOptionalNoCAWarned: a route answering 403 to
// "X-Ssl-Client-Verify: NONE" admits verified clients only on a site of
// client_auth request (a client on a connection verified or sent no
// certificate); under optional_no_ca a certificate that does not verify
// is FAILED:reason and passes it, so the route is warned of at its
// header, with line and column. The same route under request is not.
func TestVerifyNoneUnderOptionalNoCAWarned(t *testing.T) {
	pki, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.ReplaceAll(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - name: onca
    server_names: [localhost]
    tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.key}
    client_auth: {mode: optional_no_ca, ca: PKI/ca.crt}
    routes:
      - {path_prefix: /admin/, header: {x-ssl-client-verify: NONE}, respond: {status: 403}}
      - {respond: {status: 204}}
  - name: req
    server_names: [portal.example.cn]
    tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.key}
    client_auth: {mode: request, ca: PKI/ca.crt}
    routes:
      - {path_prefix: /admin/, header: {X-Ssl-Client-Verify: NONE}, respond: {status: 403}}
      - {respond: {status: 204}}
`, "PKI", pki)
	f := filepath.Join(t.TempDir(), "gmproxy.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, probs := Check(f)
	if cfg == nil || probs.HasErrors() {
		t.Fatalf("refused: %v", probs)
	}
	var got []Problem
	for _, p := range probs {
		if strings.Contains(p.Path, "x-ssl-client-verify") || strings.Contains(p.Path, "X-Ssl-Client-Verify") {
			got = append(got, p)
		}
	}
	if len(got) != 1 || got[0].Path != "sites[0].routes[0].header.x-ssl-client-verify" || got[0].Severity != SeverityWarning ||
		got[0].Line != 8 || got[0].Column == 0 || !strings.Contains(got[0].Message, "FAILED") {
		t.Errorf("got %v, want one warning at sites[0].routes[0].header.x-ssl-client-verify (line 8)", got)
	}
}
