package tlcp

import (
	"sync"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// The TLCP PRF is the TLS 1.2 P_hash with HMAC-SM3 (RFC 5246 §5; GB/T 38636
// §6.4.5.10 as cited by implementers): PRF(secret, label, seed) =
// P_SM3(secret, label || seed). It is verified against the digest's E.6
// vectors and against Tongsuo/GmSSL traffic.
//
// The HMAC-SM3 is internal/sm3state's (shared with tls13sm): it is keyed once
// per secret (two SM3 compressions, or none from a saved sm3state.HMACState),
// each further HMAC costs exactly its own compressions, and nothing
// allocates.

var (
	labelMasterSecret   = []byte("master secret")
	labelKeyExpansion   = []byte("key expansion")
	labelClientFinished = []byte("client finished")
	labelServerFinished = []byte("server finished")
)

// prf is a keyed P_SM3 generator.
type prf struct {
	h    sm3state.HMAC
	a    [32]byte
	b    [32]byte
	seed [128]byte
}

// expand fills out with P_SM3(secret, label || seed1 || seed2).
func (p *prf) expand(out, label, seed1, seed2 []byte) {
	h := &p.h
	seed := p.seed[:0]
	if len(label)+len(seed1)+len(seed2) <= len(p.seed) {
		seed = append(append(append(seed, label...), seed1...), seed2...)
	} else {
		seed = append(append(append([]byte(nil), label...), seed1...), seed2...)
	}
	// A(1) = HMAC(label || seed)
	h.MAC(p.a[:], seed)
	for len(out) > 0 {
		h.Begin()
		h.Write(p.a[:])
		h.Write(seed)
		h.Finish(p.b[:0])
		n := copy(out, p.b[:])
		out = out[n:]
		if len(out) > 0 {
			// A(i+1) = HMAC(A(i)): 32 bytes, one block with its padding.
			h.MAC(p.a[:], p.a[:])
		}
	}
}

// keySchedule holds what a handshake derives from the master secret. It is
// pooled: release it when the handshake ends (nothing may keep its slices).
type keySchedule struct {
	master   [masterSecretLength]byte
	p        prf
	keyBlock [128]byte
	verify   [2][finishedVerifyLen]byte
	// finMsg holds the Finished messages built by finishedMsg.
	finMsg [2][4 + finishedVerifyLen]byte
}

var keySchedulePool = sync.Pool{New: func() any { return new(keySchedule) }}

func (ks *keySchedule) release() {
	clear(ks.master[:])
	clear(ks.keyBlock[:])
	ks.verify, ks.finMsg = [2][finishedVerifyLen]byte{}, [2][4 + finishedVerifyLen]byte{}
	ks.p.a, ks.p.b, ks.p.seed = [32]byte{}, [32]byte{}, [128]byte{}
	ks.p.h.Wipe()
	keySchedulePool.Put(ks)
}

// masterFromPreMaster computes master_secret = PRF(pre_master, "master secret",
// client_random || server_random)[0..48) (GB/T 38636 §6.5 as cited).
func masterFromPreMaster(preMaster, clientRandom, serverRandom []byte) *keySchedule {
	ks := keySchedulePool.Get().(*keySchedule)
	ks.p.h.SetKey(preMaster)
	ks.p.expand(ks.master[:], labelMasterSecret, clientRandom, serverRandom)
	ks.p.h.SetKey(ks.master[:])
	return ks
}

// scheduleFromState is scheduleFromMaster with the master secret's HMAC
// state saved earlier (masterState): no compression needed.
func scheduleFromState(master []byte, st *sm3state.HMACState) *keySchedule {
	ks := keySchedulePool.Get().(*keySchedule)
	copy(ks.master[:], master)
	ks.p.h.LoadState(st)
	return ks
}

// masterState saves the HMAC state of the master secret into st.
func (ks *keySchedule) masterState(st *sm3state.HMACState) { ks.p.h.SaveState(st) }

func scheduleFromMaster(master []byte) *keySchedule {
	ks := keySchedulePool.Get().(*keySchedule)
	copy(ks.master[:], master)
	ks.p.h.SetKey(ks.master[:])
	return ks
}

// keys returns key_block = PRF(master, "key expansion", server_random ||
// client_random), split per the suite: CBC — client MAC key, server MAC key,
// client key, server key, client IV, server IV; GCM — client key, server key,
// client fixed IV, server fixed IV. The slices alias the schedule.
func (ks *keySchedule) keys(suite *cipherSuite, clientRandom, serverRandom []byte) (cMAC, sMAC, cKey, sKey, cIV, sIV []byte) {
	n := 2*suite.macLen + 2*suite.keyLen + 2*suite.ivLen
	kb := ks.keyBlock[:n]
	ks.p.expand(kb, labelKeyExpansion, serverRandom, clientRandom)
	cMAC, kb = kb[:suite.macLen], kb[suite.macLen:]
	sMAC, kb = kb[:suite.macLen], kb[suite.macLen:]
	cKey, kb = kb[:suite.keyLen], kb[suite.keyLen:]
	sKey, kb = kb[:suite.keyLen], kb[suite.keyLen:]
	cIV, kb = kb[:suite.ivLen], kb[suite.ivLen:]
	sIV = kb[:suite.ivLen]
	return
}

// finished returns verify_data = PRF(master, "client finished" | "server
// finished", SM3(handshake_messages))[0..12). The slice aliases the schedule.
func (ks *keySchedule) finished(client bool, transcriptHash []byte) []byte {
	label, out := labelServerFinished, ks.verify[0][:]
	if client {
		label, out = labelClientFinished, ks.verify[1][:]
	}
	ks.p.expand(out, label, transcriptHash, nil)
	return out
}

// finishedMsg returns the whole Finished message (header included) with
// finished's verify_data. The slice aliases the schedule.
func (ks *keySchedule) finishedMsg(client bool, transcriptHash []byte) []byte {
	m := ks.finMsg[0][:]
	if client {
		m = ks.finMsg[1][:]
	}
	m[0], m[1], m[2], m[3] = typeFinished, 0, 0, finishedVerifyLen
	copy(m[4:], ks.finished(client, transcriptHash))
	return m
}

// transcript accumulates the handshake messages: a running SM3 for Finished
// and CertificateVerify, and optionally the raw bytes (GmSSL's single-hash
// CertificateVerify). Its compressor (and so gmsm's digest) is created on
// first use and kept by pooled handshake states.
type transcript struct {
	s   sm3state.Hasher
	c   sm3state.Compressor
	raw []byte
	// keepRaw makes write keep the raw bytes.
	keepRaw bool
	buf     [sm3state.Size]byte
}

func newTranscript() *transcript {
	t := new(transcript)
	t.init()
	return t
}

// init empties a zero or reused transcript (keeping its compressor).
func (t *transcript) init() {
	t.s.Reset()
	t.raw, t.keepRaw = nil, false
}

func (t *transcript) write(b []byte) {
	t.s.Write(&t.c, b)
	if t.keepRaw {
		t.raw = append(t.raw, b...)
	}
}

// sum returns SM3 of the messages so far without ending the running hash.
func (t *transcript) sum() []byte { return t.s.SumWith(&t.c, nil, t.buf[:0]) }
