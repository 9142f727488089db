package asciifold

import "testing"

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"Secure.Example", "secure.EXAMPLE", true},
		{"", "", true},
		{"ſecure.example", "secure.example", false}, // U+017F: strings.EqualFold says equal
		{"\u212aey", "key", false},                  // Kelvin sign: bytes.ToLower says equal
		{"a", "ab", false},
		{"@", "`", false}, // the bytes around 'A'..'Z' and 'a'..'z'
		{"[", "{", false},
	} {
		if got := Equal(tc.a, tc.b); got != tc.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	for c := 0; c < 256; c++ {
		want := byte(c)
		if 'A' <= c && c <= 'Z' {
			want = byte(c) + 32
		}
		if got := Lower(byte(c)); got != want {
			t.Errorf("Lower(%#x) = %#x, want %#x", c, got, want)
		}
	}
}

func TestLowerString(t *testing.T) {
	for in, want := range map[string]string{"Secure.EXAMPLE": "secure.example", "plain": "plain", "\u212aEY": "\u212aey", "": ""} {
		if got := LowerString(in); got != want {
			t.Errorf("LowerString(%q) = %q, want %q", in, got, want)
		}
	}
}
