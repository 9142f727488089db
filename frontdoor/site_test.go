package frontdoor

import "testing"

// TestNormalizeNameASCIIOnly: site names compare ignoring ASCII case only,
// as the TLCP and TLS 1.3-SM session bindings do: with Unicode lowering,
// an SNI with the Kelvin sign ("\u212aey.example") reached the site of
// key.example, whose resumed sessions it then could not match.
func TestNormalizeNameASCIIOnly(t *testing.T) {
	for in, want := range map[string]string{
		"Key.EXAMPLE.":     "key.example",
		"\u212aey.example": "\u212aey.example",
		"localhost":        "localhost",
	} {
		if got := NormalizeName(in); got != want {
			t.Errorf("NormalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}
