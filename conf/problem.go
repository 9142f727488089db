package conf

import (
	"fmt"
	"sort"
	"strings"
)

// Severity of a Problem.
type Severity int

const (
	// SeverityError makes the configuration unusable.
	SeverityError Severity = iota
	// SeverityWarning is reported but does not stop gmproxy.
	SeverityWarning
)

func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Problem is one thing wrong with a configuration, with its position.
type Problem struct {
	File   string // configuration file
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based; 0 when unknown
	// Path is the key path, e.g. "sites[0].tlcp.sign_cert" ("" for the
	// whole file).
	Path     string
	Severity Severity
	Message  string // what is wrong
	Fix      string // how to fix it ("" when obvious)
}

// String formats p as "file:line:column: error: path: message; fix".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, ":%d", p.Column)
		}
	}
	b.WriteString(": ")
	b.WriteString(p.Severity.String())
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Fix != "" {
		b.WriteString("; ")
		b.WriteString(p.Fix)
	}
	return b.String()
}

// Problems is a list of problems; as an error it reports all of them, one
// per line.
type Problems []Problem

// Error implements error.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any problem is an error.
func (ps Problems) HasErrors() bool { return ps.Count(SeverityError) > 0 }

// Count returns the number of problems of severity s.
func (ps Problems) Count(s Severity) int {
	n := 0
	for _, p := range ps {
		if p.Severity == s {
			n++
		}
	}
	return n
}

// Only returns the problems of severity s.
func (ps Problems) Only(s Severity) Problems {
	var out Problems
	for _, p := range ps {
		if p.Severity == s {
			out = append(out, p)
		}
	}
	return out
}

func (ps Problems) sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}
