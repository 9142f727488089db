package tls13sm

import (
	"encoding"
	"errors"
	"hash"

	"github.com/emmansun/gmsm/sm3"
)

// This file implements the RFC 8446 §7.1 key schedule with SM3 as the hash
// (RFC 8998 §3.4): HKDF-Extract / HKDF-Expand-Label / Derive-Secret built on
// an HMAC-SM3 whose keyed inner and outer states are saved once per key and
// restored for every MAC, so a whole handshake's schedule costs two SM3
// compressions per derived value and allocates nothing.

const (
	hashSize = sm3.Size // 32
	// sm3StateSize is the size of gmsm's marshalled SM3 state.
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
	var ks keySchedule
	ks.m.setKey(zeroKey[:])
	ks.m.saveState(&zeroSaltState)
	ks.extract(earlySecretNoPSK[:], nil, zeroKey[:])
	ks.deriveSecret(derivedNoPSKSecret[:], earlySecretNoPSK[:], "derived", emptyHash[:])
	ks.m.setKey(derivedNoPSKSecret[:])
	ks.m.saveState(&noPSKSaltState)
}

// hmacSM3 is HMAC-SM3 (RFC 2104) with reusable hash states.
type hmacSM3 struct {
	inner, outer       hash.Hash
	innerApp, outerApp encoding.BinaryAppender
	innerUn, outerUn   encoding.BinaryUnmarshaler
	istate, ostate     [sm3StateSize]byte
	pad                [sm3.BlockSize]byte
	sum                [hashSize]byte
}

func (m *hmacSM3) init() {
	if m.inner != nil {
		return
	}
	m.inner, m.outer = sm3.New(), sm3.New()
	m.innerApp = m.inner.(encoding.BinaryAppender)
	m.outerApp = m.outer.(encoding.BinaryAppender)
	m.innerUn = m.inner.(encoding.BinaryUnmarshaler)
	m.outerUn = m.outer.(encoding.BinaryUnmarshaler)
}

// setKey keys the HMAC: the states after absorbing key^ipad and key^opad
// are computed once and saved.
func (m *hmacSM3) setKey(key []byte) {
	m.init()
	if len(key) > sm3.BlockSize {
		m.inner.Reset()
		m.inner.Write(key)
		key = m.inner.Sum(m.sum[:0])
	}
	for i := range m.pad {
		m.pad[i] = 0x36
	}
	for i, b := range key {
		m.pad[i] ^= b
	}
	m.inner.Reset()
	m.inner.Write(m.pad[:])
	m.innerApp.AppendBinary(m.istate[:0])
	for i := range m.pad {
		m.pad[i] ^= 0x36 ^ 0x5c
	}
	m.outer.Reset()
	m.outer.Write(m.pad[:])
	m.outerApp.AppendBinary(m.ostate[:0])
}

// hmacState is a saved keyed HMAC state.
type hmacState struct {
	istate, ostate [sm3StateSize]byte
}

func (m *hmacSM3) saveState(s *hmacState) { s.istate, s.ostate = m.istate, m.ostate }

func (m *hmacSM3) loadState(s *hmacState) {
	m.init()
	m.istate, m.ostate = s.istate, s.ostate
}

// begin starts a MAC under the current key.
func (m *hmacSM3) begin() { m.innerUn.UnmarshalBinary(m.istate[:]) }

func (m *hmacSM3) write(p []byte) { m.inner.Write(p) }

// finish appends the MAC to out.
func (m *hmacSM3) finish(out []byte) []byte {
	s := m.inner.Sum(m.sum[:0])
	m.outerUn.UnmarshalBinary(m.ostate[:])
	m.outer.Write(s)
	return m.outer.Sum(out)
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
	ks.m.begin()
	ks.m.write(ikm)
	ks.m.finish(out[:0])
}

// extractHandshakeNoPSK is HKDF-Extract(Derive-Secret(early, "derived", ""),
// ikm) for a handshake without PSK, whose salt is a constant (§7.1).
func (ks *keySchedule) extractHandshakeNoPSK(out, ikm []byte) {
	ks.m.loadState(&noPSKSaltState)
	ks.m.begin()
	ks.m.write(ikm)
	ks.m.finish(out[:0])
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
	ks.m.begin()
	ks.m.write(data)
	ks.m.finish(out[:0])
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
	ks.m.begin()
	ks.m.write(transcriptHash)
	ks.m.finish(out[:0])
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
