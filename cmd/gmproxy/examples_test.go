package main

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// certsLine matches a `gmproxy certs …` command written in a comment of a
// shipped example (the step that makes the files the example names).
var certsLine = regexp.MustCompile(`(?m)^#.*?gmproxy (certs -out [^#\n]*)`)

// secretLine matches a `head -c N /dev/urandom [| base64] > FILE` command
// written in a comment of a shipped example (the step that makes a secret
// the example names: a ticket or wrap key, a password).
var secretLine = regexp.MustCompile(`(?m)^#\s+head -c (\d+) /dev/urandom( \| base64)? > (\S+)`)

// writeExampleSecrets runs the secret-making commands of example text
// (after /etc/gmproxy/ was moved under a temporary root); relative paths
// are made in dir.
func writeExampleSecrets(t *testing.T, text, dir string) {
	t.Helper()
	for _, m := range secretLine.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		b := make([]byte, n)
		rand.Read(b)
		if m[2] != "" {
			b = []byte(base64.StdEncoding.EncodeToString(b) + "\n")
		}
		path := m[3]
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// exampleCertsCommands returns the arguments of every `gmproxy certs`
// command documented in example text.
func exampleCertsCommands(text string) [][]string {
	var cmds [][]string
	for _, m := range certsLine.FindAllStringSubmatch(text, -1) {
		cmds = append(cmds, strings.Fields(m[1]))
	}
	return cmds
}

var kubernetesManifest = regexp.MustCompile(`(?m)^apiVersion:`)

// filesRoot finds the absolute roots of an example's files routes.
var filesRoot = regexp.MustCompile(`files: \{root: (/[^,} ]+)`)

// TestShippedExamplesCheck runs, for every deploy/examples file, the
// `gmproxy certs` commands its comments give (under a temporary root instead
// of /etc/gmproxy) and then `gmproxy check` (`gmproxy keyserver -check` for a
// key server file) on it: the paths in the examples are the files those
// commands write, and the examples load without errors or warnings.
func TestShippedExamplesCheck(t *testing.T) {
	files, _ := filepath.Glob("../../deploy/examples/*.yaml")
	more, _ := filepath.Glob("../../deploy/examples/*/*.yaml")
	files = append(files, more...)
	if len(files) < 4 {
		t.Fatalf("found %d examples under deploy/examples", len(files))
	}
	for _, f := range files {
		// A Kubernetes manifest is not a gmproxy configuration: deploy's
		// TestManifestsDeploy checks the configuration inside it.
		if b, err := os.ReadFile(f); err == nil && kubernetesManifest.Match(b) {
			continue
		}
		name, _ := filepath.Rel("../../deploy/examples", f)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			text := strings.ReplaceAll(string(b), "/etc/gmproxy/", filepath.Join(root, "etc", "gmproxy")+"/")
			// The directories its files routes serve (/srv/www/...),
			// which a deploy makes.
			text = strings.ReplaceAll(text, "/srv/www/", filepath.Join(root, "srv", "www")+"/")
			for _, m := range filesRoot.FindAllStringSubmatch(text, -1) {
				if err := os.MkdirAll(m[1], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(root, "example")
			cmds := exampleCertsCommands(text)
			if len(cmds) == 0 {
				t.Fatal("the example's comments give no `gmproxy certs -out DIR` command that makes its files")
			}
			for _, args := range cmds {
				if out := args[2]; !filepath.IsAbs(out) {
					args[2] = filepath.Join(dir, out) // relative to the example's folder
				}
				if code, out, errs := ccRun(args...); code != 0 {
					t.Fatalf("gmproxy %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
				}
			}
			writeExampleSecrets(t, text, dir)
			cfg := filepath.Join(dir, filepath.Base(f))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"check", "-c", cfg}
			if filepath.Base(f) == "keyserver.yaml" {
				// Its listen address is the key server host's (10.0.0.5).
				args = []string{"keyserver", "-c", cfg, "-check", "-no-bind"}
			}
			code, out, errs := ccRun(args...)
			if code != 0 || errs != "" {
				t.Fatalf("gmproxy %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
			}
		})
	}
}

func TestExampleCertsCommands(t *testing.T) {
	got := exampleCertsCommands("# a\n#   gmproxy certs -out /x/pki -hosts a.cn   # comment\nsites: []\n# gmproxy certs -out pki\n")
	if len(got) != 2 || strings.Join(got[0], " ") != "certs -out /x/pki -hosts a.cn" || strings.Join(got[1], " ") != "certs -out pki" {
		t.Fatalf("%q", got)
	}
}
