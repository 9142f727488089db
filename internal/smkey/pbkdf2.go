package smkey

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"hash"

	"github.com/emmansun/gmsm/pkcs"
	"github.com/emmansun/gmsm/sm3"
)

// PBKDF2 (RFC 8018 §5.2) for the encrypted PKCS#8 keys gmsm's pkcs8
// decrypts, registered in place of gmsm's own (pkcs.RegisterKDF, its
// documented extension point) so that it knows both object identifiers
// HMAC-SM3 goes by: 1.2.156.10197.1.401.2, which GmSSL writes and gmsm
// reads, and 1.2.156.10197.1.401.3.1, OpenSSL's and Tongsuo's
// "hmacWithSM3" (openssl pkcs8 -topk8 -v2 sm4-cbc -v2prf hmacWithSM3),
// which gmsm refuses ("unsupported hash function").
var (
	oidPBKDF2         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACWithSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACWithSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACWithSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACWithSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidHMACWithSM3    = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 401, 2}
	oidOpenSSLSM3HMAC = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 401, 3, 1}
)

func init() {
	pkcs.RegisterKDF(oidPBKDF2, func() pkcs.KDFParameters { return new(pbkdf2Params) })
}

// pbkdf2Params is PBKDF2-params (RFC 8018 Appendix A.2); the PRF defaults
// to HMAC-SHA1.
type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLen         int                      `asn1:"optional"`
	PRF            pkix.AlgorithmIdentifier `asn1:"optional"`
}

// maxPBKDF2Iterations bounds the work a key file can ask for.
const maxPBKDF2Iterations = 10_000_000

func (p pbkdf2Params) DeriveKey(_ asn1.ObjectIdentifier, password []byte, size int) ([]byte, error) {
	var h func() hash.Hash
	switch alg := p.PRF.Algorithm; {
	case len(alg) == 0, alg.Equal(oidHMACWithSHA1):
		h = sha1.New
	case alg.Equal(oidHMACWithSHA224):
		h = sha256.New224
	case alg.Equal(oidHMACWithSHA256):
		h = sha256.New
	case alg.Equal(oidHMACWithSHA384):
		h = sha512.New384
	case alg.Equal(oidHMACWithSHA512):
		h = sha512.New
	case alg.Equal(oidHMACWithSM3), alg.Equal(oidOpenSSLSM3HMAC):
		h = sm3.New
	default:
		return nil, errors.New("pbkdf2: unsupported PRF " + alg.String())
	}
	if p.IterationCount < 1 || p.IterationCount > maxPBKDF2Iterations {
		return nil, errors.New("pbkdf2: iteration count out of range")
	}
	return pbkdf2.Key(h, string(password), p.Salt, p.IterationCount, size)
}

func (p pbkdf2Params) KeyLength() int { return p.KeyLen }
