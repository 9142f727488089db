package conf

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// TestExamples loads deploy/examples/*.yaml with generated certificates in
// place of the real ones: /etc/gmproxy/ is mapped to a temporary folder
// holding devpki PKIs (and /srv/www/ to its www folder), and relative
// paths get one beside the copy.
func TestExamples(t *testing.T) {
	defer func(old func() time.Time) { now = old }(now)
	now = time.Now
	root := t.TempDir()
	for _, sub := range []struct {
		dir   string
		hosts []string
	}{
		{"pki/portal", []string{"portal.example.cn", "www.example.cn"}},
		{"pki/api", []string{"api.example.cn", "localhost"}},
		{"pki", []string{"localhost", "127.0.0.1"}},
	} {
		if _, err := devpki.LoadOrCreate(filepath.Join(root, sub.dir), devpki.Options{Hosts: sub.hosts}); err != nil {
			t.Fatal(err)
		}
	}
	// The static files the examples serve (/srv/www/).
	if err := os.MkdirAll(filepath.Join(root, "www", "portal", "current"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../deploy/examples/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(b), "/etc/gmproxy/", root+"/")
			text = strings.ReplaceAll(text, "/srv/www/", root+"/www/")
			cfg, err := Parse(filepath.Join(root, filepath.Base(f)), []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range cfg.Warnings {
				t.Errorf("warning: %s", w)
			}
			if len(cfg.Sites) < 2 || len(cfg.Upstreams) < 1 {
				t.Errorf("example too small: %d sites, %d upstreams", len(cfg.Sites), len(cfg.Upstreams))
			}
		})
	}
}

// keyServerExampleRoot returns a folder standing for /etc/gmproxy/ in the
// examples with remote keys: devpki PKIs in pki/portal and pki/api, and the
// key server's mutual-TLS files in pki.
func keyServerExampleRoot(t *testing.T) string {
	root := t.TempDir()
	for _, sub := range []struct {
		dir   string
		hosts []string
	}{
		{"pki/portal", []string{"portal.example.cn", "www.example.cn"}},
		{"pki/api", []string{"api.example.cn"}},
	} {
		if _, err := devpki.LoadOrCreate(filepath.Join(root, sub.dir), devpki.Options{Hosts: sub.hosts}); err != nil {
			t.Fatal(err)
		}
	}
	writeTestMTLS(t, filepath.Join(root, "pki"))
	return root
}

// TestKeyServerExamples loads deploy/examples/keyserver/ (the key server's
// configuration and the edge configuration that uses it) with generated
// certificates and keys in place of /etc/gmproxy/.
func TestKeyServerExamples(t *testing.T) {
	defer func(old func() time.Time) { now = old }(now)
	now = time.Now
	root := keyServerExampleRoot(t)
	load := func(name string) (string, []byte) {
		b, err := os.ReadFile(filepath.Join("../deploy/examples/keyserver", name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, name)
		text := []byte(strings.ReplaceAll(string(b), "/etc/gmproxy/", root+"/"))
		if err := os.WriteFile(path, text, 0o600); err != nil {
			t.Fatal(err)
		}
		return path, text
	}
	ksPath, _ := load("keyserver.yaml")
	ks, err := LoadKeyServer(ksPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ks.Warnings {
		t.Errorf("keyserver.yaml: warning: %s", w)
	}
	if len(ks.Material.Keys) != 2 {
		t.Errorf("keyserver.yaml serves %d keys, want 2", len(ks.Material.Keys))
	}
	edgePath, text := load("edge.yaml")
	cfg, err := Parse(edgePath, text)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		t.Errorf("edge.yaml: warning: %s", w)
	}
	m := cfg.Sites[0].Material
	if m.TLCPSign.KeyServer != "keys" || m.TLCPEnc.KeyServer != "keys" || m.TLS13SM.KeyServer != "keys" || m.TLS.KeyServer != "" {
		t.Errorf("edge.yaml: key servers %q %q %q %q", m.TLCPSign.KeyServer, m.TLCPEnc.KeyServer, m.TLS13SM.KeyServer, m.TLS.KeyServer)
	}
	// The key server holds exactly the keys of the edge's remote certificates.
	for _, kp := range []*KeyPair{m.TLCPSign, m.TLCPEnc} {
		found := false
		for _, k := range ks.Material.Keys {
			found = found || smkey.PublicKeysEqual(k.Key, kp.Leaf().PublicKey)
		}
		if !found {
			t.Errorf("the key server does not hold the key of %s", kp.CertFile)
		}
	}
}

// TestFleetExample loads deploy/examples/fleet/gmproxy.yaml with generated
// certificates and secrets in place of /etc/gmproxy/: its only warning is
// the admin port that HAProxy's health checks reach.
func TestFleetExample(t *testing.T) {
	defer func(old func() time.Time) { now = old }(now)
	now = time.Now
	root := keyServerExampleRoot(t)
	wrap := make([]byte, 32)
	rand.Read(wrap)
	for name, content := range map[string]string{"fleet-wrap.key": string(wrap), "redis.pass": "pw\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("../deploy/examples/fleet/gmproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(filepath.Join(root, "gmproxy.yaml"), []byte(strings.ReplaceAll(string(b), "/etc/gmproxy/", root+"/")))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		if w.Path != "admin.address" {
			t.Errorf("warning: %s", w)
		}
	}
	s := cfg.Sessions
	if s.Store == nil || s.Store.Password != "pw" || s.TicketKeys == nil || len(s.TicketKeys.WrapKeys) != 1 || !cfg.Listeners[0].ProxyProtocol.Enabled {
		t.Errorf("the fleet example lost its store, ticket keys or PROXY protocol: %+v", s)
	}
}
