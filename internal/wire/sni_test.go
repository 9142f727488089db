package wire

import "testing"

func TestSNIHostName(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "",
		"portal.example.cn":  "portal.example.cn",
		"portal.example.cn.": "portal.example.cn",
		"127.0.0.1":          "",
		"127.0.0.1.":         "",
		"::1":                "",
		"[::1]":              "",
		"fe80::1%eth0":       "",
		"localhost":          "localhost",
	} {
		if got := SNIHostName(in); got != want {
			t.Errorf("SNIHostName(%q) = %q, want %q", in, got, want)
		}
	}
}
