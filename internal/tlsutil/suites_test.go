package tlsutil

import "testing"

func TestSuiteNameMatches(t *testing.T) {
	for _, tc := range []struct {
		name, canonical string
		want            bool
	}{
		{"TLS_SM4_GCM_SM3", "TLS_SM4_GCM_SM3", true},
		{"tls_sm4_gcm_sm3", "TLS_SM4_GCM_SM3", true},
		{" SM4-GCM-SM3 ", "TLS_SM4_GCM_SM3", true},
		{"TLS-SM4-GCM-SM3", "TLS_SM4_GCM_SM3", true},
		{"TLS_ECC_SM4_CBC_SM3", "ECC_SM4_CBC_SM3", true},
		{"ecc-sm2-sm4-cbc-sm3", "ECC-SM2-SM4-CBC-SM3", true},
		{"ECC_SM2_WITH_SM4_SM3", "ECC-SM2-WITH-SM4-SM3", true},
		{"TLS_SM4_CCM_SM3", "TLS_SM4_GCM_SM3", false},
		{"", "TLS_SM4_GCM_SM3", false},
		{"SM4GCMSM3", "TLS_SM4_GCM_SM3", false},
		{"TLS_TLS_SM4_GCM_SM3", "TLS_SM4_GCM_SM3", false},
	} {
		if got := SuiteNameMatches(tc.name, tc.canonical); got != tc.want {
			t.Errorf("SuiteNameMatches(%q, %q) = %v", tc.name, tc.canonical, got)
		}
	}
}
