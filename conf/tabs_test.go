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
