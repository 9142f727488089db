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

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// The direct path must be on with the gmsm version in go.mod (internal/sm3state
// has the details and the tests of both paths).
func TestGmsmDigestLayout(t *testing.T) {
	if !sm3state.Direct() {
		t.Fatal("gmsm's SM3 digest no longer has the layout internal/sm3state expects: the key schedule runs on the portable path")
	}
}

// The schedules of the Ratio benchmarks take exactly the SM3 compressions
// that RFC 8446 §7.1 requires with HMAC keying saved per key: 2 per key
// (ipad, opad) and 2 per MAC of at most 55 bytes.
func TestKeyScheduleCompressions(t *testing.T) {
	x := new(scheduleScratch)
	n := 0
	x.m.Compressor().CountBlocks(&n)
	shared := make([]byte, 32)
	th := sm3.Sum([]byte("th"))
	fullSchedule(x, shared, th[:])
	if n != 62 {
		t.Errorf("full handshake schedule: %d compressions, want 62", n)
	}
	n = 0
	resumedSchedule(x, new(resumptionPSK), shared, th[:])
	if n != 80 {
		t.Errorf("resumed handshake schedule: %d compressions, want 80", n)
	}
}

// certificateVerifyDigest computes gmsm's e = SM3(Z_A || content) with the
// RFC 8998 ID, for both contexts, cached or not.
func TestCertificateVerifyDigest(t *testing.T) {
	{
		key, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		th := sm3.Sum([]byte("transcript"))
		var c sm3state.Compressor
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
	}
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
		// Any other signer gets the content with sm2SignerOpts (as gmsm's
		// option: the recorder is no ContextSigner).
		r := &optsRecorder{PrivateKey: key}
		sig, err = signCertificateVerify(context.Background(), cfg, nil, r, ctx, th[:])
		if err != nil {
			t.Fatal(err)
		}
		if r.opts != sm2SignerOpts.GMSM() || !bytes.Equal(r.msg, signedMessage(ctx, th[:])) {
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
