package daemon

import (
	"fmt"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/handshake"
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
func buildTLCPSite(b *siteBuild) (hs, inTLS handshake.Handshaker, err error) {
	m := &b.site.Material
	off := b.off
	cert := tlcp.Certificate{
		SignCertificate: m.TLCPSign.DER(),
		SignKey:         off.Wrap(m.TLCPSign.Key, handshake.FamilyTLCP),
		EncCertificate:  m.TLCPEnc.Leaf().Raw,
		EncKey:          off.Wrap(m.TLCPEnc.Key, handshake.FamilyTLCP),
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
	switch b.site.ClientAuth.Mode {
	case conf.ClientAuthRequest:
		cfg.ClientAuth = tlcp.VerifyClientCertIfGiven
	case conf.ClientAuthRequire:
		cfg.ClientAuth = tlcp.RequireAndVerifyClientCert
	}
	if b.cfg.Sessions.CacheSize > 0 {
		size, life := b.cfg.Sessions.CacheSize, b.sessionLifetime()
		cfg.SessionStore = b.env.store(fmt.Sprintf("tlcp-sessions/%d/%s", size, life), func() any {
			return tlcp.SessionStore(newSessionStore(handshake.FamilyTLCP, size, life, b.env.Sessions))
		}).(tlcp.SessionStore)
	} else {
		cfg.SessionCacheDisabled = true
	}
	in := cfg.Clone()
	in.AllowTLSRecordHello = true
	return handshake.TLCPHandshaker(cfg), handshake.TLCPHandshaker(in), nil
}

// buildTLS13SMSite makes the TLS 1.3-SM server config of a site.
func buildTLS13SMSite(b *siteBuild) (handshake.Handshaker, error) {
	m := &b.site.Material
	off := b.off
	keys, err := b.env.TicketKeys(b.cfg)
	if err != nil {
		return nil, err
	}
	cfg := &tls13sm.Config{
		Certificates: []tls13sm.Certificate{{
			Certificate: m.TLS13SM.DER(),
			PrivateKey:  off.Wrap(m.TLS13SM.Key, handshake.FamilyTLS13SM),
			Leaf:        m.TLS13SM.Leaf(),
		}},
		CipherSuites:           m.TLS13SMSuites,
		NextProtos:             b.alpn,
		ClientCAs:              m.ClientCAPool(),
		SessionTicketsDisabled: !b.cfg.Sessions.Tickets,
		TicketKeys:             keys,
		TicketLifetime:         b.sessionLifetime(),
		Strict:                 b.site.TLS13SM != nil && b.site.TLS13SM.Strict,
		OnTicket:               tls13smTicketObserver(b.env.Sessions),
	}
	switch b.site.ClientAuth.Mode {
	case conf.ClientAuthRequest:
		cfg.ClientAuth = tls13sm.VerifyClientCertIfGiven
	case conf.ClientAuthRequire:
		cfg.ClientAuth = tls13sm.RequireAndVerifyClientCert
	}
	return handshake.TLS13SMHandshaker(cfg), nil
}

// tls13smTicketObserver reports tls13sm ticket events to the session
// observer under the family "tls13sm" (nil observer: no hook). The
// rejection reason is bounded but the observer has no label for it yet.
func tls13smTicketObserver(obs handshake.SessionObserver) func(tls13sm.TicketEvent) {
	if obs == nil {
		return nil
	}
	return func(e tls13sm.TicketEvent) {
		switch e.Kind {
		case tls13sm.TicketIssued:
			obs.TicketIssued(handshake.FamilyTLS13SM)
		case tls13sm.TicketAccepted:
			obs.TicketAccepted(handshake.FamilyTLS13SM)
		case tls13sm.TicketRejected:
			obs.TicketRejected(handshake.FamilyTLS13SM)
		}
	}
}

// tlcpTicketObserver reports tlcp ticket events to the session observer
// under the family "tlcp" (nil observer: no hook), as tls13smTicketObserver
// does for TLS 1.3-SM. Session-ID lookups are reported by sessionStore.
func tlcpTicketObserver(obs handshake.SessionObserver) func(tlcp.TicketEvent) {
	if obs == nil {
		return nil
	}
	return func(e tlcp.TicketEvent) {
		switch e.Kind {
		case tlcp.TicketIssued:
			obs.TicketIssued(handshake.FamilyTLCP)
		case tlcp.TicketAccepted:
			obs.TicketAccepted(handshake.FamilyTLCP)
		case tlcp.TicketRejected:
			obs.TicketRejected(handshake.FamilyTLCP)
		}
	}
}
