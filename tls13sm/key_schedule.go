package tls13sm

import (
	"encoding"
	"encoding/binary"
	"errors"
	"hash"
	"reflect"
	"sync/atomic"

	"github.com/emmansun/gmsm/sm3"
)

// This file implements the RFC 8446 §7.1 key schedule with SM3 as the hash
// (RFC 8998 §3.4): HKDF-Extract / HKDF-Expand-Label / Derive-Secret built on
// an HMAC-SM3 whose keyed inner and outer chaining values are computed once
// per key, so that a whole handshake's schedule costs two SM3 compressions
// per key and two per derived value (62 for a full server handshake that
// issues a ticket, 80 for a resumption) and allocates nothing. The
// compressions run on gmsm's SM3 block function through sm3Compressor; the
// padding of the short messages HMAC sees here is built in place.

const (
	hashSize = sm3.Size // 32
	// sm3StateSize is the size of gmsm's marshalled SM3 state: magic,
	// chaining value, block buffer, length.
	sm3StateSize = 4 + 8*4 + sm3.BlockSize + 8
)

// Constant values of the schedule that do not depend on the handshake.
var (
	emptyHash = sm3.Sum(nil)
	zeroKey   [hashSize]byte
	// earlySecretNoPSK = HKDF-Extract(0, 0) and its "derived" child.
	earlySecretNoPSK   [hashSize]byte
	derivedNoPSKSecret [hashSize]byte
)

// zeroSaltState is HMAC-SM3 keyed with HashLen zeros, the salt of the
// early-secret extraction; noPSKSaltState is keyed with derivedNoPSKSecret,
// the salt of every handshake-secret extraction without a PSK.
var zeroSaltState, noPSKSaltState hmacState

func init() {
	sm3DirectState.Store(gmsmDigestLayoutMatches())
	var ks keySchedule
	ks.m.setKey(zeroKey[:])
	ks.m.saveState(&zeroSaltState)
	ks.extract(earlySecretNoPSK[:], nil, zeroKey[:])
	ks.deriveSecret(derivedNoPSKSecret[:], earlySecretNoPSK[:], "derived", emptyHash[:])
	ks.m.setKey(derivedNoPSKSecret[:])
	ks.m.saveState(&noPSKSaltState)
}

// sm3IV is SM3's initial chaining value (GB/T 32905-2016 §4.1).
var sm3IV = [8]uint32{0x7380166f, 0x4914b2b9, 0x172442d7, 0xda8a0600, 0xa96f30bc, 0x163138aa, 0xe38dee4d, 0xb0fb0e4e}

// sm3Compressor applies SM3's compression function to whole blocks with
// gmsm's (assembly) implementation, reached through a gmsm SM3 hash.Hash.
// Padding and buffering are done by sm3Hasher, so a derivation costs
// exactly the compressions its construction needs, without the digest
// copies of Sum or the re-padding a saved state would need. The zero value
// is ready to use.
//
// The chaining value is moved in and out of the digest directly when
// gmsm's digest has the layout of gmsmDigest (checked field by field with
// reflect, and by a known-answer test, at init); otherwise through
// UnmarshalBinary and AppendBinary, which is correct with any layout but
// adds about 70 ns per compression (a third of one).
type sm3Compressor struct {
	d    hash.Hash
	fast *gmsmDigest // d's fields, if their layout is the expected one
	un   encoding.BinaryUnmarshaler
	app  encoding.BinaryAppender
	st   [sm3StateSize]byte
	// spare is scratch for a copy of an sm3Hasher being finished (a local
	// copy would escape to the heap through the hash.Hash call).
	spare sm3Hasher
	// blocks, when not nil, counts the blocks compressed (tests).
	blocks *int
}

// gmsmDigest is the layout of gmsm v0.44's SM3 digest
// (internal/sm3.digest): chaining value, block buffer, buffered bytes,
// total length.
type gmsmDigest struct {
	h   [8]uint32
	x   [sm3.BlockSize]byte
	nx  int
	len uint64
}

// sm3DirectState says whether new sm3Compressors may use gmsmDigest's
// layout (set first thing in init; tests turn it off to exercise the
// portable path).
var sm3DirectState atomic.Bool

// gmsmDigestLayoutMatches checks that sm3.New returns a pointer to a struct
// with exactly gmsmDigest's fields (names, kinds, sizes, offsets) and that
// compressing through that layout gives SM3's known answer.
func gmsmDigestLayoutMatches() bool {
	t := reflect.TypeOf(sm3.New())
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return false
	}
	got, want := t.Elem(), reflect.TypeFor[gmsmDigest]()
	if got.Size() != want.Size() || got.NumField() != want.NumField() {
		return false
	}
	for i := range want.NumField() {
		g, w := got.Field(i), want.Field(i)
		if g.Name != w.Name || g.Offset != w.Offset || g.Type.Kind() != w.Type.Kind() || g.Type.Size() != w.Type.Size() {
			return false
		}
		if w.Type.Kind() == reflect.Array && (g.Type.Len() != w.Type.Len() || g.Type.Elem().Kind() != w.Type.Elem().Kind()) {
			return false
		}
	}
	// SM3("abc"), GB/T 32905-2016 Appendix A.1, through the direct path.
	var c sm3Compressor
	c.init(true)
	var s sm3Hasher
	s.resume(&sm3IV, 0)
	s.write(&c, []byte("abc"))
	return string(s.sum(&c, nil)) == string(sm3ABC[:])
}

var sm3ABC = sm3.Sum([]byte("abc"))

func (c *sm3Compressor) init(direct bool) {
	c.d = sm3.New()
	c.fast = nil
	if direct {
		c.fast = (*gmsmDigest)(reflect.ValueOf(c.d).UnsafePointer())
	}
	c.un = c.d.(encoding.BinaryUnmarshaler)
	c.app = c.d.(encoding.BinaryAppender)
	copy(c.st[:], "sm3\x03")
}

// compress runs the compression function over blocks (a multiple of 64
// bytes) starting from the chaining value h, which it updates.
func (c *sm3Compressor) compress(h *[8]uint32, blocks []byte) {
	if c.d == nil {
		c.init(sm3DirectState.Load())
	}
	if c.blocks != nil {
		*c.blocks += len(blocks) / sm3.BlockSize
	}
	if d := c.fast; d != nil {
		// An empty buffer: Write hands whole blocks to the block function.
		d.h, d.nx = *h, 0
		c.d.Write(blocks)
		*h = d.h
		return
	}
	// Marshalled state: magic, h, an empty buffer, and a length that is a
	// multiple of the block size (the buffer holds nothing).
	for i, v := range h {
		binary.BigEndian.PutUint32(c.st[4+4*i:], v)
	}
	clear(c.st[4+32 : sm3StateSize-8])
	binary.BigEndian.PutUint64(c.st[sm3StateSize-8:], sm3.BlockSize)
	c.un.UnmarshalBinary(c.st[:])
	c.d.Write(blocks)
	st, _ := c.app.AppendBinary(c.st[:0])
	for i := range h {
		h[i] = binary.BigEndian.Uint32(st[4+4*i:])
	}
}

// sm3Hasher is an SM3 computation in progress (a plain value: copying it
// saves its state) whose compressions run on an sm3Compressor.
type sm3Hasher struct {
	h   [8]uint32
	n   int    // bytes in buf
	len uint64 // bytes hashed so far
	buf [sm3.BlockSize]byte
}

// resume starts from a chaining value reached after prefixLen bytes (a
// multiple of the block size).
func (s *sm3Hasher) resume(h *[8]uint32, prefixLen uint64) {
	s.h, s.n, s.len = *h, 0, prefixLen
}

func (s *sm3Hasher) write(c *sm3Compressor, p []byte) {
	s.len += uint64(len(p))
	if s.n > 0 {
		k := copy(s.buf[s.n:], p)
		s.n += k
		p = p[k:]
		if s.n < sm3.BlockSize {
			return
		}
		c.compress(&s.h, s.buf[:])
		s.n = 0
	}
	if full := len(p) &^ (sm3.BlockSize - 1); full > 0 {
		c.compress(&s.h, p[:full])
		p = p[full:]
	}
	s.n = copy(s.buf[:], p)
}

// sum pads (GB/T 32905-2016 §5.2), finishes the hash and appends it to
// out. s is spent.
func (s *sm3Hasher) sum(c *sm3Compressor, out []byte) []byte {
	s.buf[s.n] = 0x80
	clear(s.buf[s.n+1:])
	if s.n+1 > sm3.BlockSize-8 {
		c.compress(&s.h, s.buf[:])
		clear(s.buf[:])
	}
	binary.BigEndian.PutUint64(s.buf[sm3.BlockSize-8:], s.len<<3)
	c.compress(&s.h, s.buf[:])
	for _, v := range s.h {
		out = binary.BigEndian.AppendUint32(out, v)
	}
	return out
}

// sm3Transcript is a handshake's running transcript hash (§4.4.1) as a
// hash.Hash: an sm3Hasher on a borrowed compressor whose Sum leaves it
// unchanged.
type sm3Transcript struct {
	s sm3Hasher
	c *sm3Compressor
}

func (t *sm3Transcript) Write(p []byte) (int, error) {
	t.s.write(t.c, p)
	return len(p), nil
}

// Sum appends the hash of what was written so far to b.
func (t *sm3Transcript) Sum(b []byte) []byte {
	t.c.spare = t.s
	return t.c.spare.sum(t.c, b)
}

func (t *sm3Transcript) Reset()         { t.s.resume(&sm3IV, 0) }
func (t *sm3Transcript) Size() int      { return hashSize }
func (t *sm3Transcript) BlockSize() int { return sm3.BlockSize }

// hmacSM3 is HMAC-SM3 (RFC 2104): the chaining values after key^ipad and
// key^opad are computed once per key, so a MAC of a short message costs two
// compressions.
type hmacSM3 struct {
	c      sm3Compressor
	s      sm3Hasher
	istate [8]uint32
	ostate [8]uint32
	pad    [sm3.BlockSize]byte
	opad   [sm3.BlockSize]byte
	sum    [hashSize]byte
	// blk is the single block of a short MAC (macShort).
	blk [sm3.BlockSize]byte
}

// maxShortMAC is the longest message macShort takes: it and SM3's padding
// (0x80 and the 8-byte length) fill one block.
const maxShortMAC = sm3.BlockSize - 9

// macShort writes HMAC(key, m.blk[:n]) under the current key to out
// (len(out) ≤ 32) for n ≤ maxShortMAC: exactly two compressions, padding
// built in place.
func (m *hmacSM3) macShort(out []byte, n int) {
	b := &m.blk
	b[n] = 0x80
	clear(b[n+1 : sm3.BlockSize-8])
	binary.BigEndian.PutUint64(b[sm3.BlockSize-8:], uint64(sm3.BlockSize+n)<<3)
	h := m.istate
	m.c.compress(&h, b[:])
	// The outer hash's one block: the inner hash, padding, length.
	for i, v := range h {
		binary.BigEndian.PutUint32(b[4*i:], v)
	}
	b[hashSize] = 0x80
	clear(b[hashSize+1 : sm3.BlockSize-8])
	binary.BigEndian.PutUint64(b[sm3.BlockSize-8:], (sm3.BlockSize+hashSize)<<3)
	h = m.ostate
	m.c.compress(&h, b[:])
	if len(out) >= hashSize {
		for i, v := range h {
			binary.BigEndian.PutUint32(out[4*i:], v)
		}
		return
	}
	for i, v := range h {
		binary.BigEndian.PutUint32(m.sum[4*i:], v)
	}
	copy(out, m.sum[:])
}

// mac writes HMAC(key, data) under the current key to out[:32].
func (m *hmacSM3) mac(out, data []byte) {
	if len(data) <= maxShortMAC {
		m.macShort(out, copy(m.blk[:], data))
		return
	}
	m.begin()
	m.write(data)
	m.finish(out[:0])
}

// setKey keys the HMAC (two compressions).
func (m *hmacSM3) setKey(key []byte) {
	if len(key) > sm3.BlockSize {
		m.s.resume(&sm3IV, 0)
		m.s.write(&m.c, key)
		key = m.s.sum(&m.c, m.sum[:0])
	}
	// key^ipad and key^opad, eight bytes at a time.
	clear(m.pad[:])
	copy(m.pad[:], key)
	for i := 0; i < sm3.BlockSize; i += 8 {
		w := binary.LittleEndian.Uint64(m.pad[i:])
		binary.LittleEndian.PutUint64(m.pad[i:], w^0x3636363636363636)
		binary.LittleEndian.PutUint64(m.opad[i:], w^0x5c5c5c5c5c5c5c5c)
	}
	m.istate = sm3IV
	m.c.compress(&m.istate, m.pad[:])
	m.ostate = sm3IV
	m.c.compress(&m.ostate, m.opad[:])
}

// hmacState is a saved keyed HMAC state.
type hmacState struct {
	istate, ostate [8]uint32
}

func (m *hmacSM3) saveState(s *hmacState) { s.istate, s.ostate = m.istate, m.ostate }

func (m *hmacSM3) loadState(s *hmacState) { m.istate, m.ostate = s.istate, s.ostate }

// begin starts a MAC under the current key.
func (m *hmacSM3) begin() { m.s.resume(&m.istate, sm3.BlockSize) }

func (m *hmacSM3) write(p []byte) { m.s.write(&m.c, p) }

// finish appends the MAC to out.
func (m *hmacSM3) finish(out []byte) []byte {
	inner := m.s.sum(&m.c, m.sum[:0])
	m.s.resume(&m.ostate, sm3.BlockSize)
	m.s.write(&m.c, inner)
	return m.s.sum(&m.c, out)
}

// keySchedule holds the scratch state of the TLS 1.3 key schedule. All
// buffers live in the struct so that no derivation allocates.
type keySchedule struct {
	m    hmacSM3
	info [2 + 1 + 255 + 1 + 255 + 1]byte
	t    [hashSize]byte
	fk   [hashSize]byte // finished_key scratch
}

// extract is HKDF-Extract(salt, ikm) (RFC 5869 §2.2); a nil salt is HashLen zeros.
func (ks *keySchedule) extract(out, salt, ikm []byte) {
	if salt == nil {
		ks.m.loadState(&zeroSaltState)
	} else {
		ks.m.setKey(salt)
	}
	ks.m.mac(out, ikm)
}

// extractHandshakeNoPSK is HKDF-Extract(Derive-Secret(early, "derived", ""),
// ikm) for a handshake without PSK, whose salt is a constant (§7.1).
func (ks *keySchedule) extractHandshakeNoPSK(out, ikm []byte) {
	ks.m.loadState(&noPSKSaltState)
	ks.m.mac(out, ikm)
}

// expand is HKDF-Expand(prk, info, len(out)) (RFC 5869 §2.3) for any length.
func (ks *keySchedule) expand(out, prk, info []byte) {
	ks.m.setKey(prk)
	ks.expandKeyed(out, info)
}

// expandKeyed is HKDF-Expand with the PRK already set by setKey.
func (ks *keySchedule) expandKeyed(out, info []byte) {
	var prev []byte
	for ctr := byte(1); len(out) > 0; ctr++ {
		ks.m.begin()
		ks.m.write(prev)
		ks.m.write(info)
		ks.info[len(ks.info)-1] = ctr
		ks.m.write(ks.info[len(ks.info)-1:])
		t := ks.m.finish(ks.t[:0])
		n := copy(out, t)
		out = out[n:]
		prev = ks.t[:]
	}
}

// buildLabel writes the HkdfLabel structure of RFC 8446 §7.1 into ks.info
// and returns it.
func (ks *keySchedule) buildLabel(label string, context []byte, length int) []byte {
	b := ks.info[:0]
	b = append(b, byte(length>>8), byte(length), byte(6+len(label)))
	b = append(b, "tls13 "...)
	b = append(b, label...)
	b = append(b, byte(len(context)))
	b = append(b, context...)
	return b
}

// expandLabelKeyed is HKDF-Expand-Label(secret, label, context, len(out))
// with secret already keyed into ks.m. len(out) must be ≤ 32 and label and
// context short (they always are in TLS 1.3).
func (ks *keySchedule) expandLabelKeyed(out []byte, label string, context []byte) {
	// HkdfLabel and the counter byte of the single HKDF-Expand block
	// usually fit in one SM3 block with the padding.
	if 2+1+6+len(label)+1+len(context)+1 <= maxShortMAC {
		b := ks.m.blk[:0]
		b = append(b, byte(len(out)>>8), byte(len(out)), byte(6+len(label)))
		b = append(b, "tls13 "...)
		b = append(b, label...)
		b = append(b, byte(len(context)))
		b = append(b, context...)
		b = append(b, 1)
		ks.m.macShort(out, len(b))
		return
	}
	info := ks.buildLabel(label, context, len(out))
	ks.m.begin()
	ks.m.write(info)
	ks.info[len(ks.info)-1] = 1
	ks.m.write(ks.info[len(ks.info)-1:])
	if len(out) == hashSize {
		ks.m.finish(out[:0])
		return
	}
	copy(out, ks.m.finish(ks.t[:0]))
}

// expandLabel is HKDF-Expand-Label(secret, label, context, len(out)).
func (ks *keySchedule) expandLabel(out, secret []byte, label string, context []byte) {
	ks.m.setKey(secret)
	ks.expandLabelKeyed(out, label, context)
}

// deriveSecret is Derive-Secret(secret, label, transcript) with the
// transcript hash already computed.
func (ks *keySchedule) deriveSecret(out, secret []byte, label string, transcriptHash []byte) {
	ks.expandLabel(out[:hashSize], secret, label, transcriptHash)
}

// trafficKeys derives the record key (16) and IV (12) of RFC 8446 §7.3.
func (ks *keySchedule) trafficKeys(key, iv, secret []byte) {
	ks.m.setKey(secret)
	ks.expandLabelKeyed(key[:16], "key", nil)
	ks.expandLabelKeyed(iv[:12], "iv", nil)
}

// trafficKeysFinished derives the record key, IV and finished_key from one
// handshake traffic secret with a single keying of the HMAC.
func (ks *keySchedule) trafficKeysFinished(key, iv, finishedKey, secret []byte) {
	ks.m.setKey(secret)
	ks.expandLabelKeyed(key[:keyLen], "key", nil)
	ks.expandLabelKeyed(iv[:ivLen], "iv", nil)
	ks.expandLabelKeyed(finishedKey[:hashSize], "finished", nil)
}

// macWithKey is HMAC(key, data) into out (a Finished or binder value when
// key is a finished_key).
func (ks *keySchedule) macWithKey(out, key, data []byte) {
	ks.m.setKey(key)
	ks.m.mac(out, data)
}

// handshakeTrafficSecrets derives both handshake traffic secrets and the
// "derived" salt for the master secret with one keying (RFC 8446 §7.1).
func (ks *keySchedule) handshakeTrafficSecrets(chs, shs, derived, handshakeSecret, th []byte) {
	ks.m.setKey(handshakeSecret)
	ks.expandLabelKeyed(chs[:hashSize], "c hs traffic", th)
	ks.expandLabelKeyed(shs[:hashSize], "s hs traffic", th)
	ks.expandLabelKeyed(derived[:hashSize], "derived", emptyHash[:])
}

// pskSecrets derives the early secret of a resumption PSK, its binder key
// and the "derived" salt for the handshake secret (RFC 8446 §7.1).
func (ks *keySchedule) pskSecrets(early, binderKey, derived, psk []byte) {
	ks.extract(early, nil, psk)
	ks.m.setKey(early)
	ks.expandLabelKeyed(binderKey[:hashSize], "res binder", emptyHash[:])
	ks.expandLabelKeyed(derived[:hashSize], "derived", emptyHash[:])
}

// finishedMAC computes the Finished verify_data of RFC 8446 §4.4.4 from the
// base key (a handshake traffic secret, or the binder key) into out.
func (ks *keySchedule) finishedMAC(out, baseKey, transcriptHash []byte) {
	ks.expandLabel(ks.fk[:], baseKey, "finished", nil)
	ks.m.setKey(ks.fk[:])
	ks.m.mac(out, transcriptHash)
}

// nextTrafficSecret is application_traffic_secret_N+1 of RFC 8446 §7.2.
func (ks *keySchedule) nextTrafficSecret(out, secret []byte) {
	ks.expandLabel(out[:hashSize], secret, "traffic upd", nil)
}

var errLabelTooLong = errors.New("tls13sm: HKDF label too long")

// hkdfExpandLabel is an allocating convenience wrapper for tests and rare paths.
func hkdfExpandLabel(secret []byte, label string, context []byte, length int) ([]byte, error) {
	if len(label) > 249 || len(context) > 255 || length > hashSize {
		return nil, errLabelTooLong
	}
	var ks keySchedule
	out := make([]byte, length)
	ks.expandLabel(out, secret, label, context)
	return out, nil
}
