package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// TestSchema: mutants put in one schema build (schema.go) each change
// only their own run, none the unmutated one: a copy ends its function
// (a function without results does not go on into the original body),
// labels are renamed, the file keeps its line numbers, and a body whose
// copy would shadow a result is left to a build of its own.
func TestSchema(t *testing.T) {
	files := map[string]string{
		"go.mod": "module m\n\ngo 1.22\n",
		"p/p.go": `package p

import "runtime"

func Add(a, b int) int {
	return a + b
}

func Set(x *int) {
	*x = 1
}

func First(xs []int) (n int) {
outer:
	for _, x := range xs {
		for x > 0 {
			n = x
			break outer
		}
	}
	return n
}

func Shadow() (err error) {
	v, err := 1, error(nil)
	_ = v
	return
}

func Line() int {
	_, _, l, _ := runtime.Caller(0)
	return l + 0
}
`,
		"p/p_test.go": `package p

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 1) != 3 {
		t.Fatal(Add(2, 1))
	}
}

func TestSet(t *testing.T) {
	var x int
	Set(&x)
	if x != 1 {
		t.Fatal(x)
	}
}

func TestFirst(t *testing.T) {
	if n := First([]int{0, 5, 6}); n != 5 {
		t.Fatal(n)
	}
}

func TestLine(t *testing.T) {
	if l := Line(); l != 31 {
		t.Fatal(l)
	}
}
`,
	}
	dir := writeModule(t, files)
	list := []mutant{
		{name: "Add subtracts", file: "p/p.go", old: "return a + b", new: "return a - b", run: "^TestAdd$"},
		{name: "Set sets 2", file: "p/p.go", old: "*x = 1", new: "*x = 2", run: "^TestSet$"},
		{name: "First off by one", file: "p/p.go", old: "n = x\n", new: "n = x + 1\n", run: "^TestFirst$"},
		{name: "Line off by one", file: "p/p.go", old: "return l + 0", new: "return l + 1", run: "^TestLine$"},
		{name: "Shadow", file: "p/p.go", old: "_ = v", new: "_ = v + 1", run: "^TestAdd$"},
	}
	_, alone, err := makeSchema(dir, list)
	if err != nil {
		t.Fatal(err)
	}
	if len(alone) != 1 || alone[5] == "" {
		t.Fatalf("left out of the schema: %v, want only the mutant of Shadow", alone)
	}
	sb, err := newSchemaBuild(dir, list)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sb.dir) })
	if out, err := sb.build("./p"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, failed, err := runTests(dir, os.Environ(), sb.bin("./p"), "./p", "."); err != nil || failed {
		t.Fatalf("unmutated: failed %v, %v\n%s", failed, err, out)
	}
	for id := 1; id <= 4; id++ {
		env := append(os.Environ(), envMutant+"="+strconv.Itoa(id))
		// Each mutant fails its own test and no other.
		for j, m := range list[:4] {
			out, failed, err := runTests(dir, env, sb.bin("./p"), "./p", m.run)
			if err != nil {
				t.Fatal(err)
			}
			if failed != (j+1 == id) {
				t.Errorf("mutant %q: %s failed %v\n%s", list[id-1].name, m.run, failed, out)
			}
		}
	}
}

// TestSchemaMutantText: the copy is checked and its labels renamed as
// the mutant leaves the body, not as it was: a mutant that names one of
// the body's labels, or declares a result with ":=", builds and runs as
// it does alone.
func TestSchemaMutantText(t *testing.T) {
	files := map[string]string{
		"go.mod": "module m\n\ngo 1.22\n",
		"p/p.go": `package p

func Sum(xs [][]int) (n int) {
outer:
	for _, row := range xs {
		if len(row) == 0 {
			continue outer
		}
		for _, x := range row {
			if x < 0 {
				continue
			}
			n += x
		}
	}
	return n
}

func Parse(s string) (v int, err error) {
	w, e := len(s), error(nil)
	v = w
	_ = e
	return
}
`,
		"p/p_test.go": `package p

import "testing"

func TestSum(t *testing.T) {
	if n := Sum([][]int{{1, -1, 2}, {3}}); n != 6 {
		t.Fatal(n)
	}
}

func TestParse(t *testing.T) {
	if v, err := Parse("ab"); v != 2 || err != nil {
		t.Fatal(v, err)
	}
}
`,
	}
	dir := writeModule(t, files)
	list := []mutant{
		// Alone, the row's rest skipped at the first negative.
		{name: "Sum skips the row", file: "p/p.go", old: "continue\n", new: "continue outer\n", run: "^TestSum$"},
		// Alone, err assigned: Parse fails.
		{name: "Parse fails", file: "p/p.go", old: "w, e := len(s), error(nil)", new: "w, err := len(s), error(nil)\n\terr = errors.ErrUnsupported\n\te := err", run: "^TestParse$"},
	}
	// The second mutant needs errors imported.
	b, _ := os.ReadFile(filepath.Join(dir, "p/p.go"))
	b = bytes.Replace(b, []byte("package p\n"), []byte("package p\n\nimport \"errors\"\n\nvar _ = errors.New\n"), 1)
	if err := os.WriteFile(filepath.Join(dir, "p/p.go"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := newSchemaBuild(dir, list)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sb.dir) })
	if out, err := sb.build("./p"); err != nil {
		t.Fatalf("the schema does not build: %v\n%s", err, out)
	}
	if out, failed, err := runTests(dir, os.Environ(), sb.bin("./p"), "./p", "."); err != nil || failed {
		t.Fatalf("unmutated: failed %v, %v\n%s", failed, err, out)
	}
	for i, m := range list {
		if !sb.s.ids[i+1] {
			continue // built alone
		}
		env := append(os.Environ(), envMutant+"="+strconv.Itoa(i+1))
		out, failed, err := runTests(dir, env, sb.bin("./p"), "./p", m.run)
		if err != nil {
			t.Fatal(err)
		}
		if !failed {
			t.Errorf("mutant %q survived its schema build, not alone\n%s", m.name, out)
		}
	}
}

// TestSchemaLabeledDefine: a ":=" that assigns a parameter is no less
// one for a label in front of it; its body's copy would declare a new
// variable where the function assigns the parameter, and a mutant that
// changes nothing was caught.
func TestSchemaLabeledDefine(t *testing.T) {
	files := map[string]string{
		"go.mod": "module m\n\ngo 1.22\n",
		"p/p.go": `package p

func Inc(n int) int {
	p := &n
again:
	n, k := n+1, 0
	if k > 0 || n < 0 {
		goto again
	}
	return *p
}
`,
		"p/p_test.go": `package p

import "testing"

func TestInc(t *testing.T) {
	if n := Inc(1); n != 2 {
		t.Fatal(n)
	}
}
`,
	}
	dir := writeModule(t, files)
	list := []mutant{{name: "Inc unchanged", file: "p/p.go", old: "return *p", new: "return *p + 0", run: "^TestInc$"}}
	sb, err := newSchemaBuild(dir, list)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sb.dir) })
	if !sb.s.ids[1] {
		return // built alone
	}
	if out, err := sb.build("./p"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	env := append(os.Environ(), envMutant+"=1")
	if out, failed, err := runTests(dir, env, sb.bin("./p"), "./p", "."); err != nil || failed {
		t.Fatalf("a mutant that changes nothing: failed %v, %v\n%s", failed, err, out)
	}
}

// TestSchemaMissingReturn: a mutant that leaves a function with results
// able to run off the end of its body does not compile alone ("missing
// return"), which is an error in the list; its copy ran on into the
// original body instead, doing the work twice, and was caught.
func TestSchemaMissingReturn(t *testing.T) {
	files := map[string]string{
		"go.mod": "module m\n\ngo 1.22\n",
		"p/p.go": `package p

func Next(c *int) int {
	*c++
	if *c > 10 {
		panic("overflow")
	}
	return *c
}
`,
		"p/p_test.go": `package p

import "testing"

func TestNext(t *testing.T) {
	var c int
	if n := Next(&c); n != 1 {
		t.Fatal(n)
	}
}
`,
	}
	dir := writeModule(t, files)
	list := []mutant{{name: "Next without its return", file: "p/p.go", old: "return *c", new: "_ = c", run: "^TestNext$"}}
	_, alone, err := makeSchema(dir, list)
	if err != nil {
		t.Fatal(err)
	}
	if alone[1] == "" {
		t.Fatal("a mutant that cannot compile alone put in the schema")
	}
	// Every way a body may end and not run off it stays in the schema.
	ok := map[string]string{
		"return":   "return 1",
		"panic":    `panic("x")`,
		"goto":     "goto L\nL:\n\tfor {\n\t}",
		"if else":  "if *c > 0 {\n\t\treturn 1\n\t} else {\n\t\tpanic(0)\n\t}",
		"for":      "for {\n\t\tif *c > 0 {\n\t\t\treturn 1\n\t\t}\n\t\tfor {\n\t\t\tbreak\n\t\t}\n\t}",
		"switch":   "switch *c {\n\tcase 1:\n\t\tfallthrough\n\tdefault:\n\t\treturn 2\n\t}",
		"select":   "select {}",
		"block":    "{\n\t\treturn 1\n\t}",
		"labelled": "L:\n\tfor {\n\t\tcontinue L\n\t}",
	}
	not := map[string]string{
		"break":        "for {\n\t\tbreak\n\t}",
		"break label":  "L:\n\tfor {\n\t\tfor {\n\t\t\tbreak L\n\t\t}\n\t}",
		"no default":   "switch *c {\n\tcase 1:\n\t\treturn 2\n\t}",
		"if":           "if *c > 0 {\n\t\treturn 1\n\t}",
		"switch break": "switch {\n\tdefault:\n\t\tif *c > 0 {\n\t\t\tbreak\n\t\t}\n\t\treturn 1\n\t}",
	}
	for name, end := range ok {
		m := []mutant{{name: name, file: "p/p.go", old: "return *c", new: end, run: "."}}
		if _, alone, _ := makeSchema(dir, m); alone[1] != "" {
			t.Errorf("%s: left out: %s", name, alone[1])
		}
	}
	for name, end := range not {
		m := []mutant{{name: name, file: "p/p.go", old: "return *c", new: end, run: "."}}
		if _, alone, _ := makeSchema(dir, m); alone[1] == "" {
			t.Errorf("%s: put in the schema", name)
		}
	}
}

// TestTestEnv: the tests' environment does not carry a GMPROXY_MUTANT of
// the caller's (one exported to reproduce a mutant): the baselines ran
// with that mutant on in their schema build and failed.
func TestTestEnv(t *testing.T) {
	env := testEnv([]string{"HOME=/h", envMutant + "=3", "GMPROXY_TEST_WAIT=1"})
	want := []string{"HOME=/h", "GMPROXY_TEST_WAIT=1"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Fatalf("%q, want %q", env, want)
	}
	if env := testEnv([]string{"HOME=/h"}); strings.Join(env, " ") != "HOME=/h GMPROXY_TEST_WAIT="+testWait {
		t.Fatalf("%q: no test wait", env)
	}
}

// writeModule writes files (path: text) into a new directory and returns
// it.
func writeModule(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, text := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestNullGroups: a -null run tests the unchanged copies of one function
// once for each package of their tests, their filters joined; a
// subtest's filter (with '/') and another function's copies stay apart.
func TestNullGroups(t *testing.T) {
	list := []mutant{
		{name: "a", file: "p/p.go", run: "^TestA$"},
		{name: "b", file: "p/p.go", run: "^TestB$"},
		{name: "c", file: "p/p.go", run: "TestC/sub"},
		{name: "d", file: "p/p.go", run: "./q:^TestD$"},
		{name: "e", file: "p/p.go", run: "^TestE$"},
		{name: "f", file: "p/p.go", run: "^TestF$"},
	}
	s := &schema{ids: map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true}, fn: map[int]string{1: "p/p.go:10", 2: "p/p.go:10", 3: "p/p.go:10", 4: "p/p.go:10", 5: "p/p.go:99"}}
	ids := nullGroups(list, s)
	if want := []int{1, 3, 4, 5}; !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	if pkgOf(list[0]) != "./p" || runOf(list[0]) != "^TestA$|^TestB$" {
		t.Errorf("joined run %q", list[0].run)
	}
	for i, want := range []string{"TestC/sub", "./q:^TestD$", "^TestE$"} {
		if list[i+2].run != want {
			t.Errorf("%s: run %q, want %q", list[i+2].name, list[i+2].run, want)
		}
	}
}
