// Package asciifold holds the case folding of protocol names (host names,
// HTTP field names): ASCII letters only. strings.EqualFold and
// bytes.ToLower fold Unicode too ("ſ" is "s" to EqualFold, the Kelvin sign
// "K" is "k" to ToLower), so a name compared with them can match where
// another layer that reads the same name (choosing a site by SNI, a
// backend reading a field) sees a different one.
package asciifold

// Equal reports whether a and b are equal ignoring the case of ASCII
// letters only (RFC 4343 §3 for DNS names; RFC 9110 §5.1 for field names).
func Equal(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if Lower(a[i]) != Lower(b[i]) {
			return false
		}
	}
	return true
}

// Lower returns c lower-cased if it is an ASCII upper-case letter, else c.
func Lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// LowerString returns s with its ASCII upper-case letters lower-cased (s
// itself when it has none).
func LowerString(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = Lower(b[j])
			}
			return string(b)
		}
	}
	return s
}
