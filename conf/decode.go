package conf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The YAML is decoded by walking yaml.Node trees with reflection rather than
// with yaml.Unmarshal, so that every value keeps its line:column, every
// problem (unknown keys, wrong types) is collected instead of stopping at the
// first, and defaults are applied to list elements before they are filled.

type pos struct{ line, col int }

type decoder struct {
	file   string
	probs  Problems
	valPos map[string]pos // key path → position of its value
	keyPos map[string]pos // key path → position of its key
	// failed holds the paths that already have a decoding problem (and
	// the keys suggested for typos), so that validation does not report
	// consequences of the same mistake again.
	failed map[string]bool
	depth  int // current nesting, bounded by maxDepth
	nodes  int // nodes visited, bounded by maxNodes (alias bombs)
	// reported holds the problems added, by position and message: an
	// alias decoded many times reports each of its problems once.
	reported map[problemKey]bool
	// merging holds the mappings being decoded, so that a merge key
	// (<<) that refers to one of them is reported, not expanded.
	merging map[*yaml.Node]bool
	// before holds what each struct field held before its first value
	// (its default), so that a later value for the same field (a key
	// after a merge key, an earlier mapping of a merge list) replaces the
	// first one whole instead of being decoded into it (fresh).
	before map[fieldKey]former
}

// former is a field's value before its first value from the file, and
// the field's address, held so that the field's memory is not reused for
// another field while the decoder runs (the key is the address).
type former struct{ was, at reflect.Value }

// fieldKey names one field of the configuration being decoded.
type fieldKey struct {
	addr uintptr
	typ  reflect.Type
}

type problemKey struct {
	line, col int
	msg       string
}

// Limits on what a configuration file may make the decoder do.
const (
	maxDepth = 64
	maxNodes = 200000
)

func newDecoder(file string) *decoder {
	return &decoder{file: file, valPos: map[string]pos{}, keyPos: map[string]pos{}, failed: map[string]bool{},
		reported: map[problemKey]bool{}, merging: map[*yaml.Node]bool{}}
}

func (d *decoder) addAt(sev Severity, p pos, path, msg, fix string) {
	if sev == SeverityError {
		d.failed[path] = true
	}
	if k := (problemKey{p.line, p.col, msg}); !d.reported[k] {
		d.reported[k] = true
		d.probs = append(d.probs, Problem{File: d.file, Line: p.line, Column: p.col, Path: path, Severity: sev, Message: msg, Fix: fix})
	}
}

func nodePos(n *yaml.Node) pos { return pos{n.Line, n.Column} }

// where writes p as file:line:column, the form a problem's own position
// has, so that an editor or grep finds another place a problem names
// (a duplicate key's first occurrence) as it finds the problem's.
func (d *decoder) where(p pos) string {
	return fmt.Sprintf("%s:%d:%d", d.file, p.line, p.col)
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// decodeFile parses data into cfg (a pointer to a Config or a
// KeyServerFile, already defaulted).
func (d *decoder) decodeFile(data []byte, cfg any) {
	if p, ok := strayBOM(data); ok {
		d.addAt(SeverityError, p, "", "the file has a byte order mark (U+FEFF) after its start (files joined, or a mark saved twice)", "remove it: only the file's first character may be one")
		return
	}
	var root yaml.Node
	yd := yaml.NewDecoder(bytes.NewReader(data))
	err := yd.Decode(&root)
	if errors.Is(err, io.EOF) {
		err = nil // an empty file: reported below
	}
	if err != nil {
		if p, what, ok := badCharacter(data); ok {
			// The YAML reader names no line for these.
			d.addAt(SeverityError, p, "", "the file has "+what, "remove it, and save the file as UTF-8 text")
			return
		}
		p := pos{}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			p.line, _ = strconv.Atoi(m[1])
			msg = strings.TrimSpace(strings.Replace(msg, m[0]+":", "", 1))
		}
		if tp, ok := tabIndent(data, p.line, strings.Contains(msg, "tab")); ok {
			d.addAt(SeverityError, tp, "", "a tab in the indentation (YAML indents with spaces only)", "replace the tab with spaces, as many as the lines around it use")
			return
		}
		d.addAt(SeverityError, p, "", "YAML syntax error: "+msg, "check indentation (spaces only, no tabs) and quoting near this line")
		return
	}
	if root.Kind == 0 || len(root.Content) == 0 || root.Content[0].Tag == "!!null" {
		d.addAt(SeverityError, pos{1, 1}, "", "the configuration is empty", "start from deploy/examples/edge.yaml or run gmproxy without arguments for the development setup")
		return
	}
	// A second document ("---") would be ignored: the sections in it
	// would silently not apply.
	var next yaml.Node
	if err := yd.Decode(&next); !errors.Is(err, io.EOF) {
		p := pos{next.Line, next.Column}
		if err != nil || p.line == 0 {
			p = pos{}
		}
		if m := yamlLineRE.FindStringSubmatch(fmt.Sprint(err)); err != nil && m != nil {
			// The second document does not parse either: where it
			// does not is in it.
			p.line, _ = strconv.Atoi(m[1])
		}
		d.addAt(SeverityError, p, "", "the file holds more than one YAML document (a line \"---\" starts another)", "put every section in one document: remove the \"---\" line and merge the sections")
	}
	d.decode(root.Content[0], reflect.ValueOf(cfg).Elem(), "")
}

// tabIndent finds the tab in the indentation that made the YAML syntax
// error the reader reported at line: on that line, or (when the reader's
// message names a tab, which it reports at the line before it for a tab
// under a list item) on a later one. No column comes with the reader's
// errors; this gives the tab's.
func tabIndent(data []byte, line int, named bool) (pos, bool) {
	if line <= 0 {
		return pos{}, false
	}
	for i, l := range bytes.Split(data, []byte("\n")) {
		if i+1 < line {
			continue
		}
		indent := len(l) - len(bytes.TrimLeft(l, " \t"))
		if col := bytes.IndexByte(l[:indent], '\t'); col >= 0 {
			return pos{i + 1, col + 1}, true
		}
		if !named {
			break
		}
	}
	return pos{}, false
}

// utf8BOM is U+FEFF in UTF-8.
var utf8BOM = []byte("\ufeff")

// strayBOM finds a byte order mark after the first character of data. The
// YAML reader takes one at the start; a second one there makes it drop the
// first letter of later keys ("sites" read as "ites"), and one before a
// key or in a value is part of the name, which then reads as another.
func strayBOM(data []byte) (pos, bool) {
	start := 0
	if bytes.HasPrefix(data, utf8BOM) {
		start = len(utf8BOM)
	}
	i := bytes.Index(data[start:], utf8BOM)
	if i < 0 {
		return pos{}, false
	}
	before := data[:start+i]
	line := bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return pos{line, utf8.RuneCount(before[lineStart:]) + 1}, true
}

// badCharacter finds the first byte sequence of data that is not UTF-8 or
// is a control character YAML does not allow (all but tab, line feed and
// carriage return; DEL and the C1 controls but NEL too), and its position.
func badCharacter(data []byte) (p pos, what string, ok bool) {
	p = pos{1, 1}
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return p, "a byte sequence that is not UTF-8", true
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f, r >= 0x80 && r <= 0x9f && r != 0x85:
			return p, fmt.Sprintf("a control character (U+%04X)", r), true
		case r == '\n':
			p.line, p.col = p.line+1, 1
		default:
			p.col++
		}
		i += n
	}
	return pos{}, "", false
}

// refusedTag says why n's explicit tag is refused ("" when n has none or
// a core-schema one, !!str or !!int say, which only state the type). A
// tag other programs expand (!include, !env, Ansible's !vault, !!binary)
// would be ignored here and its text taken as the value: a vault blob
// for a password, a file name for its contents.
func refusedTag(n *yaml.Node) string {
	if n.Style&yaml.TaggedStyle == 0 {
		return ""
	}
	switch n.Tag {
	case "!!str", "!!int", "!!bool", "!!null", "!!float", "!!map", "!!seq":
		return ""
	}
	return fmt.Sprintf("the tag %s is not supported: gmproxy expands no YAML tags and would take the text after it as the value", n.Tag)
}

// nodeDecoder is implemented by types with their own YAML forms.
type nodeDecoder interface {
	decodeNode(d *decoder, n *yaml.Node, path string)
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
	rateType     = reflect.TypeFor[Rate]()
)

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "an unexpected node"
}

func (d *decoder) typeError(n *yaml.Node, path, want, fix string) {
	d.addAt(SeverityError, nodePos(n), path, fmt.Sprintf("expected %s, got %s", want, kindName(n)), fix)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decode decodes n into v, path naming it in problems: it resolves
// aliases, enforces the size and depth bounds, records the value's
// position, then hands the value to the decoder of its kind.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n, ok := d.enter(n, path)
	if !ok {
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	if why := refusedTag(n); why != "" {
		d.addAt(SeverityError, nodePos(n), path, why, "remove the tag and write the value itself (a secret: its *_file key, or the file it names)")
		return
	}
	if path != "" {
		if _, ok := d.valPos[path]; !ok {
			d.valPos[path] = nodePos(n)
		}
	}
	if v.CanAddr() {
		if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
			nd.decodeNode(d, n, path)
			return
		}
	}
	isNull := n.Kind == yaml.ScalarNode && n.Tag == "!!null"
	if u, ok := unitScalars[v.Type()]; ok {
		d.decodeUnit(n, v, path, u, isNull)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		d.decodePointer(n, v, path, isNull)
	case reflect.Struct:
		if isNull {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.typeError(n, path, "a mapping of keys", "indent the keys of this section under it ("+strings.Join(fieldNames(v.Type()), ", ")+")")
			return
		}
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if !isNull {
			d.decodeSlice(n, v, path)
		}
	case reflect.Map:
		if !isNull {
			d.decodeMap(n, v, path)
		}
	case reflect.String:
		d.decodeString(n, v, path, isNull)
	case reflect.Bool:
		if !isNull {
			d.decodeBool(n, v, path)
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		if !isNull {
			d.decodeInt(n, v, path)
		}
	default:
		d.addAt(SeverityError, nodePos(n), path, fmt.Sprintf("internal error: cannot decode into %s", v.Type()), "")
	}
}

// enter resolves n's aliases and counts it against the node and depth
// bounds; ok is false (with a problem added) when n must not be decoded.
func (d *decoder) enter(n *yaml.Node, path string) (_ *yaml.Node, ok bool) {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		if i > maxDepth {
			d.addAt(SeverityError, nodePos(n), path, "alias refers to itself", "remove the alias loop")
			return n, false
		}
		n = n.Alias
	}
	d.nodes++
	if d.nodes == maxNodes+1 {
		d.addAt(SeverityError, nodePos(n), path, "the configuration expands to too many values (alias loop or bomb?)", "write it without nested aliases")
	}
	if d.nodes > maxNodes {
		return n, false
	}
	if d.depth >= maxDepth {
		d.addAt(SeverityError, nodePos(n), path, "values nested too deeply", "")
		return n, false
	}
	return n, true
}

// decodeUnit decodes a scalar with a unit (durations, byte sizes).
func (d *decoder) decodeUnit(n *yaml.Node, v reflect.Value, path string, u unitScalar, isNull bool) {
	if isNull {
		return
	}
	x, err := u.parse(n)
	if err != nil {
		d.addAt(SeverityError, nodePos(n), path, err.Error(), u.hint)
		return
	}
	v.SetInt(x)
}

// decodePointer allocates the pointed-to value (with its defaults) and
// decodes into it.
func (d *decoder) decodePointer(n *yaml.Node, v reflect.Value, path string, isNull bool) {
	if v.IsNil() {
		nv := reflect.New(v.Type().Elem())
		if df, ok := nv.Interface().(defaulter); ok {
			df.setDefaults()
		}
		v.Set(nv)
	}
	if isNull {
		return
	}
	d.decode(n, v.Elem(), path)
}

// decodeSlice decodes a list; a single scalar stands for a one-element
// list of scalars (or of values that decode themselves from a scalar).
func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	elems := n.Content
	if n.Kind != yaml.SequenceNode {
		if n.Kind == yaml.ScalarNode && v.Type().Elem().Kind() != reflect.Struct {
			elems = []*yaml.Node{n} // a single value stands for a one-element list
		} else if n.Kind == yaml.ScalarNode && reflect.PointerTo(v.Type().Elem()).Implements(reflect.TypeFor[nodeDecoder]()) {
			elems = []*yaml.Node{n}
		} else {
			d.typeError(n, path, "a list", "write one item per line starting with \"- \", or [a, b] on one line")
			return
		}
	}
	s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
	for i, e := range elems {
		ev := s.Index(i)
		if df, ok := ev.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.decode(e, ev, fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

// decodeMap decodes a mapping of name: value.
func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "a mapping of name: value", "write one \"Name: value\" per line under this key")
		return
	}
	m := reflect.MakeMap(v.Type())
	seen := map[string]pos{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Value == "<<" && k.Tag == "!!merge" {
			if len(merges) > 0 {
				d.secondMerge(k, path)
				continue
			}
			merges = append(merges, val)
			continue
		}
		kp := joinPath(path, k.Value)
		// The names are header field names: X-Tenant and x-tenant are
		// one, and the last would silently win.
		if prev, dup := seen[strings.ToLower(k.Value)]; dup {
			d.addAt(SeverityError, nodePos(k), kp, fmt.Sprintf("name %q appears twice in this mapping (first at %s)", k.Value, d.where(prev)), "keep only one of them")
			continue
		}
		seen[strings.ToLower(k.Value)] = nodePos(k)
		d.keyPos[kp] = nodePos(k)
		ev := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, ev, kp)
		m.SetMapIndex(reflect.ValueOf(k.Value), ev)
	}
	// Merge keys ("<<: *anchor") add the names this mapping does not
	// give, in any letter case; of a list of mappings, the earlier one's.
	d.merging[n] = true
	defer delete(d.merging, n)
	for _, val := range merges {
		srcs := []*yaml.Node{val}
		if r := resolveAlias(val); r.Kind == yaml.SequenceNode {
			srcs = r.Content
		}
		for _, s := range srcs {
			if d.merging[resolveAlias(s)] {
				d.addAt(SeverityError, nodePos(s), path, "a merge key (<<) refers to the mapping it is in", "remove it from the merge key's list")
				continue
			}
			src := reflect.New(v.Type()).Elem()
			d.decode(s, src, path)
			names := src.MapKeys()
			sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
			for _, name := range names {
				if _, dup := seen[strings.ToLower(name.String())]; !dup {
					seen[strings.ToLower(name.String())] = nodePos(s)
					m.SetMapIndex(name, src.MapIndex(name))
				}
			}
		}
	}
	v.Set(m)
}

// resolveAlias returns the node an alias refers to, n if it is none.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i <= maxDepth; i++ {
		n = n.Alias
	}
	return n
}

// decodeString decodes a single value (null is the empty string).
func (d *decoder) decodeString(n *yaml.Node, v reflect.Value, path string, isNull bool) {
	if n.Kind != yaml.ScalarNode {
		d.typeError(n, path, "a single value", "quote the value if it contains \": \", \"#\", \"[\" or \"{\"")
		return
	}
	if isNull {
		v.SetString("")
		return
	}
	v.SetString(n.Value)
}

// decodeBool decodes true/false (and yes/no, on/off).
func (d *decoder) decodeBool(n *yaml.Node, v reflect.Value, path string) {
	b, ok := parseBool(n)
	if !ok {
		d.typeError(n, path, "true or false", "")
		return
	}
	v.SetBool(b)
}

// decodeInt decodes a whole number within the int32 range.
func (d *decoder) decodeInt(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!float" {
		d.typeError(n, path, "a whole number", "")
		return
	}
	// "!!str 443" states that the value is text (YAML 1.2 §10.1.1.3):
	// another reader of the file takes it as the string, so reading it as
	// the number would make the two disagree on what the file says.
	if n.Style&yaml.TaggedStyle != 0 && n.Tag == "!!str" {
		d.addAt(SeverityError, nodePos(n), path, fmt.Sprintf("expected a whole number, got the string %q (tagged !!str)", n.Value),
			"remove the !!str tag (or write !!int): this key takes a number")
		return
	}
	digits := strings.ReplaceAll(n.Value, "_", "")
	// 010000 is 4096 to a YAML 1.1 reader (and to ParseInt's base 0) but
	// 10000 to YAML 1.2 and to nginx: take neither reading.
	if u := strings.TrimLeft(digits, "+-"); len(u) > 1 && u[0] == '0' && u[1] >= '0' && u[1] <= '9' {
		dec := strings.TrimLeft(u, "0")
		if dec == "" {
			dec = "0"
		}
		d.addAt(SeverityError, nodePos(n), path, fmt.Sprintf("number %q starts with 0: YAML 1.1 reads it as octal, YAML 1.2 as decimal", n.Value),
			fmt.Sprintf("write it without the leading 0: %s%s", digits[:len(digits)-len(u)], dec))
		return
	}
	i, err := strconv.ParseInt(digits, 0, 64)
	if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		d.typeError(n, path, "a whole number", "")
		return
	}
	v.SetInt(i)
}

func parseBool(n *yaml.Node) (bool, bool) {
	if n.Kind != yaml.ScalarNode {
		return false, false
	}
	switch strings.ToLower(n.Value) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	fields := structFields(v.Type())
	seen := map[string]pos{}
	d.merging[n] = true
	defer delete(d.merging, n)
	// Merge keys ("<<: *anchor") first, so that explicit keys override them;
	// a list of mappings is decoded last to first, so that a key of an
	// earlier one overrides the same key of a later one, as the YAML merge
	// type has it (and yaml.v3's Unmarshal).
	merged := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "<<" && n.Content[i].Tag == "!!merge" {
			if merged {
				d.secondMerge(n.Content[i], path)
				continue
			}
			merged = true
			val := n.Content[i+1]
			for val.Kind == yaml.AliasNode && val.Alias != nil {
				val = val.Alias
			}
			srcs := []*yaml.Node{val}
			if val.Kind == yaml.SequenceNode {
				srcs = val.Content
			}
			for j := len(srcs) - 1; j >= 0; j-- {
				s := srcs[j]
				src := s
				for src.Kind == yaml.AliasNode && src.Alias != nil {
					src = src.Alias
				}
				if d.merging[src] {
					d.addAt(SeverityError, nodePos(s), path, "a merge key (<<) refers to the mapping it is in", "remove it from the merge key's list")
					continue
				}
				d.decode(s, v, path)
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Value == "<<" && k.Tag == "!!merge" {
			continue
		}
		kp := joinPath(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.addAt(SeverityError, nodePos(k), kp, fmt.Sprintf("key %q appears twice in this section (first at %s)", k.Value, d.where(prev)), "keep only one of them")
			continue
		}
		seen[k.Value] = nodePos(k)
		idx, ok := fields[k.Value]
		if !ok {
			d.unknownKey(k, v.Type(), kp)
			continue
		}
		d.keyPos[kp] = nodePos(k)
		d.valPos[kp] = nodePos(val)
		f := v.FieldByIndex(idx)
		d.fresh(f)
		d.decode(val, f, kp)
	}
}

// fresh readies struct field f for a value: a field that already has one
// from this file (only merge keys give a field two) gets back what it held
// before, so that the new value replaces the old one whole, nested
// sections included, as a mapping's key replaces a merged one in YAML's
// merge type (yaml.v3's Unmarshal too); decoded into the old one, a
// section would keep the merged keys the new one leaves out. Slices and
// maps are made anew by each decode, so the shallow copy is the field's
// whole former value.
func (d *decoder) fresh(f reflect.Value) {
	if !f.CanAddr() {
		return
	}
	k := fieldKey{f.Addr().Pointer(), f.Type()}
	if old, ok := d.before[k]; ok {
		f.Set(old.was)
		return
	}
	if d.before == nil {
		d.before = map[fieldKey]former{}
	}
	was := reflect.New(f.Type()).Elem()
	was.Set(f)
	d.before[k] = former{was: was, at: f.Addr()}
}

// secondMerge reports a second merge key in one mapping: a key appears
// once in a mapping (YAML 1.2 §3.2.1.1), and which of the two would win
// is no rule any reader of the file could know.
func (d *decoder) secondMerge(k *yaml.Node, path string) {
	d.addAt(SeverityError, nodePos(k), path, "a second merge key (<<) in this mapping", "merge several mappings with one: <<: [*a, *b] (the earlier wins)")
}

func (d *decoder) unknownKey(k *yaml.Node, t reflect.Type, path string) {
	names := fieldNames(t)
	msg := fmt.Sprintf("unknown key %q", k.Value)
	var fix string
	if best := closest(k.Value, names); best != "" {
		fix = fmt.Sprintf("did you mean %q?", best)
		parent := strings.TrimSuffix(strings.TrimSuffix(path, k.Value), ".")
		d.failed[joinPath(parent, best)] = true
	} else if owners := keyOwners()[k.Value]; len(owners) > 0 {
		fix = fmt.Sprintf("%q belongs under %s, not here", k.Value, strings.Join(owners, " or "))
	} else {
		fix = "valid keys here: " + strings.Join(names, ", ")
	}
	d.addAt(SeverityError, nodePos(k), path, msg, fix)
}

var fieldCache sync.Map // reflect.Type → map[string][]int

// structFields maps the YAML keys of t (inline structs flattened) to field
// index paths.
func structFields(t reflect.Type) map[string][]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	yamlFields(t, func(name string, index []int) { m[name] = index })
	fieldCache.Store(t, m)
	return m
}

// yamlFields calls fn with the YAML key and field index path of each
// field of t that YAML sees, in declaration order, inline structs
// flattened.
func yamlFields(t reflect.Type, fn func(name string, index []int)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, inline := yamlTag(f)
		if name == "-" {
			continue
		}
		if inline {
			yamlFields(f.Type, func(name string, index []int) { fn(name, append([]int{i}, index...)) })
			continue
		}
		fn(name, []int{i})
	}
}

func yamlTag(f reflect.StructField) (name string, inline bool) {
	tag := f.Tag.Get("yaml")
	name, opts, _ := strings.Cut(tag, ",")
	if opts == "inline" {
		return "", true
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, false
}

// fieldNames lists t's YAML keys in declaration order.
func fieldNames(t reflect.Type) []string {
	var out []string
	yamlFields(t, func(name string, _ []int) { out = append(out, name) })
	return out
}

var (
	ownersOnce sync.Once
	owners     map[string][]string
)

// keyOwners maps every key of the schema to the sections that have it
// ("sites[].tlcp"), for unknown-key hints.
func keyOwners() map[string][]string {
	ownersOnce.Do(func() {
		owners = map[string][]string{}
		seen := map[reflect.Type]bool{}
		var walk func(t reflect.Type, section string)
		walk = func(t reflect.Type, section string) {
			for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
				if t.Kind() == reflect.Slice {
					section += "[]"
				}
				t = t.Elem()
			}
			if t.Kind() != reflect.Struct || t == durationType || seen[t] {
				return
			}
			seen[t] = true
			for _, name := range fieldNames(t) {
				sec := section
				if sec == "" {
					sec = "the top level"
				}
				owners[name] = append(owners[name], sec)
			}
			for name, idx := range structFields(t) {
				walk(t.FieldByIndex(idx).Type, joinPath(section, name))
			}
		}
		walk(reflect.TypeFor[Config](), "")
		for k := range owners {
			sort.Strings(owners[k])
		}
	})
	return owners
}

// closest returns the candidate nearest to s by edit distance, if close
// enough to be a likely typo.
func closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	ls := strings.ToLower(s)
	for _, c := range candidates {
		dist := levenshtein(ls, strings.ToLower(c))
		if dist < bestD {
			best, bestD = c, dist
		}
	}
	limit := 2
	if len(s) >= 9 {
		limit = 3
	}
	if bestD <= limit || (best != "" && (strings.Contains(best, ls) || strings.Contains(ls, best)) && len(ls) >= 3) {
		return best
	}
	// A long common prefix ("retry" for "retries").
	for _, c := range candidates {
		lc := strings.ToLower(c)
		n := 0
		for n < len(ls) && n < len(lc) && ls[n] == lc[n] {
			n++
		}
		if n >= 4 && n*3 >= len(ls)*2 {
			return c
		}
	}
	return ""
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// unitScalar parses a scalar with a unit; hint is the fix of a bad one.
type unitScalar struct {
	parse func(*yaml.Node) (int64, error)
	hint  string
}

// unitScalars are the integer types written with a unit in YAML: how to
// parse one and the hint shown when that fails.
var unitScalars = map[reflect.Type]unitScalar{
	durationType: {func(n *yaml.Node) (int64, error) { d, err := parseDuration(n); return int64(d), err }, "write a duration such as 500ms, 10s, 5m or 1h"},
	byteSizeType: {func(n *yaml.Node) (int64, error) { b, err := parseByteSize(n); return int64(b), err }, "write a size such as 4096, 64KiB, 10MiB or 1GiB"},
	rateType:     {func(n *yaml.Node) (int64, error) { r, err := parseRate(n); return int64(r), err }, "write a rate such as 10/s, 30/m or 500/h"},
}

// Rate is a number of requests per second, minute or hour, written as
// 10/s, 30/m or 500/h (or as nginx writes it, 10r/s); it holds the
// interval between two requests.
type Rate time.Duration

// Interval is the time between two requests at the rate.
func (r Rate) Interval() time.Duration { return time.Duration(r) }

var rateUnits = []struct {
	suffix string
	per    time.Duration
}{{"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}

// maxRate bounds the count of a rate (a million per second: an interval of
// a microsecond).
const maxRate = 1_000_000

func parseRate(n *yaml.Node) (Rate, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("expected a rate, got %s", kindName(n))
	}
	count, unit, ok := strings.Cut(strings.TrimSpace(n.Value), "/")
	if !ok {
		return 0, fmt.Errorf("rate %q has no unit", n.Value)
	}
	// nginx's limit_req_zone writes 10r/s: the r is taken as well, so a
	// rate carried over from nginx reads as it did there.
	v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(count), "r"), 10, 64)
	if err != nil || v <= 0 || v > maxRate {
		return 0, fmt.Errorf("invalid rate %q (want a count from 1 to %d)", n.Value, maxRate)
	}
	for _, u := range rateUnits {
		if strings.TrimSpace(unit) == u.suffix {
			return Rate(u.per / time.Duration(v)), nil
		}
	}
	return 0, fmt.Errorf("invalid rate %q (the unit is s, m or h)", n.Value)
}

// String writes the rate with the smallest unit whose count reads back
// (parseRate) as the same interval. A count must be one parseRate takes:
// 998/s, an interval of 1002004 ns, is 3592800/h, which it refuses.
func (r Rate) String() string {
	if r <= 0 {
		return "0/s"
	}
	for _, u := range rateUnits {
		if n := u.per / time.Duration(r); n >= 1 && n <= maxRate && u.per/n == time.Duration(r) {
			return strconv.FormatInt(int64(n), 10) + "/" + u.suffix
		}
	}
	return strconv.FormatInt(int64(time.Hour/time.Duration(r)), 10) + "/h"
}

func parseDuration(n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("expected a duration, got %s", kindName(n))
	}
	s := strings.TrimSpace(n.Value)
	if s == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("duration %q has no unit", s)
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if dur < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	if dur > maxDuration {
		return 0, fmt.Errorf("duration %q is over %s (100 years)", s, formatDuration(maxDuration))
	}
	return dur, nil
}

// maxDuration bounds every duration: the proxy arms its waits d + d/8
// ahead (a deadline moved at most every eighth of it), which for a
// duration near time.Duration's 292 years overflows to a negative wait
// that fires at once (a timer spinning, or firing before it is stored).
// No wait is meant to be longer; 0 is "no limit" where one is allowed.
const maxDuration = 100 * 365 * 24 * time.Hour

// ByteSize is a number of bytes. In YAML it is a number or a number with a
// unit: B, K/KB/KiB, M/MB/MiB, G/GB/GiB (all units are powers of 1024).
type ByteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

func parseByteSize(n *yaml.Node) (ByteSize, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("expected a size, got %s", kindName(n))
	}
	s := strings.ToLower(strings.TrimSpace(n.Value))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q", n.Value)
	}
	return ByteSize(v * mult), nil
}

// String formats the size with the largest exact binary unit.
func (b ByteSize) String() string {
	switch {
	case b != 0 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b != 0 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b != 0 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return strconv.FormatInt(int64(b), 10)
}

// formatDuration writes durations the way users write them ("5m", "1h30m",
// "250ms") rather than time.Duration.String's "5m0s".
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d%time.Second != 0 {
		if d%time.Millisecond == 0 {
			return fmt.Sprintf("%dms", d/time.Millisecond)
		}
		return d.String()
	}
	s := d.String()
	s = strings.Replace(s, "m0s", "m", 1)
	s = strings.Replace(s, "h0m", "h", 1)
	return s
}

// decodeNode accepts "host:port" or {address, weight, backup}.
func (t *Target) decodeNode(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		t.Address = n.Value
		d.valPos[joinPath(path, "address")] = nodePos(n)
		return
	}
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "\"host:port\" or a mapping {address, weight, backup}", "")
		return
	}
	d.decodeStruct(n, reflect.ValueOf(t).Elem(), path)
}

// encode turns a configuration value back into YAML (the normalised form):
// every key with its effective value, empty strings, empty lists and absent
// optional sections left out.
func encode(v reflect.Value) *yaml.Node {
	if v.Type() == durationType {
		return scalar(formatDuration(time.Duration(v.Int())))
	}
	if v.Type() == byteSizeType {
		return scalar(ByteSize(v.Int()).String())
	}
	if v.Type() == rateType {
		return scalar(Rate(v.Int()).String())
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return encode(v.Elem())
	case reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		encodeFields(m, v)
		return m
	case reflect.Slice:
		if v.Len() == 0 {
			return nil
		}
		s := &yaml.Node{Kind: yaml.SequenceNode}
		if v.Type().Elem().Kind() != reflect.Struct {
			s.Style = yaml.FlowStyle
		}
		for i := 0; i < v.Len(); i++ {
			s.Content = append(s.Content, encodeOrEmpty(v.Index(i)))
		}
		return s
	case reflect.Map:
		if v.Len() == 0 {
			return nil
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range keys {
			m.Content = append(m.Content, scalar(k.String()), encodeOrEmpty(v.MapIndex(k)))
		}
		return m
	case reflect.String:
		if v.String() == "" {
			return nil
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	}
	return nil
}

// encodeOrEmpty is encode with an explicit empty value instead of nil
// (list elements and map values cannot be left out).
func encodeOrEmpty(v reflect.Value) *yaml.Node {
	if e := encode(v); e != nil {
		return e
	}
	switch v.Kind() {
	case reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ""}
	case reflect.Slice:
		return &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	}
	return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
}

func encodeFields(m *yaml.Node, v reflect.Value) {
	t := v.Type()
	yamlFields(t, func(name string, index []int) {
		f, fv := t.FieldByIndex(index), v.FieldByIndex(index)
		if f.Type.Kind() == reflect.Struct && fv.IsZero() {
			return // an all-default section such as proxy_protocol
		}
		if fv.Kind() == reflect.Slice && !fv.IsNil() && fv.Len() == 0 {
			// Written empty on purpose (upgrades: []): left out, it would
			// load as its default.
			m.Content = append(m.Content, scalar(name), &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle})
			return
		}
		if e := encode(fv); e != nil {
			if e.Kind == yaml.MappingNode && len(e.Content) == 0 && f.Type.Kind() != reflect.Pointer {
				return
			}
			m.Content = append(m.Content, scalar(name), e)
		}
	})
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// Normalized returns c as YAML with every default filled in, paths as
// written, suites in their canonical names — what gmproxy actually uses.
func (c *Config) Normalized() ([]byte, error) {
	n := encode(reflect.ValueOf(c).Elem())
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
