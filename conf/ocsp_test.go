package conf

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/gmproxy/gmproxy/internal/staple/ocsptest"
)

// TestOCSPFile: tls.ocsp_file is stapled when it holds a current good
// response signed for the certificate, and is otherwise an error at the
// key's file:line:column saying why; ocsp_fetch needs the certificate's
// responder URL, and both need the issuer in the chain.
func TestOCSPFile(t *testing.T) {
	defer func(old func() time.Time) { now = old }(now)
	now = time.Now
	p := ocsptest.New(t)
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certPEM := func(certs ...*x509.Certificate) []byte {
		var b bytes.Buffer
		for _, c := range certs {
			pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
		return b.Bytes()
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(p.LeafKey)
	if err != nil {
		t.Fatal(err)
	}
	write("chain.crt", certPEM(p.Leaf, p.CA))
	write("leaf.crt", certPEM(p.Leaf))
	otherCA, otherKey := ocsptest.NewCA(t, "Other CA")
	write("wrongchain.crt", certPEM(p.Leaf, otherCA))
	write("leaf.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	// A leaf without a responder URL, for ocsp_fetch.
	noAIA := *p.Leaf
	noAIA.OCSPServer, noAIA.SerialNumber = nil, big.NewInt(99)
	noAIALeaf, noAIAKey := ocsptest.Issue(t, p.CA, p.CAKey, &noAIA)
	noAIAKeyDER, _ := x509.MarshalPKCS8PrivateKey(noAIAKey)
	write("noaia.crt", certPEM(noAIALeaf, p.CA))
	write("noaia.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: noAIAKeyDER}))

	t0 := time.Now().Truncate(time.Second)
	good := p.Response(t, t0.Add(-time.Minute), t0.Add(time.Hour))
	write("good.der", good)
	write("good.pem", pem.EncodeToMemory(&pem.Block{Type: "OCSP RESPONSE", Bytes: good}))
	write("expired.der", p.Response(t, t0.Add(-2*time.Hour), t0.Add(-time.Hour)))
	write("revoked.der", p.Sign(t, ocsp.Response{Status: ocsp.Revoked, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: t0, NextUpdate: t0.Add(time.Hour), RevokedAt: t0}, nil, nil))
	write("forged.der", p.Sign(t, ocsp.Response{Status: ocsp.Good, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: t0, NextUpdate: t0.Add(time.Hour)}, otherCA, otherKey))

	parse := func(cert, key, extra string) (*Config, error) {
		yaml := "listeners:\n  - {address: 127.0.0.1:443, protocols: [tls]}\n" +
			"sites:\n  - server_names: [localhost]\n    tls:\n" +
			"      cert: " + cert + "\n      key: " + key + "\n" + extra +
			"    routes:\n      - {path_prefix: /, upstream: app}\n" +
			"upstreams:\n  - {name: app, targets: [127.0.0.1:8080]}\n"
		return Parse(filepath.Join(dir, "gmproxy.yaml"), []byte(yaml))
	}

	cfg, err := parse("chain.crt", "leaf.key", "      ocsp_file: good.der\n")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Sites[0].Material
	if m.TLSOCSP == nil || !bytes.Equal(m.TLSOCSP.DER, good) || !m.TLSOCSP.NextUpdate.Equal(t0.Add(time.Hour)) {
		t.Fatalf("ocsp_file not loaded: %+v", m.TLSOCSP)
	}
	cfg, err = parse("chain.crt", "leaf.key", "      ocsp_fetch: true\n")
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Sites[0].Material; m.TLSOCSPURL != p.Leaf.OCSPServer[0] || !m.TLSOCSPIssuer.Equal(p.CA) {
		t.Fatalf("ocsp_fetch: responder %q, issuer %v", m.TLSOCSPURL, m.TLSOCSPIssuer != nil)
	}
	// ocsp_responder replaces the certificate's responder, or names one
	// for a certificate without.
	for _, ck := range [][2]string{{"chain.crt", "leaf.key"}, {"noaia.crt", "noaia.key"}} {
		cfg, err = parse(ck[0], ck[1], "      ocsp_fetch: true\n      ocsp_responder: http://relay.internal:8080/ocsp\n")
		if err != nil {
			t.Fatal(err)
		}
		if m := cfg.Sites[0].Material; m.TLSOCSPURL != "http://relay.internal:8080/ocsp" || !m.TLSOCSPIssuer.Equal(p.CA) {
			t.Fatalf("%s: ocsp_responder: responder %q, issuer %v", ck[0], m.TLSOCSPURL, m.TLSOCSPIssuer != nil)
		}
	}

	for _, c := range []struct {
		name, cert, key, extra string
		want                   []string // in the problem's text
	}{
		{"expired", "chain.crt", "leaf.key", "      ocsp_file: expired.der\n", []string{"gmproxy.yaml:8:18", "expired at"}},
		{"revoked", "chain.crt", "leaf.key", "      ocsp_file: revoked.der\n", []string{"gmproxy.yaml:8:18", "revoked"}},
		{"forged", "chain.crt", "leaf.key", "      ocsp_file: forged.der\n", []string{"gmproxy.yaml:8:18", "not issued by the certificate's issuer"}},
		{"pem", "chain.crt", "leaf.key", "      ocsp_file: good.pem\n", []string{"gmproxy.yaml:8:18", "must be DER"}},
		{"missing", "chain.crt", "leaf.key", "      ocsp_file: none.der\n", []string{"gmproxy.yaml:8:18", "none.der"}},
		{"no issuer", "leaf.crt", "leaf.key", "      ocsp_file: good.der\n", []string{"gmproxy.yaml:8:18", "the chain's second certificate is not it"}},
		{"another CA after it", "wrongchain.crt", "leaf.key", "      ocsp_file: good.der\n", []string{"gmproxy.yaml:8:18", "the chain's second certificate is not it"}},
		{"no responder", "noaia.crt", "noaia.key", "      ocsp_fetch: true\n", []string{"gmproxy.yaml:8:19", "names no OCSP responder"}},
		{"both", "chain.crt", "leaf.key", "      ocsp_file: good.der\n      ocsp_fetch: true\n", []string{"gmproxy.yaml:9:19", "both set"}},
		{"responder without fetch", "chain.crt", "leaf.key", "      ocsp_responder: http://relay.internal/\n", []string{"gmproxy.yaml:8:23", "only used by ocsp_fetch"}},
		{"responder not http", "chain.crt", "leaf.key", "      ocsp_fetch: true\n      ocsp_responder: ftp://relay.internal/\n", []string{"gmproxy.yaml:9:23", "not an http:// or https:// URL"}},
		{"responder relative", "noaia.crt", "noaia.key", "      ocsp_fetch: true\n      ocsp_responder: /ocsp\n", []string{"gmproxy.yaml:9:23", "not an http:// or https:// URL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.cert, c.key, c.extra)
			var probs Problems
			if !errors.As(err, &probs) || !probs.HasErrors() {
				t.Fatalf("accepted (%v)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
