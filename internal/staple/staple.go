// Package staple checks and fetches the OCSP responses (RFC 6960) that
// gmproxy staples to its ordinary TLS certificates (RFC 6066 §8): a
// response from a file (nginx's ssl_stapling_file) or one fetched from the
// responder named by the certificate's Authority Information Access
// extension and refreshed in the background (ssl_stapling on). Every
// response is verified before it is stapled: a client that checks the
// staple would otherwise refuse the handshake (a revoked or stale
// response), and one that does not would be told nothing true.
package staple

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"golang.org/x/crypto/ocsp"
)

// MaxResponse is the largest OCSP response accepted, from a file or a
// responder: a response for one certificate with its responder's
// certificate is a few KiB.
const MaxResponse = 64 << 10

// Skew is how far in the future a response's thisUpdate may be, for the
// clocks of the responder and gmproxy that disagree a little.
const Skew = 5 * time.Minute

// Verify parses der as an OCSP response for leaf, issued by issuer, and
// checks that it can be stapled at now: signed by issuer or by a responder
// issuer delegated to (RFC 6960 §4.2.2.2), which its responderID names,
// about leaf's serial number, status good, and current (thisUpdate not
// after now, nextUpdate, when present, after now and not before
// thisUpdate; RFC 6960 §4.2.2.1).
func Verify(der []byte, leaf, issuer *x509.Certificate, now time.Time) (*ocsp.Response, error) {
	return verify(der, leaf, issuer, now, false)
}

// verify is Verify; with anyStatus, a response of status revoked or
// unknown passes too (the fetcher's: the responder's current word on the
// certificate, whatever it is, supersedes the good response kept).
func verify(der []byte, leaf, issuer *x509.Certificate, now time.Time, anyStatus bool) (*ocsp.Response, error) {
	if len(der) > MaxResponse {
		return nil, fmt.Errorf("the response is %d bytes, over %d", len(der), MaxResponse)
	}
	// Signatures are checked below, against issuer (the parser checks
	// only that an embedded responder certificate signed the response).
	resp, err := ocsp.ParseResponseForCert(der, leaf, nil)
	if err != nil {
		return nil, fmt.Errorf("not an OCSP response for the certificate: %w", err)
	}
	// The single response's whole CertID, serial number included, is
	// checked here, not left to the parser's choice of it.
	if err := checkCertID(der, resp, leaf, issuer); err != nil {
		return nil, err
	}
	if err := checkSigner(resp, issuer, now); err != nil {
		return nil, err
	}
	switch {
	case resp.Status == ocsp.Good, anyStatus:
	case resp.Status == ocsp.Revoked:
		return nil, fmt.Errorf("the certificate is revoked (since %s, reason %d)", resp.RevokedAt.UTC().Format(time.RFC3339), resp.RevocationReason)
	default:
		return nil, errors.New("the responder does not know the certificate (status unknown)")
	}
	if now.Add(Skew).Before(resp.ThisUpdate) {
		return nil, fmt.Errorf("the response is not valid before %s (thisUpdate)", resp.ThisUpdate.UTC().Format(time.RFC3339))
	}
	if !resp.NextUpdate.IsZero() && !now.Before(resp.NextUpdate) {
		return nil, fmt.Errorf("the response expired at %s (nextUpdate)", resp.NextUpdate.UTC().Format(time.RFC3339))
	}
	// A nextUpdate before thisUpdate passes the two checks above while
	// thisUpdate is within Skew ahead; OpenSSL's OCSP_check_validity,
	// which clients run on the staple, refuses it
	// (NEXTUPDATE_BEFORE_THISUPDATE).
	if !resp.NextUpdate.IsZero() && resp.NextUpdate.Before(resp.ThisUpdate) {
		return nil, fmt.Errorf("the response's nextUpdate %s is before its thisUpdate %s", resp.NextUpdate.UTC().Format(time.RFC3339), resp.ThisUpdate.UTC().Format(time.RFC3339))
	}
	return resp, nil
}

// The parts of an OCSP response (RFC 6960 §4.2.1) that checkCertID
// reads; encoding/asn1 ignores the fields after them.
type (
	ocspOuter struct {
		Status asn1.Enumerated
		Bytes  struct {
			Type     asn1.ObjectIdentifier
			Response []byte
		} `asn1:"explicit,tag:0,optional"`
	}
	ocspBasic struct {
		TBS struct {
			Version     int `asn1:"optional,default:0,explicit,tag:0"`
			ResponderID asn1.RawValue
			ProducedAt  asn1.RawValue
			Responses   []struct {
				CertID struct {
					HashAlgorithm           pkix.AlgorithmIdentifier
					NameHash, IssuerKeyHash []byte
					SerialNumber            *big.Int
				}
			}
		}
	}
)

// checkCertID checks that the single response resp was taken from (the
// first about leaf's serial number, as the parser chooses) names
// issuer's name and key in its CertID: a serial number is unique to one
// issuer only, and a responder that answers for several issuers (RFC 6960
// §3.2 item 1 wants the whole CertID matched) signs answers about the
// same serial number of another issuer's certificates.
func checkCertID(der []byte, resp *ocsp.Response, leaf, issuer *x509.Certificate) error {
	var outer ocspOuter
	var basic ocspBasic
	if _, err := asn1.Unmarshal(der, &outer); err != nil {
		return fmt.Errorf("not an OCSP response: %v", err)
	}
	if _, err := asn1.Unmarshal(outer.Bytes.Response, &basic); err != nil {
		return fmt.Errorf("not an OCSP response: %v", err)
	}
	// The CertID issuer would give the certificate, with the response's
	// hash function.
	req, err := ocsp.CreateRequest(leaf, issuer, &ocsp.RequestOptions{Hash: resp.IssuerHash})
	if err != nil {
		return fmt.Errorf("the response's CertID hash %v: %v", resp.IssuerHash, err)
	}
	want, err := ocsp.ParseRequest(req)
	if err != nil {
		return err
	}
	for _, r := range basic.TBS.Responses {
		id := &r.CertID
		if id.SerialNumber == nil || id.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
			continue
		}
		if !bytes.Equal(id.NameHash, want.IssuerNameHash) || !bytes.Equal(id.IssuerKeyHash, want.IssuerKeyHash) {
			return fmt.Errorf("the response is about a certificate of another issuer than %q (serial number %x)", issuer.Subject.CommonName, leaf.SerialNumber)
		}
		return nil
	}
	return errors.New("no response about the certificate's serial number")
}

// checkSigner checks that issuer signed resp, itself or through a
// certificate it issued for OCSP signing that resp carries, and that
// resp's responderID names that signer.
func checkSigner(resp *ocsp.Response, issuer *x509.Certificate, now time.Time) error {
	d := resp.Certificate
	if d == nil {
		if err := resp.CheckSignatureFrom(issuer); err != nil {
			return fmt.Errorf("the response is not signed by the certificate's issuer %q: %v", issuer.Subject.CommonName, err)
		}
		return checkResponderID(resp, issuer)
	}
	if err := checkResponderID(resp, d); err != nil {
		return err
	}
	// The parser checked that d signed the response.
	if bytes.Equal(d.Raw, issuer.Raw) {
		return nil
	}
	if err := d.CheckSignatureFrom(issuer); err != nil {
		return fmt.Errorf("the response's signer %q is not issued by the certificate's issuer %q: %v", d.Subject.CommonName, issuer.Subject.CommonName, err)
	}
	if !slices.Contains(d.ExtKeyUsage, x509.ExtKeyUsageOCSPSigning) {
		return fmt.Errorf("the response's signer %q lacks extendedKeyUsage OCSPSigning: the issuer did not delegate OCSP to it", d.Subject.CommonName)
	}
	if now.Before(d.NotBefore) || now.After(d.NotAfter) {
		return fmt.Errorf("the response's signer certificate %q is valid only from %s to %s", d.Subject.CommonName, d.NotBefore.UTC().Format(time.RFC3339), d.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkResponderID checks that resp's responderID (RFC 6960 §4.2.1) names
// signer, by its subject or the SHA-1 hash of its public key: clients
// find the certificate to check the staple's signature with by the
// responderID alone (Firefox's mozilla::pkix, OpenSSL's
// OCSP_basic_verify), so a response whose responderID names another
// certificate than the one that signed it fails their check, and a
// client requiring the staple (must-staple) refuses the handshake.
func checkResponderID(resp *ocsp.Response, signer *x509.Certificate) error {
	if resp.RawResponderName != nil {
		if !bytes.Equal(resp.RawResponderName, signer.RawSubject) {
			return fmt.Errorf("the response's responderID names another responder than its signer %q", signer.Subject.CommonName)
		}
		return nil
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(signer.RawSubjectPublicKeyInfo, &spki); err != nil {
		return fmt.Errorf("the response's signer %q: %v", signer.Subject.CommonName, err)
	}
	if h := sha1.Sum(spki.PublicKey.RightAlign()); !bytes.Equal(resp.ResponderKeyHash, h[:]) {
		return fmt.Errorf("the response's responderID names another responder key than its signer %q's", signer.Subject.CommonName)
	}
	return nil
}

// Staple is a verified response with the time it stops being stapled.
type Staple struct {
	DER        []byte
	ThisUpdate time.Time
	NextUpdate time.Time // zero: none given
	// Status is the response's certStatus (RFC 6960 §4.2.1): ocsp.Good
	// (zero, the only one Verify passes), ocsp.Revoked or ocsp.Unknown
	// (a Fetcher's, see Fetcher).
	Status int
}

// Expired reports whether s is past its nextUpdate at now.
func (s *Staple) Expired(now time.Time) bool {
	return !s.NextUpdate.IsZero() && !now.Before(s.NextUpdate)
}

// At returns the response to staple at now: nil past its nextUpdate (a
// client that checks would refuse the handshake), for status unknown
// (see Fetcher) or for no response.
func (s *Staple) At(now time.Time) []byte {
	if s == nil || s.Expired(now) || s.Status == ocsp.Unknown {
		return nil
	}
	return s.DER
}
