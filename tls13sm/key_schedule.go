package tls13sm

import (
	"errors"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// This file implements the RFC 8446 §7.1 key schedule with SM3 as the hash
// (RFC 8998 §3.4): HKDF-Extract / HKDF-Expand-Label / Derive-Secret built on
// an HMAC-SM3 whose keyed inner and outer chaining values are computed once
// per key, so that a whole handshake's schedule costs two SM3 compressions
// per key and two per derived value (62 for a full server handshake that
// issues a ticket, 80 for a resumption) and allocates nothing. The HMAC and
// the SM3 on raw chaining values are internal/sm3state's, shared with tlcp; the
// HkdfLabel of the short messages HMAC sees here is built in place in its
// one-block buffer.

const hashSize = sm3state.Size // 32

// The secrets of the schedule (§7.1) each have their own type, as in
// crypto/tls, so that a function cannot be handed one for another: each
// derivation takes and returns exactly the kinds the RFC names.
type (
	// earlySecret is HKDF-Extract(0, PSK), or of zeros without a PSK.
	earlySecret [hashSize]byte
	// derivedSecret is Derive-Secret(., "derived", ""), the salt of the
	// next extraction (handshake or master secret).
	derivedSecret [hashSize]byte
	// handshakeSecret is HKDF-Extract(derived, (EC)DHE).
	handshakeSecret [hashSize]byte
	// masterSecret is HKDF-Extract(derived, 0).
	masterSecret [hashSize]byte
	// trafficSecret is a client or server handshake or application traffic
	// secret, from which record keys, IVs and finished keys derive.
	trafficSecret [hashSize]byte
	// finishedKey is HKDF-Expand-Label(traffic secret, "finished", "", 32),
	// the HMAC key of a Finished message (§4.4.4).
	finishedKey [hashSize]byte
	// binderKey is the resumption binder key, the base key of a PSK
	// binder's finished key (§4.2.11.2).
	binderKey [hashSize]byte
	// resumptionMasterSecret is Derive-Secret(master, "res master", ...),
	// from which each ticket's PSK derives (§4.6.1).
	resumptionMasterSecret [hashSize]byte
	// resumptionPSK is a ticket's PSK.
	resumptionPSK [hashSize]byte
)

// Constant values of the schedule that do not depend on the handshake.
var (
	emptyHash = sm3.Sum(nil)
	zeroKey   [hashSize]byte
	// earlySecretNoPSK = HKDF-Extract(0, 0) and its "derived" child.
	earlySecretNoPSK   earlySecret
	derivedNoPSKSecret derivedSecret
)

// zeroSaltState is HMAC-SM3 keyed with HashLen zeros, the salt of the
// early-secret extraction; noPSKSaltState is keyed with derivedNoPSKSecret,
// the salt of every handshake-secret extraction without a PSK.
var zeroSaltState, noPSKSaltState sm3state.HMACState

func init() {
	var ks keySchedule
	ks.m.SetKey(zeroKey[:])
	ks.m.SaveState(&zeroSaltState)
	ks.extract(earlySecretNoPSK[:], nil, zeroKey[:])
	ks.m.SetKey(earlySecretNoPSK[:])
	ks.expandLabelKeyed(derivedNoPSKSecret[:], "derived", emptyHash[:])
	ks.m.SetKey(derivedNoPSKSecret[:])
	ks.m.SaveState(&noPSKSaltState)
}

// keySchedule holds the scratch state of the TLS 1.3 key schedule. All
// buffers live in the struct so that no derivation allocates.
type keySchedule struct {
	m    sm3state.HMAC
	info [2 + 1 + 255 + 1 + 255 + 1]byte
	t    [hashSize]byte
	fk   finishedKey // binder finished_key scratch
}

// extract is HKDF-Extract(salt, ikm) (RFC 5869 §2.2); a nil salt is HashLen zeros.
func (ks *keySchedule) extract(out, salt, ikm []byte) {
	if salt == nil {
		ks.m.LoadState(&zeroSaltState)
	} else {
		ks.m.SetKey(salt)
	}
	ks.m.MAC(out, ikm)
}

// extractHandshake is the handshake secret HKDF-Extract(salt, ikm), salt
// being Derive-Secret(early, "derived", "") of a PSK's early secret.
func (ks *keySchedule) extractHandshake(out *handshakeSecret, salt *derivedSecret, ikm []byte) {
	ks.extract(out[:], salt[:], ikm)
}

// extractHandshakeNoPSK is HKDF-Extract(Derive-Secret(early, "derived", ""),
// ikm) for a handshake without PSK, whose salt is a constant (§7.1).
func (ks *keySchedule) extractHandshakeNoPSK(out *handshakeSecret, ikm []byte) {
	ks.m.LoadState(&noPSKSaltState)
	ks.m.MAC(out[:], ikm)
}

// extractMaster is the master secret HKDF-Extract(salt, 0), salt being
// Derive-Secret(handshake secret, "derived", "").
func (ks *keySchedule) extractMaster(out *masterSecret, salt *derivedSecret) {
	ks.extract(out[:], salt[:], zeroKey[:])
}

// expand is HKDF-Expand(prk, info, len(out)) (RFC 5869 §2.3) for any length.
func (ks *keySchedule) expand(out, prk, info []byte) {
	ks.m.SetKey(prk)
	ks.expandKeyed(out, info)
}

// expandKeyed is HKDF-Expand with the PRK already set by setKey.
func (ks *keySchedule) expandKeyed(out, info []byte) {
	var prev []byte
	for ctr := byte(1); len(out) > 0; ctr++ {
		ks.m.Begin()
		ks.m.Write(prev)
		ks.m.Write(info)
		ks.info[len(ks.info)-1] = ctr
		ks.m.Write(ks.info[len(ks.info)-1:])
		t := ks.m.Finish(ks.t[:0])
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
	if 2+1+6+len(label)+1+len(context)+1 <= sm3state.MaxShortMAC {
		b := ks.m.ShortBuf()[:0]
		b = append(b, byte(len(out)>>8), byte(len(out)), byte(6+len(label)))
		b = append(b, "tls13 "...)
		b = append(b, label...)
		b = append(b, byte(len(context)))
		b = append(b, context...)
		b = append(b, 1)
		ks.m.MACShort(out, len(b))
		return
	}
	info := ks.buildLabel(label, context, len(out))
	ks.m.Begin()
	ks.m.Write(info)
	ks.info[len(ks.info)-1] = 1
	ks.m.Write(ks.info[len(ks.info)-1:])
	if len(out) == hashSize {
		ks.m.Finish(out[:0])
		return
	}
	copy(out, ks.m.Finish(ks.t[:0]))
}

// expandLabel is HKDF-Expand-Label(secret, label, context, len(out)).
func (ks *keySchedule) expandLabel(out, secret []byte, label string, context []byte) {
	ks.m.SetKey(secret)
	ks.expandLabelKeyed(out, label, context)
}

// trafficKeys derives the record key (16) and IV (12) of RFC 8446 §7.3.
func (ks *keySchedule) trafficKeys(key, iv []byte, secret *trafficSecret) {
	ks.m.SetKey(secret[:])
	ks.expandLabelKeyed(key[:16], "key", nil)
	ks.expandLabelKeyed(iv[:12], "iv", nil)
}

// trafficKeysFinished derives the record key, IV and finished_key from one
// handshake traffic secret with a single keying of the HMAC.
func (ks *keySchedule) trafficKeysFinished(key, iv []byte, fk *finishedKey, secret *trafficSecret) {
	ks.m.SetKey(secret[:])
	ks.expandLabelKeyed(key[:keyLen], "key", nil)
	ks.expandLabelKeyed(iv[:ivLen], "iv", nil)
	ks.expandLabelKeyed(fk[:], "finished", nil)
}

// finishedMAC is the verify_data HMAC(finished_key, transcript hash) of a
// Finished message (§4.4.4) into out.
func (ks *keySchedule) finishedMAC(out []byte, fk *finishedKey, transcriptHash []byte) {
	ks.m.SetKey(fk[:])
	ks.m.MAC(out, transcriptHash)
}

// handshakeTrafficSecrets derives both handshake traffic secrets and the
// "derived" salt for the master secret with one keying (RFC 8446 §7.1).
func (ks *keySchedule) handshakeTrafficSecrets(chs, shs *trafficSecret, derived *derivedSecret, hs *handshakeSecret, th []byte) {
	ks.m.SetKey(hs[:])
	ks.expandLabelKeyed(chs[:hashSize], "c hs traffic", th)
	ks.expandLabelKeyed(shs[:hashSize], "s hs traffic", th)
	ks.expandLabelKeyed(derived[:hashSize], "derived", emptyHash[:])
}

// pskSecrets derives the early secret of a resumption PSK, its binder key
// and the "derived" salt for the handshake secret (RFC 8446 §7.1).
func (ks *keySchedule) pskSecrets(early *earlySecret, bk *binderKey, derived *derivedSecret, psk *resumptionPSK) {
	ks.extract(early[:], nil, psk[:])
	ks.m.SetKey(early[:])
	ks.expandLabelKeyed(bk[:], "res binder", emptyHash[:])
	ks.expandLabelKeyed(derived[:hashSize], "derived", emptyHash[:])
}

// binderMAC computes a PSK binder (§4.2.11.2), the Finished verify_data
// of §4.4.4 with the binder key as base key, into out.
func (ks *keySchedule) binderMAC(out []byte, bk *binderKey, transcriptHash []byte) {
	ks.expandLabel(ks.fk[:], bk[:], "finished", nil)
	ks.finishedMAC(out, &ks.fk, transcriptHash)
}

// nextTrafficSecret is application_traffic_secret_N+1 of RFC 8446 §7.2.
func (ks *keySchedule) nextTrafficSecret(out, secret *trafficSecret) {
	ks.expandLabel(out[:], secret[:], "traffic upd", nil)
}

// resumptionMaster derives the resumption master secret over th, the
// transcript hash up to the client Finished, with the master secret
// already keyed into ks (§7.1).
func (ks *keySchedule) resumptionMasterKeyed(out *resumptionMasterSecret, th []byte) {
	ks.expandLabelKeyed(out[:], "res master", th)
}

// resumptionPSK derives a ticket's PSK from the resumption master secret
// and the ticket nonce (§4.6.1).
func (ks *keySchedule) resumptionPSK(out *resumptionPSK, rms *resumptionMasterSecret, nonce []byte) {
	ks.expandLabel(out[:], rms[:], "resumption", nonce)
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
