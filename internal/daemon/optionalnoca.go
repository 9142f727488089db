package daemon

import (
	"crypto/x509"
	"errors"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/revocation"
)

// clientVerifier is the check of a site of client_auth optional_no_ca
// (frontdoor.Site.VerifyClient), nil for other sites. Its handshakes take
// any client certificate whose key signed CertificateVerify, as nginx's
// ssl_verify_client optional_no_ca: this verifies it afterwards, after
// each handshake and each resumption, as the other modes verify it in the
// handshake, against ca (none: nothing verifies), with the site's CRLs,
// verify_depth and the key-usage checks, and says why it fails in
// OpenSSL's words, which X-Ssl-Client-Verify carries after "FAILED:".
func clientVerifier(s *conf.Site) func(family string, certs []*smx509.Certificate) string {
	if s.ClientAuth.Mode != conf.ClientAuthOptionalNoCA {
		return nil
	}
	m := &s.Material
	smRoots := m.ClientCAPool()
	// TLS clients are verified against the RSA/ECDSA CAs, as crypto/tls
	// verifies them under the other modes.
	tlsRoots, nTLS := conf.X509Pool(m.ClientCAs)
	crls, depth := m.ClientCRLs, s.ClientAuth.VerifyDepth
	return func(family string, certs []*smx509.Certificate) string {
		now := time.Now()
		var err error
		switch {
		case family == frontdoor.FamilyTLS && nTLS == 0, family != frontdoor.FamilyTLS && smRoots == nil:
			return frontdoor.VerifyUnknownIssuer
		case family == frontdoor.FamilyTLS:
			err = verifyTLSClient(certs, tlsRoots, crls, depth, now)
		default:
			err = verifySMClient(family, certs, smRoots, crls, depth, now)
		}
		return verifyErrorText(err, now)
	}
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
		return err
	}
	if leaf.KeyUsage != 0 && leaf.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
		return smx509.CertificateInvalidError{Cert: leaf, Reason: smx509.IncompatibleUsage, Detail: "keyUsage without digitalSignature"}
	}
	raw := [][]byte{leaf.Raw}
	if family == frontdoor.FamilyTLCP && len(certs) >= 2 && certs[1] != nil && !certs[1].IsCA && certs[1].KeyUsage&smx509.KeyUsageCertSign == 0 {
		enc := certs[1]
		if _, err := enc.Verify(opts); err != nil {
			return err
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
		return err
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
