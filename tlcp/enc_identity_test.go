package tlcp

import (
	"crypto/rand"
	"math/big"
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
				scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{suite}}
				ccfg := &Config{RootCAs: pool, ServerName: "localhost", CipherSuites: []uint16{suite}}
				if suite == ECDHE_SM4_GCM_SM3 {
					scfg.ClientAuth, scfg.ClientCAs = RequireAndVerifyClientCert, pool
					ccfg.Certificates = []Certificate{pair}
				}
				cerr, serr := handshakePair(t, scfg, ccfg)
				if tc.ok {
					if cerr != nil || serr != nil {
						t.Fatalf("%s: client %v, server %v; want a handshake", CipherSuiteName(suite), cerr, serr)
					}
					continue
				}
				if a, ok := alertOf(cerr); !ok || a != AlertBadCertificate {
					t.Fatalf("%s: client error %v, want bad_certificate", CipherSuiteName(suite), cerr)
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
		scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{tc.suite}}
		ccfg := &Config{RootCAs: pool, ServerName: "localhost", CipherSuites: []uint16{tc.suite}}
		if tc.suite == ECDHE_SM4_GCM_SM3 {
			scfg.ClientAuth, scfg.ClientCAs = RequireAndVerifyClientCert, pool
			ccfg.Certificates = []Certificate{pair}
		}
		cerr, serr := handshakePair(t, scfg, ccfg)
		if tc.ok {
			if cerr != nil || serr != nil {
				t.Fatalf("key usage %#x, %s: client %v, server %v; want a handshake", tc.ku, CipherSuiteName(tc.suite), cerr, serr)
			}
			continue
		}
		if a, ok := alertOf(cerr); !ok || a != AlertBadCertificate {
			t.Fatalf("key usage %#x, %s: client error %v, want bad_certificate", tc.ku, CipherSuiteName(tc.suite), cerr)
		}
	}
}
