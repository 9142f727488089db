package tlcp

import (
	"context"
	"crypto"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Key exchange of GB/T 38636 §6.4.5.4 and §6.4.5.8 (protocol-notes §5.7, §5.8, §6.2).

const curveSM2 = 41 // named curve id of SM2 in ServerECDHEParams

// eccSignedParams builds client_random || server_random || u24 len || encCert.
func eccSignedParams(clientRandom, serverRandom, encCert []byte) []byte {
	b := make([]byte, 0, 64+3+len(encCert))
	b = append(b, clientRandom...)
	b = append(b, serverRandom...)
	b = append(b, byte(len(encCert)>>16), byte(len(encCert)>>8), byte(len(encCert)))
	return append(b, encCert...)
}

// ecdheParams returns ServerECDHEParams / ClientECDHEParams:
// 03 (named_curve) || 00 29 || 41 || 04 X Y (69 bytes).
func ecdheParams(pub *ecdh.PublicKey) []byte {
	p := pub.Bytes()
	b := make([]byte, 0, 4+len(p))
	b = append(b, 3, 0, curveSM2, byte(len(p)))
	return append(b, p...)
}

// parseECDHEParams reads 03 || curve(2) || u8 point, returning the point and
// the rest. Like Tongsuo, the curve id is not enforced beyond the point being
// on SM2.
func parseECDHEParams(b []byte) (*ecdh.PublicKey, []byte, error) {
	s := cryptobyte.String(b)
	var curveType uint8
	var curve uint16
	var point []byte
	if !s.ReadUint8(&curveType) || curveType != 3 || !s.ReadUint16(&curve) || !s.ReadUint8LengthPrefixed((*cryptobyte.String)(&point)) {
		return nil, nil, errors.New("malformed ECDHE parameters")
	}
	pub, err := ecdh.P256().NewPublicKey(point)
	if err != nil {
		return nil, nil, fmt.Errorf("ECDHE point: %w", err)
	}
	return pub, []byte(s), nil
}

func u16Vector(b []byte) []byte {
	out := make([]byte, 2+len(b))
	out[0], out[1] = byte(len(b)>>8), byte(len(b))
	copy(out[2:], b)
	return out
}

// readSignature reads signature<u16> that must end the message.
func readSignature(b []byte) ([]byte, bool) {
	s := cryptobyte.String(b)
	var sig cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&sig) || len(sig) == 0 || !s.Empty() {
		return nil, false
	}
	return sig, true
}

// ---- server side ----

type serverKeyAgreement struct {
	suite     *cipherSuite
	cert      *Certificate
	ephemeral *ecdh.PrivateKey
}

// generateServerKeyExchange signs the enc certificate (ECC) or an ephemeral
// SM2 point (ECDHE) with the signing key.
func (ka *serverKeyAgreement) generateServerKeyExchange(ctx context.Context, rand io.Reader, clientRandom, serverRandom []byte) ([]byte, error) {
	var signed, params []byte
	if ka.suite.ecdhe {
		eph, err := ecdh.P256().GenerateKey(rand)
		if err != nil {
			return nil, err
		}
		ka.ephemeral = eph
		params = ecdheParams(eph.PublicKey())
		signed = make([]byte, 0, 64+len(params))
		signed = append(append(append(signed, clientRandom...), serverRandom...), params...)
	} else {
		signed = eccSignedParams(clientRandom, serverRandom, ka.cert.EncCertificate)
	}
	sig, err := signSM2(ctx, ka.cert.SignKey, rand, signed)
	if err != nil {
		return nil, wrapErr(AlertInternalError, "signing ServerKeyExchange", err)
	}
	return append(params, u16Vector(sig)...), nil
}

// processClientKeyExchange recovers the pre-master secret. For ECC, any
// decryption or version failure continues with a random pre-master so the
// handshake fails at Finished without an oracle (RFC 5246 §7.4.7.1 practice).
func (ka *serverKeyAgreement) processClientKeyExchange(ctx context.Context, rand io.Reader, body []byte, clientEnc *smx509.Certificate) ([]byte, error) {
	if ka.suite.ecdhe {
		return ka.processECDHE(ctx, body, clientEnc)
	}
	random := make([]byte, 48)
	if _, err := io.ReadFull(rand, random); err != nil {
		return nil, wrapErr(AlertInternalError, "random pre-master", err)
	}
	random[0], random[1] = VersionTLCP>>8, VersionTLCP&0xff
	ct := body
	s := cryptobyte.String(body)
	var v cryptobyte.String
	if s.ReadUint16LengthPrefixed(&v) && s.Empty() {
		ct = v
	} else if len(body) > 0 && body[0] != 0x30 {
		return nil, errorf(AlertDecodeError, "malformed ECC ClientKeyExchange")
	}
	// Some senders pad after the DER SM2Cipher: keep the SEQUENCE only.
	var seq cryptobyte.String
	in := cryptobyte.String(ct)
	if in.ReadASN1Element(&seq, 0x30) {
		ct = seq
	}
	dec, ok := ka.cert.EncKey.(crypto.Decrypter)
	if !ok {
		return nil, errorf(AlertInternalError, "encryption key %T cannot decrypt", ka.cert.EncKey)
	}
	pm, err := smkey.Decrypt(ctx, dec, rand, ct, nil)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, smkey.ErrKeyUnavailable) {
		// The key could not be used, whatever the ciphertext (a remote
		// key server down or refusing): no oracle to hide.
		return nil, wrapErr(AlertInternalError, "decrypting the ClientKeyExchange", err)
	}
	good := 0
	if err == nil && len(pm) == 48 {
		good = subtle.ConstantTimeByteEq(pm[0], VersionTLCP>>8) & subtle.ConstantTimeByteEq(pm[1], VersionTLCP&0xff)
	} else {
		pm = make([]byte, 48)
	}
	subtle.ConstantTimeCopy(1-good, pm, random)
	return pm, nil
}

func (ka *serverKeyAgreement) processECDHE(ctx context.Context, body []byte, clientEnc *smx509.Certificate) ([]byte, error) {
	// Tongsuo/Kona send the bare 69-byte params; GmSSL a 71-byte u16 vector.
	params := body
	if len(body) >= 2 && body[0] != 3 && int(body[0])<<8|int(body[1]) == len(body)-2 {
		params = body[2:]
	}
	peerEph, rest, err := parseECDHEParams(params)
	if err != nil || len(rest) != 0 {
		return nil, wrapErr(AlertDecodeError, "ECDHE ClientKeyExchange", err)
	}
	if clientEnc == nil {
		return nil, errorf(AlertHandshakeFailure, "ECDHE needs the client's encryption certificate")
	}
	peerStatic, err := cachedECDHPublic(clientEnc)
	if err != nil {
		return nil, wrapErr(AlertBadCertificate, "client encryption certificate", err)
	}
	kag := smkey.AsKeyAgreement(ka.cert.EncKey)
	if kag == nil {
		return nil, errorf(AlertInternalError, "encryption key %T cannot do SM2 key agreement", ka.cert.EncKey)
	}
	pm, err := kag.SM2KeyAgree(ctx, ka.ephemeral, peerStatic, peerEph, false, 48, nil, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Both peer points passed the curve checks above, so the
		// agreement fails for the server's own reasons (a key server
		// down, the private-key queue full), as a signature can:
		// internal_error, not handshake_failure.
		return nil, wrapErr(AlertInternalError, "SM2 key agreement", err)
	}
	return pm, nil
}

// ecdhKeys caches the SM2 key-agreement form of peer encryption keys: the
// conversion checks the point, which costs a few microseconds per ECDHE
// handshake otherwise. Entries are keyed by the public point itself
// (smkey.SM2Point), not by the certificate: a certificate may be one that
// parsedCerts does not keep (over maxCachedCert bytes, parsed anew in each
// handshake and pointing into its flight), which the cache would then hold
// for as long as the entry lives, for any peer that sends one.
var ecdhKeys = lru.New[[65]byte, *ecdh.PublicKey](1024, time.Hour)

// cachedECDHPublic is ecdhPublic through ecdhKeys.
func cachedECDHPublic(c *smx509.Certificate) (*ecdh.PublicKey, error) {
	ep, err := sm2Public(c)
	if err != nil {
		return nil, err
	}
	point, ok := smkey.SM2Point(ep)
	if !ok {
		return nil, errors.New("SM2 public key out of range")
	}
	if k, ok := ecdhKeys.Get(point); ok {
		return k, nil
	}
	k, err := sm2.PublicKeyToECDH(ep)
	if err != nil {
		return nil, err
	}
	ecdhKeys.Put(point, k)
	return k, nil
}

func ecdhPublic(c *smx509.Certificate) (*ecdh.PublicKey, error) {
	ep, err := sm2Public(c)
	if err != nil {
		return nil, err
	}
	return sm2.PublicKeyToECDH(ep)
}

// ---- client side ----

type clientKeyAgreement struct {
	suite      *cipherSuite
	serverEph  *ecdh.PublicKey
	serverSign *smx509.Certificate
	serverEnc  *smx509.Certificate
	asVector   bool
	clientCert *Certificate
	// loadGen is Config.InsecureLoadGenerator.
	loadGen bool
}

// loadGenPreMasters holds, for Config.InsecureLoadGenerator clients, the
// one pre-master encrypted to each server encryption certificate (parsed
// certificates are cached, so the pointer is stable across connections).
var loadGenPreMasters = lru.New[*smx509.Certificate, loadGenPreMaster](64, 0)

type loadGenPreMaster struct{ pm, ckeBody []byte }

// processServerKeyExchange verifies the server's signature.
func (ka *clientKeyAgreement) processServerKeyExchange(body, clientRandom, serverRandom []byte) error {
	var signed []byte
	sigPart := body
	if ka.suite.ecdhe {
		eph, rest, err := parseECDHEParams(body)
		if err != nil {
			return wrapErr(AlertDecodeError, "ServerKeyExchange", err)
		}
		ka.serverEph = eph
		params := body[:len(body)-len(rest)]
		signed = append(append(append([]byte{}, clientRandom...), serverRandom...), params...)
		sigPart = rest
	} else {
		signed = eccSignedParams(clientRandom, serverRandom, ka.serverEnc.Raw)
	}
	sig, ok := readSignature(sigPart)
	if !ok {
		return errorf(AlertDecodeError, "malformed ServerKeyExchange signature")
	}
	if ka.loadGen {
		return nil // Config.InsecureLoadGenerator: benchmarks only
	}
	if !verifySM2(ka.serverSign.PublicKey, signed, sig) {
		return errorf(AlertDecryptError, "ServerKeyExchange signature does not verify with the server signing certificate")
	}
	return nil
}

// generateClientKeyExchange returns the pre-master and the CKE body.
func (ka *clientKeyAgreement) generateClientKeyExchange(ctx context.Context, rand io.Reader) ([]byte, []byte, error) {
	if ka.suite.ecdhe {
		if ka.clientCert == nil || ka.clientCert.EncKey == nil {
			return nil, nil, errorf(AlertHandshakeFailure, "ECDHE suites need a client certificate pair")
		}
		kag := smkey.AsKeyAgreement(ka.clientCert.EncKey)
		if kag == nil {
			return nil, nil, errorf(AlertInternalError, "client encryption key %T cannot do SM2 key agreement", ka.clientCert.EncKey)
		}
		eph, err := ecdh.P256().GenerateKey(rand)
		if err != nil {
			return nil, nil, err
		}
		serverStatic, err := ecdhPublic(ka.serverEnc)
		if err != nil {
			return nil, nil, wrapErr(AlertBadCertificate, "server encryption certificate", err)
		}
		pm, err := kag.SM2KeyAgree(ctx, eph, serverStatic, ka.serverEph, true, 48, nil, nil)
		if err != nil {
			return nil, nil, wrapErr(AlertInternalError, "SM2 key agreement", err)
		}
		params := ecdheParams(eph.PublicKey())
		if ka.asVector {
			params = u16Vector(params)
		}
		return pm, params, nil
	}
	if ka.loadGen {
		if e, ok := loadGenPreMasters.Get(ka.serverEnc); ok {
			return e.pm, e.ckeBody, nil
		}
	}
	pm := make([]byte, 48)
	if _, err := io.ReadFull(rand, pm[2:]); err != nil {
		return nil, nil, err
	}
	pm[0], pm[1] = VersionTLCP>>8, VersionTLCP&0xff
	pub, err := sm2Public(ka.serverEnc)
	if err != nil {
		return nil, nil, wrapErr(AlertBadCertificate, "server encryption certificate", err)
	}
	ct, err := sm2.EncryptASN1(rand, pub, pm)
	if err != nil {
		return nil, nil, wrapErr(AlertInternalError, "SM2 encryption of the pre-master", err)
	}
	if ka.loadGen {
		loadGenPreMasters.Put(ka.serverEnc, loadGenPreMaster{pm, u16Vector(ct)})
	}
	return pm, u16Vector(ct), nil
}
