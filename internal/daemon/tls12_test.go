package daemon

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// rsaServerPair is a self-signed RSA server certificate for localhost.
func rsaServerPair(t *testing.T) *conf.KeyPair {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &conf.KeyPair{Chain: []*smx509.Certificate{cert}, Key: key}
}

// TestTLS12WithECDSAAndRSACertificates: TLS 1.2 clients (each ECDHE suite
// the certificate allows) and TLS 1.3 clients complete handshakes and
// requests against a `tls:` certificate with an ECDSA key and one with an
// RSA key, both behind the offload engine. (An ECDSA key wrapped as a
// crypto.Decrypter failed every TLS 1.2 handshake with internal_error.)
func TestTLS12WithECDSAAndRSACertificates(t *testing.T) {
	p := testPKI(t)
	b := newBackend(t)
	ecdsaPair := pair(*p.ECDSAServer)
	rsaPair := rsaServerPair(t)
	for _, c := range []struct {
		name   string
		pair   *conf.KeyPair
		suites []uint16
	}{
		{"ecdsa", ecdsaPair, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
		{"rsa", rsaPair, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}},
	} {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites = cfg.Sites[:1]
		cfg.Sites[0].Material.TLS = c.pair
		td := startDaemon(t, cfg)
		roots := x509.NewCertPool()
		roots.AddCert(mustX509(t, c.pair.Chain[len(c.pair.Chain)-1].Raw))
		if c.name == "ecdsa" {
			roots.AddCert(mustX509(t, p.ECDSACA.Cert.Raw))
		}
		fetch := func(tc *tls.Config) (*tls.ConnectionState, error) {
			raw, err := net.Dial("tcp", td.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			conn := tls.Client(raw, tc)
			if err := conn.Handshake(); err != nil {
				return nil, err
			}
			req, _ := http.NewRequest("GET", "https://localhost/tls12", nil)
			req.Close = true
			if err := req.Write(conn); err != nil {
				return nil, err
			}
			body, err := io.ReadAll(conn)
			if err != nil && !strings.Contains(string(body), "path=/tls12") {
				return nil, err
			}
			if !strings.Contains(string(body), "path=/tls12") {
				t.Errorf("%s: response %q", c.name, body)
			}
			cs := conn.ConnectionState()
			return &cs, nil
		}
		for _, suite := range c.suites {
			tc := &tls.Config{RootCAs: roots, ServerName: "localhost", MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}, NextProtos: []string{"http/1.1"}}
			cs, err := fetch(tc)
			if err != nil {
				t.Errorf("%s: TLS 1.2 %s: %v", c.name, tls.CipherSuiteName(suite), err)
				continue
			}
			if cs.Version != tls.VersionTLS12 || cs.CipherSuite != suite {
				t.Errorf("%s: negotiated %x %s", c.name, cs.Version, tls.CipherSuiteName(cs.CipherSuite))
			}
		}
		if _, err := fetch(&tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}}); err != nil {
			t.Errorf("%s: TLS 1.3: %v", c.name, err)
		}
		td.obs.mu.Lock()
		if len(td.obs.reasons) != 0 {
			t.Errorf("%s: failed handshakes: %v", c.name, td.obs.reasons)
		}
		td.obs.mu.Unlock()
	}
}

func mustX509(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTLSBelow12Refused: a site's `tls:` accepts TLS 1.2 and 1.3 by
// default and refuses a client that offers TLS 1.0 and 1.1 only.
func TestTLSBelow12Refused(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	try := func(minV, maxV uint16) error {
		raw, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		return tls.Client(raw, &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", MinVersion: minV, MaxVersion: maxV}).Handshake()
	}
	if err := try(tls.VersionTLS10, tls.VersionTLS11); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.0–1.1 client: %v, want a protocol_version refusal", err)
	}
	if err := try(tls.VersionTLS12, tls.VersionTLS12); err != nil {
		t.Errorf("TLS 1.2 client: %v", err)
	}
}
