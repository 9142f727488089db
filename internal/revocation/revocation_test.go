package revocation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
)

var pkiOnce = sync.OnceValues(func() (*devpki.PKI, error) {
	return devpki.Generate(devpki.Options{Hosts: []string{"a.example.cn"}})
})

func testPKI(t *testing.T) *devpki.PKI {
	t.Helper()
	p, err := pkiOnce()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newCRL signs a CRL of ca valid over [this, next] revoking serials, with
// extra extensions.
func newCRL(t *testing.T, ca devpki.Cert, this, next time.Time, ext []pkix.Extension, serials ...*big.Int) []byte {
	t.Helper()
	tmpl := &smx509.RevocationList{Number: big.NewInt(1), ThisUpdate: this, NextUpdate: next, ExtraExtensions: ext}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, smx509.RevocationListEntry{SerialNumber: s, RevocationTime: this})
	}
	der, err := smx509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func parse(t *testing.T, der []byte) *smx509.RevocationList {
	t.Helper()
	rl, err := smx509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	return rl
}

func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestCheck: a listed serial is revoked, another is not; an issuer
// without a CRL and a CRL outside [thisUpdate, nextUpdate] refuse every
// certificate; CheckChains skips the trust anchor only.
func TestCheck(t *testing.T) {
	p := testPKI(t)
	now := time.Now()
	ix := NewIndex([]Signed{{parse(t, newCRL(t, p.CA, now.Add(-time.Hour), now.Add(time.Hour), nil, p.ClientEnc.Cert.SerialNumber)), p.CA.Cert}})
	leaf, enc, ca := p.ClientSign.Cert, p.ClientEnc.Cert, p.CA.Cert
	key := ca.RawSubjectPublicKeyInfo
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"not listed", ix.Check(leaf.RawIssuer, key, leaf.SerialNumber, now), ""},
		{"listed", ix.Check(enc.RawIssuer, key, enc.SerialNumber, now), ReasonRevoked},
		{"after nextUpdate", ix.Check(leaf.RawIssuer, key, leaf.SerialNumber, now.Add(2*time.Hour)), ReasonCRLExpired},
		{"before thisUpdate", ix.Check(leaf.RawIssuer, key, leaf.SerialNumber, now.Add(-2*time.Hour)), ReasonCRLExpired},
		{"issuer without a CRL", ix.Check(p.ECDSACA.Cert.RawSubject, key, leaf.SerialNumber, now), ReasonNoCRL},
		{"chain", ix.CheckChains([][]*smx509.Certificate{{leaf, ca}}, now), ""},
		{"chain with a revoked leaf", ix.CheckChains([][]*smx509.Certificate{{enc, ca}}, now), ReasonRevoked},
		{"second chain", ix.CheckChains([][]*smx509.Certificate{{leaf, ca}, {enc, ca}}, now), ReasonRevoked},
		// A self-signed anchor's issuer is itself: it is not checked.
		{"encryption certificate", ix.CheckIssued(enc, now), ReasonRevoked},
		{"encryption certificate not listed", ix.CheckIssued(leaf, now), ""},
		{"trust anchor alone", NewIndex(nil).CheckChains([][]*smx509.Certificate{{ca}}, now), ""},
	} {
		if got := reason(tc.err); got != tc.want || (tc.want == "") != (tc.err == nil) {
			t.Errorf("%s: %v, want reason %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestRemoveFromCRL: an entry whose reason is removeFromCRL (a hold
// released, RFC 5280 §5.3.1) does not revoke its certificate, as OpenSSL
// reads it; an entry with another reason (certificateHold too) does.
func TestRemoveFromCRL(t *testing.T) {
	p := testPKI(t)
	now := time.Now()
	tmpl := &smx509.RevocationList{Number: big.NewInt(1), ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(time.Hour),
		RevokedCertificateEntries: []smx509.RevocationListEntry{
			{SerialNumber: p.ClientSign.Cert.SerialNumber, RevocationTime: now.Add(-time.Hour), ReasonCode: reasonRemoveFromCRL},
			{SerialNumber: p.ClientEnc.Cert.SerialNumber, RevocationTime: now.Add(-time.Hour), ReasonCode: 6}, // certificateHold
		}}
	der, err := smx509.CreateRevocationList(rand.Reader, tmpl, p.CA.Cert, p.CA.Key)
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex([]Signed{{parse(t, der), p.CA.Cert}})
	if err := ix.CheckIssued(p.ClientSign.Cert, now); err != nil {
		t.Errorf("certificate listed with removeFromCRL: %v, want not revoked", err)
	}
	if got := reason(ix.CheckIssued(p.ClientEnc.Cert, now)); got != ReasonRevoked {
		t.Errorf("certificate on hold: reason %q, want %q", got, ReasonRevoked)
	}
}

// TestMergedCRLs: two CRLs of one issuer revoke what either lists, and
// the issuer is current only while both are.
func TestMergedCRLs(t *testing.T) {
	p := testPKI(t)
	now := time.Now()
	a := parse(t, newCRL(t, p.CA, now.Add(-time.Hour), now.Add(time.Hour), nil, big.NewInt(7)))
	b := parse(t, newCRL(t, p.CA, now.Add(-time.Hour), now.Add(time.Minute), nil, big.NewInt(8)))
	ix := NewIndex([]Signed{{a, p.CA.Cert}, {b, p.CA.Cert}})
	issuer, key := p.CA.Cert.RawSubject, p.CA.Cert.RawSubjectPublicKeyInfo
	if reason(ix.Check(issuer, key, big.NewInt(7), now)) != ReasonRevoked || reason(ix.Check(issuer, key, big.NewInt(8), now)) != ReasonRevoked {
		t.Error("a serial one of two CRLs of an issuer lists is not revoked")
	}
	if reason(ix.Check(issuer, key, big.NewInt(9), now.Add(10*time.Minute))) != ReasonCRLExpired {
		t.Error("an issuer one of whose CRLs expired is still current")
	}
	if string(NewIndex([]Signed{{a, p.CA.Cert}}).Fingerprint()) == string(ix.Fingerprint()) {
		t.Error("the fingerprint does not change with the CRLs")
	}
}

// TestIssuerKey: a CRL stands for the CA whose key signed it, not for
// another CA of the same name (the same CA re-keyed, RFC 5280 §6.3.3 (f)):
// a certificate that CA issued has no CRL, whether in a chain or as an
// encryption certificate, and a serial one of the two revoked is not
// revoked under the other.
func TestIssuerKey(t *testing.T) {
	old := testPKI(t)
	rekeyed, err := devpki.Generate(devpki.Options{Hosts: []string{"a.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(rekeyed.CA.Cert.RawSubject) != string(old.CA.Cert.RawSubject) {
		t.Fatal("the two test CAs differ in name")
	}
	now := time.Now()
	leaf := rekeyed.ClientSign.Cert
	oldCRL := Signed{parse(t, newCRL(t, old.CA, now.Add(-time.Hour), now.Add(time.Hour), nil, leaf.SerialNumber)), old.CA.Cert}
	ix := NewIndex([]Signed{oldCRL})
	chain := [][]*smx509.Certificate{{leaf, rekeyed.CA.Cert}}
	if got := reason(ix.CheckChains(chain, now)); got != ReasonNoCRL {
		t.Errorf("a certificate of the re-keyed CA, with only the old key's CRL: reason %q, want %q", got, ReasonNoCRL)
	}
	if got := reason(ix.CheckIssued(rekeyed.ClientEnc.Cert, now)); got != ReasonNoCRL {
		t.Errorf("an encryption certificate of the re-keyed CA, with only the old key's CRL: reason %q, want %q", got, ReasonNoCRL)
	}
	ix = NewIndex([]Signed{oldCRL, {parse(t, newCRL(t, rekeyed.CA, now.Add(-time.Hour), now.Add(time.Hour), nil)), rekeyed.CA.Cert}})
	if err := ix.CheckChains(chain, now); err != nil {
		t.Errorf("a serial the old key's CRL lists refused under the re-keyed CA: %v", err)
	}
}

// TestUnsupported: delta CRLs, scoped issuing distribution points and
// critical extensions gmproxy does not understand are named; a
// distribution point name alone is fine.
func TestUnsupported(t *testing.T) {
	p := testPKI(t)
	now := time.Now()
	crit := func(oid asn1.ObjectIdentifier, v []byte) []pkix.Extension {
		return []pkix.Extension{{Id: oid, Critical: true, Value: v}}
	}
	for _, tc := range []struct {
		name string
		ext  []pkix.Extension
		want string // in the reason; "" for none
	}{
		{"plain", nil, ""},
		{"distribution point name only", crit(oidIssuingDistributionPoint, []byte{0x30, 0x04, 0xa0, 0x02, 0xa0, 0x00}), ""},
		{"indirect CRL", crit(oidIssuingDistributionPoint, []byte{0x30, 0x03, 0x84, 0x01, 0xff}), "issuingDistributionPoint"},
		{"user certificates only", crit(oidIssuingDistributionPoint, []byte{0x30, 0x03, 0x81, 0x01, 0xff}), "issuingDistributionPoint"},
		{"delta CRL", crit(oidDeltaCRLIndicator, []byte{0x02, 0x01, 0x01}), "delta"},
		{"unknown critical extension", crit(asn1.ObjectIdentifier{1, 2, 3, 4}, []byte{0x05, 0x00}), "1.2.3.4"},
		{"unknown non-critical extension", []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 2, 3, 4}, Value: []byte{0x05, 0x00}}}, ""},
	} {
		got := Unsupported(parse(t, newCRL(t, p.CA, now, now.Add(time.Hour), tc.ext)))
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Unsupported = %q, want one naming %q", tc.name, got, tc.want)
		}
	}
	// An indirect CRL's entry names the certificate's issuer in a
	// critical certificateIssuer extension.
	tmpl := &smx509.RevocationList{Number: big.NewInt(1), ThisUpdate: now, NextUpdate: now.Add(time.Hour),
		RevokedCertificateEntries: []smx509.RevocationListEntry{{SerialNumber: big.NewInt(5), RevocationTime: now,
			ExtraExtensions: crit(asn1.ObjectIdentifier{2, 5, 29, 29}, []byte{0x30, 0x00})}}}
	der, err := smx509.CreateRevocationList(rand.Reader, tmpl, p.CA.Cert, p.CA.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got := Unsupported(parse(t, der)); !strings.Contains(got, "2.5.29.29") {
		t.Errorf("entry with a critical certificateIssuer: Unsupported = %q", got)
	}
}

// TestParseFile: PEM with other blocks around, and DER, are read; a file
// without a CRL is refused.
func TestParseFile(t *testing.T) {
	p := testPKI(t)
	now := time.Now()
	der := newCRL(t, p.CA, now, now.Add(time.Hour), nil)
	pemData := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.CA.Cert.Raw}), pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})...)
	pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})...)
	if crls, err := ParseFile(pemData); err != nil || len(crls) != 2 {
		t.Errorf("PEM: %d CRLs, %v; want 2", len(crls), err)
	}
	if crls, err := ParseFile(der); err != nil || len(crls) != 1 {
		t.Errorf("DER: %d CRLs, %v; want 1", len(crls), err)
	}
	if _, err := ParseFile(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.CA.Cert.Raw})); err == nil {
		t.Error("a file without a CRL parsed")
	}
}

// FuzzFullScope: the issuingDistributionPoint reader never panics, and
// accepts only a SEQUENCE that holds at most a distributionPoint.
func FuzzFullScope(f *testing.F) {
	f.Add([]byte{0x30, 0x04, 0xa0, 0x02, 0xa0, 0x00})
	f.Add([]byte{0x30, 0x03, 0x84, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, der []byte) {
		if !fullScope(der) {
			return
		}
		// encoding/asn1 reads it otherwise: a SEQUENCE holding nothing or
		// one context-specific constructed [0].
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(der, &seq); err != nil || len(rest) > 0 || seq.Tag != asn1.TagSequence || !seq.IsCompound {
			t.Fatalf("fullScope accepted %x, which is no SEQUENCE (%v)", der, err)
		}
		if len(seq.Bytes) == 0 {
			return
		}
		var dp asn1.RawValue
		if rest, err := asn1.Unmarshal(seq.Bytes, &dp); err != nil || len(rest) > 0 || dp.Class != asn1.ClassContextSpecific || dp.Tag != 0 || !dp.IsCompound {
			t.Fatalf("fullScope accepted %x, which holds more than a distributionPoint (%v)", der, err)
		}
	})
}

// issue makes a certificate of parent for key (a CA when isCA).
func issue(t *testing.T, parent devpki.Cert, cn string, serial int64, isCA bool, key *ecdsa.PrivateKey) devpki.Cert {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		BasicConstraintsValid: true, IsCA: isCA, KeyUsage: x509.KeyUsageDigitalSignature}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	issuer, err := x509.ParseCertificate(parent.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, parent.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return devpki.Cert{Cert: c, Key: key}
}

// TestRevokedIntermediateAnchor: with an intermediate CA and its root both
// in client_auth.ca, the intermediate is crypto/x509's trust anchor, but
// its root's CRL still revokes it (and every certificate below it), on
// TLCP/TLS 1.3-SM chains, crypto/tls chains and encryption certificates.
func TestRevokedIntermediateAnchor(t *testing.T) {
	p := testPKI(t)
	root := *p.ECDSACA
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	inter := issue(t, root, "intermediate CA", 1000, true, key())
	leaf := issue(t, inter, "client", 7, false, key())
	now := time.Now()
	interCRL := Signed{parse(t, newCRL(t, inter, now.Add(-time.Hour), now.Add(time.Hour), nil)), inter.Cert}
	rootCRL := func(serials ...*big.Int) Signed {
		return Signed{parse(t, newCRL(t, root, now.Add(-time.Hour), now.Add(time.Hour), nil, serials...)), root.Cert}
	}
	x509Chain := func() [][]*x509.Certificate {
		var chain []*x509.Certificate
		for _, c := range []*smx509.Certificate{leaf.Cert, inter.Cert} {
			xc, err := x509.ParseCertificate(c.Raw)
			if err != nil {
				t.Fatal(err)
			}
			chain = append(chain, xc)
		}
		return [][]*x509.Certificate{chain}
	}()
	chain := [][]*smx509.Certificate{{leaf.Cert, inter.Cert}}

	ix := NewIndex([]Signed{rootCRL(), interCRL})
	if err := ix.CheckChains(chain, now); err != nil {
		t.Fatalf("an intermediate its root does not revoke: %v", err)
	}
	ix = NewIndex([]Signed{rootCRL(inter.Cert.SerialNumber), interCRL})
	for name, err := range map[string]error{
		"chain":                  ix.CheckChains(chain, now),
		"crypto/tls chain":       ix.CheckX509Chains(x509Chain, now),
		"encryption certificate": ix.CheckIssued(leaf.Cert, now),
	} {
		if got := reason(err); got != ReasonRevoked {
			t.Errorf("%s under an intermediate its root revoked: %v, want reason %q", name, err, ReasonRevoked)
		}
	}
	if got := reason(NewIndex([]Signed{rootCRL(), interCRL}).CheckChains(chain, now.Add(2*time.Hour))); got != ReasonCRLExpired {
		t.Errorf("with the CRLs expired: reason %q, want %q", got, ReasonCRLExpired)
	}
}
