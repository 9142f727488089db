package testpeer

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Files is a generated set of committed fixture files (seed corpora), by
// path relative to the test's package directory.
type Files map[string][]byte

// Sync regenerates the files on disk when env is set to 1 and otherwise
// checks that each one is committed with exactly the generated content, so a
// generator and its corpus cannot drift apart. Files on disk that the
// generator does not make (hand-written seeds) are left alone.
func (fs Files) Sync(t testing.TB, env string) {
	t.Helper()
	if len(fs) == 0 {
		t.Fatal("the generator made no files")
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	write := os.Getenv(env) == "1"
	for _, n := range names {
		if write {
			if err := os.MkdirAll(filepath.Dir(n), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(n, fs[n], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil || !bytes.Equal(b, fs[n]) {
			t.Errorf("%s is missing or stale (%v); regenerate with %s=1", n, err, env)
		}
	}
}
