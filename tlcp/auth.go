package tlcp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"fmt"
	"io"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// SM2 in TLCP (GB/T 38636 §6.4.5.4, digest A.6.1): SM2-with-SM3 signatures
// with the default ID 1234567812345678, DER r,s.

// signSM2 signs msg (the raw message; Z is prefixed by the signer) with key.
func signSM2(ctx context.Context, key crypto.Signer, rand io.Reader, msg []byte) ([]byte, error) {
	return smkey.Sign(ctx, key, rand, msg, sm2.DefaultSM2SignerOpts)
}

// verifySM2 checks an SM2 signature with the default ID.
func verifySM2(pub crypto.PublicKey, msg, sig []byte) bool {
	ep, ok := pub.(*ecdsa.PublicKey)
	if !ok || ep.Curve != sm2.P256() {
		return false
	}
	return sm2.VerifyASN1WithSM2(ep, nil, msg, sig)
}

func sm2Public(c *smx509.Certificate) (*ecdsa.PublicKey, error) {
	ep, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || ep.Curve != sm2.P256() {
		return nil, fmt.Errorf("certificate %q does not hold an SM2 public key (%T)", c.Subject.CommonName, c.PublicKey)
	}
	return ep, nil
}

// checkSignUsage checks that a signing certificate may sign (KeyUsage
// digitalSignature when the extension is present).
func checkSignUsage(c *smx509.Certificate) error {
	if c.KeyUsage != 0 && c.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
		return fmt.Errorf("signing certificate %q lacks the digitalSignature key usage", c.Subject.CommonName)
	}
	return nil
}

// checkEncUsage checks that an encryption certificate may be used for key
// exchange (keyEncipherment, dataEncipherment or keyAgreement).
func checkEncUsage(c *smx509.Certificate) error {
	const want = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	if c.KeyUsage != 0 && c.KeyUsage&want == 0 {
		return fmt.Errorf("encryption certificate %q lacks the keyEncipherment/dataEncipherment/keyAgreement key usage", c.Subject.CommonName)
	}
	return nil
}

// parsedCerts caches parsed peer certificates by their DER: clients and
// servers present the same certificates again and again, and parsing (with
// the SM2 point checks) costs more than the lookup. Parsed certificates are
// never modified, so sharing them is safe.
var parsedCerts = lru.New[string, *smx509.Certificate](1024, time.Hour)

// parseCertificates parses a peer's certificate list, bounded in count.
func parseCertificates(raw [][]byte) ([]*smx509.Certificate, error) {
	if len(raw) > maxCertChain {
		return nil, fmt.Errorf("%d certificates exceed the limit of %d", len(raw), maxCertChain)
	}
	certs := make([]*smx509.Certificate, len(raw))
	for i, r := range raw {
		if c, ok := parsedCerts.Get(string(r)); ok {
			certs[i] = c
			continue
		}
		c, err := smx509.ParseCertificate(r)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		parsedCerts.Put(string(r), c)
		certs[i] = c
	}
	return certs, nil
}

// verifyChain verifies leaf against roots with the other certificates as
// intermediates. dnsName is checked when not empty.
func verifyChain(leaf *smx509.Certificate, others []*smx509.Certificate, roots *smx509.CertPool, dnsName string, now time.Time, usage smx509.ExtKeyUsage) ([][]*smx509.Certificate, error) {
	inter := smx509.NewCertPool()
	for _, c := range others {
		if c != leaf {
			inter.AddCert(c)
		}
	}
	opts := smx509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		DNSName:       dnsName,
		CurrentTime:   now,
		KeyUsages:     []smx509.ExtKeyUsage{usage},
	}
	return leaf.Verify(opts)
}

// certAlert maps a verification error to an alert.
func certAlert(err error) AlertError {
	switch err.(type) {
	case smx509.UnknownAuthorityError:
		return AlertUnknownCA
	case smx509.CertificateInvalidError:
		e := err.(smx509.CertificateInvalidError)
		if e.Reason == smx509.Expired {
			return AlertCertificateExpired
		}
		return AlertBadCertificate
	}
	return AlertBadCertificate
}
