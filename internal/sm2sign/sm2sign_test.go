package sm2sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"math/big"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

func newKey(t testing.TB) (*sm2.PrivateKey, *Key) {
	t.Helper()
	priv, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, k
}

func digestOf(t testing.TB, b byte) []byte {
	t.Helper()
	d := bytes.Repeat([]byte{b}, scalarLen)
	d[0] ^= 0x5a
	return d
}

// TestSignVerifies: signatures of digests and of messages (default and
// other IDs) verify with gmsm, for many keys.
func TestSignVerifies(t *testing.T) {
	uid := []byte("sm2sign test ID")
	for i := 0; i < 25; i++ {
		priv, k := newKey(t)
		e := digestOf(t, byte(i))
		sig, err := k.Sign(rand.Reader, e, crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		if !sm2.VerifyASN1(&priv.PublicKey, e, sig) {
			t.Fatalf("key %d: digest signature does not verify", i)
		}
		msg := []byte("a handshake's signed parameters")
		sig, err = k.SignContext(context.Background(), rand.Reader, msg, smkey.DefaultSM2SignerOpts)
		if err != nil {
			t.Fatal(err)
		}
		if !sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
			t.Fatalf("key %d: default-ID message signature does not verify", i)
		}
		sig, err = k.Sign(rand.Reader, msg, smkey.NewSM2SignerOpts(uid))
		if err != nil {
			t.Fatal(err)
		}
		if !sm2.VerifyASN1WithSM2(&priv.PublicKey, uid, msg, sig) || sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
			t.Fatalf("key %d: the ID is not the options'", i)
		}
		// A changed digest does not verify (the check above can fail).
		e[5] ^= 1
		if sm2.VerifyASN1(&priv.PublicKey, e, sig) {
			t.Fatal("signature verifies for another digest")
		}
	}
}

// reference computes r and s for nonce kb with math/big and gmsm's
// generic curve arithmetic, apart from the code under test.
func reference(priv *sm2.PrivateKey, e, kb []byte) (r, s []byte) {
	c := sm2.P256()
	N := c.Params().N
	x1, _ := c.ScalarBaseMult(kb)
	k := new(big.Int).SetBytes(kb)
	rr := new(big.Int).Add(new(big.Int).SetBytes(e), x1)
	rr.Mod(rr, N)
	inv := new(big.Int).ModInverse(new(big.Int).Add(priv.D, big.NewInt(1)), N)
	ss := new(big.Int).Mul(rr, priv.D)
	ss.Sub(k, ss)
	ss.Mul(ss, inv)
	ss.Mod(ss, N)
	return rr.FillBytes(make([]byte, scalarLen)), ss.FillBytes(make([]byte, scalarLen))
}

func randomScalar(t testing.TB) []byte {
	t.Helper()
	k, err := rand.Int(rand.Reader, new(big.Int).Sub(sm2.P256().Params().N, big.NewInt(2)))
	if err != nil {
		t.Fatal(err)
	}
	return k.Add(k, big.NewInt(1)).FillBytes(make([]byte, scalarLen))
}

// TestSignMatchesReference: for chosen nonces, r and s are those of GB/T
// 32918.2 §6.1 computed independently.
func TestSignMatchesReference(t *testing.T) {
	for i := 0; i < 25; i++ {
		priv, k := newKey(t)
		e := randomScalar(t)
		if i == 0 {
			e = bytes.Repeat([]byte{0xff}, scalarLen) // e ≥ n: reduced
		}
		kb := randomScalar(t)
		r, s, err := k.sign(e, new([scalarLen]byte), func(out *[scalarLen]byte, try byte) {
			if try != 0 {
				t.Fatalf("try %d for an in-range nonce", try)
			}
			copy(out[:], kb)
		})
		if err != nil {
			t.Fatal(err)
		}
		wr, ws := reference(priv, e, kb)
		if !bytes.Equal(r, wr) || !bytes.Equal(s, ws) {
			t.Fatalf("key %d: (r, s) = (%x, %x), want (%x, %x)", i, r, s, wr, ws)
		}
	}
}

// TestSignRejectsNonceOutOfRange: k = n, 0 and n-1 are drawn again; a
// source that never gives one in range ends in an error.
func TestSignRejectsNonceOutOfRange(t *testing.T) {
	priv, k := newKey(t)
	e := digestOf(t, 7)
	N := sm2.P256().Params().N
	order := N.FillBytes(make([]byte, scalarLen))
	nMinus1 := new(big.Int).Sub(N, big.NewInt(1)).FillBytes(make([]byte, scalarLen))
	good := randomScalar(t)
	seq := [][]byte{order, make([]byte, scalarLen), nMinus1, bytes.Repeat([]byte{0xff}, scalarLen), good}
	var tries []byte
	r, s, err := k.sign(e, new([scalarLen]byte), func(out *[scalarLen]byte, try byte) {
		tries = append(tries, try)
		copy(out[:], seq[try])
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tries, []byte{0, 1, 2, 3, 4}) {
		t.Fatalf("tries %v", tries)
	}
	wr, ws := reference(priv, e, good)
	if !bytes.Equal(r, wr) || !bytes.Equal(s, ws) {
		t.Fatal("signature is not the one of the first nonce in range")
	}
	n := 0
	if _, _, err := k.sign(e, new([scalarLen]byte), func(out *[scalarLen]byte, try byte) { n++; clear(out[:]) }); !errors.Is(err, errNonce) || n != maxTries {
		t.Fatalf("zero nonces: err %v after %d tries", err, n)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func rOf(t *testing.T, sig []byte) []byte {
	t.Helper()
	in := cryptobyte.String(sig)
	var seq cryptobyte.String
	var r []byte
	if !in.ReadASN1(&seq, asn1.SEQUENCE) || !seq.ReadASN1Bytes(&r, asn1.INTEGER) {
		t.Fatal("malformed signature")
	}
	return r
}

// TestSignNonceIsHedged: the nonce depends on the random bytes, the key
// and the digest, so that a source stuck at zero repeats no nonce for
// different digests or keys; a failing source gives no signature.
func TestSignNonceIsHedged(t *testing.T) {
	_, k := newKey(t)
	_, k2 := newKey(t)
	e1, e2 := digestOf(t, 1), digestOf(t, 2)
	sign := func(k *Key, rd interface{ Read([]byte) (int, error) }, e []byte) []byte {
		sig, err := k.Sign(rd, e, crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	if a, b := sign(k, rand.Reader, e1), sign(k, rand.Reader, e1); bytes.Equal(a, b) {
		t.Fatal("two signatures of one digest are equal: the random bytes are not used")
	}
	if a, b := sign(k, zeroReader{}, e1), sign(k, zeroReader{}, e1); !bytes.Equal(a, b) {
		t.Fatal("with the same random bytes, key and digest the signature changed")
	}
	// r = e + x1 mod n: equal x1 (equal nonces) give r's that differ by
	// e1 - e2; compare x1 = r - e instead.
	x1 := func(sig, e []byte) *big.Int {
		x := new(big.Int).Sub(new(big.Int).SetBytes(rOf(t, sig)), new(big.Int).SetBytes(e))
		return x.Mod(x, sm2.P256().Params().N)
	}
	if x1(sign(k, zeroReader{}, e1), e1).Cmp(x1(sign(k, zeroReader{}, e2), e2)) == 0 {
		t.Fatal("a stuck random source repeats the nonce for another digest")
	}
	if x1(sign(k, zeroReader{}, e1), e1).Cmp(x1(sign(k2, zeroReader{}, e1), e1)) == 0 {
		t.Fatal("a stuck random source repeats the nonce for another key")
	}
	if sig, err := k.Sign(failReader{}, e1, crypto.Hash(0)); err == nil || sig != nil {
		t.Fatalf("failing random source: %x, %v", sig, err)
	}
}

// TestNewRejectsKeysOutOfRange: d must be in [1, n-2].
func TestNewRejectsKeysOutOfRange(t *testing.T) {
	N := sm2.P256().Params().N
	for _, d := range []*big.Int{big.NewInt(0), new(big.Int).Sub(N, big.NewInt(1)), N, new(big.Int).Lsh(big.NewInt(1), 300)} {
		priv := &sm2.PrivateKey{}
		priv.Curve = sm2.P256()
		priv.D = d
		if _, err := New(priv); err == nil {
			t.Errorf("d = %x accepted", d)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("nil key accepted")
	}
	priv, _ := newKey(t)
	nMinus2 := new(big.Int).Sub(N, big.NewInt(2))
	priv.D = nMinus2
	if _, err := New(priv); err != nil {
		t.Errorf("d = n-2 refused: %v", err)
	}
}

// TestSignLeavesGMSMOptionsToGMSM: gmsm's own option and a nil random
// source are signed by gmsm, with their meaning (a message with the
// default ID; a deterministic signature).
func TestSignLeavesGMSMOptionsToGMSM(t *testing.T) {
	priv, k := newKey(t)
	msg := []byte("message")
	sig, err := k.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err != nil || !sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
		t.Fatalf("gmsm option: %v", err)
	}
	e := digestOf(t, 3)
	a, err1 := k.Sign(nil, e, crypto.Hash(0))
	b, err2 := k.Sign(nil, e, crypto.Hash(0))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) || !sm2.VerifyASN1(&priv.PublicKey, e, a) {
		t.Fatalf("nil rand: %v %v, equal %v", err1, err2, bytes.Equal(a, b))
	}
	if k.Unwrap() != crypto.Signer(priv) || k.Public() != crypto.PublicKey(&priv.PublicKey) {
		t.Fatal("Unwrap or Public is not the key's")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.SignContext(ctx, rand.Reader, e, crypto.Hash(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
}

// BenchmarkSign compares a signature of a digest here with gmsm's
// SignASN1 on the same key.
func BenchmarkSign(b *testing.B) {
	priv, k := newKey(b)
	e := digestOf(b, 9)
	b.Run("sm2sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.Sign(rand.Reader, e, crypto.Hash(0)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gmsm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sm2.SignASN1(rand.Reader, priv, e, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeSignature: DER of (r, s) for values with and without a top
// bit set and with leading zeros, as cryptobyte writes it.
func TestEncodeSignature(t *testing.T) {
	cases := [][2][]byte{
		{bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0x7f}, 32)},
		{append(make([]byte, 31), 1), append([]byte{0, 0x80}, make([]byte, 30)...)},
		{make([]byte, 32), append([]byte{0x12}, make([]byte, 31)...)},
	}
	for _, c := range cases {
		var b cryptobyte.Builder
		b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1BigInt(new(big.Int).SetBytes(c[0]))
			b.AddASN1BigInt(new(big.Int).SetBytes(c[1]))
		})
		if got, want := encodeSignature(c[0], c[1]), b.BytesOrPanic(); !bytes.Equal(got, want) {
			t.Errorf("encodeSignature(%x, %x) = %x, want %x", c[0], c[1], got, want)
		}
	}
}

// TestSignConcurrent: one Key signs from several goroutines (pooled
// scratch, shared precomputation); every signature verifies.
func TestSignConcurrent(t *testing.T) {
	priv, k := newKey(t)
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			for i := 0; i < 25; i++ {
				e := digestOf(t, byte(g*25+i))
				sig, err := k.Sign(rand.Reader, e, crypto.Hash(0))
				if err == nil && !sm2.VerifyASN1(&priv.PublicKey, e, sig) {
					err = errors.New("signature does not verify")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSignMessageWithNilRand: with a nil rand (gmsm's deterministic
// signature) the options still mean a message and its ID, as with a
// random source; gmsm, not knowing smkey's options, would sign the
// message as if it were e.
func TestSignMessageWithNilRand(t *testing.T) {
	priv, k := newKey(t)
	uid := []byte("other id")
	for _, msg := range [][]byte{[]byte("a message"), digestOf(t, 3)} {
		sig, err := k.Sign(nil, msg, smkey.DefaultSM2SignerOpts)
		if err != nil || !sm2.VerifyASN1WithSM2(&priv.PublicKey, nil, msg, sig) {
			t.Errorf("default ID, %d-byte message: %v, signature does not verify", len(msg), err)
		}
		sig, err = k.SignContext(context.Background(), nil, msg, smkey.NewSM2SignerOpts(uid))
		if err != nil || !sm2.VerifyASN1WithSM2(&priv.PublicKey, uid, msg, sig) {
			t.Errorf("other ID, %d-byte message: %v, signature does not verify", len(msg), err)
		}
	}
}
