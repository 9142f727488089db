package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMutantBuiltUnderLinkedTmp: a mutant reaches its test binary when
// the scratch copies are made under a TMPDIR reached through a symbolic
// link (macOS's). The overlay named buildDir as MkdirTemp wrote it, the
// go command the files by their real path: the binary was built from the
// unmutated file, and the mutant survived.
func TestMutantBuiltUnderLinkedTmp(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "tmp")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	t.Setenv("TMPDIR", link)
	files := map[string]string{
		"go.mod":      "module m\n\ngo 1.22\n",
		"p/p.go":      "package p\n\nconst V = 1\n",
		"p/p_test.go": "package p\n\nimport \"testing\"\n\nfunc TestV(t *testing.T) {\n\tif V != 1 {\n\t\tt.Fatal(V)\n\t}\n}\n",
	}
	var dirs [2]string
	for i := range dirs {
		dir, err := scratchDir()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir); os.RemoveAll(dir + "-overlay") })
		for name, text := range files {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dirs[i] = dir
	}
	buildDir, dir := dirs[0], dirs[1]
	m := mutant{name: "V off by one", file: "p/p.go", old: "const V = 1", new: "const V = 2", run: "^TestV$"}
	r, err := try(m, buildDir, dir, os.Environ(), filepath.Join(dir, ".mutants-bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.failed {
		t.Fatalf("the mutant survived: its test binary was built without it\n%s", r.out)
	}
}
