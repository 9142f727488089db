package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"fmt"
	"io"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// SM2 in TLCP (GB/T 38636 §6.4.5.4, protocol-notes §6.1): SM2-with-SM3 signatures
// with the default ID 1234567812345678, DER r,s.

// signSM2 signs msg with key. An in-process *sm2.PrivateKey (also behind
// a wrapper's Unwrap) is given the digest e = SM3(Z_A || msg) computed here
// with the cached Z_A, which gmsm signs as is; any other signer (a key
// server, hardware, an unknown wrapper) gets the message with the SM2
// signer option and computes Z_A itself.
func signSM2(ctx context.Context, key crypto.Signer, rand io.Reader, msg []byte) ([]byte, error) {
	if priv := smkey.InProcessSM2(key); priv != nil {
		if za, ok := sm2ZA(&priv.PublicKey); ok {
			e := sm2Digest(&za, msg)
			// Not an SM2SignerOption: gmsm signs e as the digest.
			return smkey.Sign(ctx, key, rand, e[:], crypto.Hash(0))
		}
	}
	return smkey.Sign(ctx, key, rand, msg, smkey.DefaultSM2SignerOpts)
}

// verifySM2 checks an SM2 signature with the default ID: e = SM3(Z_A ||
// msg) with the cached Z_A, then the full verification of (r, s) over e.
func verifySM2(pub crypto.PublicKey, msg, sig []byte) bool {
	ep, ok := pub.(*ecdsa.PublicKey)
	if !ok || ep.Curve != sm2.P256() {
		return false
	}
	za, ok := sm2ZA(ep)
	if !ok {
		return false
	}
	e := sm2Digest(&za, msg)
	return sm2.VerifyASN1(ep, e[:], sig)
}

// sm2Digest returns SM3(za || msg), the e of GB/T 32918.2.
func sm2Digest(za *[sm3.Size]byte, msg []byte) [sm3.Size]byte {
	h := sm3.New()
	h.Write(za[:])
	h.Write(msg)
	var e [sm3.Size]byte
	h.Sum(e[:0])
	return e
}

// Z_A (GB/T 32918.2 §5.5: SM3 over the ID's length and value, the curve
// parameters and the public key, four SM3 compressions) depends only on
// the public key and the ID, which TLCP fixes to the default. It is cached
// by the public point itself (smkey.SM2Point), so an entry can only ever
// serve the key it was computed for.
var zaCache = lru.New[[65]byte, [sm3.Size]byte](1024, time.Hour)

// sm2ZA returns Z_A of pub with the default ID.
func sm2ZA(pub *ecdsa.PublicKey) ([sm3.Size]byte, bool) {
	id, ok := smkey.SM2Point(pub)
	if !ok {
		return [sm3.Size]byte{}, false
	}
	if za, ok := zaCache.Get(id); ok {
		return za, true
	}
	z, err := sm2.CalculateZA(pub, nil)
	if err != nil || len(z) != sm3.Size {
		return [sm3.Size]byte{}, false
	}
	za := [sm3.Size]byte(z)
	zaCache.Put(id, za)
	return za, true
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
// never modified, so sharing them is safe. Only certificates up to
// maxCachedCert bytes are kept, each parsed from a copy of its own (a
// parsed certificate points into the bytes it was parsed from, here the
// handshake flight): the cache holds unverified certificates any peer can
// send, so 1024 of them stay within a few megabytes.
var parsedCerts = lru.New[string, *smx509.Certificate](1024, time.Hour)

// maxCachedCert bounds the certificates parsedCerts keeps; real ones are
// well under it.
const maxCachedCert = 4096

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
		cacheable := len(r) <= maxCachedCert
		if cacheable {
			r = bytes.Clone(r)
		}
		c, err := smx509.ParseCertificate(r)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		if cacheable {
			parsedCerts.Put(string(r), c)
		}
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
func certAlert(err error) Alert {
	switch e := err.(type) {
	case smx509.UnknownAuthorityError:
		return AlertUnknownCA
	case smx509.CertificateInvalidError:
		if e.Reason == smx509.Expired {
			return AlertCertificateExpired
		}
		return AlertBadCertificate
	}
	return AlertBadCertificate
}
