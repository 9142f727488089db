package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIPServerNameWarned: clients send no SNI for an address (RFC 6066
// §3), so a connection to https://127.0.0.1/ is made for the listener's
// default site; its requests go to the site their Host names (nginx's
// "server_name 10.0.0.5;") only when that site has the default site's
// kinds of certificate and neither checks client certificates.
// Otherwise the address routes nothing and is warned about at its place;
// on the default site of every listener serving it, it is not.
func TestIPServerNameWarned(t *testing.T) {
	pki, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	const site = `
  - name: SITE
    server_names: [HOSTS]
    tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.key}EXTRA
    routes: [{respond: {status: 204}}]`
	mk := func(name, names, extra string) string {
		return strings.NewReplacer("SITE", name, "HOSTS", names, "EXTRA", extra).Replace(site)
	}
	const auth = "\n    client_auth: {mode: require, ca: PKI/ca.crt}"
	const rsa = "\n    tls: {cert: PKI/server_ecdsa.crt, key: PKI/server_ecdsa.key}"
	for _, c := range []struct {
		name         string
		listeners    string
		portalX, ipX string // more of each site
		warnAt, why  string // path of the warning, "" for none, and its reason
	}{
		{"non-default, reached by Host", `[{address: "127.0.0.1:0"}]`, "", "", "", ""},
		{"non-default, checks clients", `[{address: "127.0.0.1:0"}]`, "", auth, "sites[1].server_names[1]", `site "ip" checks client certificates`},
		{"non-default, default checks clients", `[{address: "127.0.0.1:0"}]`, auth, "", "sites[1].server_names[1]", `site "portal" checks client certificates`},
		{"non-default, lacks a kind of certificate", `[{address: "127.0.0.1:0"}]`, rsa, "", "sites[1].server_names[1]", `site "ip" has no tls certificate`},
		{"non-default, has more kinds", `[{address: "127.0.0.1:0"}]`, "", rsa, "", ""},
		{"default", `[{address: "127.0.0.1:0", default_site: ip}]`, auth, auth, "", ""},
		{"default of one listener only", `[{address: "127.0.0.1:0", default_site: ip}, {address: "127.0.0.1:1"}]`, "", auth, "sites[1].server_names[1]", "checks client"},
		{"served alone", `[{address: "127.0.0.1:0", sites: [ip]}, {address: "127.0.0.1:1", sites: [portal]}]`, auth, auth, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			yaml := "listeners: " + c.listeners + "\nsites:" + mk("portal", "portal.example.cn", c.portalX) + mk("ip", `ip.example.cn, "127.0.0.1", "::1"`, c.ipX) + "\n"
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
				got[1].Path != "sites[1].server_names[2]" || !strings.Contains(got[0].Message, c.why) {
				t.Errorf("got %v, want warnings at %s and sites[1].server_names[2] with their line and column", got, c.warnAt)
			}
		})
	}
}

// TestServerNamePerListener: the same server name may be on two sites
// served on different listeners (nginx's server_name in a server on 443
// and in another on 8443 that checks client certificates); two sites of
// one listener sharing it are refused at the second one's name, with the
// listener, whatever the letter case.
func TestServerNamePerListener(t *testing.T) {
	pki, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	const sites = `
sites:
  - name: open
    server_names: [a.example.cn]
    tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.key}
    routes: [{respond: {status: 204}}]
  - name: mtls
    server_names: [b.example.cn, A.example.cn]
    tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.key}
    client_auth: {mode: require, ca: PKI/ca.crt}
    routes: [{respond: {status: 204}}]
`
	for _, c := range []struct {
		name, listeners, errAt string
	}{
		{"different listeners", `[{address: "127.0.0.1:0", sites: [open]}, {address: "127.0.0.1:1", sites: [mtls]}]`, ""},
		{"one listener", `[{address: "127.0.0.1:0"}]`, "127.0.0.1:0"},
		{"one of two listeners", `[{address: "127.0.0.1:0", sites: [open]}, {address: "127.0.0.1:1", sites: [mtls, open]}]`, "127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "gmproxy.yaml")
			yaml := strings.ReplaceAll("listeners: "+c.listeners+sites, "PKI", pki)
			if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, probs := Check(f)
			var dups []Problem
			for _, p := range probs {
				if strings.Contains(p.Message, "duplicate server name") {
					dups = append(dups, p)
				}
			}
			if c.errAt == "" {
				if cfg == nil || probs.HasErrors() {
					t.Fatalf("refused: %v", probs)
				}
				return
			}
			if len(dups) != 1 || dups[0].Severity != SeverityError || dups[0].Path != "sites[1].server_names[1]" ||
				dups[0].Line != 8 || dups[0].Column != 34 || !strings.Contains(dups[0].Message, "on listener "+c.errAt) {
				t.Errorf("got %v, want one error at sites[1].server_names[1] (8:34) naming listener %s", dups, c.errAt)
			}
		})
	}
}
