package main

import (
	"bytes"
	"crypto/tls"
	"strings"
	"testing"
)

// TestTLSVersionFlags: -tls1_2 and -tls1_3 imply -tls and set the version;
// a -cipher list of TLS 1.2 suites limits ordinary TLS to 1.2; a TLS 1.3
// suite, -cipher with -tls1_3, both versions, or a version with -ntls or
// -tls13sm are refused with a message instead of being ignored.
func TestTLSVersionFlags(t *testing.T) {
	for _, c := range []struct {
		f        tlsVersionFlags
		cipher   string
		min, max uint16
		suites   int
	}{
		{tlsVersionFlags{tls12: true}, "", tls.VersionTLS12, tls.VersionTLS12, 0},
		{tlsVersionFlags{tls13: true}, "", tls.VersionTLS13, tls.VersionTLS13, 0},
		{tlsVersionFlags{}, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0, tls.VersionTLS12, 2},
		{tlsVersionFlags{tls12: true}, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", tls.VersionTLS12, tls.VersionTLS12, 1},
	} {
		var cfg tls.Config
		if err := c.f.apply(&cfg, c.cipher); err != nil {
			t.Fatalf("%+v %q: %v", c.f, c.cipher, err)
		}
		if cfg.MinVersion != c.min || cfg.MaxVersion != c.max || len(cfg.CipherSuites) != c.suites {
			t.Errorf("%+v %q: versions %x-%x, %d suites", c.f, c.cipher, cfg.MinVersion, cfg.MaxVersion, len(cfg.CipherSuites))
		}
	}
	for _, args := range [][]string{
		{"-tls1_3", "-cipher", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
		{"-tls", "-cipher", "TLS_AES_128_GCM_SHA256"},
		{"-tls1_2", "-tls1_3"},
		{"-ntls", "-tls1_2"},
		{"-tls13sm", "-tls1_3"},
		{"-tls", "-cipher", "NO_SUCH_SUITE"},
	} {
		var out, errb bytes.Buffer
		if code := runGet(append(args, "-connect", "127.0.0.1:1", "https://localhost/"), &out, &errb); code != 2 || !strings.Contains(errb.String(), "tls") && !strings.Contains(errb.String(), "cipher") {
			t.Errorf("get %v: exit %d, %q; want exit 2 with a message", args, code, errb.String())
		}
		if code := dispatch(append([]string{"s_time", "-connect", "127.0.0.1:1", "-n", "1"}, args...), &out, &errb); code == 0 {
			t.Errorf("s_time %v: exit 0", args)
		}
	}
}
