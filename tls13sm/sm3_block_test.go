package tls13sm

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"io"
	"math/big"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
)

// withBothSM3Paths runs f with sm3Compressor's portable path (new
// compressors only), and then with the direct one.
func withBothSM3Paths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	direct := sm3DirectState.Load()
	t.Run("portable", func(t *testing.T) {
		sm3DirectState.Store(false)
		defer sm3DirectState.Store(direct)
		f(t)
	})
	t.Run("direct", f)
}

// The direct path must be on with the gmsm version in go.mod: if an upgrade
// changes gmsm's digest layout, this fails (the code still works, on the
// slower portable path) and gmsmDigest needs a look.
func TestGmsmDigestLayout(t *testing.T) {
	if !sm3DirectState.Load() {
		t.Fatal("gmsm's SM3 digest no longer has gmsmDigest's layout: the key schedule runs on the portable path")
	}
	var c sm3Compressor
	h := sm3IV
	c.compress(&h, make([]byte, 64))
	if c.fast == nil {
		t.Fatal("compressor did not take the direct path")
	}
}

func TestSM3HasherMatchesSM3(t *testing.T) {
	withBothSM3Paths(t, func(t *testing.T) {
		data := make([]byte, 1100)
		io.ReadFull(rand.Reader, data)
		var c sm3Compressor
		for _, n := range []int{0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200, 1100} {
			want := sm3.Sum(data[:n])
			for _, split := range []int{0, 1, 7, 64, n / 2, n} {
				split = min(split, n)
				var s sm3Hasher
				s.resume(&sm3IV, 0)
				s.write(&c, data[:split])
				s.write(&c, data[split:n])
				if got := s.sum(&c, nil); !bytes.Equal(got, want[:]) {
					t.Fatalf("len %d split %d: %x, want %x", n, split, got, want)
				}
			}
		}
		// The transcript's Sum leaves it running.
		tr := sm3Transcript{c: &c}
		tr.Reset()
		tr.Write(data[:100])
		first := tr.Sum(nil)
		tr.Write(data[100:300])
		if want := sm3.Sum(data[:100]); !bytes.Equal(first, want[:]) {
			t.Fatalf("transcript Sum %x", first)
		}
		if got, want := tr.Sum(nil), sm3.Sum(data[:300]); !bytes.Equal(got, want[:]) {
			t.Fatalf("transcript after Sum %x, want %x", got, want)
		}
	})
}

// macShort (one block, built in place) agrees with the streaming HMAC for
// every length it takes, and mac switches to streaming beyond.
func TestHMACShortMatchesStreaming(t *testing.T) {
	withBothSM3Paths(t, func(t *testing.T) {
		key := bytes.Repeat([]byte{0x5a}, 32)
		data := make([]byte, 100)
		io.ReadFull(rand.Reader, data)
		var m hmacSM3
		m.setKey(key)
		for n := 0; n <= len(data); n++ {
			m.begin()
			m.write(data[:n])
			want := m.finish(nil)
			got := make([]byte, 32)
			m.mac(got, data[:n])
			if !bytes.Equal(got, want) {
				t.Fatalf("len %d: mac %x, streaming %x", n, got, want)
			}
			if n <= maxShortMAC {
				short := make([]byte, 12)
				copy(m.blk[:], data[:n])
				m.macShort(short, n)
				if !bytes.Equal(short, want[:12]) {
					t.Fatalf("len %d: truncated macShort %x", n, short)
				}
			}
		}
	})
}

func TestKeyScheduleVectorsPortable(t *testing.T) {
	withBothSM3Paths(t, func(t *testing.T) {
		TestHMACSM3Vectors(t)
		TestHKDFSM3Vector(t)
		TestKeyScheduleVector(t)
	})
}

// The schedules of the Ratio benchmarks take exactly the SM3 compressions
// that RFC 8446 §7.1 requires with HMAC keying saved per key: 2 per key
// (ipad, opad) and 2 per MAC of at most 55 bytes.
func TestKeyScheduleCompressions(t *testing.T) {
	x := new(scheduleScratch)
	n := 0
	x.m.c.blocks = &n
	shared := make([]byte, 32)
	th := sm3.Sum([]byte("th"))
	fullSchedule(x, shared, th[:])
	if n != 62 {
		t.Errorf("full handshake schedule: %d compressions, want 62", n)
	}
	n = 0
	resumedSchedule(x, shared, shared, th[:])
	if n != 80 {
		t.Errorf("resumed handshake schedule: %d compressions, want 80", n)
	}
}

// certificateVerifyDigest computes gmsm's e = SM3(Z_A || content) with the
// RFC 8998 ID, for both contexts, cached or not.
func TestCertificateVerifyDigest(t *testing.T) {
	withBothSM3Paths(t, func(t *testing.T) {
		key, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		th := sm3.Sum([]byte("transcript"))
		var c sm3Compressor
		for i := 0; i < 2; i++ { // the second round uses the cached prefix
			for _, ctx := range []string{serverSignatureContext, clientSignatureContext} {
				want, err := sm2.CalculateSM2Hash(&key.PublicKey, signedMessage(ctx, th[:]), []byte(sm2TLS13ID))
				if err != nil {
					t.Fatal(err)
				}
				got, err := certificateVerifyDigest(&c, &key.PublicKey, ctx, th[:], nil)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%q: e = %x, want %x", ctx, got, want)
				}
			}
		}
	})
}

// optsRecorder is a crypto.Signer that is not an *sm2.PrivateKey (as an
// HSM or key-server key would be): it must get the content and the SM2
// option, not a digest.
type optsRecorder struct {
	*sm2.PrivateKey
	msg  []byte
	opts crypto.SignerOpts
}

func (r *optsRecorder) Sign(rnd io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	r.msg, r.opts = append([]byte(nil), msg...), opts
	return r.PrivateKey.Sign(rnd, msg, opts)
}

// unwrapRecorder is an optsRecorder that exposes the key beneath it, as the
// daemon's offload wrapper does.
type unwrapRecorder struct{ optsRecorder }

func (u *unwrapRecorder) Unwrap() crypto.Signer { return u.PrivateKey }

func TestSignCertificateVerifyForms(t *testing.T) {
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	th := sm3.Sum([]byte("transcript"))
	cfg := &Config{}
	for _, ctx := range []string{serverSignatureContext, clientSignatureContext} {
		// An in-process key signs the precomputed digest.
		sig, err := signCertificateVerify(context.Background(), cfg, new(keySchedule), key, ctx, th[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := verifyCertificateVerify(&key.PublicKey, ctx, th[:], sig); err != nil {
			t.Fatalf("%q: %v", ctx, err)
		}
		// Any other signer gets the content with sm2SignerOpts.
		r := &optsRecorder{PrivateKey: key}
		sig, err = signCertificateVerify(context.Background(), cfg, nil, r, ctx, th[:])
		if err != nil {
			t.Fatal(err)
		}
		if r.opts != sm2SignerOpts || !bytes.Equal(r.msg, signedMessage(ctx, th[:])) {
			t.Fatalf("%q: signer got opts %v and %d bytes", ctx, r.opts, len(r.msg))
		}
		if err := verifyCertificateVerify(&key.PublicKey, ctx, th[:], sig); err != nil {
			t.Fatalf("%q via signer: %v", ctx, err)
		}
		// A wrapper that unwraps to an in-process key is given the digest
		// e (32 bytes, not the SM2 signer option) and passes it through.
		u := &unwrapRecorder{optsRecorder{PrivateKey: key}}
		sig2, err := signCertificateVerify(context.Background(), cfg, nil, u, ctx, th[:])
		if err != nil {
			t.Fatal(err)
		}
		if u.opts != sm2DigestOpts || len(u.msg) != 32 {
			t.Fatalf("%q: unwrapping signer got opts %v and %d bytes", ctx, u.opts, len(u.msg))
		}
		if !sm2.VerifyASN1WithSM2(&key.PublicKey, []byte(sm2TLS13ID), signedMessage(ctx, th[:]), sig2) {
			t.Fatalf("%q: gmsm does not verify the unwrapping signer's signature", ctx)
		}
		// Verification (through the cached prefix, now warm) rejects the
		// other context, another transcript and a damaged signature.
		other := serverSignatureContext
		if ctx == other {
			other = clientSignatureContext
		}
		if verifyCertificateVerify(&key.PublicKey, other, th[:], sig) == nil {
			t.Fatalf("%q signature verified under %q", ctx, other)
		}
		th2 := sm3.Sum([]byte("other transcript"))
		if verifyCertificateVerify(&key.PublicKey, ctx, th2[:], sig) == nil {
			t.Fatal("signature verified over another transcript")
		}
		bad := append([]byte(nil), sig...)
		bad[len(bad)-1] ^= 1
		if verifyCertificateVerify(&key.PublicKey, ctx, th[:], bad) == nil {
			t.Fatal("damaged signature verified")
		}
		if !sm2.VerifyASN1WithSM2(&key.PublicKey, []byte(sm2TLS13ID), signedMessage(ctx, th[:]), sig) {
			t.Fatal("gmsm does not verify the signature")
		}
	}
	// A point off the curve is an error, not a panic.
	off := &ecdsa.PublicKey{Curve: sm2.P256(), X: big.NewInt(1), Y: big.NewInt(1)}
	if verifyCertificateVerify(off, serverSignatureContext, th[:], []byte{0x30, 0}) == nil {
		t.Fatal("key off the curve accepted")
	}
}
