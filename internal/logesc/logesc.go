// Package logesc escapes what a client sent (a host name, a path, an
// SNI) for a log line an operator reads, often in a terminal: the access
// log's text format and the program log share this one rule.
package logesc

import (
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Append appends s for a text log line: '"', '\\', control bytes
// and invalid UTF-8 become \xHH (nginx style), and so do the bytes of a
// character that is not printable (C1 controls such as NEL U+0085 and CSI
// U+009B, the line and paragraph separators U+2028/U+2029, bidirectional
// overrides such as U+202E), so a client cannot inject line breaks,
// terminal escapes or text that reads otherwise, nor fake quoted fields.
// With space, a space is \x20 too: a value outside quotes stays one field.
func Append(b []byte, s string, space bool) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && (c != ' ' || !space) {
			b = append(b, c)
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || size > 1) && unicode.IsPrint(r) {
				b = append(b, s[i:i+size]...)
				i += size
				continue
			}
			if size > 1 { // a valid character that is not printable: all its bytes
				for _, c := range []byte(s[i : i+size]) {
					b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
				}
				i += size
				continue
			}
		}
		b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		i++
	}
	return b
}

// String is s escaped as Append escapes it (space kept): for a value a
// client sent given to slog, whose handlers pass C1 controls and
// bidirectional overrides through unescaped (the JSON handler) or quote
// only some of them.
func String(s string) string {
	return string(Append(nil, s, false))
}
