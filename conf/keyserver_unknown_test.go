package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/keyserver"
)

// TestKeyServerKeyNamedUnknownRefused: a served key may not be named
// "unknown", by name: or by its file's name: the audit log and the
// metrics give that name to every key ID the server does not hold, and
// the key's operations would mix with those refusals. The error points
// at the name, or at the key file that gives it.
func TestKeyServerKeyNamedUnknownRefused(t *testing.T) {
	dir := t.TempDir()
	pki, _ := filepath.Abs("testdata/pki")
	writeTestMTLS(t, dir)
	b, err := os.ReadFile(filepath.Join(pki, "server_enc.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyserver.UnknownKey+".key"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ entry, at string }{
		{"{name: unknown, key: " + filepath.Join(pki, "server_enc.key") + ", roles: [decrypt, key_agreement]}", "keyserver.yaml:4:12: error: keys[0].name:"},
		{"{key: unknown.key, roles: [decrypt, key_agreement]}", "keyserver.yaml:4:11: error: keys[0].key:"},
	} {
		yaml := "listen: 127.0.0.1:7443\n" +
			"tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}\n" +
			"keys:\n  - " + tc.entry + "\n" +
			"clients:\n  - {name: edge, subject: \"CN=gmproxy\", keys: [unknown]}\n"
		path := filepath.Join(dir, "keyserver.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := LoadKeyServer(path)
		if err == nil {
			t.Errorf("keys: [%s] loaded, serving %d keys", tc.entry, len(f.Material.Policy.Keys))
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `key name "unknown"`) || !strings.Contains(msg, tc.at) {
			t.Errorf("keys: [%s]: %v, want the name \"unknown\" refused at %s", tc.entry, err, tc.at)
		}
		if strings.Contains(msg, "clients[0]") {
			t.Errorf("keys: [%s]: the client naming the refused key gets a second error: %v", tc.entry, err)
		}
	}
}
