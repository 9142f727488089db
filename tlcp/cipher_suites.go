package tlcp

import (
	"fmt"
	"strings"

	"github.com/gmproxy/gmproxy/internal/suite"
)

// Cipher suites of GB/T 38636-2020 §6.4.5.2.1 implemented here.
const (
	ECC_SM4_CBC_SM3   uint16 = 0xe013
	ECC_SM4_GCM_SM3   uint16 = 0xe053
	ECDHE_SM4_CBC_SM3 uint16 = 0xe011
	ECDHE_SM4_GCM_SM3 uint16 = 0xe051
)

// cipherSuite describes one suite. All four use SM3 for the PRF and the
// handshake hash and SM4 with 16-byte keys.
type cipherSuite struct {
	id     uint16
	name   string // Tongsuo spelling
	gbName string // GB/T and GmSSL spelling, without TLS_
	alias  string // older Tongsuo/GmSSL 2 spelling
	ecdhe  bool
	aead   bool
	keyLen int
	macLen int // CBC only
	ivLen  int // key-block IV: 16 (CBC, unused) or 4 (GCM fixed IV)
}

var cipherSuites = []*cipherSuite{
	{id: ECC_SM4_GCM_SM3, name: "ECC-SM2-SM4-GCM-SM3", gbName: "ECC_SM4_GCM_SM3", alias: "ECC-SM2-WITH-SM4-GCM-SM3", aead: true, keyLen: 16, ivLen: 4},
	{id: ECC_SM4_CBC_SM3, name: "ECC-SM2-SM4-CBC-SM3", gbName: "ECC_SM4_CBC_SM3", alias: "ECC-SM2-WITH-SM4-SM3", keyLen: 16, macLen: 32, ivLen: 16},
	{id: ECDHE_SM4_GCM_SM3, name: "ECDHE-SM2-SM4-GCM-SM3", gbName: "ECDHE_SM4_GCM_SM3", alias: "ECDHE-SM2-WITH-SM4-GCM-SM3", ecdhe: true, aead: true, keyLen: 16, ivLen: 4},
	{id: ECDHE_SM4_CBC_SM3, name: "ECDHE-SM2-SM4-CBC-SM3", gbName: "ECDHE_SM4_CBC_SM3", alias: "ECDHE-SM2-WITH-SM4-SM3", ecdhe: true, keyLen: 16, macLen: 32, ivLen: 16},
}

// defaultCipherSuites is the default server preference: GCM first.
var defaultCipherSuites = []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3}

// CipherSuites returns the IDs of all implemented suites, default order.
func CipherSuites() []uint16 { return append([]uint16(nil), defaultCipherSuites...) }

func cipherSuiteByID(id uint16) *cipherSuite { return suite.ByID(cipherSuites, id) }

// SuiteID and SuiteName make the table usable by the shared lookups.
func (s *cipherSuite) SuiteID() uint16   { return s.id }
func (s *cipherSuite) SuiteName() string { return s.name }

// CipherSuiteName returns Tongsuo's name for a suite ("ECC-SM2-SM4-GCM-SM3"), or "0xXXXX" for an unknown one.
func CipherSuiteName(id uint16) string { return suite.Name(cipherSuites, id) }

// ParseCipherSuite accepts the spellings users know, case-insensitively:
// Tongsuo's "ECC-SM2-SM4-CBC-SM3", the older "ECC-SM2-WITH-SM4-SM3", the
// GB/T "ECC_SM4_CBC_SM3", GmSSL's "TLS_ECC_SM4_CBC_SM3", and "0xE013".
func ParseCipherSuite(name string) (uint16, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if strings.HasPrefix(n, "0X") {
		var v uint16
		if _, err := fmt.Sscanf(n[2:], "%X", &v); err == nil && cipherSuiteByID(v) != nil {
			return v, nil
		}
	}
	for _, s := range cipherSuites {
		for _, cand := range []string{s.name, s.gbName, s.alias} {
			if suite.NameMatches(name, cand) {
				return s.id, nil
			}
		}
	}
	return 0, fmt.Errorf("tlcp: unknown cipher suite %q", name)
}

// mutualCipherSuite returns the first suite of pref that the peer offered.
func mutualCipherSuite(pref, offered []uint16) *cipherSuite {
	for _, id := range pref {
		for _, o := range offered {
			if o == id {
				if s := cipherSuiteByID(id); s != nil {
					return s
				}
			}
		}
	}
	return nil
}
