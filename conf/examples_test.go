package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/devpki"
)

// TestExamples loads deploy/examples/*.yaml with generated certificates in
// place of the real ones: /etc/gmproxy/ is mapped to a temporary folder
// holding devpki PKIs, and relative paths get one beside the copy.
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
