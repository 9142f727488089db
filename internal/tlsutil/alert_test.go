package tlsutil

import "testing"

func TestAlertName(t *testing.T) {
	for desc, want := range map[uint8]string{
		0:   "close notify",
		21:  "decryption failed", // TLS 1.2 / TLCP; RESERVED in TLS 1.3
		42:  "bad certificate",
		48:  "unknown certificate authority",
		86:  "inappropriate fallback",
		116: "certificate required",
		120: "no application protocol",
		1:   "alert(1)",
		121: "alert(121)",
		200: "alert(200)", // GM-specific: named by tlcp, not here
		255: "alert(255)",
	} {
		if got := AlertName(desc); got != want {
			t.Errorf("AlertName(%d) = %q, want %q", desc, got, want)
		}
	}
}
