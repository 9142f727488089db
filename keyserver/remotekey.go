package keyserver

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/keyoffload"
)

// RemoteKey is an SM2 private key held by a key server.
type RemoteKey struct {
	client *Client
	id     [32]byte
	pub    *ecdsa.PublicKey
}

// NewRemoteKey returns the key of the key server whose public key is pub
// (typically taken from the certificate).
func NewRemoteKey(c *Client, pub *ecdsa.PublicKey) (*RemoteKey, error) {
	id, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &RemoteKey{client: c, id: id, pub: pub}, nil
}

var (
	_ smkey.ContextSigner    = (*RemoteKey)(nil)
	_ smkey.ContextDecrypter = (*RemoteKey)(nil)
	_ smkey.KeyAgreement     = (*RemoteKey)(nil)
)

// Public implements crypto.Signer.
func (k *RemoteKey) Public() crypto.PublicKey { return k.pub }

// KeyLocation implements keyoffload.Locator: keyoffload.Remote.
func (k *RemoteKey) KeyLocation() string { return keyoffload.Remote }

// ID returns the key's identifier in the protocol.
func (k *RemoteKey) ID() [32]byte { return k.id }

// Sign implements crypto.Signer.
func (k *RemoteKey) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.SignContext(context.Background(), rand, digest, opts)
}

var (
	errGMSMOption = errors.New("key server: sm2.SM2SignerOption cannot be read; pass smkey.SM2SignerOpts with the message")
	errDigestSign = errors.New("key server: a remote key signs handshake messages, not digests; pass the message with smkey.SM2SignerOpts")
)

// SignContext implements smkey.ContextSigner. opts must be an
// *smkey.SM2SignerOpts and msg the message: the key server signs
// handshake messages only (a TLS 1.3 server CertificateVerify, a TLCP
// ServerKeyExchange; see the package documentation), computing e =
// SM3(Z_A || msg) itself with the ID the message's protocol prescribes.
// A digest is refused here, another message by the key server
// (ErrNotHandshake).
func (k *RemoteKey) SignContext(ctx context.Context, _ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	o, ok := opts.(*smkey.SM2SignerOpts)
	if !ok {
		if _, gm := opts.(*sm2.SM2SignerOption); gm {
			return nil, errGMSMOption
		}
		return nil, errDigestSign
	}
	sig, err := k.client.call(ctx, OpSign, k.id[:], msg)
	if err != nil {
		return nil, err
	}
	// A signature that does not verify (a key server serving another key
	// under this one's ID, a corrupt answer, a stack asking for another
	// ID than the key server's for this kind of message) fails here,
	// naming the key server, not at the peer as a failed handshake.
	e, err := sm2.CalculateSM2Hash(k.pub, msg, o.UID())
	if err != nil {
		return nil, err
	}
	if !sm2.VerifyASN1(k.pub, e, sig) {
		return nil, errBadSignature
	}
	return sig, nil
}

var errBadSignature = errors.New("key server: the signature answered does not verify under the key's public key with the ID asked for")

// ProbeSign has the key server sign a throwaway TLCP ECDHE
// ServerKeyExchange (random randoms, a fresh point) with k and checks the
// signature: a probe that the key is served and may sign, which signs
// nothing a peer would accept.
func (k *RemoteKey) ProbeSign(ctx context.Context) error {
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	msg := make([]byte, randomsLen, randomsLen+4+65)
	if _, err := rand.Read(msg); err != nil {
		return err
	}
	msg = append(append(msg, 3, 0, tlcpCurveSM2, 65), eph.PublicKey().Bytes()...)
	_, err = k.SignContext(ctx, nil, msg, tlcpSignOpts)
	return err
}

// Decrypt implements crypto.Decrypter.
func (k *RemoteKey) Decrypt(rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	return k.DecryptContext(context.Background(), rand, msg, opts)
}

// DecryptContext implements smkey.ContextDecrypter (ASN.1 ciphertexts,
// the TLCP encoding; opts must be nil).
func (k *RemoteKey) DecryptContext(ctx context.Context, _ io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	if opts != nil {
		return nil, errors.New("key server: only default SM2 decryption options are supported")
	}
	out, err := k.client.call(ctx, OpDecrypt, k.id[:], msg)
	var ke *Error
	if err != nil && !(errors.As(err, &ke) && ke.Code == CodeFailed) && !errors.Is(err, errRequestTooLarge) {
		// Not the key server's verdict on the ciphertext (CodeFailed),
		// nor its length: the key could not be used.
		err = fmt.Errorf("%w: %w", smkey.ErrKeyUnavailable, err)
	}
	return out, err
}

// SM2KeyAgree implements smkey.KeyAgreement.
func (k *RemoteKey) SM2KeyAgree(ctx context.Context, ephemeral *ecdh.PrivateKey, peerStatic, peerEphemeral *ecdh.PublicKey, responder bool, keyLen int, uid, peerUID []byte) ([]byte, error) {
	if ephemeral == nil || peerStatic == nil || peerEphemeral == nil || keyLen <= 0 || keyLen > maxKeyAgreementLen || len(uid) > maxKeyAgreementLen || len(peerUID) > maxKeyAgreementLen {
		return nil, errors.New("key server: bad key agreement arguments")
	}
	a := &keyAgreementArgs{eph: ephemeral, peerStatic: peerStatic, peerEph: peerEphemeral, responder: responder, keyLen: keyLen, uid: uid, peerUID: peerUID}
	out, err := k.client.call(ctx, OpKeyAgreement, k.id[:], appendKeyAgreement(make([]byte, 0, 32+65+65+1+2+4+len(uid)+len(peerUID)), a))
	if err == nil && len(out) != keyLen {
		return nil, fmt.Errorf("key server: key agreement answered %d bytes, %d asked", len(out), keyLen)
	}
	return out, err
}
