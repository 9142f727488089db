package tls13sm

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/sm3state"
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
// the handshake's context. An in-process *sm2.PrivateKey signs the digest
// e = SM3(Z_A || content) computed here from a cached state (see
// sm2SignPrefix), which is what gmsm computes from the content and the
// ID; any other signer (offload engines, key servers, hardware) gets the
// content with sm2SignerOpts, as before. ks provides the SM3 compressor and
// scratch (nil: a temporary one).
func signCertificateVerify(ctx context.Context, cfg *Config, ks *keySchedule, key crypto.Signer, context string, transcriptHash []byte) ([]byte, error) {
	if key == nil {
		return nil, errors.New("certificate has no private key")
	}
	if !isSM2PublicKey(key.Public()) {
		return nil, errors.New("certificate key is not an SM2 key")
	}
	var sig []byte
	var err error
	if k := smkey.InProcessSM2(key); k != nil {
		if ks == nil {
			ks = new(keySchedule)
		}
		var e []byte
		if e, err = certificateVerifyDigest(ks.m.Compressor(), &k.PublicKey, context, transcriptHash, ks.t[:0]); err == nil {
			// key, not k: a wrapper (the daemon's offload engine) passes
			// the digest and options through to k unchanged.
			sig, err = smkey.Sign(ctx, key, cfg.rand(), e, sm2DigestOpts)
		}
	} else {
		sig, err = smkey.Sign(ctx, key, cfg.rand(), signedMessage(context, transcriptHash), sm2SignerOpts)
	}
	if err != nil {
		return nil, fmt.Errorf("CertificateVerify signature: %w", err)
	}
	return sig, nil
}

// sm2DigestOpts has an SM2 signer sign its input as the digest e: no
// hash function and no SM2 option (gmsm's own option, whose fields it does
// not export, would hide that meaning from gmproxy's signers).
var sm2DigestOpts crypto.SignerOpts = crypto.Hash(0)

// sm2SignPrefix holds, for one SM2 key, SM3's state after
// Z_A || 64 spaces || context string for each side's context (§4.4.3,
// GB/T 32918.2-2016 §6.1 with the RFC 8998 ID): e for a CertificateVerify
// then costs one compression instead of the seven of Z_A and e over the
// whole content.
type sm2SignPrefix struct {
	server, client sm3state.Hasher
}

// signPrefixes caches sm2SignPrefix for our own signing keys, keyed by the
// whole public point (like peerPrefixes), so that keys replaced by a
// configuration reload age out instead of pinning the cache.
var signPrefixes = lru.New[[65]byte, *sm2SignPrefix](256, 0)

// certificateVerifyDigest appends e = SM3(Z_A || signedMessage(context,
// th)) for the key pub, with the RFC 8998 ID, to out.
func certificateVerifyDigest(c *sm3state.Compressor, pub *ecdsa.PublicKey, context string, th, out []byte) ([]byte, error) {
	p, err := cachedSignPrefix(signPrefixes, c, pub)
	if err != nil {
		return nil, err
	}
	return p.digest(c, context, th, out), nil
}

// cachedSignPrefix returns the prefix state of pub from cache, computing
// and storing it on a miss.
func cachedSignPrefix(cache *lru.Cache[[65]byte, *sm2SignPrefix], c *sm3state.Compressor, pub *ecdsa.PublicKey) (*sm2SignPrefix, error) {
	id, ok := smkey.SM2Point(pub)
	if !ok {
		return nil, errors.New("not an SM2 public key")
	}
	if p, ok := cache.Get(id); ok {
		return p, nil
	}
	p, err := newSM2SignPrefix(c, pub)
	if err != nil {
		return nil, err
	}
	cache.Put(id, p)
	return p, nil
}

// digest appends e for context and th to out.
func (p *sm2SignPrefix) digest(c *sm3state.Compressor, context string, th, out []byte) []byte {
	s := &p.server
	if context == clientSignatureContext {
		s = &p.client
	}
	return s.SumWith(c, th, out)
}

func newSM2SignPrefix(c *sm3state.Compressor, pub *ecdsa.PublicKey) (*sm2SignPrefix, error) {
	za, err := sm2.CalculateZA(pub, []byte(sm2TLS13ID))
	if err != nil {
		return nil, err
	}
	var spaces [64]byte
	for i := range spaces {
		spaces[i] = 0x20
	}
	p := new(sm2SignPrefix)
	for _, x := range []struct {
		s   *sm3state.Hasher
		ctx string
	}{{&p.server, serverSignatureContext}, {&p.client, clientSignatureContext}} {
		x.s.Reset()
		x.s.Write(c, za)
		x.s.Write(c, spaces[:])
		x.s.Write(c, []byte(x.ctx))
	}
	return p, nil
}

// verifyCertificateVerify checks an sm2sig_sm3 signature by pub.
func verifyCertificateVerify(pub crypto.PublicKey, context string, transcriptHash, sig []byte) error {
	return verifyCertificateVerifyWith(nil, pub, context, transcriptHash, sig)
}

// verifyCertificateVerifyWith checks an sm2sig_sm3 signature by pub over
// e = SM3(Z_A || content), computed from a prefix state cached per peer
// key (peerPrefixes) with ks's compressor (nil: a temporary one).
func verifyCertificateVerifyWith(ks *keySchedule, pub crypto.PublicKey, context string, transcriptHash, sig []byte) error {
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != sm2.P256() {
		return errors.New("peer key is not an SM2 key")
	}
	if ks == nil {
		ks = new(keySchedule)
	}
	p, err := cachedSignPrefix(peerPrefixes, ks.m.Compressor(), k)
	if err != nil {
		return fmt.Errorf("peer SM2 key: %w", err)
	}
	if !sm2.VerifyASN1(k, p.digest(ks.m.Compressor(), context, transcriptHash, ks.t[:0]), sig) {
		return errors.New("invalid sm2sig_sm3 CertificateVerify signature")
	}
	return nil
}

// peerPrefixes caches sm2SignPrefix for peer keys (a client meets the same
// server keys again and again), keyed by the whole public point, so an
// entry can only ever serve the key it was computed for.
var peerPrefixes = lru.New[[65]byte, *sm2SignPrefix](1024, 0)

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
	// The peer proves its identity with a signature (CertificateVerify,
	// RFC 8446 §4.4.3): a leaf whose key usage leaves out digitalSignature
	// (the encryption certificate of an SM2 pair, whose key a key
	// management centre may hold in escrow) does not authenticate it (RFC
	// 5280 §4.2.1.3). The check stands without chain verification too
	// (InsecureSkipVerify, client certificates only requested), as in TLCP:
	// it is about the key, not about trusting its issuer.
	if ku := certs[0].KeyUsage; ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 {
		return nil, nil, AlertBadCertificate, errors.New("peer certificate's key usage does not allow digital signatures (an encryption certificate?)")
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
			// Not the system pool: a certificate any public CA issued
			// would identify a client (TLCP refuses this too).
			if cfg.ClientCAs == nil {
				return nil, nil, AlertUnknownCA, errors.New("client certificate cannot be verified: Config.ClientAuth verifies but Config.ClientCAs is nil")
			}
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
			alert := AlertBadCertificate
			if ae := (*AlertError)(nil); errors.As(err, &ae) && !ae.Remote {
				alert, err = ae.Alert, ae.Err
			}
			return nil, nil, alert, err
		}
	}
	return certs, chains, 0, nil
}

// verifyDefaultID is used by tests to show that the TLS 1.3 ID matters.
func verifyDefaultID(pub crypto.PublicKey, context string, transcriptHash, sig []byte) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && sm2.VerifyASN1WithSM2(k, nil, signedMessage(context, transcriptHash), sig)
}
