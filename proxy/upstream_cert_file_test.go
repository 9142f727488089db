package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/namedfile/namedfiletest"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// TestUpstreamClientCertFilesBounded: an upstream's client certificate and
// key files given by path (UpstreamTLSConfig.Cert and Key, SignCert,
// SignKey, EncCert and EncKey) are read as its CA file is, regular files
// only: a FIFO in any of them is refused at once, naming it, where a read
// with os.ReadFile (tls.LoadX509KeyPair and the SM packages' own) waited
// for a writer and blocked New for good.
func TestUpstreamClientCertFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := namedfiletest.FIFO(t, dir)
	// The other files are regular (empty): each is read before any is
	// parsed, so the FIFO is reached wherever it is.
	regular := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type slot struct {
		proto, field string
		set          func(*UpstreamTLSConfig, string)
	}
	slots := []slot{
		{upstreamproto.TLS, "Cert", func(c *UpstreamTLSConfig, f string) { c.Cert = f }},
		{upstreamproto.TLS, "Key", func(c *UpstreamTLSConfig, f string) { c.Key = f }},
		{upstreamproto.H2, "Key", func(c *UpstreamTLSConfig, f string) { c.Key = f }},
		{upstreamproto.TLCP, "SignCert", func(c *UpstreamTLSConfig, f string) { c.SignCert = f }},
		{upstreamproto.TLCP, "SignKey", func(c *UpstreamTLSConfig, f string) { c.SignKey = f }},
		{upstreamproto.TLCP, "EncCert", func(c *UpstreamTLSConfig, f string) { c.EncCert = f }},
		{upstreamproto.TLCP, "EncKey", func(c *UpstreamTLSConfig, f string) { c.EncKey = f }},
		{upstreamproto.TLS13SM, "Cert", func(c *UpstreamTLSConfig, f string) { c.Cert = f }},
		{upstreamproto.TLS13SM, "Key", func(c *UpstreamTLSConfig, f string) { c.Key = f }},
	}
	// The files themselves still load, each where it belongs.
	pki := func(n string) string { return pkiPath(t, n) }
	ecCert, ecKey := ecdsaClientFiles(t, dir)
	good := &UpstreamTLSConfig{ServerName: "localhost", InsecureSkipVerify: true}
	for _, proto := range []string{upstreamproto.TLS, upstreamproto.TLCP, upstreamproto.TLS13SM} {
		tc := *good
		switch proto {
		case upstreamproto.TLS:
			tc.Cert, tc.Key = ecCert, ecKey
		case upstreamproto.TLCP:
			tc.SignCert, tc.SignKey, tc.EncCert, tc.EncKey = pki("client_sign.crt"), pki("client_sign.key"), pki("client_enc.crt"), pki("client_enc.key")
		case upstreamproto.TLS13SM:
			tc.Cert, tc.Key = pki("client_sign.crt"), pki("client_sign.key")
		}
		uc := &UpstreamConfig{Name: "u", Protocol: proto, Targets: []TargetConfig{{Address: "127.0.0.1:1"}}, TLS: &tc}
		if _, _, _, err := newTransport(uc, nil); err != nil {
			t.Errorf("%s with the test PKI's client files: %v", proto, err)
		}
	}
	for _, s := range slots {
		tc := &UpstreamTLSConfig{ServerName: "localhost", InsecureSkipVerify: true,
			Cert: regular, Key: regular, SignCert: regular, SignKey: regular, EncCert: regular, EncKey: regular}
		s.set(tc, fifo)
		uc := &UpstreamConfig{Name: "u", Protocol: s.proto, Targets: []TargetConfig{{Address: "127.0.0.1:1"}}, TLS: tc}
		namedfiletest.RefusesFIFO(t, s.proto+" with its "+s.field+" file", fifo, func() error {
			_, _, _, err := newTransport(uc, nil)
			return err
		})
	}
	// A key file one byte over the bound (sparse) is refused, not read
	// whole.
	big := namedfiletest.Oversize(t, dir)
	uc := &UpstreamConfig{Name: "u", Protocol: upstreamproto.TLS, Targets: []TargetConfig{{Address: "127.0.0.1:1"}},
		TLS: &UpstreamTLSConfig{ServerName: "localhost", Cert: ecCert, Key: big}}
	_, _, _, err := newTransport(uc, nil)
	namedfiletest.RefusesOversize(t, "tls with its key file", big, err)
}

// ecdsaClientFiles writes a self-signed ECDSA P-256 certificate and its key
// (PEM) into dir, a client certificate crypto/tls loads.
func ecdsaClientFiles(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client_ecdsa.crt"), filepath.Join(dir, "client_ecdsa.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
