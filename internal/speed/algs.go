package speed

import (
	"context"
	stdcipher "crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"hash"

	smcipher "github.com/emmansun/gmsm/cipher"
	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

func init() {
	Register(
		Alg{Name: "sm2-sign", Group: "sm2", Ops: true, Desc: "SM2 signature with Z (default ID) over a 32-byte message", New: newSM2Sign},
		Alg{Name: "sm2-verify", Group: "sm2", Ops: true, Desc: "SM2 verification with Z", New: newSM2Verify},
		Alg{Name: "sm2-encrypt", Group: "sm2", Ops: true, Desc: "SM2 encryption of a 48-byte secret (TLCP ECC pre-master), ASN.1", New: newSM2Encrypt},
		Alg{Name: "sm2-decrypt", Group: "sm2", Ops: true, Desc: "SM2 decryption of a 48-byte secret, ASN.1", New: newSM2Decrypt},
		Alg{Name: "sm2-keyagree", Group: "sm2", Ops: true, Desc: "SM2 key agreement, initiator side (ecdh.SM2MQV + SM2SharedKey, 48 bytes), as TLCP ECDHE servers run it", New: newSM2KeyAgree},
		Alg{Name: "sm2-ecdh", Group: "sm2", Ops: true, Desc: "curveSM2 key generation + ECDH (TLS 1.3-SM key share)", New: newSM2ECDH},
		Alg{Name: "sm3", Group: "sm3", Desc: "SM3 hash of a buffer", New: newHash(sm3.New, false)},
		Alg{Name: "hmac-sm3", Group: "sm3", Desc: "HMAC-SM3 of a buffer", New: newHash(sm3.New, true)},
		Alg{Name: "sm4-ecb", Group: "sm4", Desc: "SM4-ECB encryption", New: newSM4Mode(modeECB)},
		Alg{Name: "sm4-cbc-enc", Group: "sm4", Desc: "SM4-CBC encryption (serial)", New: newSM4Mode(modeCBCEnc)},
		Alg{Name: "sm4-cbc-dec", Group: "sm4", Desc: "SM4-CBC decryption (multi-block)", New: newSM4Mode(modeCBCDec)},
		Alg{Name: "sm4-ctr", Group: "sm4", Desc: "SM4-CTR", New: newSM4Mode(modeCTR)},
		Alg{Name: "sm4-gcm", Group: "sm4", Desc: "SM4-GCM seal, 12-byte nonce, 16-byte tag", New: newSM4Mode(modeGCM)},
		Alg{Name: "sm4-ccm", Group: "sm4", Desc: "SM4-CCM seal, 12-byte nonce, 16-byte tag", New: newSM4Mode(modeCCM)},
		Alg{Name: "sm4-xts", Group: "sm4", Desc: "SM4-XTS encryption (IEEE P1619 tweak)", New: newSM4Mode(modeXTS)},
	)
}

var msg32 = []byte("gmproxy speed: 32-byte message!!")

func newSM2Sign(int) (func() error, func(), error) {
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return func() error {
		_, err := k.Sign(rand.Reader, msg32, sm2.DefaultSM2SignerOpts)
		return err
	}, nil, nil
}

func newSM2Verify(int) (func() error, func(), error) {
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sig, err := k.Sign(rand.Reader, msg32, sm2.DefaultSM2SignerOpts)
	if err != nil {
		return nil, nil, err
	}
	return func() error {
		if !sm2.VerifyASN1WithSM2(&k.PublicKey, nil, msg32, sig) {
			return errors.New("verification failed")
		}
		return nil
	}, nil, nil
}

func newSM2Encrypt(int) (func() error, func(), error) {
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	secret := make([]byte, 48)
	return func() error {
		_, err := sm2.EncryptASN1(rand.Reader, &k.PublicKey, secret)
		return err
	}, nil, nil
}

func newSM2Decrypt(int) (func() error, func(), error) {
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	secret := make([]byte, 48)
	ct, err := sm2.EncryptASN1(rand.Reader, &k.PublicKey, secret)
	if err != nil {
		return nil, nil, err
	}
	return func() error {
		pt, err := k.Decrypt(nil, ct, sm2.ASN1DecrypterOpts)
		if err == nil && len(pt) != len(secret) {
			err = errors.New("wrong plaintext length")
		}
		return err
	}, nil, nil
}

func newSM2KeyAgree(int) (func() error, func(), error) {
	self, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	peer, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	peerStatic, err := peer.ECDH()
	if err != nil {
		return nil, nil, err
	}
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	peerEph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ka := smkey.LocalKeyAgreement{Key: self}
	ctx := context.Background()
	return func() error {
		_, err := ka.SM2KeyAgree(ctx, eph, peerStatic.PublicKey(), peerEph.PublicKey(), false, 48, nil, nil)
		return err
	}, nil, nil
}

func newSM2ECDH(int) (func() error, func(), error) {
	peer, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pub := peer.PublicKey()
	return func() error {
		k, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		_, err = k.ECDH(pub)
		return err
	}, nil, nil
}

func newHash(h func() hash.Hash, mac bool) func(int) (func() error, func(), error) {
	return func(size int) (func() error, func(), error) {
		var d hash.Hash
		if mac {
			d = hmac.New(h, make([]byte, 32))
		} else {
			d = h()
		}
		buf := make([]byte, size)
		sum := make([]byte, 0, d.Size())
		return func() error {
			d.Reset()
			d.Write(buf)
			sum = d.Sum(sum[:0])
			return nil
		}, nil, nil
	}
}

type sm4Mode int

const (
	modeECB sm4Mode = iota
	modeCBCEnc
	modeCBCDec
	modeCTR
	modeGCM
	modeCCM
	modeXTS
)

func newSM4Mode(mode sm4Mode) func(int) (func() error, func(), error) {
	return func(size int) (func() error, func(), error) {
		key := make([]byte, 16)
		if _, err := rand.Read(key); err != nil {
			return nil, nil, err
		}
		block, err := sm4.NewCipher(key)
		if err != nil {
			return nil, nil, err
		}
		src := make([]byte, size)
		dst := make([]byte, size+16)
		iv := make([]byte, 16)
		nonce := make([]byte, 12)
		switch mode {
		case modeECB:
			bm := smcipher.NewECBEncrypter(block)
			return func() error { bm.CryptBlocks(dst[:size], src); return nil }, nil, nil
		case modeCBCEnc:
			// One encrypter per buffer, as a record layer does (IV per record).
			return func() error {
				stdcipher.NewCBCEncrypter(block, iv).CryptBlocks(dst[:size], src)
				return nil
			}, nil, nil
		case modeCBCDec:
			return func() error {
				stdcipher.NewCBCDecrypter(block, iv).CryptBlocks(dst[:size], src)
				return nil
			}, nil, nil
		case modeCTR:
			return func() error {
				stdcipher.NewCTR(block, iv).XORKeyStream(dst[:size], src)
				return nil
			}, nil, nil
		case modeGCM, modeCCM:
			var aead stdcipher.AEAD
			if mode == modeGCM {
				aead, err = stdcipher.NewGCM(block)
			} else {
				aead, err = smcipher.NewCCM(block)
			}
			if err != nil {
				return nil, nil, err
			}
			return func() error { aead.Seal(dst[:0], nonce, src, nil); return nil }, nil, nil
		case modeXTS:
			tweakKey := make([]byte, 16)
			tweakKey[0] = 1
			// One data unit continued across calls (the tweak carries on).
			bm, err := smcipher.NewXTSEncrypter(sm4.NewCipher, key, tweakKey, iv)
			if err != nil {
				return nil, nil, err
			}
			return func() error { bm.CryptBlocks(dst[:size], src); return nil }, nil, nil
		}
		return nil, nil, errors.New("unknown SM4 mode")
	}
}
