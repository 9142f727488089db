package conf

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocReference checks that the configuration reference in doc.go and
// README.md matches the field documentation in config.go (rewrite both with
// -update).
func TestDocReference(t *testing.T) {
	ref, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "// # Configuration reference\n"
	i := bytes.Index(src, []byte(marker))
	j := bytes.Index(src, []byte("\npackage conf"))
	if i < 0 || j < i {
		t.Fatal("doc.go lacks the reference heading or the package clause")
	}
	p := comment.Parser{}
	d := p.Parse(ref)
	var goDoc bytes.Buffer
	goDoc.Write(src[:i])
	for _, line := range strings.SplitAfter(string((&comment.Printer{}).Comment(d)), "\n") {
		switch line {
		case "":
		case "\n":
			goDoc.WriteString("//\n")
		default:
			goDoc.WriteString("// " + line)
		}
	}
	goDoc.Write(src[j:])
	md := append([]byte("<!-- Generated from conf/config.go by TestDocReference (go test ./conf -run DocReference -update). -->\n\n"),
		(&comment.Printer{HeadingLevel: 2}).Markdown(d)...)
	md = regexp.MustCompile(` \{#hdr-[^}]*\}`).ReplaceAll(md, nil)
	golden(t, "doc.go", goDoc.Bytes())
	golden(t, "README.md", md)
}

type refGen struct {
	structs  map[string]*ast.StructType
	typeDocs map[string]string // struct name → its doc comment
	missing  []string          // keys without documentation
	goNames  []string          // keys whose documentation names Go fields
	fieldSet map[string]bool   // Go names of the fields that have a key
	out      strings.Builder
	queue    []refSection
}

type refSection struct {
	path, typ string
}

func reference() (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "config.go", nil, parser.ParseComments)
	if err != nil {
		return "", err
	}
	g := &refGen{structs: map[string]*ast.StructType{}}
	g.typeDocs = map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				g.structs[ts.Name.Name] = st
				d := ts.Doc
				if d == nil {
					d = gd.Doc
				}
				g.typeDocs[ts.Name.Name] = strings.Join(strings.Fields(d.Text()), " ")
			}
		}
	}
	g.fieldSet = map[string]bool{}
	for _, st := range g.structs {
		for _, f := range st.Fields.List {
			if len(f.Names) > 0 && f.Tag != nil && strings.Contains(f.Tag.Value, `yaml:"`) && !strings.Contains(f.Tag.Value, `yaml:"-"`) {
				g.fieldSet[f.Names[0].Name] = true
			}
		}
	}
	g.out.WriteString("# Configuration reference\n\n")
	g.out.WriteString(wrap("Every key of the YAML file, by section; \"[]\" marks a list of sections. Durations are written like 500ms, 10s, 5m, 1h (at most 100 years); sizes like 4096, 64KiB, 10MiB; whole numbers in decimal, without a leading 0 (which YAML 1.1 reads as octal). YAML anchors, aliases and merge keys (<<) work; tags that other programs expand (!include, !env, !vault, !!binary) are refused, since gmproxy expands none. Relative file names resolve against the folder of the configuration file. This reference is generated from the field documentation in config.go.", 76, "") + "\n")
	g.section(refSection{"top level", "Config"})
	// The separate file of gmproxy keyserver -c FILE.
	g.section(refSection{"keyserver", "KeyServerFile"})
	if len(g.missing) > 0 {
		return "", fmt.Errorf("keys without documentation in config.go: %s", strings.Join(g.missing, ", "))
	}
	if len(g.goNames) > 0 {
		return "", fmt.Errorf("documentation in config.go that names Go fields where the reader writes keys (write the YAML key, e.g. request_buffer, listeners[].sites): %s", strings.Join(g.goNames, "; "))
	}
	return g.out.String(), nil
}

// section writes s and then, depth first, the sections nested in it.
func (g *refGen) section(s refSection) {
	fmt.Fprintf(&g.out, "# %s\n\n", s.path)
	if d := g.typeDocs[s.typ]; d != "" && s.typ != "Config" {
		// "Route is one routing rule…" reads as "A route is…" here.
		if name, rest, ok := strings.Cut(d, " "); ok && name == s.typ {
			d = "This section" + " " + rest
		}
		g.out.WriteString(wrap(d, 76, "") + "\n")
	}
	saved := g.queue
	g.queue = nil
	g.fields(s, g.structs[s.typ])
	g.out.WriteString("\n")
	children := g.queue
	g.queue = saved
	for _, c := range children {
		g.section(c)
	}
}

func (g *refGen) fields(s refSection, st *ast.StructType) {
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			raw, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(raw).Get("yaml")
		}
		if tag == "-" {
			continue
		}
		if tag == ",inline" {
			g.fields(s, g.structs[typeName(f.Type)])
			continue
		}
		key, _, _ := strings.Cut(tag, ",")
		docText := strings.Join(strings.Fields(f.Doc.Text()), " ")
		if docText == "" {
			g.missing = append(g.missing, s.path+"."+key)
		}
		kind, sub := g.describe(f.Type)
		if sub != "" {
			child := key
			if s.path != "top level" {
				child = s.path + "." + key
			}
			if strings.HasPrefix(kind, "list") {
				child += "[]"
			}
			g.queue = append(g.queue, refSection{child, sub})
			kind += ", see " + child
		}
		if name := f.Names[0].Name; strings.HasPrefix(docText, name+" ") {
			docText = key + docText[len(name):]
		}
		if n := g.goName(f.Names[0].Name, docText); n != "" {
			g.goNames = append(g.goNames, s.path+"."+key+": "+n)
		}
		g.out.WriteString(wrap(fmt.Sprintf("  - %s (%s): %s", key, kind, docText), 76, "    "))
	}
}

// goWord is a word that may be a Go name: Field, or Type.Field.
var goWord = regexp.MustCompile(`(^|[^A-Za-z0-9_.-])([A-Z][A-Za-z0-9]*(?:\.[A-Z][A-Za-z0-9]*)?)`)

// goName returns a Go name that the documentation of field name shows the
// reader, who only ever writes YAML keys: the field's own name beginning
// it ("Zone, when set"; the reference turns only "Zone is" into the key),
// a field of a configuration struct written as Type.Field, a CamelCase
// field name, or any field name in mid-sentence ("not on Address").
func (g *refGen) goName(name, doc string) string {
	if strings.HasPrefix(doc, name) {
		return name
	}
	for _, m := range goWord.FindAllStringSubmatchIndex(doc, -1) {
		w := doc[m[4]:m[5]]
		if typ, field, ok := strings.Cut(w, "."); ok {
			if _, isStruct := g.structs[typ]; isStruct && g.fieldSet[field] {
				return w
			}
			continue
		}
		if !g.fieldSet[w] || strings.ToUpper(w) == w || w == "Host" || w == "Cluster" {
			continue // not a field, an acronym (TLS), the Host field or Redis Cluster
		}
		if strings.ContainsAny(w[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			return w
		}
		// A one-word name counts in mid-sentence only: "Required." opens
		// sentences.
		before := strings.TrimRight(doc[:m[4]], " ")
		if before != "" && !strings.HasSuffix(before, ".") && !strings.HasSuffix(before, ":") && !strings.HasSuffix(before, "(") {
			return w
		}
	}
	return ""
}

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return typeName(t.X) + "." + t.Sel.Name
	}
	return ""
}

// describe returns a user-facing type and, for sections, the struct name.
func (g *refGen) describe(e ast.Expr) (string, string) {
	switch t := e.(type) {
	case *ast.StarExpr:
		k, sub := g.describe(t.X)
		if sub != "" {
			return "optional section", sub
		}
		return k, ""
	case *ast.ArrayType:
		k, sub := g.describe(t.Elt)
		if typeName(t.Elt) == "Target" {
			return "list of \"host:port\" or sections", sub
		}
		if sub != "" {
			return "list of sections", sub
		}
		return "list of " + k + "s", ""
	case *ast.MapType:
		return "mapping of name: value", ""
	}
	switch n := typeName(e); n {
	case "string":
		return "string", ""
	case "bool":
		return "boolean", ""
	case "int":
		return "integer", ""
	case "time.Duration":
		return "duration", ""
	case "ByteSize":
		return "size", ""
	case "Rate":
		return "rate", ""
	default:
		if _, ok := g.structs[n]; ok {
			return "section", n
		}
		return n, ""
	}
}

// wrap breaks s into lines of at most width columns; continuation lines
// start with indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := ""
	for _, w := range strings.Split(s, " ") {
		if w == "" && line != "" {
			continue
		}
		switch {
		case line == "" || strings.TrimSpace(line) == "" || strings.TrimSpace(line) == "-":
			line += w + " "
		case len(line)+len(w) > width:
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = indent + w + " "
		default:
			line += w + " "
		}
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
	return b.String()
}
