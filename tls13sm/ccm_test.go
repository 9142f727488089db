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

// FuzzCCM: the record-layer CCM opens what a peer sends (any record
// payload, the record header as additional data) as gmsm's cipher.NewCCM
// does: the same plaintext or an error for both, in place too, and a
// record it refuses leaves no plaintext behind in the buffer. What it
// seals opens, and the change of any one bit, or a truncation, does not.
func FuzzCCM(f *testing.F) {
	f.Add([]byte{}, []byte{23, 3, 3, 0, 16}, []byte{}, uint16(0))
	f.Add([]byte("hello"), []byte{23, 3, 3, 0, 21}, make([]byte, 21), uint16(3))
	f.Add(bytes.Repeat([]byte{0xaa}, 129), []byte{}, make([]byte, 15), uint16(200))
	key := []byte("0123456789abcdef")
	b, err := sm4.NewCipher(key)
	if err != nil {
		f.Fatal(err)
	}
	ref, err := gmcipher.NewCCM(b)
	if err != nil {
		f.Fatal(err)
	}
	ours := newSM4CCM(b)
	nonce := []byte("twelve bytes")
	f.Fuzz(func(t *testing.T, pt, aad, record []byte, flip uint16) {
		// A peer's record: whatever it holds.
		want, wantErr := ref.Open(nil, nonce, record, aad)
		got, err := ours.Open(nil, nonce, record, aad)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Open(%x): %x, %v; gmsm %x, %v", record, got, err, want, wantErr)
		}
		buf := bytes.Clone(record)
		if got, err := ours.Open(buf[:0], nonce, buf, aad); (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("in-place Open(%x): %x, %v; gmsm %x, %v", record, got, err, want, wantErr)
		} else if err != nil && len(buf) >= ccmTagSize && !bytes.Equal(buf[:len(buf)-ccmTagSize], make([]byte, len(buf)-ccmTagSize)) {
			t.Fatalf("a refused record left %x in the buffer", buf)
		}

		// A record sealed here: opens, and opens no more when changed.
		sealed := ours.Seal(nil, nonce, pt, aad)
		if w := ref.Seal(nil, nonce, pt, aad); !bytes.Equal(sealed, w) {
			t.Fatalf("Seal(%x) = %x, gmsm %x", pt, sealed, w)
		}
		if got, err := ours.Open(nil, nonce, sealed, aad); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("round trip: %x, %v", got, err)
		}
		bit := int(flip) % (8 * len(sealed))
		bad := bytes.Clone(sealed)
		bad[bit/8] ^= 1 << (bit % 8)
		if _, err := ours.Open(nil, nonce, bad, aad); err == nil {
			t.Fatalf("bit %d flipped: opened", bit)
		}
		if _, err := ours.Open(nil, nonce, sealed[:len(sealed)-1-int(flip)%len(sealed)], aad); err == nil {
			t.Fatal("a truncated record opened")
		}
	})
}
