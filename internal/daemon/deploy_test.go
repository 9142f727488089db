package daemon

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gmproxy/gmproxy/conf"
)

// TestDeployManifests: the Kubernetes manifests are valid YAML, and the
// gmproxy configurations embedded in their ConfigMaps decode with no
// problem other than the certificate files that exist only in a cluster.
func TestDeployManifests(t *testing.T) {
	files, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		configs := 0
		for {
			var doc struct {
				Kind string            `yaml:"kind"`
				Data map[string]string `yaml:"data"`
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			y, ok := doc.Data["gmproxy.yaml"]
			if doc.Kind != "ConfigMap" || !ok {
				continue
			}
			configs++
			_, err := conf.Parse(f+":gmproxy.yaml", []byte(y))
			var probs conf.Problems
			if err != nil && !errors.As(err, &probs) {
				t.Fatalf("%s: %v", f, err)
			}
			for _, p := range probs {
				if p.Severity == conf.SeverityError && !strings.Contains(p.Message, "no such file") {
					t.Errorf("%s: %s", f, p)
				}
			}
		}
		if configs == 0 {
			t.Errorf("%s: no gmproxy ConfigMap", f)
		}
	}
}

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
