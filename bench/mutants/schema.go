package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// A mutant schema puts many mutants in one build, each switched on at
// run time: the function a mutant changes gets, at the top of its body,
// a copy of that body with the mutant applied, run instead of the rest
// when the environment names the mutant,
//
//	func (c *Conn) readRecord() error {
//		if gmproxyMutantID == 17 {
//			...the body, mutated...
//		}
//		...the body...
//	}
//
// so that a package's test binary is built once for all its mutants,
// where a build per mutant was most of the mutation step's time (a
// proxy mutant: about 6 CPU-seconds of build, 1.5 of tests). The copy
// keeps the function's name (a test that looks for it in a stack still
// finds it) and, with //line comments, the file's line numbers.
//
// A mutant is built alone as before (an overlay of its file) when its
// text is not inside one function's body, or when the body, copied into
// a block, would not mean the same: a ":=" at the top level of the body,
// as the mutant leaves it, that names a parameter or result (in the
// function's own block it assigns them, in the copy's it would declare
// new ones). A copy's labels, the mutant's among them, are renamed
// (labels are the function's: the copy would declare them twice). A mutant that
// survives in its schema is built alone before it is called a survivor:
// a test whose subprocess drops the environment would not see it.

// envMutant names the mutant a schema build runs (its number in the
// list, from 1); unset or 0, none.
const envMutant = "GMPROXY_MUTANT"

// schemaVar is the variable the copies test, one per package.
const schemaVar = "gmproxyMutantID"

// schemaFile is the file, added to every package with a schema, that
// sets schemaVar from envMutant.
const schemaFile = "gmproxy_mutant_id.go"

// schema is the overlay of a schema build: the changed files and the
// added ones, by their path in the build directory.
type schema struct {
	files map[string][]byte // relative to the module root
	ids   map[int]bool      // the mutants (index+1) it holds
	// fn names the function each mutant's copy is in (its file and the
	// offset of its body): a -null run's unchanged copies of one
	// function are the same code.
	fn map[int]string
}

// makeSchema builds the schema of list (mutants numbered by index+1)
// from the files in root, and says for each mutant left out why.
func makeSchema(root string, list []mutant) (*schema, map[int]string, error) {
	s := &schema{files: map[string][]byte{}, ids: map[int]bool{}, fn: map[int]string{}}
	alone := map[int]string{}
	byFile := map[string][]int{}
	for i, m := range list {
		if !strings.HasSuffix(m.file, ".go") || strings.HasSuffix(m.file, "_test.go") {
			alone[i+1] = "not a package's Go file"
			continue
		}
		byFile[m.file] = append(byFile[m.file], i)
	}
	files := make([]string, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	pkgs := map[string]string{} // directory: package name
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, nil, err
		}
		// The //line comments name the file as the build directory
		// has it, which is where the build reads it from.
		out, pkg, done, why := schemaOf(src, filepath.Join(root, f), list, byFile[f])
		for id, w := range why {
			alone[id] = w
		}
		if len(done) == 0 {
			continue
		}
		s.files[f] = out
		for id, body := range done {
			s.ids[id] = true
			s.fn[id] = fmt.Sprintf("%s:%d", f, body)
		}
		pkgs[filepath.Dir(f)] = pkg
	}
	for dir, pkg := range pkgs {
		s.files[filepath.Join(dir, schemaFile)] = []byte(fmt.Sprintf(`package %s

import (
	"os"
	"strconv"
)

// %s is the mutant (bench/mutants) this build runs, 0 for none.
var %s = func() int {
	n, _ := strconv.Atoi(os.Getenv(%q))
	return n
}()
`, pkg, schemaVar, schemaVar, envMutant))
	}
	return s, alone, nil
}

// schemaOf puts the mutants idx of list (all of file path, whose text is
// src) into src as copies of the bodies they change. It returns the new
// text, the package's name, the mutants it holds (index+1) with the
// offset of the body each is copied into and, for each left out, why.
func schemaOf(src []byte, path string, list []mutant, idx []int) (out []byte, pkg string, done map[int]int, why map[int]string) {
	why, done = map[int]string{}, map[int]int{}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		for _, i := range idx {
			why[i+1] = "file does not parse: " + err.Error()
		}
		return nil, "", nil, why
	}
	tf := fset.File(f.Pos())
	type insert struct {
		at   int // offset in src: just after a body's "{"
		id   int
		text []byte
	}
	var ins []insert
	for _, i := range idx {
		m := list[i]
		off := bytes.Index(src, []byte(m.old))
		end := off + len(m.old)
		fd := enclosingFunc(f, tf, off, end)
		if fd == nil {
			why[i+1] = "not inside a function's body"
			continue
		}
		// The copy is the body as the mutant leaves it, and is
		// checked and has its labels renamed as such: a mutant's own
		// text may declare a result with ":=", or name a label of the
		// body (left as it was, it named the original's, and the
		// package's schema did not compile).
		msrc := append(append(append([]byte(nil), src[:off]...), m.new...), src[end:]...)
		mfset := token.NewFileSet()
		mast, err := parser.ParseFile(mfset, path, msrc, parser.SkipObjectResolution)
		if err != nil {
			why[i+1] = "the mutated file does not parse: " + err.Error()
			continue
		}
		mf := mfset.File(mast.Pos())
		mfd := enclosingFunc(mast, mf, off, off+len(m.new))
		if mfd == nil || mf.Offset(mfd.Body.Lbrace) != tf.Offset(fd.Body.Lbrace) {
			why[i+1] = "the mutant changes where its function's body starts or ends"
			continue
		}
		if w := notCopyable(mfd); w != "" {
			why[i+1] = w
			continue
		}
		// Alone, such a mutant does not compile ("missing return"),
		// an error in the list; its copy would run on into the
		// original body.
		if fd.Type.Results != nil && len(fd.Type.Results.List) > 0 && !endsTerminating(mfd.Body.List) {
			why[i+1] = "the mutated body can run off its end (missing return)"
			continue
		}
		// Labels are the function's: the copy, in the same
		// function, renames its own.
		var edits []edit
		ast.Inspect(mfd.Body, func(n ast.Node) bool {
			var l *ast.Ident
			switch n := n.(type) {
			case *ast.LabeledStmt:
				l = n.Label
			case *ast.BranchStmt:
				l = n.Label
			}
			if l != nil {
				lo := mf.Offset(l.Pos())
				edits = append(edits, edit{lo, lo + len(l.Name), fmt.Sprintf("%s_m%d", l.Name, i+1)})
			}
			return true
		})
		sort.Slice(edits, func(a, b int) bool { return edits[a].from < edits[b].from })
		lb, rb := tf.Offset(fd.Body.Lbrace), mf.Offset(mfd.Body.Rbrace)
		var mutated []byte
		at := lb + 1
		for _, e := range edits {
			mutated = append(append(mutated, msrc[at:e.from]...), e.text...)
			at = e.to
		}
		mutated = append(mutated, msrc[at:rb]...)
		line := tf.Line(fd.Body.Lbrace)
		var b bytes.Buffer
		fmt.Fprintf(&b, "\nif %s == %d {\n//line %s:%d\n%s", schemaVar, i+1, path, line, mutated)
		if fd.Type.Results == nil || len(fd.Type.Results.List) == 0 {
			// The body of a function without results may end
			// without a return: the copy must not go on into
			// the original.
			b.WriteString("\nreturn")
		}
		b.WriteString("\n}")
		ins = append(ins, insert{at: lb + 1, id: i + 1, text: b.Bytes()})
		done[i+1] = lb
	}
	if len(ins) == 0 {
		return nil, f.Name.Name, nil, why
	}
	// From the end, so that the offsets before stay right; the copies
	// of one function in the order of their mutants.
	sort.SliceStable(ins, func(a, b int) bool {
		if ins[a].at != ins[b].at {
			return ins[a].at > ins[b].at
		}
		return ins[a].id > ins[b].id
	})
	out = append([]byte(nil), src...)
	for k := 0; k < len(ins); {
		at := ins[k].at
		var block []byte
		for ; k < len(ins) && ins[k].at == at; k++ {
			block = append(ins[k].text, block...)
		}
		// The original body goes on at its own line numbers: the
		// rest of the "{" line is that line.
		line := tf.Line(tf.Pos(at - 1))
		block = append(block, fmt.Sprintf("\n//line %s:%d\n", path, line)...)
		out = append(out[:at:at], append(block, out[at:]...)...)
	}
	return out, f.Name.Name, done, why
}

// enclosingFunc is the function declaration whose body holds
// src[off:end], or nil.
func enclosingFunc(f *ast.File, tf *token.File, off, end int) *ast.FuncDecl {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		if tf.Offset(fd.Body.Lbrace) < off && end <= tf.Offset(fd.Body.Rbrace) {
			return fd
		}
	}
	return nil
}

// notCopyable says why fd's body, copied into a block of itself, would
// not compile or not mean the same, or "".
func notCopyable(fd *ast.FuncDecl) string {
	names := map[string]bool{}
	for _, fl := range []*ast.FieldList{fd.Recv, fd.Type.Params, fd.Type.Results} {
		if fl == nil {
			continue
		}
		for _, field := range fl.List {
			for _, n := range field.Names {
				names[n.Name] = true
			}
		}
	}
	for _, st := range fd.Body.List {
		// A label does not open a block: "L: n, err := f()"
		// declares in the function's as the statement alone does.
		for {
			l, ok := st.(*ast.LabeledStmt)
			if !ok {
				break
			}
			st = l.Stmt
		}
		as, ok := st.(*ast.AssignStmt)
		if !ok || as.Tok != token.DEFINE {
			continue
		}
		for _, e := range as.Lhs {
			if id, ok := e.(*ast.Ident); ok && names[id.Name] {
				return fmt.Sprintf("%q := at the body's top level assigns a parameter or result", id.Name)
			}
		}
	}
	return ""
}

// endsTerminating reports whether list ends in a terminating statement
// (The Go Programming Language Specification, "Terminating statements"),
// as the body of a function with results must.
func endsTerminating(list []ast.Stmt) bool {
	for i := len(list) - 1; i >= 0; i-- {
		if _, ok := list[i].(*ast.EmptyStmt); !ok {
			return terminates(list[i], "")
		}
	}
	return false
}

// terminates reports whether s, labelled label if not "", is a
// terminating statement.
func terminates(s ast.Stmt, label string) bool {
	switch s := s.(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.BranchStmt:
		return s.Tok == token.GOTO
	case *ast.ExprStmt:
		c, ok := s.X.(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := ast.Unparen(c.Fun).(*ast.Ident)
		return ok && id.Name == "panic"
	case *ast.BlockStmt:
		return endsTerminating(s.List)
	case *ast.IfStmt:
		return s.Else != nil && terminates(s.Body, "") && terminates(s.Else, "")
	case *ast.ForStmt:
		return s.Cond == nil && !breaks(s.Body.List, label)
	case *ast.LabeledStmt:
		return terminates(s.Stmt, s.Label.Name)
	case *ast.SwitchStmt:
		return clausesTerminate(s.Body, label, true)
	case *ast.TypeSwitchStmt:
		return clausesTerminate(s.Body, label, true)
	case *ast.SelectStmt:
		return clausesTerminate(s.Body, label, false)
	}
	return false
}

// clausesTerminate reports whether a switch's or select's clauses make it
// a terminating statement: none breaks out of it, each ends in a
// terminating statement or a fallthrough, and a switch has a default.
func clausesTerminate(body *ast.BlockStmt, label string, needDefault bool) bool {
	def := false
	for _, c := range body.List {
		var list []ast.Stmt
		switch c := c.(type) {
		case *ast.CaseClause:
			list, def = c.Body, def || c.List == nil
		case *ast.CommClause:
			list = c.Body
		}
		if breaks(list, label) {
			return false
		}
		if n := len(list); n > 0 {
			last := list[n-1]
			for {
				l, ok := last.(*ast.LabeledStmt)
				if !ok {
					break
				}
				last = l.Stmt
			}
			if b, ok := last.(*ast.BranchStmt); ok && b.Tok == token.FALLTHROUGH {
				continue
			}
		}
		if !endsTerminating(list) {
			return false
		}
	}
	return def || !needDefault
}

// breaks reports whether list holds a break out of the statement it is
// the body of, labelled label if not "": a break without a label not
// inside another for, switch or select, or one naming label.
func breaks(list []ast.Stmt, label string) bool {
	found := false
	var visit func(n ast.Node, inner bool)
	visit = func(n ast.Node, inner bool) {
		ast.Inspect(n, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.FuncLit:
				return false // its breaks are its own
			case *ast.BranchStmt:
				if x.Tok == token.BREAK && (x.Label == nil && !inner || x.Label != nil && x.Label.Name == label) {
					found = true
				}
			case *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
				if !inner {
					visit(x, true)
					return false
				}
			}
			return !found
		})
	}
	for _, s := range list {
		visit(s, false)
	}
	return found
}

// edit replaces src[from:to] with text.
type edit struct {
	from, to int
	text     string
}

// schemaBuild is a schema's overlay and the test binaries built with it.
type schemaBuild struct {
	s        *schema
	buildDir string
	dir      string // the overlay's files and the binaries
	overlay  string // the go test -overlay file

	mu  sync.Mutex
	bad map[string]bool // packages whose binary did not build
}

// newSchemaBuild writes the schema of list, made from buildDir's files,
// beside buildDir.
func newSchemaBuild(buildDir string, list []mutant) (*schemaBuild, error) {
	s, _, err := makeSchema(buildDir, list)
	if err != nil {
		return nil, err
	}
	sb := &schemaBuild{s: s, buildDir: buildDir, dir: buildDir + "-schema", bad: map[string]bool{}}
	if err := os.MkdirAll(sb.dir, 0o755); err != nil { // none of list may be in it
		return nil, err
	}
	replace := map[string]string{}
	for rel, text := range s.files {
		// Beside the copies, not in them (a test that walks the
		// module would find it), under the file's own name (the
		// compiler reports errors under it).
		src := filepath.Join(sb.dir, "src", rel)
		if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(src, text, 0o644); err != nil {
			return nil, err
		}
		replace[filepath.Join(buildDir, rel)] = src
	}
	j, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return nil, err
	}
	sb.overlay = filepath.Join(sb.dir, "overlay.json")
	if err := os.WriteFile(sb.overlay, j, 0o644); err != nil {
		return nil, err
	}
	return sb, nil
}

// bin is the test binary of pkg.
func (sb *schemaBuild) bin(pkg string) string {
	// "_" doubled before "/" becomes one: ./a_b/c and ./a/b_c stay apart.
	name := strings.NewReplacer("_", "__", "/", "_").Replace(strings.Trim(pkg, "./"))
	return filepath.Join(sb.dir, "bin", name+".test")
}

// build builds pkg's test binary with the schema.
func (sb *schemaBuild) build(pkg string) (string, error) {
	out, err := buildTests(sb.buildDir, sb.overlay, os.Environ(), sb.bin(pkg), pkg)
	if err != nil {
		sb.mu.Lock()
		sb.bad[pkg] = true
		sb.mu.Unlock()
	}
	return out, err
}

// failed reports whether pkg's binary did not build.
func (sb *schemaBuild) failed(pkg string) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.bad[pkg]
}
