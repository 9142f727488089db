package tlcp

import (
	"crypto/rand"
	"encoding/asn1"
	"fmt"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// issueLeaf issues a server certificate from ca with key usage ku for
// subject cn (empty: an empty subject) with the DNS names dns (none: no
// subjectAltName at all).
func issueLeaf(t *testing.T, ca *smx509.Certificate, caKey *sm2.PrivateKey, ku smx509.KeyUsage, cn string, dns []string) ([]byte, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{
		SerialNumber: big.NewInt(0x55667788),
		DNSNames:     dns,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     ku,
		ExtKeyUsage:  []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth},
	}
	if cn != "" {
		tmpl.Subject = pkixName(cn)
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// TestServerEncCertOfAnotherEntity: the client encrypts the pre-master
// secret (ECC suites) to the server's encryption certificate, so that
// certificate must belong to the server the signing certificate names:
// a server with a signing certificate for the right name and an
// encryption certificate the same trusted CA issued to someone else
// would have the client encrypt to a key the named server does not hold
// (whoever holds it reads the session). It was verified only as a chain
// to a trusted root. Now its subject must be the signing certificate's
// (as GmSSL's client requires, x509_tlcp_cert_pair_entity_match), and
// the names it carries must cover the server name; one that carries no
// names (some CAs issue encryption certificates without
// subjectAltName) is bound by its subject alone.
func TestServerEncCertOfAnotherEntity(t *testing.T) {
	ca, caKey := genCA(t, "Test CA")
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	pair := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	for _, tc := range []struct {
		name string
		// signEmpty: the signing certificate has an empty subject (its
		// subjectAltName names the server).
		signEmpty bool
		cn        string
		dns       []string
		ok        bool
	}{
		{"same-subject-same-names", false, "localhost", []string{"localhost"}, true},
		{"same-subject-no-names", false, "localhost", nil, true},
		{"other-subject-no-names", false, "attacker.example", nil, false},
		{"other-subject-same-names", false, "attacker.example", []string{"localhost"}, false},
		{"same-subject-other-names", false, "localhost", []string{"attacker.example"}, false},
		{"empty-subjects-same-names", true, "", []string{"localhost"}, true},
		{"empty-subjects-no-names", true, "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := pair
			if tc.signEmpty {
				sign, key := issueLeaf(t, ca, caKey, smx509.KeyUsageDigitalSignature, "", []string{"localhost"})
				cert.SignCertificate, cert.SignKey = [][]byte{sign}, key
			}
			cert.EncCertificate, cert.EncKey = issueLeaf(t, ca, caKey, smx509.KeyUsageKeyEncipherment|smx509.KeyUsageDataEncipherment, tc.cn, tc.dns)
			for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3} {
				serr := checkServerCert(t, tc.name, cert, pair, pool, suite, tc.ok)
				if tc.ok {
					continue
				}
				if a, ok := peerAlertOf(serr); !ok || a != AlertBadCertificate {
					t.Fatalf("%s: server error %v, want peer bad_certificate", CipherSuiteName(suite), serr)
				}
			}
		})
	}
}

// TestServerEncCertKeyUsageForECC: under the ECC suites the client
// encrypts the pre-master secret to the server's encryption certificate
// (GB/T 38636-2020 §6.4.5.8), which its key usage must allow:
// keyEncipherment or dataEncipherment (Tongsuo loads no encryption
// certificate without either, GmSSL's client requires keyEncipherment).
// A certificate whose CA allowed its key only keyAgreement was taken for
// encryption too; it still serves ECDHE, whose SM2 key agreement is what
// it allows.
func TestServerEncCertKeyUsageForECC(t *testing.T) {
	ca, caKey := genCA(t, "Test CA")
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	pair := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	for _, tc := range []struct {
		ku    smx509.KeyUsage
		suite uint16
		ok    bool
	}{
		{smx509.KeyUsageKeyAgreement, ECC_SM4_GCM_SM3, false},
		{smx509.KeyUsageKeyAgreement, ECC_SM4_CBC_SM3, false},
		{smx509.KeyUsageKeyAgreement, ECDHE_SM4_GCM_SM3, true},
		{smx509.KeyUsageDataEncipherment, ECC_SM4_GCM_SM3, true},
		{smx509.KeyUsageKeyEncipherment, ECC_SM4_GCM_SM3, true},
	} {
		cert := pair
		cert.EncCertificate, cert.EncKey = issueLeaf(t, ca, caKey, tc.ku, "localhost", []string{"localhost"})
		checkServerCert(t, fmt.Sprintf("key usage %#x", tc.ku), cert, pair, pool, tc.suite, tc.ok)
	}
}

// issueTmpl issues a server certificate from ca for tmpl (subject, names
// and key usage; the rest is filled in) and returns it with its key.
func issueTmpl(t *testing.T, ca *smx509.Certificate, caKey *sm2.PrivateKey, tmpl *smx509.Certificate) ([]byte, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(0x55667799)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.ExtKeyUsage = []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

var (
	oidC  = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidO  = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidCN = asn1.ObjectIdentifier{2, 5, 4, 3}
)

// av is an attribute of type oid whose value is s encoded as the string
// type tag (BMPString and UniversalString encoded here).
func av(oid asn1.ObjectIdentifier, tag int, s string) rawAttribute {
	var b []byte
	switch tag {
	case asn1.TagBMPString:
		for _, r := range s {
			b = append(b, byte(r>>8), byte(r))
		}
	case 28:
		for _, r := range s {
			b = append(b, byte(r>>24), byte(r>>16), byte(r>>8), byte(r))
		}
	default:
		b = []byte(s)
	}
	return rawAttribute{Type: oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: b}}
}

// rawName encodes the RDNs rdns as a Name.
func rawName(t *testing.T, rdns ...rawRDNSET) []byte {
	t.Helper()
	if rdns == nil {
		rdns = []rawRDNSET{}
	}
	der, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// testSubject is C=CN, O=gmproxy test, CN=localhost, each value encoded
// as tag.
func testSubject(t *testing.T, tag int) []byte {
	return rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidO, tag, "gmproxy test")}, rawRDNSET{av(oidCN, tag, "localhost")})
}

// TestServerEncCertSubjectEncodings: the encryption certificate's subject
// must be the signing certificate's name, compared as RFC 5280 §7.1
// compares names, not byte for byte: a CA that encodes the same name
// otherwise in the two certificates (PrintableString for UTF8String,
// BMPString, another case or spacing of a caseIgnoreMatch attribute) had
// the pair refused. Another name (another value, attribute type, order,
// or an RDN more) is still refused.
func TestServerEncCertSubjectEncodings(t *testing.T) {
	ca, caKey := genCA(t, "Test CA")
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	sign, signKey := issueTmpl(t, ca, caKey, &smx509.Certificate{RawSubject: testSubject(t, asn1.TagUTF8String), DNSNames: []string{"localhost"}, KeyUsage: smx509.KeyUsageDigitalSignature})
	for _, tc := range []struct {
		name    string
		subject []byte
		ok      bool
	}{
		{"same", testSubject(t, asn1.TagUTF8String), true},
		{"printable-string", testSubject(t, asn1.TagPrintableString), true},
		{"bmp-string", testSubject(t, asn1.TagBMPString), true},
		{"case", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "cn")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "GMProxy Test")}, rawRDNSET{av(oidCN, asn1.TagPrintableString, "LocalHost")}), true},
		{"spaces", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "  gmproxy \t  test ")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "localhost ")}), true},
		{"other-cn", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "gmproxy test")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "attacker.example")}), false},
		{"inner-space-dropped", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "gmproxytest")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "localhost")}), false},
		{"other-type", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidOU, asn1.TagUTF8String, "gmproxy test")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "localhost")}), false},
		{"other-order", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "localhost")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "gmproxy test")}), false},
		{"rdn-more", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "gmproxy test")}, rawRDNSET{av(oidOU, asn1.TagUTF8String, "x")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "localhost")}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, encKey := issueTmpl(t, ca, caKey, &smx509.Certificate{RawSubject: tc.subject, DNSNames: []string{"localhost"}, KeyUsage: smx509.KeyUsageKeyEncipherment})
			cert := Certificate{SignCertificate: [][]byte{sign}, SignKey: signKey, EncCertificate: enc, EncKey: encKey}
			checkServerCert(t, tc.name, cert, Certificate{}, pool, ECC_SM4_GCM_SM3, tc.ok)
		})
	}
}

// TestSameName: the RFC 5280 §7.1 comparison of names and its RFC 4518
// string preparation (the subset sameName documents).
func TestSameName(t *testing.T) {
	oidUnknown := asn1.ObjectIdentifier{1, 2, 3, 4}
	oidDC := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	one := func(a rawAttribute) []byte { return rawName(t, rawRDNSET{a}) }
	for _, tc := range []struct {
		name string
		a, b []byte
		want bool
	}{
		{"empty", rawName(t), rawName(t), true},
		{"empty-and-not", rawName(t), one(av(oidCN, asn1.TagUTF8String, "a")), false},
		{"utf8-printable", one(av(oidCN, asn1.TagUTF8String, "Host 1")), one(av(oidCN, asn1.TagPrintableString, "host 1")), true},
		{"universal-string", one(av(oidCN, asn1.TagUTF8String, "主机 a")), one(av(oidCN, 28, "主机 A")), true},
		{"bmp-non-ascii-case", one(av(oidO, asn1.TagUTF8String, "ÉCOLE")), one(av(oidO, asn1.TagBMPString, "école")), true},
		{"whitespace-kinds", one(av(oidO, asn1.TagUTF8String, "a\u00a0\u3000b\n")), one(av(oidO, asn1.TagUTF8String, " a b")), true},
		{"mapped-to-nothing", one(av(oidO, asn1.TagUTF8String, "ac\u00adme\u200b")), one(av(oidO, asn1.TagUTF8String, "acme")), true},
		{"all-spaces", one(av(oidO, asn1.TagUTF8String, "   ")), one(av(oidO, asn1.TagPrintableString, "")), true},
		{"ia5-dc", one(av(oidDC, asn1.TagIA5String, "Example")), one(av(oidDC, asn1.TagUTF8String, "example")), true},
		{"other-value", one(av(oidCN, asn1.TagUTF8String, "a")), one(av(oidCN, asn1.TagUTF8String, "b")), false},
		{"unknown-type-encodings", one(av(oidUnknown, asn1.TagUTF8String, "a")), one(av(oidUnknown, asn1.TagPrintableString, "a")), false},
		{"unknown-type-same", one(av(oidUnknown, asn1.TagUTF8String, "a")), one(av(oidUnknown, asn1.TagUTF8String, "a")), true},
		{"unknown-type-same-beside", rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a")}, rawRDNSET{av(oidUnknown, asn1.TagUTF8String, "x")}), rawName(t, rawRDNSET{av(oidCN, asn1.TagPrintableString, "A")}, rawRDNSET{av(oidUnknown, asn1.TagUTF8String, "x")}), true},
		{"teletex-same-beside", rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a")}, rawRDNSET{av(oidO, asn1.TagT61String, "x")}), rawName(t, rawRDNSET{av(oidCN, asn1.TagPrintableString, "A")}, rawRDNSET{av(oidO, asn1.TagT61String, "x")}), true},
		{"teletex", one(av(oidCN, asn1.TagT61String, "a")), one(av(oidCN, asn1.TagUTF8String, "a")), false},
		{"invalid-utf8", one(av(oidCN, asn1.TagUTF8String, "a\xff")), one(av(oidCN, asn1.TagUTF8String, "A\xff")), false},
		{"non-ascii-printable", one(av(oidCN, asn1.TagPrintableString, "é")), one(av(oidCN, asn1.TagUTF8String, "É")), false},
		{"non-ascii-ia5", one(av(oidCN, asn1.TagIA5String, "é")), one(av(oidCN, asn1.TagUTF8String, "é")), false},
		{"odd-universal", one(rawAttribute{Type: oidCN, Value: asn1.RawValue{Tag: 28, Bytes: []byte{0, 0, 0, 'a', 0}}}), one(av(oidCN, asn1.TagUTF8String, "a")), false},
		{"universal-past-unicode", one(rawAttribute{Type: oidCN, Value: asn1.RawValue{Tag: 28, Bytes: []byte{0, 0x11, 0, 0}}}), one(av(oidCN, asn1.TagUTF8String, "\ufffd")), false},
		{"other-type", one(av(oidCN, asn1.TagUTF8String, "a")), one(av(oidO, asn1.TagUTF8String, "a")), false},
		{"inner-space", one(av(oidO, asn1.TagUTF8String, "a b")), one(av(oidO, asn1.TagUTF8String, "ab")), false},
		{"rdn-prefix", rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a")}), rawName(t, rawRDNSET{av(oidC, asn1.TagPrintableString, "CN")}), false},
		{"rdn-fewer-attributes", rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a"), av(oidO, asn1.TagUTF8String, "b")}), rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a")}), false},
		{"odd-bmp", one(rawAttribute{Type: oidCN, Value: asn1.RawValue{Tag: asn1.TagBMPString, Bytes: []byte{0, 'a', 0}}}), one(av(oidCN, asn1.TagUTF8String, "a")), false},
		{"lone-surrogate", one(rawAttribute{Type: oidCN, Value: asn1.RawValue{Tag: asn1.TagBMPString, Bytes: []byte{0xd8, 0x00}}}), one(av(oidCN, asn1.TagUTF8String, "\ufffd")), false},
		{"private-use", one(av(oidCN, asn1.TagUTF8String, "\ue000")), one(av(oidCN, asn1.TagBMPString, "\ue000")), false},
		{"multi-valued-order", rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a"), av(oidO, asn1.TagUTF8String, "b")}), rawName(t, rawRDNSET{av(oidO, asn1.TagPrintableString, "B"), av(oidCN, asn1.TagPrintableString, "A")}), true},
		{"multi-valued-one-twice", rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a"), av(oidCN, asn1.TagUTF8String, "b")}), rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a"), av(oidCN, asn1.TagPrintableString, "A")}), false},
		{"multi-valued-split", rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a"), av(oidO, asn1.TagUTF8String, "b")}), rawName(t, rawRDNSET{av(oidCN, asn1.TagUTF8String, "a")}, rawRDNSET{av(oidO, asn1.TagUTF8String, "b")}), false},
		{"not-der", []byte{0x30, 0x03, 0x31}, []byte{0x30, 0x03, 0x31}, true},
		{"not-der-differs", []byte{0x30, 0x03, 0x31}, []byte{0x30, 0x03, 0x32}, false},
		{"trailing-bytes", append(one(av(oidCN, asn1.TagUTF8String, "a")), 0), one(av(oidCN, asn1.TagUTF8String, "A")), false},
	} {
		if got := sameName(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: sameName = %v, want %v", tc.name, got, tc.want)
		}
		if got := sameName(tc.b, tc.a); got != tc.want {
			t.Errorf("%s (swapped): sameName = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestServerEncCertNonServerNames: only DNS names and IP addresses name a
// server, in the encryption certificate as in the signing certificate
// (whose check, x509 VerifyHostname, reads no other): an encryption
// certificate whose subjectAltName lists only an e-mail address or a URI
// was refused as not valid for the server name, where one without
// subjectAltName is bound by its subject; it is bound by its subject
// alone too (RFC 6125 §6.4.4). Its DNS names, when it has some, must
// still cover the server name, and with an empty subject such names bind
// it to nothing.
func TestServerEncCertNonServerNames(t *testing.T) {
	ca, caKey := genCA(t, "Test CA")
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	pair := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	uri, _ := url.Parse("https://attacker.example/")
	for _, tc := range []struct {
		name   string
		signCN string // the signing certificate's subject (empty: none)
		tmpl   smx509.Certificate
		ok     bool
	}{
		{"email", "localhost", smx509.Certificate{EmailAddresses: []string{"ops@attacker.example"}}, true},
		{"uri", "localhost", smx509.Certificate{URIs: []*url.URL{uri}}, true},
		{"email-and-dns", "localhost", smx509.Certificate{EmailAddresses: []string{"ops@localhost"}, DNSNames: []string{"localhost"}}, true},
		{"email-and-other-dns", "localhost", smx509.Certificate{EmailAddresses: []string{"ops@localhost"}, DNSNames: []string{"attacker.example"}}, false},
		{"email-other-subject", "localhost", smx509.Certificate{Subject: pkixName("attacker.example"), EmailAddresses: []string{"ops@localhost"}}, false},
		{"email-empty-subjects", "", smx509.Certificate{EmailAddresses: []string{"ops@localhost"}}, false},
		{"uri-empty-subjects", "", smx509.Certificate{URIs: []*url.URL{uri}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := pair
			tmpl := tc.tmpl
			if tc.signCN == "" {
				sign, key := issueLeaf(t, ca, caKey, smx509.KeyUsageDigitalSignature, "", []string{"localhost"})
				cert.SignCertificate, cert.SignKey = [][]byte{sign}, key
			} else if tmpl.Subject.CommonName == "" {
				tmpl.Subject = pkixName(tc.signCN)
			}
			tmpl.KeyUsage = smx509.KeyUsageKeyEncipherment
			cert.EncCertificate, cert.EncKey = issueTmpl(t, ca, caKey, &tmpl)
			checkServerCert(t, tc.name, cert, Certificate{}, pool, ECC_SM4_GCM_SM3, tc.ok)
		})
	}
}

// TestServerOneCertSignAndEnc: a server that sends one certificate as
// both its signing and its encryption certificate. GB/T 38636-2020
// §6.4.5.3 has the server send two (signing, then encryption), but
// neither Tongsuo's client (tls_post_process_server_certificate_ntls
// verifies each as a leaf, compares nothing), nor GmSSL's, 3.1.1
// (x509_certs_verify_tlcp) or master (x509_tlcp_cert_pair_entity_match:
// the same subject, subjectAltName, issuer and algorithms, which one
// certificate has), refuses it when the key usage allows both, and the
// client follows them: it is taken under both suites when the certificate
// allows digitalSignature and keyEncipherment, and refused as an
// encryption certificate under the ECC suites when it allows only
// digitalSignature.
func TestServerOneCertSignAndEnc(t *testing.T) {
	ca, caKey := genCA(t, "Test CA")
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	pair := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	for _, tc := range []struct {
		ku    smx509.KeyUsage
		suite uint16
		ok    bool
	}{
		{smx509.KeyUsageDigitalSignature | smx509.KeyUsageKeyEncipherment, ECC_SM4_GCM_SM3, true},
		{smx509.KeyUsageDigitalSignature | smx509.KeyUsageKeyEncipherment | smx509.KeyUsageKeyAgreement, ECDHE_SM4_GCM_SM3, true},
		{smx509.KeyUsageDigitalSignature, ECC_SM4_GCM_SM3, false},
	} {
		der, key := issueLeaf(t, ca, caKey, tc.ku, "localhost", []string{"localhost"})
		cert := Certificate{SignCertificate: [][]byte{der}, SignKey: key, EncCertificate: der, EncKey: key}
		checkServerCert(t, fmt.Sprintf("key usage %#x", tc.ku), cert, pair, pool, tc.suite, tc.ok)
	}
}

// FuzzSameName: any pair of byte strings (a certificate's subject comes
// from the peer, though only once its CA's signature verifies) is
// compared without a panic, and the comparison is reflexive and
// symmetric.
func FuzzSameName(f *testing.F) {
	f.Add([]byte{0x30, 0x00}, []byte{0x30, 0x00})
	subj := func(tag byte, v string) []byte {
		attr := append([]byte{0x06, 0x03, 0x55, 0x04, 0x03, tag, byte(len(v))}, v...)
		set := append([]byte{0x31, byte(len(attr) + 2), 0x30, byte(len(attr))}, attr...)
		return append([]byte{0x30, byte(len(set))}, set...)
	}
	f.Add(subj(asn1.TagUTF8String, " Local  Host"), subj(asn1.TagPrintableString, "local host"))
	f.Add(subj(asn1.TagBMPString, "\x00a\x00b"), subj(28, "\x00\x00\x00A\x00\x00\x00B"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if !sameName(a, a) {
			t.Fatalf("%x is not itself", a)
		}
		if sameName(a, b) != sameName(b, a) {
			t.Fatalf("sameName(%x, %x) is not symmetric", a, b)
		}
	})
}

// checkServerCert has a client trusting pool connect under suite to a
// server presenting cert (under ECDHE, with mutual authentication: the
// client presents pair), and fails t, naming what, unless the handshake
// completes (ok) or the client refuses the server's certificates with
// bad_certificate; it returns the server's error.
func checkServerCert(t *testing.T, what string, cert, pair Certificate, pool *smx509.CertPool, suite uint16, ok bool) error {
	t.Helper()
	scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{suite}}
	ccfg := &Config{RootCAs: pool, ServerName: "localhost", CipherSuites: []uint16{suite}}
	if suite == ECDHE_SM4_GCM_SM3 {
		scfg.ClientAuth, scfg.ClientCAs = RequireAndVerifyClientCert, pool
		ccfg.Certificates = []Certificate{pair}
	}
	cerr, serr := handshakePair(t, scfg, ccfg)
	if ok {
		if cerr != nil || serr != nil {
			t.Fatalf("%s, %s: client %v, server %v; want a handshake", what, CipherSuiteName(suite), cerr, serr)
		}
		return nil
	}
	if a, isAlert := alertOf(cerr); !isAlert || a != AlertBadCertificate {
		t.Fatalf("%s, %s: client error %v, want bad_certificate", what, CipherSuiteName(suite), cerr)
	}
	return serr
}
