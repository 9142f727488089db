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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/internal/testwait"
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
	fifo := filepath.Join(dir, "client.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Readers waiting in open(2) (the defect) go on once a writer
		// opens, and then read the end.
		for range 8 {
			if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				w.Close()
			}
		}
	})
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
		done := make(chan error, 1)
		go func() {
			_, _, _, err := newTransport(uc, nil)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), fifo) {
				t.Errorf("%s with a FIFO as its %s file: error %v, want one naming the file and saying it is not a regular file", s.proto, s.field, err)
			}
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("%s with a FIFO as its %s file: still opening it (waiting for a writer)", s.proto, s.field)
		}
	}
	// A key file one byte over the bound (sparse) is refused, not read
	// whole.
	big := filepath.Join(dir, "key-big.pem")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(namedfile.Max + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	uc := &UpstreamConfig{Name: "u", Protocol: upstreamproto.TLS, Targets: []TargetConfig{{Address: "127.0.0.1:1"}},
		TLS: &UpstreamTLSConfig{ServerName: "localhost", Cert: ecCert, Key: big}}
	if _, _, _, err := newTransport(uc, nil); err == nil || !strings.Contains(err.Error(), "over 64MiB") || !strings.Contains(err.Error(), big) {
		t.Errorf("tls with a key file over 64MiB: error %v, want one naming the file and saying it is over 64MiB", err)
	}
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
