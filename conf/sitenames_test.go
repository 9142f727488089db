package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIPServerNameWarned: clients send no SNI for an address (RFC 6066
// §3), so a connection to https://127.0.0.1/ is made for the listener's
// default site, which keeps serving its requests whatever their Host: an
// IP address in the server_names of another site (nginx's "server_name
// 10.0.0.5;") routes nothing and is warned about at its place; on the
// default site of every listener serving it, it is not.
func TestIPServerNameWarned(t *testing.T) {
	pki, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	const site = `
  - name: SITE
    server_names: [HOSTS]
    tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.key}
    routes: [{respond: {status: 204}}]`
	mk := func(name, names string) string {
		return strings.NewReplacer("SITE", name, "HOSTS", names).Replace(site)
	}
	for _, c := range []struct {
		name      string
		listeners string
		warnAt    string // path of the warning, "" for none
	}{
		{"non-default", `[{address: "127.0.0.1:0"}]`, "sites[1].server_names[1]"},
		{"default", `[{address: "127.0.0.1:0", default_site: ip}]`, ""},
		{"default of one listener only", `[{address: "127.0.0.1:0", default_site: ip}, {address: "127.0.0.1:1"}]`, "sites[1].server_names[1]"},
		{"served alone", `[{address: "127.0.0.1:0", sites: [ip]}, {address: "127.0.0.1:1", sites: [portal]}]`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			yaml := "listeners: " + c.listeners + "\nsites:" + mk("portal", "portal.example.cn") + mk("ip", `ip.example.cn, "127.0.0.1", "::1"`) + "\n"
			yaml = strings.ReplaceAll(yaml, "PKI", pki)
			f := filepath.Join(dir, "gmproxy.yaml")
			if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, probs := Check(f)
			if cfg == nil || probs.HasErrors() {
				t.Fatalf("refused: %v", probs)
			}
			var got []Problem
			for _, p := range probs {
				if strings.Contains(p.Message, "IP address") {
					got = append(got, p)
				}
			}
			if c.warnAt == "" {
				if len(got) > 0 {
					t.Errorf("warned: %v", got)
				}
				return
			}
			if len(got) != 2 || got[0].Path != c.warnAt || got[0].Severity != SeverityWarning || got[0].Line == 0 || got[0].Column == 0 ||
				got[1].Path != "sites[1].server_names[2]" {
				t.Errorf("got %v, want warnings at %s and sites[1].server_names[2] with their line and column", got, c.warnAt)
			}
		})
	}
}
