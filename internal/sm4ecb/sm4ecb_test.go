package sm4ecb

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/emmansun/gmsm/cipher"
	"github.com/emmansun/gmsm/sm4"
)

// TestLanes: a call takes whole passes, never fewer blocks than asked.
func TestLanes(t *testing.T) {
	if Width < 1 || Width > MaxWidth {
		t.Fatalf("Width %d outside 1..%d", Width, MaxWidth)
	}
	for k := 1; k <= 40; k++ {
		l := Lanes(k)
		if l < k || l%Width != 0 || l-k >= Width {
			t.Errorf("Lanes(%d) = %d with width %d", k, l, Width)
		}
	}
}

// TestSingleMatchesECB: Single's block equals gmsm's ECB encryption of
// that block alone, whatever its buffer held before, in place or not.
func TestSingleMatchesECB(t *testing.T) {
	key := make([]byte, 16)
	rand.Read(key)
	b, err := sm4.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSingle(b)
	ref := cipher.NewECBEncrypter(b)
	for i := 0; i < 50; i++ {
		src := make([]byte, 16)
		rand.Read(src)
		want := make([]byte, 16)
		ref.CryptBlocks(want, src)
		got := make([]byte, 16)
		s.Encrypt(got, src)
		if !bytes.Equal(got, want) {
			t.Fatalf("block %d: %x, want %x", i, got, want)
		}
		s.Encrypt(src, src)
		if !bytes.Equal(src, want) {
			t.Fatalf("block %d in place: %x, want %x", i, src, want)
		}
	}
}

// BenchmarkSingle: one block through a padded pass, against the ECB mode
// with one block and Block.Encrypt (which is the table code unless
// FORCE_SM4BLOCK_AESNI=1 is set, as gmproxy's daemon sets it).
func BenchmarkSingle(b *testing.B) {
	blk, _ := sm4.NewCipher(make([]byte, 16))
	buf := make([]byte, 16)
	b.Run("padded", func(b *testing.B) {
		s := NewSingle(blk)
		b.ReportAllocs()
		for b.Loop() {
			s.Encrypt(buf, buf)
		}
	})
	b.Run("ecb1", func(b *testing.B) {
		e := cipher.NewECBEncrypter(blk)
		b.ReportAllocs()
		for b.Loop() {
			e.CryptBlocks(buf, buf)
		}
	})
	b.Run("block", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			blk.Encrypt(buf, buf)
		}
	})
}
