package testpeer

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// WithFillerCAs returns a copy of pool with 70 self-signed SM2 CAs whose
// names take about 1 KiB each: their names together exceed the 64 KiB a
// CertificateRequest's certificate_authorities can carry.
func WithFillerCAs(t testing.TB, pool *smx509.CertPool) *smx509.CertPool {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	huge := pool.Clone()
	for i := range 70 {
		tmpl := &smx509.Certificate{SerialNumber: big.NewInt(int64(5000 + i)),
			Subject:   pkix.Name{CommonName: fmt.Sprintf("filler CA %d %s", i, strings.Repeat("x", 1000))},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: smx509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := smx509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		huge.AddCert(c)
	}
	return huge
}
