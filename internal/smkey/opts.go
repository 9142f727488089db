package smkey

import (
	"crypto"

	"github.com/emmansun/gmsm/sm2"
)

// SM2SignerOpts asks a signer for an SM2 signature of a message (not of a
// digest) with a distinguishing ID: the signer computes e = SM3(Z_A ||
// msg) itself (GB/T 32918.2-2016 §6.1). gmproxy's signers (the offload
// engine, the key server's remote keys) read the ID from here; Sign gives
// any other signer gmsm's equivalent option, whose fields gmsm does not
// export.
type SM2SignerOpts struct {
	uid  []byte
	gmsm *sm2.SM2SignerOption
}

// NewSM2SignerOpts returns the options for ID uid (nil: the default ID
// 1234567812345678).
func NewSM2SignerOpts(uid []byte) *SM2SignerOpts {
	uid = append([]byte(nil), uid...)
	if len(uid) == 0 {
		uid = nil
	}
	return &SM2SignerOpts{uid: uid, gmsm: sm2.NewSM2SignerOption(true, uid)}
}

// DefaultSM2SignerOpts signs with the default ID (TLCP, GB/T 38636 §6.4.5.4).
var DefaultSM2SignerOpts = NewSM2SignerOpts(nil)

// HashFunc implements crypto.SignerOpts: the message is not pre-hashed.
func (*SM2SignerOpts) HashFunc() crypto.Hash { return 0 }

// UID returns the distinguishing ID; nil means the default one.
func (o *SM2SignerOpts) UID() []byte { return o.uid }

// GMSM returns gmsm's option with the same meaning, for signers that only
// know gmsm's (an *sm2.PrivateKey).
func (o *SM2SignerOpts) GMSM() *sm2.SM2SignerOption { return o.gmsm }
