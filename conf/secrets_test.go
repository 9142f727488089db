package conf

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// secretsConfig writes a configuration in a temporary folder whose TLCP
// keys, password file and ticket key file are copies of the test PKI's with
// mode perm, and returns its path.
func secretsConfig(t *testing.T, perm os.FileMode, ticketKey []byte) string {
	t.Helper()
	dir := t.TempDir()
	cp := func(name string, mode os.FileMode) {
		b, err := os.ReadFile(filepath.Join("testdata/pki", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	for _, n := range []string{"server_sign.crt", "server_enc.crt"} {
		cp(n, 0o644)
	}
	for _, n := range []string{"server_sign.enc.key", "server_enc.key", "password.txt"} {
		cp(n, perm)
	}
	if err := os.WriteFile(filepath.Join(dir, "ticket.key"), ticketKey, perm); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "ticket.key"), perm)
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("0123456789abcdef0123456789abcdef\n"), perm); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "admin.token"), perm)
	cfg := `listeners: [{address: "127.0.0.1:0"}]
sites:
  - tlcp:
      sign_cert: server_sign.crt
      sign_key: server_sign.enc.key
      enc_cert: server_enc.crt
      enc_key: server_enc.key
      key_password_file: password.txt
    routes: [{respond: {}}]
sessions:
  tickets: true
  ticket_key_file: ticket.key
admin: {address: 127.0.0.1:9100, token_file: admin.token}
`
	path := filepath.Join(dir, "gmproxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// foreignGroup is a group this process is not in, which only root can give
// a file (-2 otherwise).
func foreignGroup() int {
	if os.Getuid() != 0 {
		return -2
	}
	groups, _ := os.Getgroups()
	for gid := 54321; ; gid++ {
		if gid != os.Getgid() && !slices.Contains(groups, gid) {
			return gid
		}
	}
}

func randomishKey() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// TestSecretFileModes: check warns, at the key's position, about each
// private key, password file, ticket key file and admin token file
// readable by others or by a group gmproxy is not in, and says nothing
// when only the owner and gmproxy's own group can read them.
func TestSecretFileModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits")
	}
	for _, c := range []struct {
		perm os.FileMode
		who  string
		gid  int // chown the secrets to this group (-1: leave ours)
	}{
		{0o600, "", -1},
		{0o640, "", -1}, // our own group: how gmproxy reads a root-owned key
		{0o440, "", -1}, // a Kubernetes Secret with the pod's fsGroup
		{0o604, "readable by others (mode 0604)", -1},
		{0o644, "readable by others (mode 0644)", -1},
		{0o640, "readable by its group, which gmproxy is not in (mode 0640)", foreignGroup()},
	} {
		if c.gid == -2 {
			continue // no foreign group can be set without root
		}
		path := secretsConfig(t, c.perm, randomishKey())
		if c.gid >= 0 {
			for _, n := range []string{"server_sign.enc.key", "server_enc.key", "password.txt", "ticket.key", "admin.token"} {
				if err := os.Chown(filepath.Join(filepath.Dir(path), n), -1, c.gid); err != nil {
					t.Fatal(err)
				}
			}
		}
		cfg, probs := Check(path)
		if probs.HasErrors() || cfg == nil {
			t.Fatalf("%04o: %v", c.perm, probs)
		}
		var got []string
		for _, p := range probs {
			if strings.Contains(p.Message, "is readable by") {
				got = append(got, p.String())
			}
		}
		if c.who == "" {
			if len(got) != 0 {
				t.Errorf("%04o: warnings %q", c.perm, got)
			}
			continue
		}
		want := []string{
			`gmproxy.yaml:5:17: warning: sites[0].tlcp.sign_key: private key file "server_sign.enc.key" is ` + c.who,
			`gmproxy.yaml:7:16: warning: sites[0].tlcp.enc_key: private key file "server_enc.key" is ` + c.who,
			`gmproxy.yaml:8:26: warning: sites[0].tlcp.key_password_file: password file "password.txt" is ` + c.who,
			`gmproxy.yaml:12:20: warning: sessions.ticket_key_file: ticket key file "ticket.key" is ` + c.who,
			`gmproxy.yaml:13:46: warning: admin.token_file: admin token file "admin.token" is ` + c.who,
		}
		if len(got) != len(want) {
			t.Fatalf("%04o: warnings\n%s\nwant %d", c.perm, strings.Join(got, "\n"), len(want))
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) || !strings.Contains(got[i], "chmod 600") {
				t.Errorf("%04o: warning\n%s\nwant it to contain\n%s", c.perm, got[i], want[i])
			}
		}
	}
}

// TestRepeatedByteTicketKey: an all-zero (or any one-byte) ticket key file
// is a configuration error at the ticket_key_file position.
func TestRepeatedByteTicketKey(t *testing.T) {
	for _, key := range [][]byte{make([]byte, 32), bytes.Repeat([]byte{'A'}, 48), append(randomishKey(), make([]byte, 32)...)} {
		_, probs := Check(secretsConfig(t, 0o600, key))
		if !probs.HasErrors() {
			t.Fatalf("%d-byte key %x… accepted", len(key), key[:4])
		}
		msg := probs.Error()
		if !strings.Contains(msg, "gmproxy.yaml:12:20: error: sessions.ticket_key_file: ticket key") || !strings.Contains(msg, "repeated") {
			t.Errorf("error %q", msg)
		}
	}
}

// TestKeyPasswordEnvUnset: the variable named by key_password_env is
// removed from the environment once read, and validating the configuration
// again (a reload) still finds the password.
func TestKeyPasswordEnvUnset(t *testing.T) {
	abs, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.ReplaceAll(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.enc.key, key_password_env: GMPROXY_CONF_TEST_UNSET_PW}
    routes: [{respond: {}}]
`, "PKI", abs)
	t.Setenv("GMPROXY_CONF_TEST_UNSET_PW", "secret")
	for i := 0; i < 2; i++ {
		if _, err := Parse("mem.yaml", []byte(yaml)); err != nil {
			t.Fatalf("parse %d: %v", i+1, err)
		}
		if v, ok := os.LookupEnv("GMPROXY_CONF_TEST_UNSET_PW"); ok {
			t.Fatalf("parse %d: the password is still in the environment (%q)", i+1, v)
		}
	}
}

// TestSwappedKeysOnReloadWithEnvPassword: swapped sign and enc keys are
// named as such on a reload too, when their password comes from
// key_password_env (which the first load took out of the environment):
// before, the reload read the variable again, found nothing, and reported
// two mismatches instead.
func TestSwappedKeysOnReloadWithEnvPassword(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"server_sign.crt", "server_sign.enc.key", "server_enc.crt", "server_enc.key"} {
		b, err := os.ReadFile(filepath.Join("testdata/pki", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := func(signKey, encKey string) []byte {
		return []byte(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tlcp: {sign_cert: server_sign.crt, sign_key: ` + signKey + `, enc_cert: server_enc.crt, enc_key: ` + encKey + `, key_password_env: GMPROXY_TEST_SWAP_PW}
    routes: [{respond: {}}]
`)
	}
	t.Setenv("GMPROXY_TEST_SWAP_PW", "secret")
	path := filepath.Join(dir, "gmproxy.yaml")
	if _, err := Parse(path, config("server_sign.enc.key", "server_enc.key")); err != nil {
		t.Fatal(err)
	}
	if _, ok := os.LookupEnv("GMPROXY_TEST_SWAP_PW"); ok {
		t.Fatal("the password variable is still in the environment: the test does not reproduce a reload")
	}
	if _, err := Parse(path, config("server_enc.key", "server_sign.enc.key")); err == nil || !strings.Contains(err.Error(), "swapped") {
		t.Errorf("reload with the keys swapped: %v, want them named swapped", err)
	}
}

// TestAdminTokenMustBeText: a token file of raw random bytes (head -c 32
// /dev/urandom without | base64) is refused with its position: no client
// can carry it in an Authorization header (control bytes), so gmproxy
// reload would fail only once the configuration runs. A text token with
// surrounding white space is taken without it.
func TestAdminTokenMustBeText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token []byte
		ok    bool
	}{
		{"base64", []byte("c2VjcmV0LXRva2VuLWZvci1nbXByb3h5Cg==\n"), true},
		{"hex with CRLF", []byte("  0123456789abcdef0123456789abcdef\r\n"), true},
		{"raw bytes", []byte("\x8f\x01\xa3Zq\x00\x7f\xe2\x10\x9c\x44\x81\x02\xfe\x33\x19\x0b\xd7"), false},
		{"line break inside", []byte("0123456789abcdef\n0123456789abcdef\n"), false},
		{"non-ASCII", []byte("口令口令口令口令口令口令\n"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := secretsConfig(t, 0o600, randomishKey())
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "admin.token"), tc.token, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if tc.ok {
				if err != nil {
					t.Fatalf("a text token refused: %v", err)
				}
				if want := string(bytes.TrimSpace(tc.token)); string(cfg.Admin.Token) != want {
					t.Errorf("token %q, want %q", cfg.Admin.Token, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("token %q taken", tc.token)
			}
			msg := err.Error()
			if !strings.Contains(msg, "gmproxy.yaml:13:") || !strings.Contains(msg, "admin.token_file") || !strings.Contains(msg, "base64") {
				t.Errorf("error %q: want the file:line:column of token_file, its name and how to fix it", msg)
			}
			if strings.Contains(msg, string(bytes.TrimSpace(tc.token))) {
				t.Errorf("the error shows the token: %q", msg)
			}
		})
	}
}

// TestKeyPasswordFileOfSeveralLines: a password file of several lines
// (nginx's ssl_password_file, whose lines nginx tries in turn) is refused
// at key_password_file, saying gmproxy reads one password, instead of
// its whole content being taken as the password and the key reported as
// one whose password is wrong.
func TestKeyPasswordFileOfSeveralLines(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"server_sign.crt", "server_sign.enc.key"} {
		b, err := os.ReadFile(filepath.Join("testdata/pki", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, pw := range []string{"secret\nother\n", "secret\r\nother", "other\nsecret\n"} {
		if err := os.WriteFile(filepath.Join(dir, "pw.txt"), []byte(pw), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Parse(filepath.Join(dir, "gmproxy.yaml"), []byte(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tls13sm: {cert: server_sign.crt, key: server_sign.enc.key, key_password_file: pw.txt}
    routes: [{respond: {}}]
`))
		if err == nil {
			t.Errorf("%q: loaded", pw)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `sites[0].tls13sm.key_password_file: password file "pw.txt" has more than one line`) || strings.Contains(msg, "wrong password") {
			t.Errorf("%q: %s", pw, msg)
		}
	}
}
