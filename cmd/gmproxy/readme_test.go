package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlocks returns the fenced code blocks of README.md whose info
// string is lang.
func readmeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	parts := strings.Split(string(b), "\n```"+lang+"\n")
	for _, p := range parts[1:] {
		block, _, ok := strings.Cut(p, "\n```")
		if !ok {
			t.Fatalf("a ```%s block of README.md is not closed", lang)
		}
		blocks = append(blocks, block+"\n")
	}
	return blocks
}

// TestReadmeConfigsCheck: every YAML block of README.md, written beside
// the files `gmproxy certs -out DIR -keyserver keys.internal` makes (the
// names the blocks use) for the hosts they name, passes gmproxy check
// (gmproxy keyserver -check for the key server's file) without an error
// or a warning: an operator who copies one gets a configuration that
// loads.
func TestReadmeConfigsCheck(t *testing.T) {
	dir := t.TempDir()
	if code, out, errs := ccRun("certs", "-out", dir, "-hosts", "portal.example.cn,*.example.cn,localhost", "-keyserver", "keys.internal"); code != 0 {
		t.Fatalf("gmproxy certs: exit %d\n%s%s", code, out, errs)
	}
	blocks := readmeBlocks(t, "yaml")
	if len(blocks) < 3 {
		t.Fatalf("README.md has %d YAML blocks, want the quick start's and the key server's two", len(blocks))
	}
	for i, y := range blocks {
		f := filepath.Join(dir, "readme.yaml")
		if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		// The listen addresses are the production hosts' (0.0.0.0:443,
		// 10.0.0.5:7443): not bound here.
		args := []string{"check", "-no-bind", "-c", f}
		if strings.HasPrefix(y, "# keyserver.yaml") {
			args = []string{"keyserver", "-c", f, "-check", "-no-bind"}
		}
		code, out, errs := ccRun(args...)
		if code != 0 || errs != "" {
			t.Errorf("README.md YAML block %d: gmproxy %s: exit %d\n%s%s\n%s", i+1, strings.Join(args, " "), code, out, errs, y)
		}
	}
}

// TestReadmeCommandFlags: every `gmproxy COMMAND ...` line in README.md's
// shell blocks and inline code names a command that exists and flags that
// command takes, as its -help lists them.
func TestReadmeCommandFlags(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([A-Za-z0-9_-]+)`)
	known := map[string]map[string]bool{}
	for name := range commands {
		var out, errb strings.Builder
		dispatch([]string{name, "-help"}, &out, &errb)
		known[name] = map[string]bool{"h": true, "help": true}
		for _, m := range flagLine.FindAllStringSubmatch(errb.String()+out.String(), -1) {
			known[name][m[1]] = true
		}
	}
	// A command, in a shell line or in inline code, up to a comment, a
	// pipe or the end of the code.
	use := regexp.MustCompile("(?:^|[\\s`(])(?:gmproxy|go run \\./cmd/gmproxy) ([a-z_]+)((?: [^`#|\\n]*)?)")
	n := 0
	for _, m := range use.FindAllStringSubmatch(string(b), -1) {
		name, rest := m[1], m[2]
		flags, ok := known[name]
		if !ok {
			// Prose ("gmproxy keeps only the certificates"), not a command.
			continue
		}
		n++
		for _, w := range strings.Fields(rest) {
			w = strings.Trim(w, "[]()|,;")
			if !strings.HasPrefix(w, "-") || w == "-" {
				continue
			}
			f, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			for _, alt := range strings.Split(f, "|-") { // [-ntls|-tls13sm]
				if alt != "" && !flags[strings.TrimLeft(alt, "-")] {
					t.Errorf("README.md: gmproxy %s%s: no flag -%s", name, rest, alt)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d gmproxy commands in README.md", n)
	}
}
