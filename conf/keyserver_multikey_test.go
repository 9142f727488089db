package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyServerMultiKeyFileRefused: a keys[] entry whose file holds
// several keys is refused: its cert or roles would give every key the
// same roles, and a TLCP signing key beside the encryption key would be
// served to decrypt (what roles exist to prevent).
func TestKeyServerMultiKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	pki, _ := filepath.Abs("testdata/pki")
	writeTestMTLS(t, dir)
	var both []byte
	for _, f := range []string{"server_enc.key", "server_sign.key"} {
		b, err := os.ReadFile(filepath.Join(pki, f))
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, b...)
	}
	if err := os.WriteFile(filepath.Join(dir, "both.key"), both, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, entry := range []string{
		"{name: tlcp, key: both.key, cert: " + filepath.Join(pki, "server_enc.crt") + "}",
		"{name: tlcp, key: both.key, roles: [decrypt, key_agreement]}",
	} {
		yaml := "listen: 127.0.0.1:7443\n" +
			"tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}\n" +
			"keys:\n  - " + entry + "\n" +
			"clients:\n  - {name: edge, subject: \"CN=gmproxy\", keys: [tlcp]}\n"
		path := filepath.Join(dir, "keyserver.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := LoadKeyServer(path)
		if err == nil {
			var served []string
			for _, k := range f.Material.Policy.Keys {
				served = append(served, k.Name+" "+k.Roles.String())
			}
			t.Errorf("keys: [%s] with two keys in the file loaded, serving %q", entry, served)
			continue
		}
		if !strings.Contains(err.Error(), "holds 2 keys") {
			t.Errorf("keys: [%s]: %v, want the file's two keys named as the problem", entry, err)
		}
	}
}
