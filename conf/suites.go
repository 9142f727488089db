package conf

import "strings"

// Cipher suite name tables. conf must not import the protocol packages, so
// the names users write are resolved here to the wire values (identical in
// Tongsuo, GmSSL, gotlcp and GB/T 38636-2020; RFC 8998 for TLS 1.3).

// TLCP suite values.
const (
	TLCPECCSM4CBCSM3   uint16 = 0xe013
	TLCPECCSM4GCMSM3   uint16 = 0xe053
	TLCPECDHESM4CBCSM3 uint16 = 0xe011
	TLCPECDHESM4GCMSM3 uint16 = 0xe051
)

// TLS 1.3 SM suite values (RFC 8998).
const (
	TLS13SM4GCMSM3 uint16 = 0x00c6
	TLS13SM4CCMSM3 uint16 = 0x00c7
)

type suiteName struct {
	id        uint16
	canonical string   // the name written in the normalised configuration
	aliases   []string // other spellings, compared after normalizeSuite
}

var tlcpSuites = []suiteName{
	{TLCPECCSM4GCMSM3, "ECC-SM2-SM4-GCM-SM3", []string{"ECC_SM4_GCM_SM3", "ECC_SM2_WITH_SM4_GCM_SM3", "ECC_SM4_GCM"}},
	{TLCPECCSM4CBCSM3, "ECC-SM2-SM4-CBC-SM3", []string{"ECC_SM4_CBC_SM3", "ECC_SM2_WITH_SM4_SM3", "ECC_SM4_SM3", "ECC_SM4_CBC"}},
	{TLCPECDHESM4GCMSM3, "ECDHE-SM2-SM4-GCM-SM3", []string{"ECDHE_SM4_GCM_SM3", "ECDHE_SM2_WITH_SM4_GCM_SM3", "ECDHE_SM4_GCM"}},
	{TLCPECDHESM4CBCSM3, "ECDHE-SM2-SM4-CBC-SM3", []string{"ECDHE_SM4_CBC_SM3", "ECDHE_SM2_WITH_SM4_SM3", "ECDHE_SM4_SM3", "ECDHE_SM4_CBC"}},
}

var tls13SMSuites = []suiteName{
	{TLS13SM4GCMSM3, "TLS_SM4_GCM_SM3", []string{"SM4_GCM"}},
	{TLS13SM4CCMSM3, "TLS_SM4_CCM_SM3", []string{"SM4_CCM"}},
}

// normalizeSuite upper-cases, turns '-' into '_' and drops a TLS_ prefix.
func normalizeSuite(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	s = strings.ReplaceAll(s, "-", "_")
	return strings.TrimPrefix(s, "TLS_")
}

func lookupSuite(table []suiteName, name string) (suiteName, bool) {
	n := normalizeSuite(name)
	for _, s := range table {
		if n == normalizeSuite(s.canonical) {
			return s, true
		}
		for _, a := range s.aliases {
			if n == a {
				return s, true
			}
		}
	}
	return suiteName{}, false
}

// TLCPSuite resolves a TLCP suite name in any common spelling
// (ECC-SM2-SM4-CBC-SM3, ECC-SM2-WITH-SM4-SM3, ECC_SM4_CBC_SM3,
// TLS_ECC_SM4_CBC_SM3, …; case-insensitive) to its value and Tongsuo name.
func TLCPSuite(name string) (id uint16, canonical string, ok bool) {
	s, ok := lookupSuite(tlcpSuites, name)
	return s.id, s.canonical, ok
}

// TLS13SMSuite resolves TLS_SM4_GCM_SM3 / TLS_SM4_CCM_SM3 (any case, with
// or without TLS_, '-' or '_') to its value and RFC 8998 name.
func TLS13SMSuite(name string) (id uint16, canonical string, ok bool) {
	s, ok := lookupSuite(tls13SMSuites, name)
	return s.id, s.canonical, ok
}

// IsECDHE reports whether a TLCP suite value is an ECDHE suite (these need
// the client's sign/enc certificates).
func IsECDHE(id uint16) bool { return id == TLCPECDHESM4CBCSM3 || id == TLCPECDHESM4GCMSM3 }

func suiteNames(table []suiteName) []string {
	out := make([]string, len(table))
	for i, s := range table {
		out[i] = s.canonical
	}
	return out
}
