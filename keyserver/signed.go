package keyserver

import (
	"bytes"
	"crypto/ecdsa"
	"errors"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// What the sign operation signs. A client sends the message, not a
// digest: the key server checks that it is one of the handshake messages
// gmproxy's servers sign with a remote key, and computes e = SM3(Z_A ||
// M) itself with the ID the message's protocol prescribes. An edge that
// may use a signing key can thus have it sign handshakes, and nothing
// else: not a document, a certificate or a message of another protocol.
// The shapes are exactly what the tlcp and tls13sm packages build:
//
//   - TLS 1.3 server CertificateVerify content (RFC 8446 §4.4.3): 64 bytes
//     of 0x20 || "TLS 1.3, server CertificateVerify" || 0x00 || an SM3
//     transcript hash (32 bytes), signed with the ID of RFC 8998 §3.2.1.
//   - TLCP ECDHE ServerKeyExchange (GB/T 38636-2020 §6.4.5.4):
//     client_random (32) || server_random (32) || ServerECDHParams:
//     curve_type 3 (named_curve) || curve 41 (SM2, as tlcp writes it) ||
//     length 65 || an uncompressed point on the SM2 curve; default ID.
//   - TLCP ECC ServerKeyExchange: client_random (32) || server_random (32)
//     || length (3) || the DER of the server's encryption certificate, an
//     X.509 certificate with an SM2 public key whose key usage (when
//     present) allows key encipherment, data encipherment or key
//     agreement, as tlcp requires of an encryption certificate; default
//     ID.
//
// The client's half of a handshake (a TLCP or TLS 1.3 client
// CertificateVerify) is not signed: gmproxy keeps no client key on a key
// server. The encryption certificate of an ECC ServerKeyExchange is not
// required to hold a key this server serves: a site's encryption key may
// live on another key server or on the edge (sign_key_server and
// enc_key_server are set apart).

const (
	// sm2TLS13ID is the SM2 ID of TLS 1.3 CertificateVerify (RFC 8998
	// §3.2.1), the one tls13sm passes.
	sm2TLS13ID = "TLSv1.3+GM+Cipher+Suite"
	// tls13ServerContext is the context string of a server's
	// CertificateVerify with its 0 byte (RFC 8446 §4.4.3).
	tls13ServerContext = "TLS 1.3, server CertificateVerify\x00"
	// tlcpCurveSM2 is the named curve tlcp writes in ServerECDHParams.
	tlcpCurveSM2 = 41
	randomsLen   = 32 + 32
)

// The signer options of each kind of message: its SM2 ID.
var (
	tls13SignOpts = smkey.NewSM2SignerOpts([]byte(sm2TLS13ID))
	tlcpSignOpts  = smkey.DefaultSM2SignerOpts
)

// errNotHandshake is the failure of a sign request whose message is not a
// handshake message the key server signs (CodeNotHandshake).
var errNotHandshake = errors.New("sign: the message is not a TLS 1.3 server CertificateVerify nor a TLCP ServerKeyExchange")

// handshakeSignOpts returns the signer options (the SM2 ID) of msg when it
// is a handshake message the key server signs, else errNotHandshake.
func handshakeSignOpts(msg []byte) (*smkey.SM2SignerOpts, error) {
	switch {
	case isTLS13CertificateVerify(msg):
		return tls13SignOpts, nil
	case isTLCPECDHEParams(msg), isTLCPECCParams(msg):
		return tlcpSignOpts, nil
	}
	return nil, errNotHandshake
}

// isTLS13CertificateVerify reports whether msg is the content a TLS
// 1.3-SM server signs in its CertificateVerify.
func isTLS13CertificateVerify(msg []byte) bool {
	const pad = 64
	if len(msg) != pad+len(tls13ServerContext)+32 {
		return false
	}
	for _, b := range msg[:pad] {
		if b != 0x20 {
			return false
		}
	}
	return string(msg[pad:pad+len(tls13ServerContext)]) == tls13ServerContext
}

// isTLCPECDHEParams reports whether msg is the signed part of a TLCP
// ECDHE ServerKeyExchange.
func isTLCPECDHEParams(msg []byte) bool {
	const pointLen = 65
	if len(msg) != randomsLen+4+pointLen {
		return false
	}
	if !bytes.Equal(msg[randomsLen:randomsLen+4], []byte{3, 0, tlcpCurveSM2, pointLen}) {
		return false
	}
	// On the curve, uncompressed, not the identity.
	_, err := ecdh.P256().NewPublicKey(msg[randomsLen+4 : randomsLen+4+pointLen])
	return err == nil
}

// isTLCPECCParams reports whether msg is the signed part of a TLCP ECC
// ServerKeyExchange.
func isTLCPECCParams(msg []byte) bool {
	if len(msg) <= randomsLen+3 {
		return false
	}
	n := int(msg[randomsLen])<<16 | int(msg[randomsLen+1])<<8 | int(msg[randomsLen+2])
	der := msg[randomsLen+3:]
	if n != len(der) {
		return false
	}
	// ParseCertificate refuses trailing bytes: the length covers one
	// certificate and nothing else.
	cert, err := smx509.ParseCertificate(der)
	if err != nil {
		return false
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != sm2.P256() {
		return false
	}
	const encUsage = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	return cert.KeyUsage == 0 || cert.KeyUsage&encUsage != 0
}
