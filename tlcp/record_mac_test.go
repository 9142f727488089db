package tlcp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/emmansun/gmsm/sm3"
)

// zeroReader is an allocation-free io.Reader of zeros (CBC IVs in tests).
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// newCBCPair returns a writing and a reading half of one CBC direction.
func newCBCPair(t testing.TB) (w, r *halfConn) {
	t.Helper()
	s := cipherSuiteByID(ECC_SM4_CBC_SM3)
	keys := make([]byte, 64)
	rand.Read(keys)
	wc, err := newRecordCipher(s, keys[:32], keys[32:48], keys[48:])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := newRecordCipher(s, keys[:32], keys[32:48], keys[48:])
	if err != nil {
		t.Fatal(err)
	}
	return &halfConn{cipher: wc}, &halfConn{cipher: rc}
}

// cbcRecord encrypts payload (whole blocks, padding included, no MAC
// computed) as a CBC record body with a zero IV under w's key.
func cbcRecord(w *halfConn, payload []byte) []byte {
	rec := make([]byte, recordHeaderLen+cbcIVLen+len(payload))
	rec[0], rec[1], rec[2] = byte(recordTypeApplicationData), VersionTLCP>>8, VersionTLCP&0xff
	rec[3], rec[4] = byte((cbcIVLen+len(payload))>>8), byte(cbcIVLen+len(payload))
	body := rec[recordHeaderLen:]
	copy(body[cbcIVLen:], payload)
	prev := body[:cbcIVLen]
	for off := cbcIVLen; off < len(body); off += blockLen {
		blk := body[off : off+blockLen]
		xor16(blk, blk, prev)
		w.cipher.ecbEnc.CryptBlocks(blk, blk)
		prev = blk
	}
	return rec
}

// TestCBCDecryptConstantSM3Work: the Lucky13 equaliser makes a CBC record's
// SM3 compression count depend only on its (public) length, whatever its
// padding says: every padding byte value, valid or not, and a genuine
// record of the same length cost the same number of compressions.
func TestCBCDecryptConstantSM3Work(t *testing.T) {
	w, r := newCBCPair(t)
	n := 0
	r.cipher.mac.Compressor().CountBlocks(&n)
	for _, plen := range []int{48, 64, 80, 96, 112, 128, 304, 320, 336, 1024} {
		// A genuine record whose payload is plen bytes: data of
		// plen-32-1 bytes (one byte of padding).
		data := make([]byte, plen-macLen-1)
		rand.Read(data)
		w.seq, r.seq = [8]byte{}, [8]byte{}
		rec, _, err := w.appendRecords(nil, recordTypeApplicationData, data, maxPlaintext, zeroReader{})
		if err != nil || len(rec) != recordHeaderLen+cbcIVLen+plen {
			t.Fatalf("plen %d: record of %d bytes, %v", plen, len(rec), err)
		}
		n = 0
		got, err := r.decrypt(rec)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("plen %d: genuine record: %v", plen, err)
		}
		want := n
		if want == 0 {
			t.Fatal("compressions not counted")
		}
		payload := make([]byte, plen)
		for pad := 0; pad < 256; pad++ {
			rand.Read(payload)
			for i := 1; i <= pad+1 && i <= plen; i++ {
				payload[plen-i] = byte(pad) // well formed where it fits
			}
			r.seq = [8]byte{}
			n = 0
			if _, err := r.decrypt(cbcRecord(w, payload)); err == nil {
				t.Fatalf("plen %d pad %d: forged record accepted", plen, pad)
			}
			if n != want {
				t.Fatalf("plen %d pad %d: %d SM3 compressions, genuine record %d", plen, pad, n, want)
			}
		}
	}
}

// TestCBCRecordMACNoAllocs: sealing and opening CBC records allocates
// nothing once the buffers exist.
func TestCBCRecordMACNoAllocs(t *testing.T) {
	w, r := newCBCPair(t)
	data := make([]byte, 1000)
	rand.Read(data)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(50, func() {
		rec, _, err := w.appendRecords(buf[:0], recordTypeApplicationData, data, maxPlaintext, zeroReader{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := r.decrypt(rec); err != nil || len(got) != len(data) {
			t.Fatal("record did not open", err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per CBC record round trip", allocs)
	}
}

// TestCBCPaddingIntoMACRefused: a padding that reaches into the MAC is
// bad even when its bytes are all right and what precedes it is the MAC
// of an empty record: a 64-byte payload of the MAC of no data whose last
// byte is 32, then 32 bytes of 32, reads as 33 bytes of padding over 31
// of MAC; it is bad_record_mac, not an empty record.
func TestCBCPaddingIntoMACRefused(t *testing.T) {
	s := cipherSuiteByID(ECC_SM4_CBC_SM3)
	keys := make([]byte, 64)
	rand.Read(keys)
	macKey := keys[:32]
	wc, err := newRecordCipher(s, macKey, keys[32:48], keys[48:])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := newRecordCipher(s, macKey, keys[32:48], keys[48:])
	if err != nil {
		t.Fatal(err)
	}
	w, r := &halfConn{cipher: wc}, &halfConn{cipher: rc}
	// A sequence number whose empty record's MAC ends in 32 (1 in 256).
	for seq := uint64(0); seq < 1<<16; seq++ {
		var hdr [13]byte
		binary.BigEndian.PutUint64(hdr[:], seq)
		hdr[8], hdr[9], hdr[10] = byte(recordTypeApplicationData), VersionTLCP>>8, VersionTLCP&0xff
		h := hmac.New(sm3.New, macKey)
		h.Write(hdr[:])
		mac := h.Sum(nil)
		if mac[macLen-1] != 32 {
			continue
		}
		payload := append(mac, bytes.Repeat([]byte{32}, 32)...)
		// The same MAC with a padding that fits is a genuine empty record.
		fits := append(append([]byte(nil), mac...), bytes.Repeat([]byte{15}, 16)...)
		binary.BigEndian.PutUint64(r.seq[:], seq)
		if got, err := r.decrypt(cbcRecord(w, fits)); err != nil || len(got) != 0 {
			t.Fatalf("seq %d: the empty record: %q, %v", seq, got, err)
		}
		binary.BigEndian.PutUint64(r.seq[:], seq)
		if got, err := r.decrypt(cbcRecord(w, payload)); err != errBadRecordMAC {
			t.Fatalf("seq %d: 33 bytes of padding over the MAC: %q, %v; want bad_record_mac", seq, got, err)
		}
		return
	}
	t.Fatal("no sequence number found")
}
