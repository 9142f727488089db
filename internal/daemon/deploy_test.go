package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
)

// TestReadmeConfig: the YAML example in the README decodes with no problem
// other than its certificate files.
func TestReadmeConfig(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "```yaml\n")
	if len(parts) < 2 {
		t.Fatal("no yaml example in README.md")
	}
	for _, part := range parts[1:] {
		y, _, _ := strings.Cut(part, "```")
		var probs conf.Problems
		if strings.HasPrefix(y, "# keyserver.yaml") {
			// The file of gmproxy keyserver, not gmproxy's.
			f := filepath.Join(t.TempDir(), "keyserver.yaml")
			if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
				t.Fatal(err)
			}
			_, probs = conf.CheckKeyServer(f)
			for _, p := range probs {
				if p.Severity == conf.SeverityError && !strings.Contains(p.Message, "no such file") {
					t.Errorf("README keyserver example: %s", p)
				}
			}
			continue
		}
		_, err := conf.Parse("README.md", []byte(y))
		if err != nil && !errors.As(err, &probs) {
			t.Fatal(err)
		}
		for _, p := range probs {
			if p.Severity == conf.SeverityError && !strings.Contains(p.Message, "no such file") {
				t.Errorf("README example: %s", p)
			}
		}
	}
}
