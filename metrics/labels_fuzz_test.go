package metrics

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzLabels: whatever strings reach a label (a client's HTTP method, the
// key server's client names and key IDs, refusal reasons, configuration
// names), the value written is "none" for an empty string, "other", or
// the string itself when it is a valid name (printable UTF-8, at most
// maxNameLen bytes) and, for a fixed vocabulary, one of it; a valid name
// is shown as itself while the admitter has room (a Chinese name is not
// "other"); a value shown is valid UTF-8 without control or format
// characters; and an admitter never holds more than its cap of distinct
// values, so a series count stays bounded however many distinct strings
// arrive.
func FuzzLabels(f *testing.F) {
	f.Add([]byte("edge\x00edge\x00other\x00\x00a b\x00k1\x00k2\x00k3"), uint8(2), "get", 200)
	f.Add([]byte("\xff\xfe\x00\x7f\x00"+string(bytes.Repeat([]byte("x"), 65))), uint8(1), "GET ", 99)
	f.Add([]byte("none\x00other\x00"), uint8(0), "", 600)
	f.Add([]byte("网上银行\x00政务 服务\x00"+strings.Repeat("银", 43)+"\x00a\u202eb\x00c\u0085d"), uint8(3), "网上银行", 200)
	f.Fuzz(func(t *testing.T, vals []byte, max uint8, method string, status int) {
		a := newAdmitter(int(max))
		admitted := map[string]bool{}
		for _, v := range bytes.Split(vals, []byte{0}) {
			room := len(a.seen) < int(max)
			got := a.label(string(v))
			if room && len(v) > 0 && validName(string(v)) && got != string(v) {
				t.Fatalf("valid name %q labelled %q with room under the cap", v, got)
			}
			if got != Other && got != None && (!utf8.ValidString(got) || len(got) > maxNameLen ||
				strings.IndexFunc(got, func(r rune) bool { return !unicode.IsGraphic(r) }) >= 0) {
				t.Fatalf("value %q shown as %q", v, got)
			}
			switch {
			case len(v) == 0:
				if got != None {
					t.Fatalf("empty value labelled %q", got)
				}
			case got == Other:
			case got == string(v) && validName(got):
				admitted[got] = true
			default:
				t.Fatalf("value %q labelled %q", v, got)
			}
		}
		if len(admitted) > int(max) {
			t.Fatalf("%d distinct values admitted with a cap of %d", len(admitted), max)
		}
		if got := methodLabel(method); got != None && got != Other && (got != method || !httpMethods[got]) {
			t.Fatalf("method %q labelled %q", method, got)
		}
		if got := protocolLabel(method); got != None && got != Other && got != method {
			t.Fatalf("protocol %q labelled %q", method, got)
		}
		if got := cipherLabel(method); got != None && got != Other && (got != method || !validName(got)) {
			t.Fatalf("cipher %q labelled %q", method, got)
		}
		got := codeClass(status)
		if status >= 100 && status <= 599 {
			if len(got) != 3 || got[0] != byte('0'+status/100) || got[1:] != "xx" {
				t.Fatalf("status %d labelled %q", status, got)
			}
		} else if got != Other {
			t.Fatalf("status %d labelled %q", status, got)
		}
	})
}
