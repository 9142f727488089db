package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"io"
	"math/big"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// Tests of the shortcuts the handshake takes for speed: each must give
// exactly what the plain computation gives.

// TestScheduleFromStates: a schedule keyed with saved HMAC states derives
// the same key block and Finished values as one keyed from the master.
func TestScheduleFromStates(t *testing.T) {
	master := make([]byte, masterSecretLength)
	rand.Read(master)
	cr, sr, h := make([]byte, 32), make([]byte, 32), make([]byte, 32)
	rand.Read(cr)
	rand.Read(sr)
	rand.Read(h)
	for _, id := range defaultCipherSuites {
		suite := cipherSuiteByID(id)
		a := scheduleFromMaster(master)
		var st sm3state.HMACState
		a.masterState(&st)
		b := scheduleFromState(master, &st)
		ka := append([]byte(nil), a.keyBlock[:0]...)
		cMAC, sMAC, cKey, sKey, cIV, sIV := a.keys(suite, cr, sr)
		ka = append(append(append(append(append(append(ka, cMAC...), sMAC...), cKey...), sKey...), cIV...), sIV...)
		cMAC, sMAC, cKey, sKey, cIV, sIV = b.keys(suite, cr, sr)
		var kb []byte
		kb = append(append(append(append(append(append(kb, cMAC...), sMAC...), cKey...), sKey...), cIV...), sIV...)
		if !bytes.Equal(ka, kb) {
			t.Fatalf("%s: key blocks differ", suite.name)
		}
		for _, client := range []bool{false, true} {
			fa := append([]byte(nil), a.finishedMsg(client, h)...)
			if fb := b.finishedMsg(client, h); !bytes.Equal(fa, fb) || fa[0] != typeFinished || len(fa) != 4+finishedVerifyLen {
				t.Fatalf("%s: Finished differ: %x %x", suite.name, fa, fb)
			}
		}
		a.release()
		b.release()
	}
}

// opaqueSigner hides the key type, as a hardware or remote signer does: it
// only accepts the message form (SM2SignerOption).
type opaqueSigner struct{ k *sm2.PrivateKey }

func (o opaqueSigner) Public() crypto.PublicKey { return o.k.Public() }
func (o opaqueSigner) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if _, ok := opts.(*sm2.SM2SignerOption); !ok {
		panic("opaque signer given a digest")
	}
	return o.k.Sign(r, msg, opts)
}

// unwrapSigner is a pass-through wrapper like the daemon's offload key.
type unwrapSigner struct{ k crypto.Signer }

func (u unwrapSigner) Public() crypto.PublicKey { return u.k.Public() }
func (u unwrapSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	return u.k.Sign(r, d, o)
}
func (u unwrapSigner) Unwrap() crypto.Signer { return u.k }

// TestSignVerifySM2: signSM2 (digest form for local keys, message form for
// others) makes standard SM2 signatures with the default ID, and verifySM2
// (cached Z_A) accepts exactly what gmsm's VerifyASN1WithSM2 accepts.
func TestSignVerifySM2(t *testing.T) {
	k1, _ := sm2.GenerateKey(rand.Reader)
	k2, _ := sm2.GenerateKey(rand.Reader)
	msg := []byte("client_random || server_random || params")
	for name, signer := range map[string]crypto.Signer{"local": k1, "unwrap": unwrapSigner{k1}, "opaque": opaqueSigner{k1}} {
		sig, err := signSM2(context.Background(), signer, rand.Reader, msg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !sm2.VerifyASN1WithSM2(&k1.PublicKey, nil, msg, sig) {
			t.Fatalf("%s: gmsm rejects the signature", name)
		}
		if !verifySM2(&k1.PublicKey, msg, sig) {
			t.Fatalf("%s: verifySM2 rejects the signature", name)
		}
		bad := append([]byte(nil), msg...)
		bad[0] ^= 1
		if verifySM2(&k1.PublicKey, bad, sig) || verifySM2(&k2.PublicKey, msg, sig) {
			t.Fatalf("%s: verifySM2 accepts a wrong message or key", name)
		}
		tampered := append([]byte(nil), sig...)
		tampered[len(tampered)-1] ^= 1
		if verifySM2(&k1.PublicKey, msg, tampered) {
			t.Fatalf("%s: verifySM2 accepts a tampered signature", name)
		}
	}
	// The Z_A cache is keyed by the point, not the *ecdsa.PublicKey: a
	// public key changed in place is not verified with the old Z_A.
	pub := &ecdsa.PublicKey{Curve: k1.Curve, X: new(big.Int).Set(k1.X), Y: new(big.Int).Set(k1.Y)}
	sig1, _ := signSM2(context.Background(), k1, rand.Reader, msg)
	sig2, _ := signSM2(context.Background(), k2, rand.Reader, msg)
	if !verifySM2(pub, msg, sig1) {
		t.Fatal("verify with k1")
	}
	pub.X, pub.Y = new(big.Int).Set(k2.X), new(big.Int).Set(k2.Y)
	if !verifySM2(pub, msg, sig2) || verifySM2(pub, msg, sig1) {
		t.Fatal("stale Z_A used after the key changed")
	}
	za, _ := sm2.CalculateZA(&k2.PublicKey, nil)
	got, ok := sm2ZA(pub)
	if !ok || !bytes.Equal(got[:], za) {
		t.Fatal("cached Z_A differs from gmsm's")
	}
	e := sm2Digest(&got, msg)
	want, _ := sm2.CalculateSM2Hash(&k2.PublicKey, msg, nil)
	if !bytes.Equal(e[:], want) || len(want) != sm3.Size {
		t.Fatal("digest differs from gmsm's")
	}
}

// TestAppendHandshake: bytes of messages already returned are never
// overwritten by later records.
func TestAppendHandshake(t *testing.T) {
	var hand []byte
	var msgs [][]byte
	var want [][]byte
	for i := range 40 {
		rec := bytes.Repeat([]byte{byte(i)}, 1+i*7%90)
		hand = appendHandshake(hand, rec)
		msg := hand[:len(rec):len(rec)]
		hand = hand[len(rec):]
		msgs = append(msgs, msg)
		want = append(want, rec)
	}
	for i := range msgs {
		if !bytes.Equal(msgs[i], want[i]) {
			t.Fatalf("message %d overwritten", i)
		}
	}
}

// TestAppendHandshakeSmallRecords: a handshake message that arrives in many
// small records is gathered with copying linear in its size. A peer may cut
// a 64 KiB ClientHello or Certificate into 100-byte records (105 bytes on
// the wire each); growing the buffer by a record and some slack each time
// made that 219 arrays, 7.8 MB allocated and copied and some 7 ms of CPU
// for 69 KB sent, before any signature.
func TestAppendHandshakeSmallRecords(t *testing.T) {
	for _, size := range []int{1, 100, 1000} {
		rec := make([]byte, size)
		var hand []byte
		allocated := 0
		for len(hand) < maxHandshake+4 {
			r := rec[:min(size, maxHandshake+4-len(hand))]
			before := cap(hand)
			hand = appendHandshake(hand, r)
			if cap(hand) != before {
				allocated += cap(hand)
			}
		}
		if limit := 4 * (maxHandshake + 4); allocated > limit {
			t.Errorf("a %d-byte message in %d-byte records allocated %d bytes, want at most %d", maxHandshake+4, size, allocated, limit)
		}
	}
}

// TestPreparedSessionStore: the in-memory store keeps sessions prepared
// (parsed, HMAC states saved); they resume, with client certificates, and
// a session past its lifetime does not.
func TestPreparedSessionStore(t *testing.T) {
	p := loadPKI(t)
	now := time.Now()
	store := NewLRUSessionStore(10, time.Hour)
	scfg := p.serverConfig()
	scfg.Time = func() time.Time { return now }
	scfg.SessionLifetime = time.Minute
	scfg.SessionStore = store
	scfg.SessionTicketsDisabled = true
	scfg.ClientAuth = RequireAndVerifyClientCert
	ccfg := p.clientConfig()
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	if r := runPair(t, scfg, ccfg, []byte("a")); r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("full handshake: %v %v", r.cerr, r.serr)
	}
	cs, ok := ccfg.ClientSessionCache.Get(ccfg.ServerName)
	if !ok || len(cs.sessionID) == 0 {
		t.Fatal("client has no session ID")
	}
	prep, ok := store.(preparedStore).getPrepared(cs.sessionID)
	if !ok || len(prep.peerCerts) != 2 {
		t.Fatalf("session not prepared: %v", ok)
	}
	// The chain's verify-cache key, computed by the full handshake, is kept
	// for re-verification on resumption.
	if !prep.hasChainKey || prep.chainKey != clientChainKey(prep.s.certs, true) {
		t.Fatal("prepared session lacks the client chain's verify-cache key")
	}
	want := scheduleFromMaster(prep.s.master)
	var ws sm3state.HMACState
	want.masterState(&ws)
	if ws != prep.macState {
		t.Fatal("prepared HMAC states are not those of the master secret")
	}
	want.release()
	r := runPair(t, scfg, ccfg, []byte("a"))
	if r.cerr != nil || r.serr != nil || !r.ss.DidResume || len(r.ss.PeerCertificates) != 2 || len(r.ss.VerifiedChains) == 0 {
		t.Fatalf("prepared session not resumed with verified chains: %v %v %v", r.cerr, r.serr, r.ss.DidResume)
	}
	now = now.Add(2 * time.Minute)
	if r := runPair(t, scfg, ccfg, []byte("a")); r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("expired prepared session resumed: %v %v %v", r.cerr, r.serr, r.ss.DidResume)
	}
}

// TestSessionStateWireFormat: the hand-written serialization is byte for
// byte the cryptobyte layout earlier versions wrote, so instances of both
// versions sharing a store or ticket keys read each other's sessions.
func TestSessionStateWireFormat(t *testing.T) {
	s := &sessionState{vers: VersionTLCP, cipherSuite: ECDHE_SM4_GCM_SM3, createdAt: 1234567890, master: bytes.Repeat([]byte{1}, 48),
		certs: [][]byte{bytes.Repeat([]byte{2}, 300), bytes.Repeat([]byte{3}, 5)}, serverName: "a.example", serverCert: bytes.Repeat([]byte{4}, 32)}
	var b cryptobyte.Builder
	b.AddUint16(s.vers)
	b.AddUint16(s.cipherSuite)
	b.AddUint64(s.createdAt)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.master) })
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range s.certs {
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
		}
	})
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(s.serverName)) })
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.serverCert) })
	want := b.BytesOrPanic()
	got, err := s.marshal()
	if err != nil || !bytes.Equal(got, want) || len(got) != s.size() {
		t.Fatalf("serialized state differs from the cryptobyte layout (%v)", err)
	}
	sealed, err := s.appendTo([]byte("prefix"))
	if err != nil || !bytes.Equal(sealed[6:], want) {
		t.Fatal("appendTo differs")
	}
}
