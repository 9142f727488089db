package tlcp

import (
	"bytes"
	"testing"
)

// FuzzSessionState parses any bytes as a serialized session (what an opened
// ticket or a shared session store hands the server). A state that parses
// is within the bounds the server relies on, and serializing it gives back
// exactly the input: the encoding has one form, so no two inputs decode to
// one session.
func FuzzSessionState(f *testing.F) {
	s := sessionState{
		vers:        VersionTLCP,
		cipherSuite: ECC_SM4_GCM_SM3,
		createdAt:   1_800_000_000,
		master:      bytes.Repeat([]byte{7}, masterSecretLength),
		serverName:  "www.example.com",
		serverCert:  bytes.Repeat([]byte{9}, 32),
	}
	seed, err := s.marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	s.certs = [][]byte{[]byte("client certificate"), []byte("its issuer")}
	if seed, err = s.marshal(); err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add(seed[:len(seed)-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		var s sessionState
		if !s.unmarshal(data) {
			return
		}
		if len(s.master) != masterSecretLength || len(s.certs) > maxCertChain {
			t.Fatalf("parsed a state with a %d-byte master secret and %d certificates", len(s.master), len(s.certs))
		}
		for i, c := range s.certs {
			if len(c) == 0 {
				t.Fatalf("certificate %d is empty", i)
			}
		}
		out, err := s.marshal()
		if err != nil {
			t.Fatalf("a parsed state does not serialize: %v", err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("re-serialized state differs:\n in  %x\n out %x", data, out)
		}
	})
}
