package conf

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/pkcs8"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
)

var updatePKI = flag.Bool("update-pki", false, "regenerate conf/testdata/pki (test-only keys)")

// testNow is the clock of the golden tests: the committed test PKI is valid
// from 2026-01-01 for 100 years, except the deliberately broken certificates.
var testNow = time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)

const pkiDir = "testdata/pki"

// TestGenerateTestPKI regenerates the committed test PKI with -update-pki.
// Without it the PKI is generated into a temporary folder and every file it
// holds must be committed in testdata/pki (the keys are random, so only the
// names are compared).
func TestGenerateTestPKI(t *testing.T) {
	dir := pkiDir
	if !*updatePKI {
		dir = t.TempDir()
		defer func() {
			names, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, n := range names {
				if _, err := os.Stat(filepath.Join(pkiDir, filepath.Base(n))); err != nil {
					t.Errorf("%v; regenerate the test PKI with go test ./conf -run GenerateTestPKI -update-pki", err)
				}
			}
		}()
	}
	write := func(t *testing.T, name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := devpki.Generate(devpki.Options{
		Hosts:    []string{"localhost", "portal.example.cn", "*.example.cn", "127.0.0.1"},
		Validity: 100 * 365 * 24 * time.Hour,
		Now:      func() time.Time { return start },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	ca := p.CA
	subject := p.ServerSign.Cert.Subject
	issue := func(name string, tmpl *smx509.Certificate) {
		t.Helper()
		key, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.SerialNumber == nil {
			tmpl.SerialNumber = new(big.Int).SetBytes([]byte{0x41, 2, 3, 4, 5, 6, 7, 8, 9})
		}
		if tmpl.Subject.CommonName == "" {
			tmpl.Subject = subject
		}
		if tmpl.NotAfter.IsZero() {
			tmpl.NotBefore, tmpl.NotAfter = start, start.Add(100*365*24*time.Hour)
		}
		if tmpl.DNSNames == nil {
			tmpl.DNSNames = []string{"localhost", "portal.example.cn"}
		}
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := smx509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		write(t, name+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		write(t, name+".key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	}
	sign := smx509.KeyUsageDigitalSignature
	enc := smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	serverAuth := []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
	// Expired in 2021.
	issue("expired_sign", &smx509.Certificate{KeyUsage: sign, ExtKeyUsage: serverAuth,
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)})
	// Expires 10 days after testNow.
	issue("soon_enc", &smx509.Certificate{KeyUsage: enc, ExtKeyUsage: serverAuth,
		NotBefore: start, NotAfter: testNow.Add(10 * 24 * time.Hour)})
	// A "signing" certificate with encryption usages only.
	issue("wrongku_sign", &smx509.Certificate{KeyUsage: enc, ExtKeyUsage: serverAuth})
	// An encryption certificate with another subject, 3-byte serial, dataEncipherment only.
	issue("other_enc", &smx509.Certificate{KeyUsage: smx509.KeyUsageDataEncipherment, ExtKeyUsage: serverAuth,
		Subject: pkix.Name{CommonName: "other.example"}, SerialNumber: big.NewInt(0x010203), DNSNames: []string{"other.example"}})

	// The server signing key encrypted with the password in password.txt.
	der, err := pkcs8.MarshalPrivateKey(p.ServerSign.Key, []byte("secret"), pkcs8.DefaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	write(t, "server_sign.enc.key", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}))
	// And the server encryption key, with the same password.
	if der, err = pkcs8.MarshalPrivateKey(p.ServerEnc.Key, []byte("secret"), pkcs8.DefaultOpts); err != nil {
		t.Fatal(err)
	}
	write(t, "server_enc.enc.key", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}))
	write(t, "password.txt", []byte("secret\n"))
	secret := make([]byte, 64)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	write(t, "ticket.key", secret)
	write(t, "ticket_bad.key", secret[:20])
	// The client CAs of a site that takes TLCP, TLS 1.3-SM and TLS
	// clients: the SM2 CA and the ECDSA one.
	var bundle []byte
	for _, n := range []string{"ca.crt", "ecdsa_ca.crt"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, b...)
	}
	write(t, "client_cas.crt", bundle)
	writeTestCRLs(t, dir, p.CA, *p.ECDSACA)
}
