package tls13sm

import (
	"crypto/cipher"
	"fmt"

	"github.com/emmansun/gmsm/sm4"

	"github.com/gmproxy/gmproxy/internal/suite"
)

// Protocol identifiers (RFC 8446, RFC 8998 §2).
const (
	VersionTLS13 = 0x0304

	TLS_SM4_GCM_SM3 uint16 = 0x00c6
	TLS_SM4_CCM_SM3 uint16 = 0x00c7

	// CurveSM2 is the curveSM2 named group (plain ECDH on the SM2 curve).
	CurveSM2 uint16 = 0x0029
	// X25519 is accepted only outside Strict mode, when a client offers no curveSM2.
	X25519 uint16 = 0x001d

	// SM2SigSM3 is the sm2sig_sm3 signature scheme.
	SM2SigSM3 uint16 = 0x0708
)

const (
	keyLen   = 16
	ivLen    = 12
	tagLen   = 16
	aeadOver = tagLen
)

// cipherSuite describes one TLS 1.3 suite: both use SM3 for the schedule.
type cipherSuite struct {
	id   uint16
	name string
	aead func(key []byte) (cipher.AEAD, error)
}

func aeadSM4GCM(key []byte) (cipher.AEAD, error) {
	b, err := sm4.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func aeadSM4CCM(key []byte) (cipher.AEAD, error) {
	b, err := sm4.NewCipher(key)
	if err != nil {
		return nil, err
	}
	// RFC 8998 §3.5.2: nonce 12 bytes (q = 3), tag 16 bytes. See ccm.go for
	// why this is not gmsm's cipher.NewCCM (which the tests compare against).
	return newSM4CCM(b), nil
}

var cipherSuites = []*cipherSuite{
	{TLS_SM4_GCM_SM3, "TLS_SM4_GCM_SM3", aeadSM4GCM},
	{TLS_SM4_CCM_SM3, "TLS_SM4_CCM_SM3", aeadSM4CCM},
}

// defaultCipherSuites is the server preference and client offer order.
var defaultCipherSuites = []uint16{TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3}

func cipherSuiteByID(id uint16) *cipherSuite { return suite.ByID(cipherSuites, id) }

// SuiteID and SuiteName make the table usable by the shared lookups.
func (s *cipherSuite) SuiteID() uint16   { return s.id }
func (s *cipherSuite) SuiteName() string { return s.name }

// CipherSuiteName returns the IANA name of a suite, or "0xXXXX" for an unknown one.
func CipherSuiteName(id uint16) string { return suite.Name(cipherSuites, id) }

// ParseCipherSuite maps a suite name (IANA name, case-insensitive, or the
// OpenSSL/Tongsuo spelling "SM4-GCM-SM3") to its ID.
func ParseCipherSuite(name string) (uint16, error) {
	for _, s := range cipherSuites {
		if suite.NameMatches(name, s.name) {
			return s.id, nil
		}
	}
	return 0, fmt.Errorf("tls13sm: unknown cipher suite %q (want TLS_SM4_GCM_SM3 or TLS_SM4_CCM_SM3)", name)
}

// CipherSuites returns the IDs of all implemented suites, default order.
func CipherSuites() []uint16 { return append([]uint16(nil), defaultCipherSuites...) }
