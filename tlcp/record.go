package tlcp

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"

	gmcipher "github.com/emmansun/gmsm/cipher"
	"github.com/emmansun/gmsm/sm4"

	"github.com/gmproxy/gmproxy/internal/sm3state"
	"github.com/gmproxy/gmproxy/internal/sm4ecb"
)

// Record protection of GB/T 38636 §6.3.3 (protocol-notes §2).
//
// CBC suites: MAC-then-encrypt with a fresh 16-byte explicit IV per record:
//
//	IV || SM4-CBC(IV, fragment || HMAC-SM3(seq || type || 01 01 || len || fragment) || padding)
//
// SM4 blocks run through gmsm's ECB BlockMode on the assembly (constant
// time), never through Block.Encrypt, whose amd64 default is a table
// implementation, and always a whole pass of its lanes at a time
// (internal/sm4ecb). Several records of one write are encrypted side by side:
// block i of every record goes through one ECB call. Decryption uses the
// batched ECB decrypter and XORs the chain.
//
// GCM suites: explicit_nonce(8) || SM4-GCM(fixed_iv(4) || explicit_nonce,
// fragment, AAD = seq || type || 01 01 || len) || tag(16). The explicit nonce
// is read from the wire (Tongsuo starts at a random value); we send the
// sequence number.

const (
	cbcIVLen    = 16
	macLen      = 32
	gcmExplicit = 8
	gcmTagLen   = 16
	blockLen    = 16
	// decryptChunk is the CBC decryption batch (bytes) kept per connection.
	decryptChunk = 1024
)

// recordCipher is the negotiated protection of one direction.
type recordCipher struct {
	aead    cipher.AEAD
	fixedIV [4]byte

	// cbcState is nil for GCM (so a GCM connection does not carry it).
	*cbcState
}

// cbcState is the CBC suites' part of a recordCipher (one allocation).
type cbcState struct {
	// ecbEnc and ecbDec run gmsm's constant-time assembly; every call
	// takes a whole number of its passes (sm4ecb.Lanes).
	ecbEnc, ecbDec cipher.BlockMode
	// mac is HMAC-SM3 keyed once (internal/sm3state); its compressor also
	// equalises SM3 work when padding is short (Lucky13).
	mac sm3state.HMAC
	// scratch holds a CBC decryption batch or the gathered blocks of a
	// side-by-side encryption: small for handshake-sized records, a
	// decryptChunk buffer allocated on first need.
	scratch []byte
	small   [smallScratch]byte
}

// smallScratch covers the CBC records of a handshake (Finished: 64 bytes).
const smallScratch = 128

func newRecordCipher(suite *cipherSuite, macKey, key, iv []byte) (*recordCipher, error) {
	rc := &recordCipher{}
	if err := rc.init(suite, macKey, key, iv); err != nil {
		return nil, err
	}
	return rc, nil
}

// init sets up a zero recordCipher.
func (rc *recordCipher) init(suite *cipherSuite, macKey, key, iv []byte) error {
	block, err := sm4.NewCipher(key)
	if err != nil {
		return err
	}
	if suite.aead {
		rc.aead, err = cipher.NewGCM(block)
		if err != nil {
			return err
		}
		copy(rc.fixedIV[:], iv)
		return nil
	}
	cs := &cbcState{ecbEnc: gmcipher.NewECBEncrypter(block), ecbDec: gmcipher.NewECBDecrypter(block)}
	cs.mac.SetKey(macKey)
	rc.cbcState = cs
	return nil
}

// scratchFor returns n bytes of scratch space (n <= decryptChunk).
func (rc *cbcState) scratchFor(n int) []byte {
	if n <= len(rc.small) {
		return rc.small[:n]
	}
	if rc.scratch == nil {
		rc.scratch = make([]byte, decryptChunk)
	}
	return rc.scratch[:n]
}

// halfConn is one direction of the record layer.
type halfConn struct {
	cipher *recordCipher
	next   *recordCipher // installed by ChangeCipherSpec
	seq    [8]byte
	err    error // permanent error

	nonce  [12]byte
	aad    [13]byte
	macBuf [macLen]byte
}

func (hc *halfConn) setErr(err error) error {
	if hc.err == nil {
		hc.err = err
	}
	return err
}

// errBadRecordMAC is decrypt's error for a record that does not
// authenticate; the caller sends bad_record_mac.
var errBadRecordMAC = errors.New("tlcp: record authentication failed")

func (hc *halfConn) changeCipherSpec() error {
	if hc.next == nil {
		return errorf(AlertUnexpectedMessage, "ChangeCipherSpec before the keys were computed")
	}
	hc.cipher, hc.next = hc.next, nil
	hc.seq = [8]byte{}
	return nil
}

func (hc *halfConn) incSeq() {
	for i := 7; i >= 0; i-- {
		hc.seq[i]++
		if hc.seq[i] != 0 {
			return
		}
	}
	// 2^64 records: never reached in practice; fail rather than reuse.
	panic("tlcp: sequence number wraparound")
}

func (hc *halfConn) setAAD(typ recordType, n int) {
	copy(hc.aad[:8], hc.seq[:])
	hc.aad[8] = byte(typ)
	hc.aad[9] = VersionTLCP >> 8
	hc.aad[10] = VersionTLCP & 0xff
	hc.aad[11] = byte(n >> 8)
	hc.aad[12] = byte(n)
}

// decrypt authenticates and decrypts record (header included) in place and
// returns the plaintext, a slice of record.
func (hc *halfConn) decrypt(record []byte) ([]byte, error) {
	typ := recordType(record[0])
	body := record[recordHeaderLen:]
	rc := hc.cipher
	if rc == nil {
		hc.incSeq()
		return body, nil
	}
	if rc.aead != nil {
		if len(body) < gcmExplicit+gcmTagLen {
			return nil, errBadRecordMAC
		}
		copy(hc.nonce[:4], rc.fixedIV[:])
		copy(hc.nonce[4:], body[:gcmExplicit])
		ct := body[gcmExplicit:]
		hc.setAAD(typ, len(ct)-gcmTagLen)
		pt, err := rc.aead.Open(ct[:0], hc.nonce[:], ct, hc.aad[:])
		if err != nil {
			return nil, errBadRecordMAC
		}
		hc.incSeq()
		return pt, nil
	}

	// CBC. The body length is public: IV plus at least one block holding
	// MAC and padding, a multiple of the block size.
	if len(body) < cbcIVLen+macLen+blockLen || (len(body)-cbcIVLen)%blockLen != 0 {
		return nil, errBadRecordMAC
	}
	iv, payload := body[:cbcIVLen], body[cbcIVLen:]
	hc.cbcDecrypt(rc, iv, payload)

	n := len(payload)
	padLen, good := cbcPadding(payload)
	// A padding that reaches into the MAC is bad, and leaves no data:
	// selected without a branch, which would time the padding byte.
	over := subtle.ConstantTimeLessOrEq(n-macLen+1, padLen) // padLen > n-macLen
	dataLen := subtle.ConstantTimeSelect(over, 0, n-macLen-padLen)
	good &= byte(over - 1)
	hc.setAAD(typ, dataLen)
	rc.mac.Begin()
	rc.mac.Write(hc.aad[:])
	rc.mac.Write(payload[:dataLen])
	sum := rc.mac.Finish(hc.macBuf[:0])
	// Lucky13: make the SM3 compression count independent of the padding
	// by compressing the blocks a minimal padding would have cost. The
	// number of Compress calls still differs by a few (the MAC hands its
	// whole blocks over in one call, Burn one block per call): a few
	// tens of ns against 0.2-0.3 us per block; decrypting a 288-byte
	// record with bad padding, padding 0 and padding 255 took 5.46, 5.56
	// and 5.55 us (noise).
	maxData := n - macLen - 1
	rc.mac.Compressor().Burn(sm3Blocks(maxData) - sm3Blocks(dataLen))
	macOK := subtle.ConstantTimeCompare(sum, payload[dataLen:dataLen+macLen])
	if subtle.ConstantTimeByteEq(good, 0xff)&macOK != 1 {
		return nil, errBadRecordMAC
	}
	hc.incSeq()
	return payload[:dataLen], nil
}

// sm3Blocks is the number of SM3 compressions of the inner HMAC over a
// 13-byte header and n data bytes, after the saved ipad block.
func sm3Blocks(n int) int { return (13 + n + 9 + 63) / 64 }

// cbcPadding returns the padding length (including the length byte) and
// 0xff if the TLS padding is well formed, examining up to 256 trailing bytes
// without data-dependent branches or early exits. On bad padding it returns
// a length of 1 so the MAC still covers the unchecked bytes.
func cbcPadding(p []byte) (int, byte) {
	last := p[len(p)-1]
	// good starts as "the padding fits in p".
	fits := uint32(len(p)-1) - uint32(last) // MSB clear iff len(p)-1 >= last
	good := byte(int32(^fits) >> 31)
	limit := 256
	if limit > len(p) {
		limit = len(p)
	}
	for i := 1; i <= limit; i++ {
		// inPad is 0xff when byte p[len-i] belongs to the padding (i <= last+1).
		d := uint32(last) + 1 - uint32(i)
		inPad := byte(int32(^d) >> 31)
		good &^= inPad & (p[len(p)-i] ^ last)
	}
	// Collapse to 0x00 / 0xff.
	good &= good << 4
	good &= good << 2
	good &= good << 1
	good = byte(int8(good) >> 7)
	return int(last&good) + 1, good
}

// cbcDecrypt decrypts payload in place, batch by batch through the ECB
// decrypter, keeping the ciphertext block each batch needs for the chain.
func (hc *halfConn) cbcDecrypt(rc *recordCipher, iv, payload []byte) {
	var prev [blockLen]byte
	copy(prev[:], iv)
	for len(payload) > 0 {
		k := len(payload)
		if k > decryptChunk {
			k = decryptChunk
		}
		chunk := payload[:k]
		lanes := sm4ecb.Lanes(k/blockLen) * blockLen
		tmp := rc.scratchFor(lanes)
		if lanes == k {
			rc.ecbDec.CryptBlocks(tmp, chunk)
		} else {
			copy(tmp, chunk)
			rc.ecbDec.CryptBlocks(tmp, tmp)
		}
		// P_i = D(C_i) xor C_{i-1}; C_{i-1} is still intact in chunk.
		subtle.XORBytes(tmp[blockLen:], tmp[blockLen:], chunk[:k-blockLen])
		subtle.XORBytes(tmp[:blockLen], tmp[:blockLen], prev[:])
		copy(prev[:], chunk[k-blockLen:])
		copy(chunk, tmp)
		payload = payload[k:]
	}
}

// sealedLen is the body length of a record holding n plaintext bytes.
func (rc *recordCipher) sealedLen(n int) int {
	if rc == nil {
		return n
	}
	if rc.aead != nil {
		return gcmExplicit + n + gcmTagLen
	}
	p := n + macLen
	p += blockLen - p%blockLen // 1..16 bytes of padding
	return cbcIVLen + p
}

// appendRecords appends records of type typ carrying data to out, at most
// maxPlaintext bytes each (recSize if smaller), protected with hc's cipher.
// CBC records of one call are encrypted side by side.
func (hc *halfConn) appendRecords(out []byte, typ recordType, data []byte, recSize int, rnd io.Reader) ([]byte, int, error) {
	if recSize <= 0 {
		recSize = maxPlaintext // callers pass maxPlaintext; tests may exceed it
	}
	rc := hc.cipher
	start := len(out)
	records, pending := 0, 0
	var starts [maxBatchRecords]int
	for first := true; first || len(data) > 0; first = false {
		n := len(data)
		if n > recSize {
			n = recSize
		}
		frag := data[:n]
		data = data[n:]
		bodyLen := rc.sealedLen(n)
		off := len(out)
		out = growLen(out, recordHeaderLen+bodyLen)
		rec := out[off:]
		rec[0] = byte(typ)
		rec[1] = VersionTLCP >> 8
		rec[2] = VersionTLCP & 0xff
		binary.BigEndian.PutUint16(rec[3:], uint16(bodyLen))
		body := rec[recordHeaderLen:]
		switch {
		case rc == nil:
			copy(body, frag)
		case rc.aead != nil:
			copy(body[:gcmExplicit], hc.seq[:])
			copy(hc.nonce[:4], rc.fixedIV[:])
			copy(hc.nonce[4:], hc.seq[:])
			hc.setAAD(typ, n)
			rc.aead.Seal(body[gcmExplicit:gcmExplicit], hc.nonce[:], frag, hc.aad[:])
		default:
			if _, err := io.ReadFull(rnd, body[:cbcIVLen]); err != nil {
				return out[:start], 0, err
			}
			p := body[cbcIVLen:]
			copy(p, frag)
			hc.setAAD(typ, n)
			rc.mac.Begin()
			rc.mac.Write(hc.aad[:])
			rc.mac.Write(frag)
			rc.mac.Finish(p[n:n])
			padLen := len(p) - n - macLen // 1..16 bytes, each of value padLen-1
			for i := n + macLen; i < len(p); i++ {
				p[i] = byte(padLen - 1)
			}
			starts[pending] = off + recordHeaderLen
			pending++
		}
		hc.incSeq()
		records++
		if pending == maxBatchRecords || (pending > 0 && len(data) == 0) {
			hc.cbcEncryptBatch(rc, out, starts[:pending])
			pending = 0
		}
	}
	return out, records, nil
}

// maxBatchRecords is how many CBC records are encrypted side by side.
const maxBatchRecords = 16

// cbcEncryptBatch CBC-encrypts the records whose bodies start at starts
// (IV first, then whole blocks up to the next record header or the end of
// buf) side by side: round i gathers block i of each record still running,
// XORs it with that record's previous ciphertext block, encrypts all of them
// in one ECB call and scatters them back.
func (hc *halfConn) cbcEncryptBatch(rc *recordCipher, buf []byte, starts []int) {
	var ends [maxBatchRecords]int
	maxBlocks := 0
	for i, s := range starts {
		n := int(binary.BigEndian.Uint16(buf[s-2:])) - cbcIVLen
		ends[i] = s + cbcIVLen + n
		if b := n / blockLen; b > maxBlocks {
			maxBlocks = b
		}
	}
	g := rc.scratchFor(sm4ecb.Lanes(len(starts)) * blockLen)
	for round := 0; round < maxBlocks; round++ {
		k := 0
		for i, s := range starts {
			off := s + cbcIVLen + round*blockLen
			if off >= ends[i] {
				continue
			}
			xor16(g[k*blockLen:], buf[off:], buf[off-blockLen:])
			k++
		}
		// Unused lanes carry whatever the scratch held: their output
		// is dropped.
		lanes := sm4ecb.Lanes(k) * blockLen
		rc.ecbEnc.CryptBlocks(g[:lanes], g[:lanes])
		k = 0
		for i, s := range starts {
			off := s + cbcIVLen + round*blockLen
			if off >= ends[i] {
				continue
			}
			copy(buf[off:off+blockLen], g[k*blockLen:(k+1)*blockLen])
			k++
		}
	}
}

// xor16 sets dst[:16] = a[:16] ^ b[:16].
func xor16(dst, a, b []byte) {
	_ = dst[15]
	_ = a[15]
	_ = b[15]
	binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(a)^binary.LittleEndian.Uint64(b))
	binary.LittleEndian.PutUint64(dst[8:], binary.LittleEndian.Uint64(a[8:])^binary.LittleEndian.Uint64(b[8:]))
}

// cbcRecordSize picks the record size of a CBC write of n bytes: CBC
// encryption is serial within a record, so a write is cut into up to
// maxBatchRecords records of even size, at least minCBCRecord bytes, that
// are then encrypted side by side through the multi-block SM4 path.
func cbcRecordSize(n int) int {
	r := min(max(n/minCBCRecord, 1), maxBatchRecords)
	return min((n+r-1)/r, maxPlaintext)
}

// minCBCRecord is the smallest record a CBC write is cut into. Each record
// adds 54 to 69 bytes (header, IV, MAC, padding), at most 13.5 % of 512;
// in exchange a 1200-byte HTTP response (two records) costs 14 µs to seal
// instead of 23 µs, 2 KiB 18 µs instead of 38 µs, 4 KiB 25 µs instead of
// 45 µs (BenchmarkRecordCBCWrite1K and a size sweep, constant-time SM4,
// against 2048 as the minimum before).
const minCBCRecord = 512

// growLen extends b by n bytes, reallocating if needed.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*cap(b)+n)
	copy(nb, b)
	return nb
}
