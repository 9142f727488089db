package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorPagesLoaded: a site's error pages are read into its material
// by status, and a page over MaxErrorPage is refused.
func TestErrorPagesLoaded(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "50x.html"), filepath.Join(dir, "big.html")
	os.WriteFile(small, []byte("<h1>soon</h1>"), 0o644)
	os.WriteFile(big, make([]byte, MaxErrorPage+1), 0o644)
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	with := func(pages string) (*Config, error) {
		return Parse(path, []byte(strings.Replace(string(data), "    routes:\n", "    error_pages: "+pages+"\n    routes:\n", 1)))
	}
	cfg, err := with("[{status: [502, 504], file: " + small + "}]")
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Sites[0].Material.ErrorPages; string(m[502]) != "<h1>soon</h1>" || string(m[504]) != "<h1>soon</h1>" || len(m) != 2 {
		t.Errorf("pages %v", m)
	}
	// Refused by its size before it is read, with the fix that fits a
	// page (its images and styles linked, not inlined).
	if _, err := with("[{status: [502], file: " + big + "}]"); err == nil || !strings.Contains(err.Error(), "over 64KiB; keep the page under 64KiB (link its images and styles)") {
		t.Errorf("a page over 64KiB: %v", err)
	}
}
