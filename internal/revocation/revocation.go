// Package revocation refuses client certificates that their CAs have
// revoked, from certificate revocation lists (RFC 5280 §5) loaded with the
// configuration, as nginx's ssl_crl does. The check is strict, as
// OpenSSL's X509_V_FLAG_CRL_CHECK_ALL: every certificate of a verified
// chain but its trust anchor needs a current CRL of its issuer, so that a
// CA whose CRL is missing or stale cannot let a revoked certificate pass.
// One Index serves the TLCP, TLS 1.3-SM and TLS servers alike.
package revocation

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// Reasons a certificate is refused, as client-certificate metric labels.
const (
	ReasonRevoked    = "revoked"     // its serial is on its issuer's CRL
	ReasonCRLExpired = "crl_expired" // its issuer's CRL is past nextUpdate or before thisUpdate
	ReasonNoCRL      = "no_crl"      // its issuer has no CRL
)

// Error says why a certificate was refused.
type Error struct {
	Reason string // one of the Reason constants
	Serial *big.Int
	Issuer string // the issuer's distinguished name
}

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonRevoked:
		return fmt.Sprintf("certificate %s of %s is revoked", e.Serial.Text(16), e.Issuer)
	case ReasonCRLExpired:
		return fmt.Sprintf("the CRL of %s is not current (certificate %s)", e.Issuer, e.Serial.Text(16))
	}
	return fmt.Sprintf("no CRL of %s (certificate %s)", e.Issuer, e.Serial.Text(16))
}

// ClientCertReason is the client-certificate failure reason of the error
// (frontdoor.ClientCertReason reads it).
func (e *Error) ClientCertReason() string { return e.Reason }

// issuerCRL is what the Index keeps of an issuer's CRLs.
type issuerCRL struct {
	thisUpdate, nextUpdate time.Time // nextUpdate zero: none given
	revoked                map[string]struct{}
}

// reasonRemoveFromCRL is the CRLReason removeFromCRL (RFC 5280 §5.3.1).
const reasonRemoveFromCRL = 8

// issuerKey names a CA by its name and its public key: a CA re-issued
// under the same name with a new key (a key rollover, RFC 4210 §4.4) is
// another issuer, whose CRLs the old key's do not stand for (RFC 5280
// §6.3.3 (f): a CRL is used only if it verifies with the certificate
// issuer's key).
type issuerKey struct{ name, spki string }

func keyOf(name, spki []byte) issuerKey { return issuerKey{string(name), string(spki)} }

// Signed is a CRL with the CA of client_auth.ca whose key signed it.
type Signed struct {
	List   *smx509.RevocationList
	Issuer *smx509.Certificate
}

// Index holds the revoked serials of each CRL issuer, by the issuer's
// DER-encoded name and public key. It is not modified once made.
type Index struct {
	byIssuer    map[issuerKey]*issuerCRL
	issuers     []*smx509.Certificate // the CAs that signed the CRLs
	above       map[string]caLink     // by a CA's DER: the CA of issuers that issued it
	fingerprint [sha256.Size]byte
}

// caLink is a CA certificate of client_auth.ca issued by another one.
type caLink struct {
	serial            *big.Int
	rawIssuer, spki   []byte // the issuing CA's name and key
	issuerCertificate string // the issuing CA's DER
}

// NewIndex indexes crls, which the caller has checked (signature by
// Issuer, Unsupported). Several CRLs of one issuer are merged: a serial
// one of them lists is revoked (issuer and serial name one certificate,
// RFC 5280 §4.1.2.2), and the issuer's entry is current only while every
// one of them is.
func NewIndex(crls []Signed) *Index {
	ix := &Index{byIssuer: make(map[issuerKey]*issuerCRL)}
	h := sha256.New()
	for _, s := range crls {
		rl := s.List
		sum := sha256.Sum256(rl.Raw)
		h.Write(sum[:])
		k := keyOf(rl.RawIssuer, s.Issuer.RawSubjectPublicKeyInfo)
		e := ix.byIssuer[k]
		if e == nil {
			e = &issuerCRL{thisUpdate: rl.ThisUpdate, nextUpdate: rl.NextUpdate, revoked: make(map[string]struct{})}
			ix.byIssuer[k] = e
			ix.issuers = append(ix.issuers, s.Issuer)
		}
		if rl.ThisUpdate.After(e.thisUpdate) {
			e.thisUpdate = rl.ThisUpdate
		}
		if !rl.NextUpdate.IsZero() && (e.nextUpdate.IsZero() || rl.NextUpdate.Before(e.nextUpdate)) {
			e.nextUpdate = rl.NextUpdate
		}
		for _, r := range rl.RevokedCertificateEntries {
			// removeFromCRL (RFC 5280 §5.3.1) says a certificate is no
			// longer revoked (its hold released); it belongs in delta
			// CRLs, but a CA may list it in a full one, and OpenSSL
			// (nginx) then takes the certificate as not revoked.
			if r.ReasonCode == reasonRemoveFromCRL {
				continue
			}
			e.revoked[serialKey(r.SerialNumber)] = struct{}{}
		}
	}
	h.Sum(ix.fingerprint[:0])
	// Every certificate of client_auth.ca is a trust anchor to crypto/x509,
	// an intermediate too; OpenSSL goes on to its root and checks the
	// intermediate against the root's CRL. Which CA issued which is known
	// now, so that a handshake need not verify signatures to do the same.
	ix.above = make(map[string]caLink)
	for _, c := range ix.issuers {
		for _, p := range ix.issuers {
			if p != c && bytes.Equal(p.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(p) == nil {
				ix.above[string(c.Raw)] = caLink{c.SerialNumber, c.RawIssuer, p.RawSubjectPublicKeyInfo, string(p.Raw)}
				break
			}
		}
	}
	return ix
}

// checkAbove checks a verified chain's trust anchor, given by its DER,
// and the CAs above it: a CA of client_auth.ca that another one issued
// needs that one's CRL not to list it.
func (ix *Index) checkAbove(anchor []byte, now time.Time) error {
	cur := string(anchor)
	for range len(ix.issuers) { // bounded: the CAs may issue each other
		l, ok := ix.above[cur]
		if !ok {
			return nil
		}
		if err := ix.Check(l.rawIssuer, l.spki, l.serial, now); err != nil {
			return err
		}
		cur = l.issuerCertificate
	}
	return nil
}

// Fingerprint identifies the CRLs' contents: a reload that changes them
// changes it (sessions are bound to it).
func (ix *Index) Fingerprint() []byte { return ix.fingerprint[:] }

// Changes returns the instants at which Check's answer may change with
// the time alone: each issuer's thisUpdate (its CRL current from then)
// and the instant after its nextUpdate (stale from then), in no order.
// A result computed at now holds until the first of them after now
// (client_auth optional_no_ca caches its verifications so).
func (ix *Index) Changes() []time.Time {
	var ts []time.Time
	for _, e := range ix.byIssuer {
		ts = append(ts, e.thisUpdate)
		if !e.nextUpdate.IsZero() {
			ts = append(ts, e.nextUpdate.Add(time.Nanosecond))
		}
	}
	return ts
}

func serialKey(n *big.Int) string { return n.Text(16) }

// Check refuses the certificate with serial that the CA named rawIssuer,
// whose public key is issuerSPKI (its DER SubjectPublicKeyInfo), issued,
// at now: it is on that CA's CRL, the CA has none, or its CRL is not
// current.
func (ix *Index) Check(rawIssuer, issuerSPKI []byte, serial *big.Int, now time.Time) error {
	e := ix.byIssuer[keyOf(rawIssuer, issuerSPKI)]
	var reason string
	switch {
	case e == nil:
		reason = ReasonNoCRL
	case now.Before(e.thisUpdate) || !e.nextUpdate.IsZero() && now.After(e.nextUpdate):
		reason = ReasonCRLExpired
	default:
		if _, ok := e.revoked[serialKey(serial)]; !ok {
			return nil
		}
		reason = ReasonRevoked
	}
	return &Error{Reason: reason, Serial: serial, Issuer: issuerName(rawIssuer)}
}

// CheckIssued checks c, which is in no verified chain (a TLCP client's
// encryption certificate), against the CRL of the CA that signed it. Only
// the CAs of the CRLs have one: c issued by any other (an intermediate the
// client sends, one sharing a CA's name) has no CRL.
func (ix *Index) CheckIssued(c *smx509.Certificate, now time.Time) error {
	for _, ca := range ix.issuers {
		if bytes.Equal(ca.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(ca) == nil {
			if err := ix.Check(c.RawIssuer, ca.RawSubjectPublicKeyInfo, c.SerialNumber, now); err != nil {
				return err
			}
			return ix.checkAbove(ca.Raw, now)
		}
	}
	return &Error{Reason: ReasonNoCRL, Serial: c.SerialNumber, Issuer: issuerName(c.RawIssuer)}
}

// issuerName renders a DER name for messages.
func issuerName(raw []byte) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(raw, &rdns); err != nil || len(rest) > 0 {
		return fmt.Sprintf("%x", raw)
	}
	var n pkix.Name
	n.FillFromRDNSequence(&rdns)
	return n.String()
}

// CheckChains checks each certificate of each verified chain but the last,
// the trust anchor (a client sends its chain, which is verified first;
// trusting the anchor is the configuration's), and an anchor that another
// CA of the CRLs issued (an intermediate in client_auth.ca) against that
// CA's CRL, up to a root, as OpenSSL does.
func (ix *Index) CheckChains(chains [][]*smx509.Certificate, now time.Time) error {
	return checkChains(ix, chains, now, func(c *smx509.Certificate) certFields {
		return certFields{c.Raw, c.RawIssuer, c.RawSubjectPublicKeyInfo, c.SerialNumber}
	})
}

// CheckX509Chains is CheckChains for crypto/tls's chains.
func (ix *Index) CheckX509Chains(chains [][]*x509.Certificate, now time.Time) error {
	return checkChains(ix, chains, now, func(c *x509.Certificate) certFields {
		return certFields{c.Raw, c.RawIssuer, c.RawSubjectPublicKeyInfo, c.SerialNumber}
	})
}

// certFields are what a revocation check reads of a certificate of either
// x509 package.
type certFields struct {
	raw, rawIssuer, spki []byte
	serial               *big.Int
}

// checkChains is CheckChains for either package's certificates, read
// through fields.
func checkChains[C any](ix *Index, chains [][]C, now time.Time, fields func(C) certFields) error {
	for _, chain := range chains {
		for i := 0; i+1 < len(chain); i++ {
			c, issuer := fields(chain[i]), fields(chain[i+1])
			if err := ix.Check(c.rawIssuer, issuer.spki, c.serial, now); err != nil {
				return err
			}
		}
		if len(chain) > 0 {
			if err := ix.checkAbove(fields(chain[len(chain)-1]).raw, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// ParseFile returns the CRLs of a file: PEM "X509 CRL" blocks (other
// blocks are skipped), or one DER CRL.
func ParseFile(data []byte) ([]*smx509.RevocationList, error) {
	if !bytes.Contains(data, []byte("-----BEGIN")) {
		rl, err := smx509.ParseRevocationList(data)
		if err != nil {
			return nil, err
		}
		return []*smx509.RevocationList{rl}, nil
	}
	var out []*smx509.RevocationList
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "X509 CRL" {
			continue
		}
		rl, err := smx509.ParseRevocationList(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CRL %d: %w", len(out)+1, err)
		}
		out = append(out, rl)
	}
	if len(out) == 0 {
		return nil, errors.New(`no "X509 CRL" PEM block`)
	}
	return out, nil
}

var (
	oidIssuingDistributionPoint = asn1.ObjectIdentifier{2, 5, 29, 28}
	oidDeltaCRLIndicator        = asn1.ObjectIdentifier{2, 5, 29, 27}
)

// Unsupported names what in rl this package cannot honour ("" when
// nothing): a critical extension it does not understand (RFC 5280 §5.2: a
// CRL with one must not be used to check revocation), a delta CRL, or an
// issuing distribution point that narrows the CRL's scope (only some
// reasons or kinds of certificate, or an indirect CRL listing other
// issuers' certificates), read as if it listed all the issuer's.
func Unsupported(rl *smx509.RevocationList) string {
	for _, e := range rl.Extensions {
		switch {
		case e.Id.Equal(oidDeltaCRLIndicator):
			return "it is a delta CRL (deltaCRLIndicator)"
		case e.Id.Equal(oidIssuingDistributionPoint):
			if !fullScope(e.Value) {
				return "its issuingDistributionPoint narrows its scope (onlySomeReasons, onlyContains…Certs or indirectCRL)"
			}
		case e.Critical:
			return fmt.Sprintf("it has critical extension %s, which gmproxy does not understand", e.Id)
		}
	}
	for _, r := range rl.RevokedCertificateEntries {
		for _, e := range r.Extensions {
			if e.Critical {
				return fmt.Sprintf("its entry of serial %s has critical extension %s (certificateIssuer of an indirect CRL?), which gmproxy does not understand", r.SerialNumber.Text(16), e.Id)
			}
		}
	}
	return ""
}

// fullScope reports whether an issuingDistributionPoint extension's value
// (RFC 5280 §5.2.5) holds at most a distributionPoint name, which does not
// narrow what the CRL covers.
func fullScope(der []byte) bool {
	s := cryptobyte.String(der)
	var idp cryptobyte.String
	if !s.ReadASN1(&idp, cbasn1.SEQUENCE) || !s.Empty() {
		return false
	}
	if !idp.SkipOptionalASN1(cbasn1.Tag(0).Constructed().ContextSpecific()) {
		return false
	}
	return idp.Empty()
}
