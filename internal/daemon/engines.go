package daemon

import (
	"fmt"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
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
	keys, err := b.env.TicketKeys(b.cfg)
	if err != nil {
		return nil, nil, err
	}
	cfg := &tlcp.Config{
		Certificates:               []tlcp.Certificate{cert},
		CipherSuites:               m.TLCPSuites,
		NextProtos:                 b.alpn,
		ClientCAs:                  m.ClientCAPool(),
		SessionTicketsDisabled:     !b.cfg.Sessions.Tickets,
		TicketKeys:                 keys,
		SessionLifetime:            b.sessionLifetime(),
		AcceptRawCertificateVerify: b.site.TLCP != nil && b.site.TLCP.AcceptRawCertificateVerify,
		OnTicket:                   tlcpTicketObserver(b.env.Sessions),
	}
	cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tlcp.VerifyClientCertIfGiven, tlcp.RequireAndVerifyClientCert)
	if b.cfg.Sessions.CacheSize > 0 {
		size, life := b.cfg.Sessions.CacheSize, b.sessionLifetime()
		local := b.env.store(fmt.Sprintf("tlcp-sessions/%d/%s", size, life), func() any {
			return tlcp.SessionStore(newSessionStore(frontdoor.FamilyTLCP, size, life, b.env.Sessions))
		}).(tlcp.SessionStore)
		cfg.SessionStore = b.env.tieredStore(b.cfg, frontdoor.FamilyTLCP, local, keys, life)
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
// or past a reload that changed its client CAs.
func buildTLS13SMSite(b *siteBuild) (frontdoor.Handshaker, error) {
	m := &b.site.Material
	off := b.off
	keys, err := b.env.TicketKeys(b.cfg)
	if err != nil {
		return nil, err
	}
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
		OnTicket:               tls13smTicketObserver(b.env.Sessions),
	}
	cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tls13sm.VerifyClientCertIfGiven, tls13sm.RequireAndVerifyClientCert)
	return frontdoor.TLS13SMHandshaker(cfg), nil
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

// tls13smTicketObserver reports tls13sm ticket events to the session
// observer under the family "tls13sm" (nil observer: no hook), with the
// bounded rejection reason when the observer takes one.
func tls13smTicketObserver(obs frontdoor.SessionObserver) func(tls13sm.TicketEvent) {
	return ticketObserver(obs, frontdoor.FamilyTLS13SM,
		func(e tls13sm.TicketEvent) (tls13sm.TicketEventKind, string) { return e.Kind, e.Reason },
		tls13sm.TicketIssued, tls13sm.TicketAccepted, tls13sm.TicketRejected)
}

// tlcpTicketObserver reports tlcp ticket events to the session observer
// under the family "tlcp" (nil observer: no hook), as tls13smTicketObserver
// does for TLS 1.3-SM. Session-ID lookups are reported by sessionStore.
func tlcpTicketObserver(obs frontdoor.SessionObserver) func(tlcp.TicketEvent) {
	return ticketObserver(obs, frontdoor.FamilyTLCP,
		func(e tlcp.TicketEvent) (tlcp.TicketEventKind, string) { return e.Kind, e.Reason },
		tlcp.TicketIssued, tlcp.TicketAccepted, tlcp.TicketRejected)
}

// ticketObserver is an OnTicket hook of either protocol package: it counts
// the event kinds issued, accepted and rejected under family (nil
// observer: no hook). A rejection goes to TicketRejectedReason with the
// protocol's reason when obs implements frontdoor.TicketReasonObserver,
// else to TicketRejected.
func ticketObserver[E any, K comparable](obs frontdoor.SessionObserver, family string, kind func(E) (K, string), issued, accepted, rejected K) func(E) {
	if obs == nil {
		return nil
	}
	withReason, _ := obs.(frontdoor.TicketReasonObserver)
	return func(e E) {
		switch k, reason := kind(e); k {
		case issued:
			obs.TicketIssued(family)
		case accepted:
			obs.TicketAccepted(family)
		case rejected:
			if withReason != nil {
				withReason.TicketRejectedReason(family, reason)
			} else {
				obs.TicketRejected(family)
			}
		}
	}
}
