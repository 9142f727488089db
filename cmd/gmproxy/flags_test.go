package main

import (
	"bytes"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestParseFlags: flags before, between and after positional arguments;
// a flag's value that looks like "--" or like a flag is a value; a "--"
// in a flag's place ends the flags.
func TestParseFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		d    string
		k    bool
		pos  []string
		code int
		ok   bool
	}{
		{[]string{"url", "-k", "-d", "x"}, "x", true, []string{"url"}, 0, true},
		{[]string{"-d", "--", "url", "-k"}, "--", true, []string{"url"}, 0, true},
		{[]string{"-d", "-k", "url"}, "-k", false, []string{"url"}, 0, true},
		{[]string{"-d=--", "-k", "url"}, "--", true, []string{"url"}, 0, true},
		{[]string{"--d", "v", "url", "--", "-k"}, "v", false, []string{"url", "-k"}, 0, true},
		{[]string{"-k=false", "a", "b"}, "", false, []string{"a", "b"}, 0, true},
		{[]string{"url", "-nope"}, "", false, nil, 2, false},
		{[]string{"url", "-h"}, "", false, nil, 0, false},
		{[]string{"url", "-d"}, "", false, nil, 2, false}, // -d without its value
	} {
		fs := flag.NewFlagSet("get", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		d := fs.String("d", "", "")
		k := fs.Bool("k", false, "")
		code, ok := parseFlags(fs, c.args)
		if code != c.code || ok != c.ok {
			t.Errorf("%q: code %d ok %v, want %d %v", c.args, code, ok, c.code, c.ok)
			continue
		}
		if ok && (*d != c.d || *k != c.k || !slices.Equal(fs.Args(), c.pos)) {
			t.Errorf("%q: -d %q -k %v args %q, want %q %v %q", c.args, *d, *k, fs.Args(), c.d, c.k, c.pos)
		}
	}
}

// TestUsageAligned: `gmproxy help` lists every command with its summary
// in one column, however long the longest name (keyserver's summary once
// started a column to the right of the others').
func TestUsageAligned(t *testing.T) {
	var b strings.Builder
	usage(&b)
	col := -1
	n := 0
	for _, line := range strings.Split(b.String(), "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "  "), " ")
		if _, known := commands[name]; !strings.HasPrefix(line, "  ") || !ok || !known {
			continue
		}
		n++
		at := strings.Index(line, commands[name].summary)
		if col < 0 {
			col = at
		}
		if at != col || at <= 2+len(name) {
			t.Errorf("%q: summary at column %d, want %d past the name", line, at, col)
		}
	}
	if n != len(commands) {
		t.Errorf("%d commands listed, want %d:\n%s", n, len(commands), b.String())
	}
}

// TestRunDevFlagsWithConfigRefused: the development setup's -listen and
// -dev-dir next to -c were ignored (the file's listeners serve); they are
// refused with what to do instead, before any configuration is read.
func TestRunDevFlagsWithConfigRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-c", "gmproxy.yaml", "-listen", "0.0.0.0:443"},
		{"-dev-dir", "/tmp/x", "-c", "gmproxy.yaml"},
	} {
		var errb bytes.Buffer
		const want = "-listen and -dev-dir are for the development setup"
		if _, code, ok := parseRunFlags(args, &errb); ok || code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("run %q: ok %v exit %d, %q; want exit 2 with %q", args, ok, code, errb.String(), want)
		}
	}
	var errb bytes.Buffer
	if _, _, ok := parseRunFlags([]string{"-listen", "127.0.0.1:0", "-dev-dir", "/tmp/x"}, &errb); !ok {
		t.Errorf("run -listen -dev-dir refused: %s", errb.String())
	}
}

// TestLogFlagsChecked: a -log-format or -log-level of run or keyserver
// that is not one was taken as text logs at info (a JSON log pipeline
// then cannot read them); it is refused with the values there are.
func TestLogFlagsChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-log-format", "jsn"}, `-log-format "jsn": want text or json`},
		{[]string{"-c", "gmproxy.yaml", "-log-level", "verbose"}, `-log-level "verbose": want debug, info, warn or error`},
	} {
		var errb bytes.Buffer
		if _, code, ok := parseRunFlags(tt.args, &errb); ok || code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("run %q: ok %v exit %d, %q; want exit 2 with %q", tt.args, ok, code, errb.String(), tt.want)
		}
		var out bytes.Buffer
		errb.Reset()
		if code := keyserverMain(append([]string{"-c", "keyserver.yaml"}, tt.args...), &out, &errb, nil, nil); code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("keyserver %q: exit %d, %q; want exit 2 with %q", tt.args, code, errb.String(), tt.want)
		}
	}
	var errb bytes.Buffer
	if _, _, ok := parseRunFlags([]string{"-c", "gmproxy.yaml", "-log-format", "JSON", "-log-level", "warn"}, &errb); !ok {
		t.Errorf("run -log-format JSON -log-level warn refused: %s", errb.String())
	}
}
