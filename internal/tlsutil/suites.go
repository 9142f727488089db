package tlsutil

import "strings"

// SuiteNameMatches reports whether name, as a user wrote it, spells the
// cipher suite name canonical: letter case, surrounding space, a leading
// "TLS_" and the difference between '-' and '_' do not matter, so
// "tls_sm4_gcm_sm3", "SM4-GCM-SM3" and "TLS_SM4_GCM_SM3" are one name.
func SuiteNameMatches(name, canonical string) bool {
	return suiteKey(name) == suiteKey(canonical)
}

func suiteKey(s string) string {
	s = strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(s)), "-", "_")
	return strings.TrimPrefix(s, "TLS_")
}
