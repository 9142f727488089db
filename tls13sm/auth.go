package tls13sm

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

const (
	serverSignatureContext = "TLS 1.3, server CertificateVerify\x00"
	clientSignatureContext = "TLS 1.3, client CertificateVerify\x00"
)

// signedMessage builds the content covered by CertificateVerify (§4.4.3):
// 64 spaces, the context string with its 0 byte, and the transcript hash.
func signedMessage(context string, transcriptHash []byte) []byte {
	b := make([]byte, 0, 64+len(context)+len(transcriptHash))
	for i := 0; i < 64; i++ {
		b = append(b, 0x20)
	}
	b = append(b, context...)
	return append(b, transcriptHash...)
}

// isSM2PublicKey reports whether pub is an SM2 public key.
func isSM2PublicKey(pub crypto.PublicKey) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && k.Curve == sm2.P256()
}

// signCertificateVerify signs with sm2sig_sm3 and the RFC 8998 ID, through
// the handshake's context.
func signCertificateVerify(ctx context.Context, cfg *Config, key crypto.Signer, context string, transcriptHash []byte) ([]byte, error) {
	if key == nil {
		return nil, errors.New("certificate has no private key")
	}
	if !isSM2PublicKey(key.Public()) {
		return nil, errors.New("certificate key is not an SM2 key")
	}
	sig, err := smkey.Sign(ctx, key, cfg.rand(), signedMessage(context, transcriptHash), sm2SignerOpts)
	if err != nil {
		return nil, fmt.Errorf("CertificateVerify signature: %w", err)
	}
	return sig, nil
}

// verifyCertificateVerify checks an sm2sig_sm3 signature by pub.
func verifyCertificateVerify(pub crypto.PublicKey, context string, transcriptHash, sig []byte) error {
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != sm2.P256() {
		return errors.New("peer key is not an SM2 key")
	}
	if !sm2.VerifyASN1WithSM2(k, []byte(sm2TLS13ID), signedMessage(context, transcriptHash), sig) {
		return errors.New("invalid sm2sig_sm3 CertificateVerify signature")
	}
	return nil
}

// verifyChain parses and (unless skipped) verifies a peer chain. It returns
// the alert to send on failure.
func verifyChain(cfg *Config, raw [][]byte, server bool, verify bool) ([]*smx509.Certificate, [][]*smx509.Certificate, Alert, error) {
	if len(raw) > maxCertChain {
		return nil, nil, AlertBadCertificate, fmt.Errorf("certificate chain of %d certificates (max %d)", len(raw), maxCertChain)
	}
	certs := make([]*smx509.Certificate, len(raw))
	for i, der := range raw {
		c, err := smx509.ParseCertificate(der)
		if err != nil {
			return nil, nil, AlertBadCertificate, fmt.Errorf("parsing peer certificate: %w", err)
		}
		certs[i] = c
	}
	if !isSM2PublicKey(certs[0].PublicKey) {
		return nil, nil, AlertUnsupportedCertificate, errors.New("peer certificate key is not SM2")
	}
	if cfg.Strict && certs[0].SignatureAlgorithm != smx509.SM2WithSM3 {
		return nil, nil, AlertBadCertificate, errors.New("strict mode: peer certificate not signed with SM2-with-SM3")
	}
	var chains [][]*smx509.Certificate
	if verify {
		opts := smx509.VerifyOptions{CurrentTime: cfg.time(), Intermediates: smx509.NewCertPool()}
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
		if server {
			opts.Roots = cfg.RootCAs
			opts.DNSName = cfg.ServerName
			opts.KeyUsages = []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}
		} else {
			opts.Roots = cfg.ClientCAs
			opts.KeyUsages = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}
		}
		var err error
		chains, err = certs[0].Verify(opts)
		if err != nil {
			var ua smx509.UnknownAuthorityError
			if errors.As(err, &ua) {
				return nil, nil, AlertUnknownCA, fmt.Errorf("verifying peer certificate: %w", err)
			}
			var ci smx509.CertificateInvalidError
			if errors.As(err, &ci) && ci.Reason == smx509.Expired {
				return nil, nil, AlertCertificateExpired, fmt.Errorf("verifying peer certificate: %w", err)
			}
			return nil, nil, AlertBadCertificate, fmt.Errorf("verifying peer certificate: %w", err)
		}
	}
	if cfg.VerifyPeerCertificate != nil {
		if err := cfg.VerifyPeerCertificate(raw, chains); err != nil {
			return nil, nil, AlertBadCertificate, err
		}
	}
	return certs, chains, 0, nil
}

// verifyDefaultID is used by tests to show that the TLS 1.3 ID matters.
func verifyDefaultID(pub crypto.PublicKey, context string, transcriptHash, sig []byte) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && sm2.VerifyASN1WithSM2(k, nil, signedMessage(context, transcriptHash), sig)
}
