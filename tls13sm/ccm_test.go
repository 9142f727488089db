package tls13sm

import (
	"bytes"
	"crypto/rand"
	"testing"

	gmcipher "github.com/emmansun/gmsm/cipher"
	"github.com/emmansun/gmsm/sm4"
)

// TestCCMMatchesGmsm checks the record-layer CCM against gmsm's
// cipher.NewCCM (used out of place, where it is correct) for many lengths.
func TestCCMMatchesGmsm(t *testing.T) {
	key := make([]byte, 16)
	rand.Read(key)
	b, _ := sm4.NewCipher(key)
	ref, err := gmcipher.NewCCM(b)
	if err != nil {
		t.Fatal(err)
	}
	ours := newSM4CCM(b)
	nonce := make([]byte, 12)
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 100, 127, 128, 129, 255, 256, 1000, 4096, 16385} {
		for _, aadLen := range []int{0, 5, 13, 20, 40} {
			pt := make([]byte, n)
			aad := make([]byte, aadLen)
			rand.Read(pt)
			rand.Read(aad)
			rand.Read(nonce)
			want := ref.Seal(nil, nonce, pt, aad)
			if got := ours.Seal(nil, nonce, pt, aad); !bytes.Equal(got, want) {
				t.Fatalf("seal n=%d aad=%d differs", n, aadLen)
			}
			buf := append(make([]byte, 0, n+16), pt...)
			if got := ours.Seal(buf[:0], nonce, buf, aad); !bytes.Equal(got, want) {
				t.Fatalf("in-place seal n=%d aad=%d differs", n, aadLen)
			}
			ct := append([]byte(nil), want...)
			got, err := ours.Open(ct[:0], nonce, ct, aad)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("open n=%d aad=%d: %v", n, aadLen, err)
			}
			bad := append([]byte(nil), want...)
			bad[len(bad)/2] ^= 1
			if _, err := ours.Open(nil, nonce, bad, aad); err == nil {
				t.Fatalf("tampered n=%d opened", n)
			}
			if aadLen > 0 {
				aad[0] ^= 1
				if _, err := ours.Open(nil, nonce, want, aad); err == nil {
					t.Fatal("wrong AAD accepted")
				}
			}
		}
	}
}
