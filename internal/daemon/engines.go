package daemon

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

func init() {
	buildTLCP = buildTLCPSite
	buildTLS13SM = buildTLS13SMSite
}

func (b *siteBuild) sessionLifetime() time.Duration {
	if b.cfg.Sessions.Lifetime > 0 {
		return b.cfg.Sessions.Lifetime
	}
	return conf.DefaultSessionLifetime
}

// buildTLCPSite makes the TLCP server config of a site: double certificates
// with their keys behind the offload engine, suites, client auth, the
// shared session store and ticket keys.
func buildTLCPSite(b *siteBuild) (hs, inTLS frontdoor.Handshaker, err error) {
	m := &b.site.Material
	off := b.off
	signKey, err := b.siteKey(m.TLCPSign)
	if err != nil {
		return nil, nil, fmt.Errorf("sign key: %w", err)
	}
	encKey, err := b.siteKey(m.TLCPEnc)
	if err != nil {
		return nil, nil, fmt.Errorf("enc key: %w", err)
	}
	cert := tlcp.Certificate{
		SignCertificate: m.TLCPSign.DER(),
		SignKey:         off.Wrap(signKey, frontdoor.FamilyTLCP),
		EncCertificate:  m.TLCPEnc.Leaf().Raw,
		EncKey:          off.Wrap(encKey, frontdoor.FamilyTLCP),
		Leaf:            m.TLCPSign.Leaf(),
		EncLeaf:         m.TLCPEnc.Leaf(),
	}
	keys := b.tickets
	cfg := &tlcp.Config{
		Certificates:               []tlcp.Certificate{cert},
		CipherSuites:               m.TLCPSuites,
		NextProtos:                 b.alpn,
		ClientCAs:                  m.ClientCAPool(),
		SessionTicketsDisabled:     !b.cfg.Sessions.Tickets,
		TicketKeys:                 keys,
		SessionLifetime:            b.sessionLifetime(),
		AcceptRawCertificateVerify: b.site.TLCP != nil && b.site.TLCP.AcceptRawCertificateVerify,
		OnTicket:                   ticketObserver(b.env.Sessions, frontdoor.FamilyTLCP),
	}
	cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tlcp.VerifyClientCertIfGiven, tlcp.RequireAndVerifyClientCert)
	if b.site.ClientAuth.Mode == conf.ClientAuthOptionalNoCA {
		// Any certificate whose key signs CertificateVerify (the ECDHE
		// suites' pair too): frontdoor verifies it after the handshake
		// (clientVerifier).
		cfg.ClientAuth = tlcp.RequestClientCert
	}
	if crls, depth := m.ClientCRLs, b.site.ClientAuth.VerifyDepth; crls != nil || depth != nil {
		cfg.VerifyPeerCertificate = func(raw [][]byte, chains [][]*smx509.Certificate) error {
			if err := checkDepth(chains, depth); err != nil {
				return refusalAlert(err)
			}
			return refusalAlert(checkTLCPClient(crls, raw, chains, time.Now()))
		}
	}
	if b.cfg.Sessions.CacheSize > 0 {
		size, life := b.cfg.Sessions.CacheSize, b.sessionLifetime()
		evicted := b.env.evictions(frontdoor.FamilyTLCP)
		local := b.env.store(b.build, fmt.Sprintf("tlcp-sessions/%d/%s", size, life), func() any {
			return tlcp.SessionStore(newSessionStore(frontdoor.FamilyTLCP, size, life, b.env.Sessions, evicted))
		}).(tlcp.SessionStore)
		cfg.SessionStore = tieredStore(b.cfg, b.fleet.shared, frontdoor.FamilyTLCP, local, keys, life)
	} else {
		cfg.SessionCacheDisabled = true
	}
	in := cfg.Clone()
	in.AllowTLSRecordHello = true
	return frontdoor.TLCPHandshaker(cfg), frontdoor.TLCPHandshaker(in), nil
}

// buildTLS13SMSite makes the TLS 1.3-SM server config of a site. Its
// tickets are bound to the site (server name and certificate) and, with a
// client certificate, to the site's client-auth mode and CAs, so the
// ticket keys shared by all sites never carry a session to another site
// or past a reload that changed its client CAs. Its CRLs need no part in
// that binding: the server runs the VerifyPeerCertificate hook, which
// checks them, on the client chain of every resumed session.
func buildTLS13SMSite(b *siteBuild) (frontdoor.Handshaker, error) {
	m := &b.site.Material
	off := b.off
	keys := b.tickets
	key, err := b.siteKey(m.TLS13SM)
	if err != nil {
		return nil, err
	}
	cfg := &tls13sm.Config{
		Certificates: []tls13sm.Certificate{{
			Certificate: m.TLS13SM.DER(),
			PrivateKey:  off.Wrap(key, frontdoor.FamilyTLS13SM),
			Leaf:        m.TLS13SM.Leaf(),
		}},
		CipherSuites:           m.TLS13SMSuites,
		NextProtos:             b.alpn,
		ClientCAs:              m.ClientCAPool(),
		ClientCAsFingerprint:   tls13sm.CertificatesFingerprint(m.ClientCAs),
		SessionTicketsDisabled: !b.cfg.Sessions.Tickets,
		TicketKeys:             keys,
		TicketLifetime:         b.sessionLifetime(),
		Strict:                 b.site.TLS13SM != nil && b.site.TLS13SM.Strict,
		OnTicket:               ticketObserver(b.env.Sessions, frontdoor.FamilyTLS13SM),
		// The client's identity is read from its certificate: the
		// X-Ssl-Client-* headers, the routes that match them (a route
		// that answers 403 to one serial) and the access log's
		// client_s_dn. A connection resumed without the chain would
		// show no identity at all, and pass a route that denies one:
		// a ticket whose chain this process does not hold (another
		// instance's, from before a restart, or evicted) is declined
		// and the client presents its certificate again.
		ResumeNeedsClientChain: true,
	}
	cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tls13sm.VerifyClientCertIfGiven, tls13sm.RequireAndVerifyClientCert)
	if b.site.ClientAuth.Mode == conf.ClientAuthOptionalNoCA {
		cfg.ClientAuth = tls13sm.RequestClientCert // verified by clientVerifier
	}
	if crls, depth := m.ClientCRLs, b.site.ClientAuth.VerifyDepth; crls != nil || depth != nil {
		cfg.VerifyPeerCertificate = func(_ [][]byte, chains [][]*smx509.Certificate) error {
			if err := checkDepth(chains, depth); err != nil || crls == nil {
				return refusalAlert(err)
			}
			return refusalAlert(crls.CheckChains(chains, time.Now()))
		}
	}
	return frontdoor.TLS13SMHandshaker(cfg), nil
}

// checkTLCPClient checks a TLCP client's verified signing chains and its
// encryption certificate, the second it sends (GB/T 38636-2020), which
// the tlcp server verifies but does not return in chains. A second
// certificate that is a CA's (an intermediate of the chain) is no
// encryption certificate, as the tlcp server tells them apart.
func checkTLCPClient(crls *revocation.Index, raw [][]byte, chains [][]*smx509.Certificate, now time.Time) error {
	if len(chains) == 0 || crls == nil {
		return nil // not verified (no client certificate asked for), or no CRLs
	}
	if err := crls.CheckChains(chains, now); err != nil {
		return err
	}
	if len(raw) < 2 || slices.ContainsFunc(chains[0], func(c *smx509.Certificate) bool { return bytes.Equal(c.Raw, raw[1]) }) {
		return nil
	}
	enc, err := smx509.ParseCertificate(raw[1])
	if err != nil || enc.IsCA || enc.KeyUsage&smx509.KeyUsageCertSign != 0 {
		return nil // the tlcp server refused it already, or not an encryption certificate
	}
	return crls.CheckIssued(enc, now)
}

// refusalAlert makes the tlcp and tls13sm servers answer a revoked client
// certificate with certificate_revoked (RFC 5246 §7.2.2) and a chain
// deeper than verify_depth with unknown_ca, as OpenSSL answers
// X509_V_ERR_CERT_CHAIN_TOO_LONG; other refusals (no CRL, a stale one)
// keep bad_certificate.
func refusalAlert(err error) error {
	if re := (*revocation.Error)(nil); errors.As(err, &re) && re.Reason == revocation.ReasonRevoked {
		return &tlcp.AlertError{Alert: tlcp.AlertCertificateRevoked, Err: err}
	}
	if deep := (*chainTooLongError)(nil); errors.As(err, &deep) {
		return &tlcp.AlertError{Alert: tlcp.AlertUnknownCA, Err: err}
	}
	return err
}

// chainTooLongError refuses a client chain with more CA certificates
// between the client's certificate and its trust anchor than
// client_auth.verify_depth allows.
type chainTooLongError struct{ intermediates, depth int }

func (e *chainTooLongError) Error() string {
	return fmt.Sprintf("client certificate chain has %d intermediate CA certificate(s); client_auth.verify_depth allows %d", e.intermediates, e.depth)
}

func (e *chainTooLongError) ClientCertReason() string { return frontdoor.ClientCertTooDeep }

// checkDepth refuses a client whose verified chains (each from its
// certificate to a trust anchor of client_auth.ca) all have more
// intermediates than depth (nil: no limit). One within depth suffices:
// OpenSSL builds one chain, and could have built that one.
func checkDepth[C any](chains [][]C, depth *int) error {
	if depth == nil || len(chains) == 0 {
		return nil
	}
	shortest := len(chains[0])
	for _, c := range chains[1:] {
		shortest = min(shortest, len(c))
	}
	// A chain of one is a certificate of ca itself.
	if n := max(shortest-2, 0); n > *depth {
		return &chainTooLongError{intermediates: n, depth: *depth}
	}
	return nil
}

// clientAuthType maps a site's client_auth mode onto a protocol package's
// ClientAuthType: request → ifGiven, require → require, none → the zero
// value (NoClientCert).
func clientAuthType[T any](mode string, ifGiven, require T) T {
	var t T
	switch mode {
	case conf.ClientAuthRequest:
		t = ifGiven
	case conf.ClientAuthRequire:
		t = require
	}
	return t
}

// ticketObserver is the OnTicket hook of either protocol package (they
// report the record core's one TicketEvent): it counts the event kinds
// issued, accepted and rejected under family (frontdoor.FamilyTLCP or
// FamilyTLS13SM; nil observer: no hook). A rejection goes to
// TicketRejectedReason with the protocol's bounded reason when obs
// implements frontdoor.TicketReasonObserver, else to TicketRejected.
// Session-ID lookups are reported by sessionStore.
func ticketObserver(obs frontdoor.SessionObserver, family string) func(record.TicketEvent) {
	if obs == nil {
		return nil
	}
	withReason, _ := obs.(frontdoor.TicketReasonObserver)
	return func(e record.TicketEvent) {
		switch e.Kind {
		case record.TicketIssued:
			obs.TicketIssued(family)
		case record.TicketAccepted:
			obs.TicketAccepted(family)
		case record.TicketRejected:
			if withReason != nil {
				withReason.TicketRejectedReason(family, e.Reason)
			} else {
				obs.TicketRejected(family)
			}
		}
	}
}

// clientAuthPolicy names site s's client authentication, its mode and
// CAs ("" without one): after a reload that changes it, a connection whose
// handshake met the old one gets 421 and connects again
// (proxy.SiteConfig.ClientAuthPolicy). A site of mode none that verifies
// its TLCP ECDHE clients has one too. The CRLs count: a reload that
// revokes a certificate reaches the connections it authenticated.
func clientAuthPolicy(s *conf.Site) string {
	mode := s.ClientAuth.Mode
	if mode == conf.ClientAuthNone || mode == "" {
		if !verifiesECDHEClients(s) {
			return ""
		}
		mode = "ecdhe"
	}
	p := mode + ":" + hex.EncodeToString(tls13sm.CertificatesFingerprint(s.Material.ClientCAs))
	if crls := s.Material.ClientCRLs; crls != nil {
		p += ":crl:" + hex.EncodeToString(crls.Fingerprint())
	}
	if d := s.ClientAuth.VerifyDepth; d != nil {
		p += fmt.Sprintf(":depth:%d", *d)
	}
	return p
}

// verifiesECDHEClients reports whether site s authenticates clients
// whatever its client_auth mode: a TLCP ECDHE key exchange needs the
// client's sign/enc pair (GB/T 38636-2020), which the tlcp server verifies
// against the site's ca when it has one. Those connections are then as
// authenticated as under mode require, and a reload that replaces the CA
// must reach them likewise.
func verifiesECDHEClients(s *conf.Site) bool {
	m := &s.Material
	if m.TLCPSign == nil || m.TLCPEnc == nil || len(m.ClientCAs) == 0 {
		return false
	}
	suites := m.TLCPSuites
	if len(suites) == 0 {
		suites = tlcp.CipherSuites() // the tlcp package's default
	}
	return slices.ContainsFunc(suites, conf.IsECDHE)
}
