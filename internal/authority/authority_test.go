package authority

import (
	"strings"
	"testing"
)

// TestValid: one host a site could have (a DNS name, an IPv4 address, an
// IPv6 literal in brackets) and a port of digits; not userinfo, lists,
// a second colon, quotes, an empty host or an IPv4 address in brackets.
func TestValid(t *testing.T) {
	for h, want := range map[string]bool{
		"a.example":              true,
		"A.Example:8443":         true,
		"_srv.a-b.example":       true,
		"192.0.2.1:443":          true,
		"[2001:db8::1]":          true,
		"[2001:db8::1]:443":      true,
		"a.example:":             true, // an empty port (RFC 3986 §3.2.3)
		"":                       false,
		":443":                   false,
		"a.example@evil.example": false,
		"a.example,evil.example": false,
		"a.example:1:1":          false,
		"a.example:123456":       false,
		"a.example:8a":           false,
		`a"b.example`:            false,
		"a b.example":            false,
		"[192.0.2.1]":            false,
		"[2001:db8::1":           false,
		"[2001:db8::1]x":         false,
		"a.example/evil":         false,
		"例子.example":             false, // IDNs travel as A-labels
		strings.Repeat("a", 300): true,  // length is the head's bound, not this
		"a.example\r\nX-Evil: 1": false,
		"a.example.":             true, // fully qualified
		"a.example.:443":         true,
		"a.example..":            false,
		"a..example":             false,
		".a.example":             false,
		".":                      false,
		"..:443":                 false,
	} {
		if got := Valid(h); got != want {
			t.Errorf("Valid(%q) = %v, want %v", h, got, want)
		}
	}
}
