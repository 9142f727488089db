package tlcp

import (
	"bytes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"io"
	"testing"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
)

// TestCBCRecordSizes: a CBC write is cut into even records of at least
// minCBCRecord bytes, at most maxBatchRecords of them (then larger, up to
// maxPlaintext), so that they are encrypted side by side.
func TestCBCRecordSizes(t *testing.T) {
	for _, c := range []struct{ n, size int }{
		{0, 0},
		{100, 100},
		{minCBCRecord*2 - 1, minCBCRecord*2 - 1}, // one record: two would be under the minimum
		{minCBCRecord * 2, minCBCRecord},
		{1200, 600},
		{8192, 512},
		{8193, 513}, // 16 records, the last shorter
		{65536, 4096},
		{300000, maxPlaintext},
	} {
		if got := cbcRecordSize(c.n); got != c.size {
			t.Errorf("cbcRecordSize(%d) = %d, want %d", c.n, got, c.size)
		}
	}
}

// TestCBCWriteMatchesReference: every CBC write, whatever its size and so
// however many records it is cut into and however many of gmsm's ECB
// lanes go unused, produces records that a reference decryption (gmsm's
// CBC mode, crypto/hmac with SM3, both independent of this package's
// side-by-side encryption) opens to the data written, with the padding
// and MAC of GB/T 38636 §6.3.3.4; and this package's reader opens them too.
func TestCBCWriteMatchesReference(t *testing.T) {
	key := bytes.Repeat([]byte{3}, 64) // connectedPair's keys
	macKey, encKey := key[:32], key[32:48]
	block, err := sm4.NewCipher(encKey)
	if err != nil {
		t.Fatal(err)
	}
	w, r, lc := connectedPair(t, ECC_SM4_CBC_SM3)
	seq := uint64(0)
	for _, n := range []int{1, 15, 16, 17, 100, 511, 512, 1023, 1024, 1200, 2048, 3000, 4095, 8192, 8193, 16385, 40000, 65536, 300001} {
		data := make([]byte, n)
		rand.Read(data)
		lc.buf, lc.off = lc.buf[:0], 0
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		wire := append([]byte(nil), lc.buf...)
		// Write hands the record layer chunks of maxWriteChunk.
		var want []int
		for rem := n; rem > 0; {
			chunk := min(rem, maxWriteChunk)
			rem -= chunk
			for size := cbcRecordSize(chunk); chunk > 0; chunk -= min(size, chunk) {
				want = append(want, min(size, chunk))
			}
		}
		var got []byte
		for recs := 0; len(wire) > 0; recs++ {
			if len(wire) < recordHeaderLen || wire[0] != byte(recordTypeApplicationData) {
				t.Fatalf("write of %d: record %d: bad header %x", n, recs, wire[:min(len(wire), recordHeaderLen)])
			}
			body := wire[recordHeaderLen : recordHeaderLen+int(binary.BigEndian.Uint16(wire[3:]))]
			wire = wire[recordHeaderLen+len(body):]
			if len(body) < cbcIVLen+macLen+1 || (len(body)-cbcIVLen)%blockLen != 0 {
				t.Fatalf("write of %d: record %d: body of %d bytes", n, recs, len(body))
			}
			p := make([]byte, len(body)-cbcIVLen)
			cipher.NewCBCDecrypter(block, body[:cbcIVLen]).CryptBlocks(p, body[cbcIVLen:])
			pad := int(p[len(p)-1]) + 1
			for _, b := range p[len(p)-pad:] {
				if int(b) != pad-1 {
					t.Fatalf("write of %d: record %d: bad padding % x", n, recs, p[len(p)-pad:])
				}
			}
			frag, mac := p[:len(p)-pad-macLen], p[len(p)-pad-macLen:len(p)-pad]
			h := hmac.New(sm3.New, macKey)
			var hdr [13]byte
			binary.BigEndian.PutUint64(hdr[:], seq)
			hdr[8], hdr[9], hdr[10] = byte(recordTypeApplicationData), VersionTLCP>>8, VersionTLCP&0xff
			binary.BigEndian.PutUint16(hdr[11:], uint16(len(frag)))
			h.Write(hdr[:])
			h.Write(frag)
			if !hmac.Equal(h.Sum(nil), mac) {
				t.Fatalf("write of %d: record %d: MAC does not match", n, recs)
			}
			if recs >= len(want) || len(frag) != want[recs] {
				t.Fatalf("write of %d: record %d carries %d bytes; want records of %v", n, recs, len(frag), want)
			}
			got = append(got, frag...)
			seq++
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("write of %d: the records decrypt to other data", n)
		}
		back := make([]byte, n)
		if _, err := io.ReadFull(r, back); err != nil || !bytes.Equal(back, data) {
			t.Fatalf("write of %d: read back: %v", n, err)
		}
	}
}
