package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesRootHoldsSecrets: a files root that holds a key or password
// file the configuration loads is refused, at the root, with the file
// named (the route would serve it to anyone); not when the file is under a
// hidden name the route does not serve (hidden: false).
func TestFilesRootHoldsSecrets(t *testing.T) {
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pki, err := filepath.Abs(filepath.Join("testdata", "pki"))
	if err != nil {
		t.Fatal(err)
	}
	// www/ serves; its keys live in www/.keys/ and www/keys/.
	www := filepath.Join(t.TempDir(), "www")
	for _, dir := range []string{".keys", "keys"} {
		if err := os.MkdirAll(filepath.Join(www, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"server_sign.key", "server_enc.key"} {
			b, err := os.ReadFile(filepath.Join(pki, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(www, dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A deploy's link (current -> www) served: the keys are still there.
	link := filepath.Join(filepath.Dir(www), "current")
	if err := os.Symlink(www, link); err != nil {
		t.Skip(err)
	}
	with := func(keys, files string) error {
		s := strings.NewReplacer("sign_key: ../pki/", "sign_key: "+keys+"/", "enc_key: ../pki/", "enc_key: "+keys+"/").Replace(string(data))
		s = strings.Replace(s, "    routes:\n", "    routes:\n      - {path_prefix: /s/, strip_prefix: /s, files: "+files+"}\n", 1)
		_, err := Parse(path, []byte(s))
		return err
	}
	for _, tc := range []struct {
		name, keys, files string
		refused           bool
	}{
		{"keys beside the root", pki, "{root: " + www + "}", false},
		{"the root holds them", pki, "{root: " + pki + "}", true},
		{"under a plain name", filepath.Join(www, "keys"), "{root: " + www + "}", true},
		{"under a hidden name", filepath.Join(www, ".keys"), "{root: " + www + "}", false},
		{"under a hidden name served", filepath.Join(www, ".keys"), "{root: " + www + ", hidden: true}", true},
		{"the root a link to them", filepath.Join(www, "keys"), "{root: " + link + "}", true},
	} {
		err := with(tc.keys, tc.files)
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "files.root") || !strings.Contains(err.Error(), "private key file")):
			t.Errorf("%s: %v; want the root refused for the keys", tc.name, err)
		case !tc.refused && err != nil:
			t.Errorf("%s: %v; want it loaded", tc.name, err)
		}
	}
}
