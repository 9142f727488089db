package tlcp

import (
	"encoding"
	"hash"
	"sync"

	"github.com/emmansun/gmsm/sm3"
)

// The TLCP PRF is the TLS 1.2 P_hash with HMAC-SM3 (RFC 5246 §5; GB/T 38636
// §6.4.5.10 as cited by implementers): PRF(secret, label, seed) =
// P_SM3(secret, label || seed). It is verified against the digest's E.6
// vectors and against Tongsuo/GmSSL traffic.
//
// One HMAC object is keyed once per secret; hmac.Reset restores the saved
// ipad/opad SM3 states, so each further HMAC costs only its own compression
// calls and allocates nothing.

var (
	labelMasterSecret   = []byte("master secret")
	labelKeyExpansion   = []byte("key expansion")
	labelClientFinished = []byte("client finished")
	labelServerFinished = []byte("server finished")
)

// hmacSM3 is HMAC-SM3 (RFC 2104) with the ipad and opad SM3 states saved
// once per key, so each MAC costs only its own compressions and allocates
// nothing. The saved states live inline (ipadBuf, opadBuf), so keying
// allocates nothing either.
type hmacSM3 struct {
	inner, outer hash.Hash
	innerU       encoding.BinaryUnmarshaler
	outerU       encoding.BinaryUnmarshaler
	ipad, opad   []byte
	tmp          [sm3.Size]byte
	pad          [sm3.BlockSize]byte
	ipadBuf      [hmacStateLen]byte
	opadBuf      [hmacStateLen]byte
}

// hmacStateLen holds a marshaled SM3 state (gmsm: 4-byte magic, 8 words,
// one block of buffer, length: 108 bytes) with room to spare.
const hmacStateLen = 128

func newHMACSM3() *hmacSM3 {
	m := &hmacSM3{}
	m.init()
	return m
}

// init prepares a zero hmacSM3 (one embedded in another struct).
func (m *hmacSM3) init() {
	m.inner, m.outer = sm3.New(), sm3.New()
	m.innerU = m.inner.(encoding.BinaryUnmarshaler)
	m.outerU = m.outer.(encoding.BinaryUnmarshaler)
	m.ipad, m.opad = m.ipadBuf[:0], m.opadBuf[:0]
}

// setKey keys the MAC (keys longer than a block are hashed first).
func (m *hmacSM3) setKey(key []byte) {
	if len(key) > sm3.BlockSize {
		m.inner.Reset()
		m.inner.Write(key)
		key = m.inner.Sum(m.tmp[:0])
	}
	for i := range m.pad {
		var k byte
		if i < len(key) {
			k = key[i]
		}
		m.pad[i] = k ^ 0x36
	}
	m.inner.Reset()
	m.inner.Write(m.pad[:])
	m.ipad, _ = m.inner.(encoding.BinaryAppender).AppendBinary(m.ipad[:0])
	for i := range m.pad {
		m.pad[i] ^= 0x36 ^ 0x5c
	}
	m.outer.Reset()
	m.outer.Write(m.pad[:])
	m.opad, _ = m.outer.(encoding.BinaryAppender).AppendBinary(m.opad[:0])
	clear(m.pad[:])
}

// setStates keys the MAC with ipad and opad states saved from another
// hmacSM3 keyed with the same key (see states): no compression needed.
func (m *hmacSM3) setStates(ipad, opad []byte) {
	m.ipad = append(m.ipad[:0], ipad...)
	m.opad = append(m.opad[:0], opad...)
}

// states returns the saved ipad and opad states (aliasing m).
func (m *hmacSM3) states() (ipad, opad []byte) { return m.ipad, m.opad }

// forget wipes the key-derived states.
func (m *hmacSM3) forget() {
	clear(m.ipad[:cap(m.ipad)])
	clear(m.opad[:cap(m.opad)])
	m.ipad, m.opad = m.ipad[:0], m.opad[:0]
	clear(m.tmp[:])
	m.inner.Reset()
	m.outer.Reset()
}

func (m *hmacSM3) reset()         { m.innerU.UnmarshalBinary(m.ipad) }
func (m *hmacSM3) write(b []byte) { m.inner.Write(b) }

// sum appends the MAC to out.
func (m *hmacSM3) sum(out []byte) []byte {
	in := m.inner.Sum(m.tmp[:0])
	m.outerU.UnmarshalBinary(m.opad)
	m.outer.Write(in)
	return m.outer.Sum(out)
}

// burn runs n SM3 compressions whose result is discarded, on the outer
// hash (free between MACs): the CBC record layer's Lucky13 equaliser.
func (m *hmacSM3) burn(n int) {
	m.outer.Reset()
	for i := 0; i < n; i++ {
		m.outer.Write(zeroBlock[:])
	}
}

// prf is a keyed P_SM3 generator.
type prf struct {
	h    *hmacSM3
	a    [32]byte
	b    [32]byte
	seed [128]byte
}

// expand fills out with P_SM3(secret, label || seed1 || seed2).
func (p *prf) expand(out, label, seed1, seed2 []byte) {
	h := p.h
	seed := p.seed[:0]
	if len(label)+len(seed1)+len(seed2) <= len(p.seed) {
		seed = append(append(append(seed, label...), seed1...), seed2...)
	} else {
		seed = append(append(append([]byte(nil), label...), seed1...), seed2...)
	}
	// A(1) = HMAC(label || seed)
	h.reset()
	h.write(seed)
	h.sum(p.a[:0])
	for len(out) > 0 {
		h.reset()
		h.write(p.a[:])
		h.write(seed)
		h.sum(p.b[:0])
		n := copy(out, p.b[:])
		out = out[n:]
		if len(out) > 0 {
			// A(i+1) = HMAC(A(i))
			h.reset()
			h.write(p.a[:])
			h.sum(p.a[:0])
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

var keySchedulePool = sync.Pool{New: func() any { return &keySchedule{p: prf{h: newHMACSM3()}} }}

func (ks *keySchedule) release() {
	clear(ks.master[:])
	clear(ks.keyBlock[:])
	ks.verify, ks.finMsg = [2][finishedVerifyLen]byte{}, [2][4 + finishedVerifyLen]byte{}
	ks.p.a, ks.p.b, ks.p.seed = [32]byte{}, [32]byte{}, [128]byte{}
	ks.p.h.forget()
	keySchedulePool.Put(ks)
}

// masterFromPreMaster computes master_secret = PRF(pre_master, "master secret",
// client_random || server_random)[0..48) (GB/T 38636 §6.5 as cited).
func masterFromPreMaster(preMaster, clientRandom, serverRandom []byte) *keySchedule {
	ks := keySchedulePool.Get().(*keySchedule)
	ks.p.h.setKey(preMaster)
	ks.p.expand(ks.master[:], labelMasterSecret, clientRandom, serverRandom)
	ks.p.h.setKey(ks.master[:])
	return ks
}

// scheduleFromStates is scheduleFromMaster with the master secret's HMAC
// states saved earlier (hmacSM3.states): no compression needed.
func scheduleFromStates(master, ipad, opad []byte) *keySchedule {
	ks := keySchedulePool.Get().(*keySchedule)
	copy(ks.master[:], master)
	ks.p.h.setStates(ipad, opad)
	return ks
}

func scheduleFromMaster(master []byte) *keySchedule {
	ks := keySchedulePool.Get().(*keySchedule)
	copy(ks.master[:], master)
	ks.p.h.setKey(ks.master[:])
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
// CertificateVerify).
type transcript struct {
	h   hash.Hash
	raw []byte
	// keepRaw makes write keep the raw bytes.
	keepRaw bool
	buf     [sm3.Size]byte
}

func newTranscript() *transcript { return &transcript{h: sm3.New()} }

// init prepares a zero or reused transcript (a kept hash is reset).
func (t *transcript) init() {
	if t.h == nil {
		t.h = sm3.New()
	} else {
		t.h.Reset()
	}
	t.raw, t.keepRaw = nil, false
}

func (t *transcript) write(b []byte) {
	t.h.Write(b)
	if t.keepRaw {
		t.raw = append(t.raw, b...)
	}
}

// sum returns SM3 of the messages so far without ending the running hash.
func (t *transcript) sum() []byte { return t.h.Sum(t.buf[:0]) }
