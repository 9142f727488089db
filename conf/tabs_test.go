package conf

import (
	"errors"
	"strings"
	"testing"
)

// TestTabIndentationPointed: a tab in the indentation, the usual YAML
// syntax error of a file edited by hand, is reported at the tab's line and
// column; the YAML reader names the line before it for some (a tab under
// a list item) and no column for any.
func TestTabIndentationPointed(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line, col  int
	}{
		{"under a list item", "listeners:\n  - address: 0.0.0.0:443\n\tprotocols: [tlcp]\n", 3, 1},
		{"a list item", "listeners:\n\t- address: 0.0.0.0:443\n", 2, 1},
		{"after spaces", "listeners:\n  - address: 0.0.0.0:443\n    \tprotocols: [tlcp]\n", 3, 5},
	} {
		_, err := Parse("tabs.yaml", []byte(tc.yaml))
		var probs Problems
		if !errors.As(err, &probs) || len(probs) != 1 {
			t.Errorf("%s: %v; want one problem", tc.name, err)
			continue
		}
		if p := probs[0]; p.Line != tc.line || p.Column != tc.col || !strings.Contains(p.Message, "tab") || !strings.Contains(p.Fix, "spaces") {
			t.Errorf("%s: %v; want the tab at %d:%d, with the fix", tc.name, p, tc.line, tc.col)
		}
	}
}

// TestSecondDocumentWithSyntaxErrorPointed: a second YAML document that
// does not parse is still reported at a line, the one the reader names.
func TestSecondDocumentWithSyntaxErrorPointed(t *testing.T) {
	_, err := Parse("docs.yaml", []byte("listeners:\n  - address: 0.0.0.0:443\n---\nsites: [\n"))
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("%v; want it refused", err)
	}
	for _, p := range probs {
		if strings.Contains(p.Message, "more than one YAML document") {
			if p.Line < 3 {
				t.Errorf("%v; want a line at or after the \"---\" (3)", p)
			}
			return
		}
	}
	t.Errorf("%v; want the second document reported", err)
}

// TestStrayByteOrderMarkRefused: a byte order mark after the file's
// start (two at the start, a file joined to one saved with one) is
// refused at its position: the YAML reader drops the first letter of
// later keys after two ("sites" read as "ites"), and one before a key or
// in a value makes it another name.
func TestStrayByteOrderMarkRefused(t *testing.T) {
	for _, tc := range []struct {
		yaml      string
		line, col int
	}{
		{"\ufeff\ufefflisteners:\n  - address: 0.0.0.0:443\nsites: []\n", 1, 2},
		{"listeners:\n  - address: 0.0.0.0:443\n\ufeffsites: []\n", 3, 1},
		{"listeners:\n  - address: \ufeff0.0.0.0:443\n", 2, 14},
	} {
		_, err := Parse("bom.yaml", []byte(tc.yaml))
		var probs Problems
		if !errors.As(err, &probs) || len(probs) != 1 {
			t.Errorf("%q: %v; want one problem", tc.yaml, err)
			continue
		}
		if p := probs[0]; p.Line != tc.line || p.Column != tc.col || !strings.Contains(p.Message, "U+FEFF") {
			t.Errorf("%q: %v; want the mark at %d:%d", tc.yaml, p, tc.line, tc.col)
		}
	}
	if _, err := Parse("bom.yaml", []byte("\ufefflisteners: []\n")); err != nil && strings.Contains(err.Error(), "U+FEFF") {
		t.Errorf("a mark at the start: %v; want it taken", err)
	}
}
