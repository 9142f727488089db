package smkey

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"

	"github.com/emmansun/gmsm/pkcs"
	"github.com/emmansun/gmsm/sm3"
	"golang.org/x/crypto/scrypt"
)

// The key derivations of the encrypted PKCS#8 keys gmsm's pkcs8 decrypts,
// registered in place of gmsm's own (pkcs.RegisterKDF, its documented
// extension point), for two reasons.
//
// PBKDF2 (RFC 8018 §5.2) knows both object identifiers HMAC-SM3 goes by:
// 1.2.156.10197.1.401.2, which GmSSL writes and gmsm reads, and
// 1.2.156.10197.1.401.3.1, OpenSSL's and Tongsuo's "hmacWithSM3" (openssl
// pkcs8 -topk8 -v2 sm4-cbc -v2prf hmacWithSM3), which gmsm refuses
// ("unsupported hash function").
//
// Each bounds the work the file asks for: gmsm derives with whatever
// iteration count or scrypt cost the file names, so that one key file
// could hold gmproxy's start, every reload and gmproxy check for hours of
// CPU, or end it out of memory (scrypt allocates 128·N·r bytes).
var (
	oidPBKDF2         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidSMPBKDF        = asn1.ObjectIdentifier{1, 2, 156, 10197, 6, 4, 1, 5, 1} // the SM identifier of PBKDF2, HMAC-SM3 by default
	oidScrypt         = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11591, 4, 11}
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
	pkcs.RegisterKDF(oidSMPBKDF, func() pkcs.KDFParameters { return new(pbkdf2Params) })
	pkcs.RegisterKDF(oidScrypt, func() pkcs.KDFParameters { return new(scryptParams) })
}

// errKDFWork is the failure of an encrypted key whose key derivation asks
// for more work than maxKDFIterations or maxScryptCost.
var errKDFWork = errors.New("more key-derivation work than gmproxy allows; re-encrypt the key with the defaults: openssl pkcs8 -topk8 -v2 sm4-cbc -v2prf hmacWithSM3 -in KEY -out KEY.p8")

// pbkdf2Params is PBKDF2-params (RFC 8018 Appendix A.2); the PRF defaults
// to HMAC-SHA1.
type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLen         int                      `asn1:"optional"`
	PRF            pkix.AlgorithmIdentifier `asn1:"optional"`
}

// maxKDFIterations bounds the iterations of PBKDF2 and PBES1 (several
// seconds of HMAC-SM3), far above what tools write (OpenSSL 2048, GmSSL
// 65536).
const maxKDFIterations = 10_000_000

func (p pbkdf2Params) DeriveKey(oidKDF asn1.ObjectIdentifier, password []byte, size int) ([]byte, error) {
	var h func() hash.Hash
	switch alg := p.PRF.Algorithm; {
	case len(alg) == 0 && oidKDF.Equal(oidSMPBKDF):
		h = sm3.New
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
	if p.IterationCount < 1 {
		return nil, errors.New("pbkdf2: iteration count out of range")
	}
	if p.IterationCount > maxKDFIterations {
		return nil, fmt.Errorf("PBKDF2 with %d iterations, at most %d: %w", p.IterationCount, maxKDFIterations, errKDFWork)
	}
	return pbkdf2.Key(h, string(password), p.Salt, p.IterationCount, size)
}

func (p pbkdf2Params) KeyLength() int { return p.KeyLen }

// scryptParams is scrypt-params (RFC 7914 §7.1).
type scryptParams struct {
	Salt                     []byte
	CostParameter            int
	BlockSize                int
	ParallelizationParameter int
	KeyLen                   int `asn1:"optional"`
}

// maxScryptCost bounds N·r·p, the work of scrypt in 128-byte blocks: at
// most 128 MiB of memory and under a second, eight times what OpenSSL's
// defaults ask (N 16384, r 8, p 1).
const maxScryptCost = 1 << 20

func (p scryptParams) DeriveKey(_ asn1.ObjectIdentifier, password []byte, size int) ([]byte, error) {
	n, r, par := p.CostParameter, p.BlockSize, p.ParallelizationParameter
	if n < 2 || r < 1 || par < 1 {
		return nil, errors.New("scrypt: parameters out of range")
	}
	if n > maxScryptCost || r > maxScryptCost/n || par > maxScryptCost/(n*r) {
		return nil, fmt.Errorf("scrypt with N %d, r %d, p %d, N·r·p at most %d: %w", n, r, par, maxScryptCost, errKDFWork)
	}
	return scrypt.Key(password, p.Salt, n, r, par, size)
}

func (p scryptParams) KeyLength() int { return p.KeyLen }
