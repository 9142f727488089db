package devpki

import (
	"bytes"
	"encoding/asn1"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

var oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}

func hasExt(c *smx509.Certificate, oid asn1.ObjectIdentifier) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(oid) {
			return true
		}
	}
	return false
}

func TestGenerate(t *testing.T) {
	p, err := Generate(Options{Hosts: []string{"localhost", "example.test", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)

	if !p.CA.Cert.IsCA || !p.CA.Cert.BasicConstraintsValid {
		t.Error("CA lacks CA:TRUE")
	}
	if p.CA.Cert.KeyUsage != smx509.KeyUsageCertSign|smx509.KeyUsageCRLSign {
		t.Errorf("CA key usage %b", p.CA.Cert.KeyUsage)
	}
	for _, e := range p.CA.Cert.Extensions {
		if e.Id.Equal(oidBasicConstraints) && !e.Critical {
			t.Error("CA basicConstraints not critical")
		}
	}

	encUsage := smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	tests := []struct {
		name string
		c    Cert
		ku   smx509.KeyUsage
		eku  smx509.ExtKeyUsage
		host string
	}{
		{"server sign", p.ServerSign, smx509.KeyUsageDigitalSignature, smx509.ExtKeyUsageServerAuth, "example.test"},
		{"server enc", p.ServerEnc, encUsage, smx509.ExtKeyUsageServerAuth, "127.0.0.1"},
		{"client sign", p.ClientSign, smx509.KeyUsageDigitalSignature, smx509.ExtKeyUsageClientAuth, ""},
		{"client enc", p.ClientEnc, encUsage, smx509.ExtKeyUsageClientAuth, ""},
		{"tls13sm", p.TLS13SM(), smx509.KeyUsageDigitalSignature, smx509.ExtKeyUsageServerAuth, "localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c.Cert
			if _, err := c.Verify(smx509.VerifyOptions{Roots: roots, DNSName: tt.host, KeyUsages: []smx509.ExtKeyUsage{tt.eku}}); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if c.KeyUsage != tt.ku {
				t.Errorf("key usage %b, want %b", c.KeyUsage, tt.ku)
			}
			if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != tt.eku {
				t.Errorf("EKU %v", c.ExtKeyUsage)
			}
			if hasExt(c, oidBasicConstraints) {
				t.Error("leaf carries basicConstraints")
			}
			if c.SignatureAlgorithm != smx509.SM2WithSM3 {
				t.Errorf("signature algorithm %v", c.SignatureAlgorithm)
			}
			if _, ok := tt.c.Key.(*sm2.PrivateKey); !ok {
				t.Errorf("key type %T", tt.c.Key)
			}
			ser, _ := asn1.Marshal(c.SerialNumber)
			if c.SerialNumber.Sign() <= 0 || len(c.SerialNumber.Bytes()) < 4 || len(ser) != 2+16 {
				t.Errorf("serial %x (DER %d bytes)", c.SerialNumber, len(ser))
			}
		})
	}
	// Pairs: identical subject, SAN and issuer.
	for _, pair := range [][2]Cert{{p.ServerSign, p.ServerEnc}, {p.ClientSign, p.ClientEnc}} {
		a, b := pair[0].Cert, pair[1].Cert
		if !bytes.Equal(a.RawSubject, b.RawSubject) || !bytes.Equal(a.RawIssuer, b.RawIssuer) {
			t.Error("sign/enc subject or issuer differ")
		}
		if len(a.DNSNames) != len(b.DNSNames) || len(a.IPAddresses) != len(b.IPAddresses) {
			t.Error("sign/enc SAN differ")
		}
	}
	// ECDSA.
	if p.ECDSACA == nil || p.ECDSAServer == nil {
		t.Fatal("no ECDSA certificates")
	}
	ecRoots := smx509.NewCertPool()
	ecRoots.AddCert(p.ECDSACA.Cert)
	if _, err := p.ECDSAServer.Cert.Verify(smx509.VerifyOptions{Roots: ecRoots, DNSName: "localhost"}); err != nil {
		t.Errorf("ECDSA verify: %v", err)
	}
	if _, err := p.ECDSAServer.Cert.Verify(smx509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err == nil {
		t.Error("ECDSA server verifies against the SM2 CA")
	}
}

func TestSkipECDSA(t *testing.T) {
	p, err := Generate(Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.ECDSACA != nil || p.ECDSAServer != nil {
		t.Fatal("ECDSA generated")
	}
	written, err := p.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 10 {
		t.Fatalf("wrote %d files", len(written))
	}
}

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p1, err := LoadOrCreate(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p1.Created {
		t.Error("first call did not create")
	}
	for _, f := range []string{FileCAKey, FileServerSignKey, FileECDSAServerKey} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", f, st.Mode())
		}
	}
	p2, err := LoadOrCreate(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Created {
		t.Error("second call regenerated")
	}
	if !p2.CA.Cert.Equal(p1.CA.Cert) || !p2.ServerEnc.Cert.Equal(p1.ServerEnc.Cert) || !p2.ECDSAServer.Cert.Equal(p1.ECDSAServer.Cert) {
		t.Error("reused PKI differs")
	}

	// A missing leaf is reissued under the same CA.
	if err := os.Remove(filepath.Join(dir, FileServerEncKey)); err != nil {
		t.Fatal(err)
	}
	p3, err := LoadOrCreate(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p3.Created || !p3.CA.Cert.Equal(p1.CA.Cert) || p3.ServerEnc.Cert.Equal(p1.ServerEnc.Cert) {
		t.Error("missing leaf: want same CA, new leaves")
	}

	// A new host reissues the leaves under the same CA.
	p4, err := LoadOrCreate(dir, Options{Hosts: []string{"localhost", "gm.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if !p4.Created || !p4.CA.Cert.Equal(p1.CA.Cert) || p4.ServerSign.Cert.VerifyHostname("gm.example.test") != nil {
		t.Error("new host: want same CA, leaves covering the host")
	}

	// Past the CA's expiry everything is regenerated.
	later := func() time.Time { return time.Now().Add(DefaultValidity) }
	p5, err := LoadOrCreate(dir, Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if !p5.Created || p5.CA.Cert.Equal(p1.CA.Cert) {
		t.Error("expired CA not regenerated")
	}

	// A corrupt CA file regenerates too.
	if err := os.WriteFile(filepath.Join(dir, FileCACert), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	p6, err := LoadOrCreate(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p6.Created {
		t.Error("corrupt CA not regenerated")
	}
}

// TestLeavesEndWithTheirCA: a clock that moves between the CA and its
// leaves (a second boundary crossed while keys are made) does not give a
// leaf a notAfter past its issuer's.
func TestLeavesEndWithTheirCA(t *testing.T) {
	tick := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { tick = tick.Add(time.Second); return tick }
	p, err := Generate(Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Cert{"server sign": p.ServerSign, "server enc": p.ServerEnc, "client sign": p.ClientSign, "ECDSA server": *p.ECDSAServer} {
		ca := p.CA
		if name == "ECDSA server" {
			ca = *p.ECDSACA
		}
		if c.Cert.NotAfter.After(ca.Cert.NotAfter) {
			t.Errorf("%s ends %v, after its CA (%v)", name, c.Cert.NotAfter, ca.Cert.NotAfter)
		}
	}
}
