package suite

import "testing"

func TestNameMatches(t *testing.T) {
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
		if got := NameMatches(tc.name, tc.canonical); got != tc.want {
			t.Errorf("NameMatches(%q, %q) = %v", tc.name, tc.canonical, got)
		}
	}
}

type testSuite struct {
	id   uint16
	name string
}

func (s *testSuite) SuiteID() uint16   { return s.id }
func (s *testSuite) SuiteName() string { return s.name }

func TestByIDAndName(t *testing.T) {
	gcm := &testSuite{0x00c6, "TLS_SM4_GCM_SM3"}
	table := []*testSuite{gcm, {0x00c7, "TLS_SM4_CCM_SM3"}}
	if ByID(table, 0x00c6) != gcm || ByID(table, 0x1301) != nil {
		t.Fatal("ByID")
	}
	if got := Name(table, 0x00c7); got != "TLS_SM4_CCM_SM3" {
		t.Errorf("Name(0x00c7) = %q", got)
	}
	if got := Name(table, 0xe053); got != "0xE053" {
		t.Errorf("Name(0xe053) = %q", got)
	}
}
