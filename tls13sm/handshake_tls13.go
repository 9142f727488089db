package tls13sm

import (
	"context"
	"crypto"
	"crypto/hmac"
	"io"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// What the client and server sides of a handshake share: the secrets of
// the key schedule (§7.1) and the reading and writing of the
// authentication messages (§4.4), whose rules are the same for both
// sides but for the context string of CertificateVerify.

// handshakeSecrets are the secrets a handshake derives (§7.1), embedded in
// both sides' handshake states.
type handshakeSecrets struct {
	earlySecret                          earlySecret
	handshakeSecret                      handshakeSecret
	masterSecret                         masterSecret
	derivedEarly, derivedHS              derivedSecret
	clientHSSecret, serverHSSecret       trafficSecret
	clientFinishedKey, serverFinishedKey finishedKey
	clientAppSecret, serverAppSecret     trafficSecret
	masterState                          sm3state.HMACState
}

// deriveApplicationSecrets derives the master secret and from it both
// application traffic secrets over th, the transcript hash up to the
// server Finished (§7.1); the master secret's HMAC state is kept for the
// resumption master secret.
func (s *handshakeSecrets) deriveApplicationSecrets(ks *keySchedule, th []byte) {
	ks.extractMaster(&s.masterSecret, &s.derivedHS)
	ks.m.SetKey(s.masterSecret[:])
	ks.expandLabelKeyed(s.clientAppSecret[:], "c ap traffic", th)
	ks.expandLabelKeyed(s.serverAppSecret[:], "s ap traffic", th)
	ks.m.SaveState(&s.masterState)
}

// readHandshakeMsg reads the next handshake message, which must be of type
// typ, and decodes it with unmarshal (a message's unmarshal method); name
// names it in errors ("client Certificate"). It returns the message's
// bytes for the transcript.
func (c *Conn) readHandshakeMsg(typ uint8, unmarshal func([]byte) bool, name string) ([]byte, error) {
	return c.readHandshakeMsgInto(nil, typ, unmarshal, name)
}

// readHandshakeMsgInto is readHandshakeMsg with the message copied into
// dst's storage when it has room.
func (c *Conn) readHandshakeMsgInto(dst []byte, typ uint8, unmarshal func([]byte) bool, name string) ([]byte, error) {
	msg, err := c.readHandshakeBytesInto(dst)
	if err != nil {
		return nil, err
	}
	if msg[0] != typ {
		return nil, c.fail(AlertUnexpectedMessage, "expected %s, got message type %d", name, msg[0])
	}
	if !unmarshal(msg) {
		return nil, c.fail(AlertDecodeError, "malformed %s", name)
	}
	return msg, nil
}

// sendCertificateVerify signs th, the transcript hash up to this side's
// Certificate, with key under sigContext (this side's context string),
// through ctx and cfg's Rand, and sends CertificateVerify (§4.4.3). ks's
// SM3 compressor computes the digest for in-process keys; the message is
// marshalled into *buf (reused).
func (c *Conn) sendCertificateVerify(ctx context.Context, cfg *Config, ks *keySchedule, buf *[]byte, key crypto.Signer, sigContext string, th []byte, transcript io.Writer) error {
	sig, err := signCertificateVerify(ctx, cfg, ks, key, sigContext, th)
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	cv := &certificateVerifyMsg{sigAlg: SM2SigSM3, signature: sig}
	*buf = cv.appendFast((*buf)[:0])
	return c.writeHandshake(*buf, transcript)
}

// readCertificateVerify reads the peer's CertificateVerify (§4.4.3) and
// checks its sm2sig_sm3 signature by pub over th, the transcript hash up
// to the peer's Certificate, under sigContext (the peer's context string).
// name names the message in errors. It returns the message's bytes for the
// transcript.
// With unchecked (a Config.InsecureLoadGenerator client) the signature is
// not verified.
func (c *Conn) readCertificateVerify(ks *keySchedule, pub crypto.PublicKey, sigContext string, th []byte, name string, unchecked bool) ([]byte, error) {
	var cv certificateVerifyMsg
	msg, err := c.readHandshakeMsg(typeCertificateVerify, cv.unmarshal, name)
	if err != nil {
		return nil, err
	}
	if cv.sigAlg != SM2SigSM3 {
		return nil, c.fail(AlertIllegalParameter, "%s with scheme %#04x that was not offered", name, cv.sigAlg)
	}
	if unchecked {
		return msg, nil
	}
	if err := verifyCertificateVerifyWith(ks, pub, sigContext, th, cv.signature); err != nil {
		return nil, c.sendAlert(AlertDecryptError, err)
	}
	return msg, nil
}

// sendFinished sends Finished (§4.4.4) with verify_data, written into vd,
// the HMAC under fk of th, the transcript hash so far, marshalled
// into *buf (reused).
func (c *Conn) sendFinished(ks *keySchedule, fk *finishedKey, th, vd []byte, buf *[]byte, transcript io.Writer) error {
	ks.finishedMAC(vd, fk, th)
	fin := &finishedMsg{verifyData: vd}
	*buf = fin.appendFast((*buf)[:0])
	return c.writeHandshake(*buf, transcript)
}

// readFinished reads the peer's Finished (§4.4.4) and checks its
// verify_data, the HMAC under fk of th (computed into want).
// name names the message in errors. It returns the message's bytes for the
// transcript, in buf's storage when it has room.
func (c *Conn) readFinished(ks *keySchedule, fk *finishedKey, th, want, buf []byte, name string) ([]byte, error) {
	var fin finishedMsg
	msg, err := c.readHandshakeMsgInto(buf, typeFinished, fin.unmarshal, name)
	if err != nil {
		return nil, err
	}
	ks.finishedMAC(want, fk, th)
	if !hmac.Equal(want, fin.verifyData) {
		return nil, c.fail(AlertDecryptError, "invalid %s", name)
	}
	return msg, nil
}
