package main

import (
	"flag"
	"io"
	"slices"
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
