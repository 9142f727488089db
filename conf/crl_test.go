package conf

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

var updateCRL = flag.Bool("update-crl", false, "regenerate the CRLs of conf/testdata/pki from its CAs")

// TestGenerateTestCRLs regenerates the committed CRLs of the test PKI's
// CAs with -update-crl (TestGenerateTestPKI writes them with the rest of
// the PKI). Without it they are written into a temporary folder and every
// file must be committed.
func TestGenerateTestCRLs(t *testing.T) {
	dir := pkiDir
	if !*updateCRL {
		dir = t.TempDir()
	}
	load := func(cert, key string) devpki.Cert {
		c, err := smkey.LoadCertificatesFile(filepath.Join(pkiDir, cert))
		if err != nil {
			t.Fatal(err)
		}
		k, err := smkey.LoadPrivateKeyFile(filepath.Join(pkiDir, key), nil)
		if err != nil {
			t.Fatal(err)
		}
		return devpki.Cert{Cert: c[0], Key: k}
	}
	writeTestCRLs(t, dir, load("ca.crt", "ca.key"), load("ecdsa_ca.crt", "ecdsa_ca.key"))
	names, _ := filepath.Glob(filepath.Join(dir, "*.crl"))
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(pkiDir, filepath.Base(n))); err != nil {
			t.Errorf("%v; regenerate the CRLs with go test ./conf -run GenerateTestCRLs -update-crl", err)
		}
	}
}

// writeTestCRLs writes the CRL files of the golden tests into dir: those
// of both client CAs (client_cas.crl), of the SM2 CA only, stale ones, a
// delta CRL, and one in the SM2 CA's name signed by another key.
func writeTestCRLs(t *testing.T, dir string, sm2CA, ecdsaCA devpki.Cert) {
	t.Helper()
	day := 24 * time.Hour
	crl := func(ca devpki.Cert, this, next time.Time, ext ...pkix.Extension) []byte {
		t.Helper()
		tmpl := &smx509.RevocationList{Number: big.NewInt(1), ThisUpdate: this, NextUpdate: next, ExtraExtensions: ext,
			RevokedCertificateEntries: []smx509.RevocationListEntry{{SerialNumber: big.NewInt(0x4000_0001), RevocationTime: this}}}
		der, err := smx509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
	}
	write := func(name string, blocks ...[]byte) {
		t.Helper()
		var b []byte
		for _, x := range blocks {
			b = append(b, x...)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	this, next := testNow.Add(-30*day), testNow.Add(100*365*day)
	smGood, ecGood := crl(sm2CA, this, next), crl(ecdsaCA, this, next)
	write("client_cas.crl", smGood, ecGood)
	write("sm2_ca.crl", smGood)
	write("stale.crl", crl(sm2CA, this, testNow.Add(-day)), crl(ecdsaCA, testNow.Add(day), next))
	write("delta.crl", crl(sm2CA, this, next, pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 27}, Critical: true, Value: []byte{2, 1, 1}}), ecGood)
	// Another key under the SM2 CA's name: the name matches, the
	// signature does not.
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *sm2CA.Cert
	tmpl.PublicKey = key.Public()
	der, err := smx509.CreateCertificate(rand.Reader, &tmpl, &tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	write("forged.crl", crl(devpki.Cert{Cert: forger, Key: key}, this, next), ecGood)
}

// TestClientCRLLoaded: a site's client_auth.crl reaches its material,
// indexed: the certificate the test CRLs revoke is refused, the client
// certificate of the test PKI is not.
func TestClientCRLLoaded(t *testing.T) {
	cfg, err := Load("testdata/good/client_crl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crls *revocation.Index
	for i := range cfg.Sites {
		if cfg.Sites[i].ClientAuth.CRL != "" {
			crls = cfg.Sites[i].Material.ClientCRLs
		}
	}
	if crls == nil {
		t.Fatal("no site has its client_auth.crl loaded")
	}
	client, err := smkey.LoadCertificatesFile("testdata/pki/client_sign.crt")
	if err != nil {
		t.Fatal(err)
	}
	c := client[0]
	if err := crls.CheckIssued(c, testNow); err != nil {
		t.Errorf("the client certificate: %v", err)
	}
	revoked := *c
	revoked.SerialNumber = big.NewInt(0x4000_0001)
	if err := crls.CheckIssued(&revoked, testNow); err == nil {
		t.Error("the serial the CRL lists is not refused")
	}
}

// TestCRLOfCAWithoutCRLSign: a CRL whose CA in client_auth.ca has a
// keyUsage without cRLSign is refused for that reason (RFC 5280 §4.2.1.3),
// not as a CRL nobody of ca signed.
func TestCRLOfCAWithoutCRLSign(t *testing.T) {
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "no crlSign CA"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign}
	signer := func() *smx509.Certificate {
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := smx509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	crlDER, err := smx509.CreateRevocationList(rand.Reader, &smx509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: testNow.Add(-time.Hour), NextUpdate: testNow.Add(time.Hour)}, signer(), key)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.KeyUsage = smx509.KeyUsageCertSign // the same CA, re-issued without cRLSign
	dir := t.TempDir()
	write := func(name string, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caPath, crlPath := write("ca.crt", "CERTIFICATE", signer().Raw), write("ca.crl", "X509 CRL", crlDER)
	b, err := os.ReadFile("testdata/good/client_crl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(b), "ca: ../pki/client_cas.crt, crl: ../pki/client_cas.crl", "ca: "+caPath+", crl: "+crlPath, 1)
	_, err = Parse("testdata/good/crlsign.yaml", []byte(yaml))
	if err == nil || !strings.Contains(err.Error(), "may not sign CRLs (its keyUsage has no cRLSign)") {
		t.Fatalf("a CRL of a CA without cRLSign: %v; want it refused for that reason", err)
	}
}
