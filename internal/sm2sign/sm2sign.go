// Package sm2sign makes SM2 signatures (GB/T 32918.2-2016 §6.1) with a
// private key held in this process, for the handshakes' ServerKeyExchange
// and CertificateVerify signatures.
//
// gmsm's SignASN1 derives each nonce through an HMAC-SM3 DRBG that it
// instantiates per signature, and rebuilds its internal key from the
// public one on every call: 31 µs and 58 allocations per signature on the
// reference machine, half of it outside the scalar multiplication. A Key
// does the per-key work once (d as a constant-time integer, (1+d)⁻¹ mod n,
// the nonce key) and derives the nonce with one HMAC-SM3, so that a
// signature costs the fixed-base scalar multiplication, its conversion to
// affine coordinates, and a few multiplications mod n.
//
// Arithmetic mod n is filippo.io/bigmod (the standard library's
// constant-time crypto/internal/fips140/bigmod, exported); [k]G is gmsm's
// constant-time fixed-base multiplication, reached through its ecdh
// package. Nothing here branches on a secret except the rejection of a
// nonce out of range, whose probability is below 2⁻³¹.
package sm2sign

import (
	"context"
	"crypto"
	"errors"
	"io"
	"math/big"
	"sync"

	"filippo.io/bigmod"
	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/sm3state"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// scalarLen is the length of n, of a private key and of a nonce.
const scalarLen = 32

var (
	n        *bigmod.Modulus
	nMinus2  []byte // the exponent of an inverse mod n (Fermat; n is prime)
	errRange = errors.New("sm2sign: private key out of range [1, n-2]")
)

func init() {
	// n, the order of the SM2 curve's base point G (GB/T 32918.5-2017
	// §2), as gmsm's curve parameters give it.
	order := sm2.P256().Params().N
	var err error
	if n, err = bigmod.NewModulus(order.FillBytes(make([]byte, scalarLen))); err != nil {
		panic("sm2sign: " + err.Error())
	}
	nMinus2 = new(big.Int).Sub(order, big.NewInt(2)).FillBytes(make([]byte, scalarLen))
}

// Key signs with one SM2 private key. It is safe for concurrent use.
type Key struct {
	priv *sm2.PrivateKey
	d    *bigmod.Nat // d
	inv  *bigmod.Nat // (1+d)⁻¹ mod n
	// nonce is HMAC-SM3 keyed with d: the nonce derivation's PRF.
	nonce sm3state.HMACState
}

// New prepares priv for signing. It fails for a key that is not on the
// SM2 curve or whose d is not in [1, n-2] (GB/T 32918.1-2016 §6.1).
func New(priv *sm2.PrivateKey) (*Key, error) {
	if priv == nil || priv.D == nil || priv.Curve != sm2.P256() || priv.D.Sign() <= 0 || priv.D.BitLen() > 8*scalarLen {
		return nil, errRange
	}
	var db [scalarLen]byte
	priv.D.FillBytes(db[:])
	defer clear(db[:])
	d, err := bigmod.NewNat().SetBytes(db[:], n)
	if err != nil {
		return nil, errRange
	}
	dp1 := bigmod.NewNat().SetUint(1).ExpandFor(n).Add(d, n)
	if dp1.IsZero() == 1 {
		return nil, errRange // d = n-1: 1+d has no inverse
	}
	k := &Key{priv: priv, d: d, inv: bigmod.NewNat().Exp(dp1, nMinus2, n)}
	var m sm3state.HMAC
	m.SetKey(db[:])
	m.SaveState(&k.nonce)
	m.Wipe()
	return k, nil
}

// Public implements crypto.Signer.
func (k *Key) Public() crypto.PublicKey { return &k.priv.PublicKey }

// Unwrap returns the gmsm key k signs with.
func (k *Key) Unwrap() crypto.Signer { return k.priv }

// SignContext implements smkey.ContextSigner: Sign after a check of ctx.
func (k *Key) SignContext(ctx context.Context, rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return k.Sign(rand, digest, opts)
}

// Sign implements crypto.Signer with gmsm's meaning of its arguments and
// returns a DER SEQUENCE of r and s:
//   - opts *smkey.SM2SignerOpts: digest is the message, signed with the
//     options' ID (e = SM3(Z_A || message) is computed here);
//   - opts *sm2.SM2SignerOption, whose fields gmsm does not export, a nil
//     rand (gmsm's deterministic signature) or a digest that is not 32
//     bytes long: gmsm signs;
//   - otherwise digest is e.
//
// The nonce is hedged: k = HMAC-SM3(d, Z || e || i) with Z 32 bytes read
// from rand and i counting the rare rejections, so that a failing random
// source repeats no nonce across different digests.
func (k *Key) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if _, gm := opts.(*sm2.SM2SignerOption); gm || rand == nil {
		// gmsm does not know smkey's options: without their gmsm
		// equivalent it would sign the message as if it were e.
		if o, ok := opts.(*smkey.SM2SignerOpts); ok {
			opts = o.GMSM()
		}
		return k.priv.Sign(rand, digest, opts)
	}
	if o, ok := opts.(*smkey.SM2SignerOpts); ok {
		e, err := sm2.CalculateSM2Hash(&k.priv.PublicKey, digest, o.UID())
		if err != nil {
			return nil, err
		}
		digest = e
	}
	if len(digest) != scalarLen {
		return k.priv.Sign(rand, digest, opts)
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.free()
	// The nonce input: z || e || i, z read in place.
	if _, err := io.ReadFull(rand, sc.in[:scalarLen]); err != nil {
		return nil, err
	}
	copy(sc.in[scalarLen:], digest)
	r, s, err := k.sign(digest, &sc.kb, func(kb *[scalarLen]byte, i byte) {
		sc.in[2*scalarLen] = i
		sc.m.LoadState(&k.nonce)
		sc.m.MAC(kb[:], sc.in[:])
	})
	if err != nil {
		return nil, err
	}
	return encodeSignature(r, s), nil
}

// scratch is a signature's working memory: pooled, so that the HMAC state
// (about 600 bytes) is not allocated per signature, and wiped before it
// returns to the pool.
type scratch struct {
	m  sm3state.HMAC
	in [2*scalarLen + 1]byte // z || e || i
	kb [scalarLen]byte       // the nonce
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (sc *scratch) free() {
	sc.m.Wipe()
	clear(sc.in[:])
	clear(sc.kb[:])
	scratchPool.Put(sc)
}

// maxTries bounds the nonce rejections: each happens with probability
// below 2⁻³¹, so reaching the bound means the nonce source is broken.
const maxTries = 64

var errNonce = errors.New("sm2sign: no nonce in range")

// sign is GB/T 32918.2-2016 §6.1 steps A3–A7 over e = digest, with the
// nonces that nonce writes into kb (try i = 0, 1, ...). It returns r and s,
// big-endian, 32 bytes each.
func (k *Key) sign(digest []byte, kb *[scalarLen]byte, nonce func(kb *[scalarLen]byte, i byte)) (r, s []byte, err error) {
	e, err := bigmod.NewNat().SetOverflowingBytes(digest, n)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < maxTries; i++ {
		// A3: k in [1, n-1]. gmsm's ecdh takes a scalar in [1, n-2]
		// only and refuses the others, n-1 included: drawn again.
		nonce(kb, byte(i))
		kp, err := ecdh.P256().NewPrivateKey(kb[:])
		if err != nil {
			continue
		}
		kn, err := bigmod.NewNat().SetBytes(kb[:], n)
		if err != nil {
			return nil, nil, err // unreachable: kb < n-1
		}
		// A4: (x1, y1) = [k]G.
		x1, err := bigmod.NewNat().SetOverflowingBytes(kp.PublicKey().Bytes()[1:1+scalarLen], n)
		if err != nil {
			return nil, nil, err
		}
		// A5: r = (e + x1) mod n; again if r = 0 or r + k = n.
		rn := x1.Add(e, n)
		if rn.IsZero() == 1 {
			continue
		}
		r = rn.Bytes(n)
		rk, _ := bigmod.NewNat().SetBytes(r, n)
		if rk.Add(kn, n).IsZero() == 1 {
			continue
		}
		// A6: s = ((1+d)⁻¹ · (k - r·d)) mod n; again if s = 0.
		rd, _ := bigmod.NewNat().SetBytes(r, n)
		rd.Mul(k.d, n)
		sn := kn.Sub(rd, n).Mul(k.inv, n)
		if sn.IsZero() == 1 {
			continue
		}
		return r, sn.Bytes(n), nil
	}
	return nil, nil, errNonce
}

// encodeSignature is the DER SEQUENCE { r INTEGER, s INTEGER } of
// GB/T 35276-2017 §7.3 (the encoding gmsm and crypto/ecdsa use), built in
// one buffer: each INTEGER is at most 33 bytes, so every length fits in
// one byte.
func encodeSignature(r, s []byte) []byte {
	r, s = minimal(r), minimal(s)
	body := integerLen(r) + integerLen(s)
	out := make([]byte, 0, 2+body)
	out = append(out, 0x30, byte(body))
	return appendInteger(appendInteger(out, r), s)
}

// minimal strips v's leading zero bytes, keeping one byte.
func minimal(v []byte) []byte {
	for len(v) > 1 && v[0] == 0 {
		v = v[1:]
	}
	return v
}

// integerLen is the DER length of the INTEGER of the positive minimal v:
// tag, length, a zero byte when v's top bit is set, v.
func integerLen(v []byte) int { return 2 + int(v[0]>>7) + len(v) }

// appendInteger appends the DER INTEGER of the positive minimal v.
func appendInteger(out, v []byte) []byte {
	out = append(out, 0x02, byte(integerLen(v)-2))
	if v[0]&0x80 != 0 {
		out = append(out, 0)
	}
	return append(out, v...)
}

var _ smkey.ContextSigner = (*Key)(nil)
