package daemon

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/internal/validity"
)

// clientVerifier is the check of a site of client_auth optional_no_ca
// (frontdoor.Site.VerifyClient), nil for other sites. Its handshakes take
// any client certificate whose key signed CertificateVerify, as nginx's
// ssl_verify_client optional_no_ca: this verifies it afterwards, after
// each handshake and each resumption, as the other modes verify it in the
// handshake, against ca (none: nothing verifies), with the site's CRLs,
// verify_depth and the key-usage checks, and says why it fails in
// OpenSSL's words, which X-Ssl-Client-Verify carries after "FAILED:".
// Results are cached (verifiedClients), so that a client's resumptions
// verify no signature again.
func clientVerifier(s *conf.Site) func(family string, certs []*smx509.Certificate) string {
	if s.ClientAuth.Mode != conf.ClientAuthOptionalNoCA {
		return nil
	}
	v := newClientVerify(s)
	return func(family string, certs []*smx509.Certificate) string { return v.check(family, certs, time.Now()) }
}

// clientVerify is one site's optional_no_ca verification: what decides
// its outcome, and a fingerprint of it that keys the cached results.
type clientVerify struct {
	smRoots  *smx509.CertPool
	tlsRoots *x509.CertPool
	nTLS     int
	crls     *revocation.Index
	depth    *int
	// settings identifies ca, crl and verify_depth: a reload that changes
	// any of them changes it, so no result computed under the old ones
	// is reused.
	settings [sha256.Size]byte
	// changes are the instants, sorted, at which a result may change with
	// the time alone: each CA's notBefore and the instant after its
	// notAfter, each CRL's thisUpdate and the instant after its
	// nextUpdate (the client's certificates add theirs).
	changes []time.Time
}

func newClientVerify(s *conf.Site) *clientVerify {
	m := &s.Material
	v := &clientVerify{smRoots: m.ClientCAPool(), crls: m.ClientCRLs, depth: s.ClientAuth.VerifyDepth}
	// TLS clients are verified against the RSA/ECDSA CAs, as crypto/tls
	// verifies them under the other modes.
	v.tlsRoots, v.nTLS = conf.X509Pool(m.ClientCAs)
	h := sha256.New()
	for _, c := range m.ClientCAs {
		writeDER(h, c.Raw)
		v.changes = append(v.changes, certChanges(c)...)
	}
	if v.crls != nil {
		writeDER(h, v.crls.Fingerprint())
		v.changes = append(v.changes, v.crls.Changes()...)
	}
	if v.depth != nil {
		fmt.Fprintf(h, "depth %d", *v.depth)
	}
	h.Sum(v.settings[:0])
	slices.SortFunc(v.changes, time.Time.Compare)
	return v
}

// Cache of client_auth optional_no_ca's results.
//
// A client resuming its session presents the same certificates again, and
// verifying them (an SM2 or ECDSA verification per CA signature, the TLCP
// encryption certificate's too, the CRL look-ups) would cost each
// resumption what the resumption saves. A result, success or failure, is
// kept under the SHA-256 of the site's settings (clientVerify.settings),
// the protocol family and the exact certificate list, with the instant it
// was computed and the first instant after it at which time alone could
// change it (a certificate's or CA's notBefore or notAfter, a CRL's
// thisUpdate or nextUpdate): it serves only in between, so a certificate
// or a CRL expires at its time, and a clock set back computes it again.
// The entries hold no certificate: 1024 of them are a few hundred KiB.
const (
	verifiedClientsSize = 1024
	verifiedClientsTTL  = 10 * time.Minute
)

type verifiedClient struct {
	result      string // "" or one of frontdoor.ClientVerifyErrors
	from, until time.Time
}

var verifiedClients = lru.New[[sha256.Size]byte, verifiedClient](verifiedClientsSize, verifiedClientsTTL)

// clientVerifications counts the verifications verifiedClients did not
// answer (tests).
var clientVerifications atomic.Uint64

// check verifies certs, a client's certificates on family, at now.
func (v *clientVerify) check(family string, certs []*smx509.Certificate, now time.Time) string {
	h := sha256.New()
	h.Write(v.settings[:])
	writeDER(h, []byte(family))
	for _, c := range certs {
		if c != nil {
			writeDER(h, c.Raw)
		}
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	if e, ok := verifiedClients.Get(key); ok && !now.Before(e.from) && now.Before(e.until) {
		return e.result
	}
	clientVerifications.Add(1)
	result := v.verify(family, certs, now)
	verifiedClients.Put(key, verifiedClient{result: result, from: now, until: v.nextChange(certs, now)})
	return result
}

// nextChange returns the first instant after now at which the result of
// certs may change with the time alone.
func (v *clientVerify) nextChange(certs []*smx509.Certificate, now time.Time) time.Time {
	until := validity.Forever
	if i, _ := slices.BinarySearchFunc(v.changes, now, func(t, now time.Time) int {
		if t.After(now) {
			return 1
		}
		return -1
	}); i < len(v.changes) {
		until = v.changes[i]
	}
	for _, c := range certs {
		if c == nil {
			continue
		}
		for _, t := range certChanges(c) {
			if t.After(now) && t.Before(until) {
				until = t
			}
		}
	}
	return until
}

// certChanges returns the instants at which c becomes valid and stops
// being valid (crypto/x509 takes it from notBefore to notAfter, both
// included).
func certChanges(c *smx509.Certificate) []time.Time {
	return []time.Time{c.NotBefore, c.NotAfter.Add(time.Nanosecond)}
}

// writeDER writes b to h after its length, so that no two lists write the
// same bytes.
func writeDER(h hash.Hash, b []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// verify verifies certs at now, uncached: "" or why not.
func (v *clientVerify) verify(family string, certs []*smx509.Certificate, now time.Time) string {
	var err error
	switch {
	case family == frontdoor.FamilyTLS && v.nTLS == 0, family != frontdoor.FamilyTLS && v.smRoots == nil:
		// No CA: OpenSSL still tells a self-signed certificate.
		if err = selfSignedChain(certs[0], certs); err == nil {
			return frontdoor.VerifyUnknownIssuer
		}
	case family == frontdoor.FamilyTLS:
		err = verifyTLSClient(certs, v.tlsRoots, v.crls, v.depth, now)
	default:
		err = verifySMClient(family, certs, v.smRoots, v.crls, v.depth, now)
	}
	return verifyErrorText(err, now)
}

// selfSignedError is a chain to no CA of ca that OpenSSL words as
// self-signed: the certificate issued itself
// (X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT), or the chain the client sent
// ends in a certificate that did (X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN).
type selfSignedError struct{ inChain bool }

func (e *selfSignedError) Error() string {
	if e.inChain {
		return "self-signed certificate in certificate chain"
	}
	return "self-signed certificate"
}

// untrusted words err, the verification error of start (a client's
// signing or encryption certificate) among certs, the client's: a chain
// to no CA that ends in a self-signed certificate becomes a
// selfSignedError, as OpenSSL tells it (x509_vfy.c, build_chain); any
// other error stays as it is.
func untrusted(err error, start *smx509.Certificate, certs []*smx509.Certificate) error {
	var ua smx509.UnknownAuthorityError
	var xua x509.UnknownAuthorityError
	if !errors.As(err, &ua) && !errors.As(err, &xua) {
		return err
	}
	if ss := selfSignedChain(start, certs); ss != nil {
		return ss
	}
	return err
}

// selfSignedChain follows the issuers of start among certs, as OpenSSL
// builds a chain of the certificates the peer sent, and returns a
// selfSignedError when it ends in a self-signed certificate, else nil.
// A certificate is self-signed, as OpenSSL 3 takes it (EXFLAG_SS), when
// its issuer is its subject and its authority key identifier, if any,
// is its own subject key identifier; another is an issuer of one when its
// subject is the other's issuer and the identifiers agree (OpenSSL's
// X509_check_issued, less the signature, which it checks later).
func selfSignedChain(start *smx509.Certificate, certs []*smx509.Certificate) error {
	cur := start
	for depth := range len(certs) + 1 { // bounded: certificates may issue each other
		if issued(cur, cur) {
			return &selfSignedError{inChain: depth > 0}
		}
		next := (*smx509.Certificate)(nil)
		for _, c := range certs {
			if c != nil && c != cur && issued(c, cur) {
				next = c
				break
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return nil
}

// issued tells whether issuer's name and key identifier are those c
// names as its issuer's.
func issued(issuer, c *smx509.Certificate) bool {
	if !bytes.Equal(issuer.RawSubject, c.RawIssuer) {
		return false
	}
	return len(c.AuthorityKeyId) == 0 || len(issuer.SubjectKeyId) == 0 || bytes.Equal(c.AuthorityKeyId, issuer.SubjectKeyId)
}

// verifySMClient verifies a TLCP or TLS 1.3-SM client's certificates as
// the tlcp and tls13sm servers do under client_auth request: the signing
// certificate (and for TLCP the encryption certificate, the second when
// it is no CA's) to roots for client authentication, its key allowed to
// sign, then verify_depth and the CRLs.
func verifySMClient(family string, certs []*smx509.Certificate, roots *smx509.CertPool, crls *revocation.Index, depth *int, now time.Time) error {
	inter := smx509.NewCertPool()
	for _, c := range certs[1:] {
		if c != nil {
			inter.AddCert(c)
		}
	}
	opts := smx509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}}
	leaf := certs[0]
	chains, err := leaf.Verify(opts)
	if err != nil {
		return untrusted(err, leaf, certs)
	}
	if leaf.KeyUsage != 0 && leaf.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
		return smx509.CertificateInvalidError{Cert: leaf, Reason: smx509.IncompatibleUsage, Detail: "keyUsage without digitalSignature"}
	}
	raw := [][]byte{leaf.Raw}
	if family == frontdoor.FamilyTLCP && len(certs) >= 2 && certs[1] != nil && !certs[1].IsCA && certs[1].KeyUsage&smx509.KeyUsageCertSign == 0 {
		enc := certs[1]
		if _, err := enc.Verify(opts); err != nil {
			return untrusted(err, enc, certs)
		}
		raw = append(raw, enc.Raw)
	}
	if err := checkDepth(chains, depth); err != nil {
		return err
	}
	if crls == nil {
		return nil
	}
	return checkTLCPClient(crls, raw, chains, now)
}

// verifyTLSClient verifies a TLS client's certificates as crypto/tls and
// the hooks of buildSite do under client_auth request.
func verifyTLSClient(certs []*smx509.Certificate, roots *x509.CertPool, crls *revocation.Index, depth *int, now time.Time) error {
	inter := x509.NewCertPool()
	var leaf *x509.Certificate
	for i, c := range certs {
		if c == nil {
			break
		}
		xc, err := x509.ParseCertificate(c.Raw)
		if err != nil {
			return err
		}
		if i == 0 {
			leaf = xc
		} else {
			inter.AddCert(xc)
		}
	}
	if leaf == nil {
		return errors.New("no client certificate")
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return untrusted(err, certs[0], certs)
	}
	if err := clientKeyMaySign(nil, chains); err != nil {
		return err
	}
	if err := checkDepth(chains, depth); err != nil || crls == nil {
		return err
	}
	return crls.CheckX509Chains(chains, now)
}

// verifyErrorText words err, a client certificate's verification error,
// as OpenSSL's X509_verify_cert_error_string does (one of
// frontdoor.ClientVerifyErrors); "" for nil.
func verifyErrorText(err error, now time.Time) string {
	if err == nil {
		return ""
	}
	var re *revocation.Error
	if errors.As(err, &re) {
		switch re.Reason {
		case revocation.ReasonRevoked:
			return frontdoor.VerifyRevoked
		case revocation.ReasonCRLExpired:
			return frontdoor.VerifyCRLExpired
		}
		return frontdoor.VerifyNoCRL
	}
	var deep *chainTooLongError
	if errors.As(err, &deep) {
		return frontdoor.VerifyChainTooLong
	}
	var ss *selfSignedError
	if errors.As(err, &ss) {
		if ss.inChain {
			return frontdoor.VerifySelfSignedInChain
		}
		return frontdoor.VerifySelfSigned
	}
	var ua smx509.UnknownAuthorityError
	var xua x509.UnknownAuthorityError
	if errors.As(err, &ua) || errors.As(err, &xua) {
		return frontdoor.VerifyUnknownIssuer
	}
	var ci smx509.CertificateInvalidError
	if errors.As(err, &ci) {
		return invalidText(int(ci.Reason), ci.Cert != nil && now.Before(ci.Cert.NotBefore))
	}
	var xci x509.CertificateInvalidError
	if errors.As(err, &xci) {
		return invalidText(int(xci.Reason), xci.Cert != nil && now.Before(xci.Cert.NotBefore))
	}
	return frontdoor.VerifyUnspecified
}

// invalidText words a CertificateInvalidError's reason (smx509's and
// crypto/x509's InvalidReason share their values).
func invalidText(reason int, early bool) string {
	switch x509.InvalidReason(reason) {
	case x509.Expired:
		if early {
			return frontdoor.VerifyNotYetValid
		}
		return frontdoor.VerifyExpired
	case x509.IncompatibleUsage:
		return frontdoor.VerifyPurpose
	case x509.NotAuthorizedToSign, x509.CANotAuthorizedForExtKeyUsage:
		return frontdoor.VerifyInvalidCA
	case x509.TooManyIntermediates:
		return frontdoor.VerifyPathLength
	}
	return frontdoor.VerifyUnspecified
}
