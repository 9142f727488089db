package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpgradesEmptyList: `upgrades: []` is an empty list, which the proxy
// reads as "no protocol may be tunnelled", not a missing key, which gets
// the default [websocket].
func TestUpgradesEmptyList(t *testing.T) {
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		route string
		want  []string
	}{
		{"{path_prefix: /, upstream: app}", []string{"websocket"}},
		{"{path_prefix: /, upstream: app, upgrades: []}", []string{}},
		{"{path_prefix: /, upstream: app, upgrades: [websocket]}", []string{"websocket"}},
	} {
		text := strings.Replace(string(data), "{path_prefix: /, upstream: app}", tc.route, 1)
		cfg, err := Parse(path, []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", tc.route, err)
		}
		got := cfg.Sites[0].Routes[0].Upgrades
		if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s: Upgrades %#v, want %#v", tc.route, got, tc.want)
		}
	}
}
