package tls13sm

import (
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/record"
)

// sessionState is what a ticket carries (sealed with internal/ticket as a
// ticket.TLS13SM ticket). It is kept small — at most 197 bytes (133 plus an
// ALPN name of up to 64), 241 sealed, under the 256-byte limit — whatever
// the client sent: a client certificate chain is never stored in it, only
// what the resumed connection must know about the client (clientIdentity),
// with the verified chain kept in a bounded per-process cache (GmSSL's
// tls13_client crashes on tickets above ~450 bytes).
type sessionState struct {
	suite     uint16
	createdAt uint64 // Unix seconds: when this ticket was issued
	// authAt is when the session began, in the full handshake that
	// authenticated it (Unix seconds): tickets issued on resumption keep
	// it, so that the session ends TicketLifetime after it however often
	// it is resumed (§4.6.1: "the server MAY ... limit the total
	// lifetime"; sessions.lifetime promises that bound).
	authAt   uint64
	lifetime uint32 // seconds
	ageAdd   uint32
	secret   resumptionPSK
	// site binds the ticket to the server identity that issued it (see
	// serverHandshakeState.siteBinding): a ticket key set shared by several
	// sites never resumes one site's session on another.
	site   [bindingSize]byte
	client clientIdentity
	alpn   string // informational; at most maxTicketALPN bytes are kept
}

// clientIdentity is what a session remembers of the client certificate.
type clientIdentity struct {
	presented bool           // a client certificate was presented
	verified  bool           // its chain verified against ClientCAs
	leafHash  [hashSize]byte // SM3 of the leaf's DER
	notAfter  uint64         // the earliest NotAfter of the verified chain (else the leaf's), Unix seconds
	// auth is the client-auth binding (Config.clientAuthBinding) the
	// certificate was checked under: ClientAuth and ClientCAs.
	auth [bindingSize]byte
}

// sessionStateVersion 3 added the site and client-auth bindings (and the
// ticket's protocol label), 4 the session's start (authAt); older tickets
// are not accepted (full handshake).
const sessionStateVersion = 4

// maxTicketALPN bounds the ALPN name kept in a ticket (it is only
// informational: ALPN is negotiated afresh on resumption).
const maxTicketALPN = 64

// maxSessionState is the largest encoded sessionState: version, suite,
// created, authenticated, lifetime, age_add, secret, site, client flag, leaf hash,
// not_after, client-auth binding, ALPN length and name. Sealed, it takes
// ticket.Overhead more, at most maxTicketSize.
const maxSessionState = 1 + 2 + 8 + 8 + 4 + 4 + hashSize + bindingSize + 1 + hashSize + 8 + bindingSize + 1 + maxTicketALPN

// maxTicketSize is the most a ticket this server issues can take (GmSSL's
// and Tongsuo's clients keep tickets of up to 256 bytes).
const maxTicketSize = 256

// Client flag byte of the encoded session state.
const (
	clientNone       = 0
	clientPresented  = 1
	clientVerifiedCA = 2
)

func (s *sessionState) ticketALPN() string {
	if len(s.alpn) > maxTicketALPN {
		return ""
	}
	return s.alpn
}

func (s *sessionState) clientFlag() uint8 {
	switch {
	case !s.client.presented:
		return clientNone
	case s.client.verified:
		return clientVerifiedCA
	}
	return clientPresented
}

func (s *sessionState) marshal() ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint8(sessionStateVersion)
	b.AddUint16(s.suite)
	b.AddUint64(s.createdAt)
	b.AddUint64(s.authAt)
	b.AddUint32(s.lifetime)
	b.AddUint32(s.ageAdd)
	b.AddBytes(s.secret[:])
	b.AddBytes(s.site[:])
	b.AddUint8(s.clientFlag())
	if s.client.presented {
		b.AddBytes(s.client.leafHash[:])
		b.AddUint64(s.client.notAfter)
		b.AddBytes(s.client.auth[:])
	}
	addU8Bytes(&b, []byte(s.ticketALPN()))
	return b.Bytes()
}

func (s *sessionState) unmarshal(data []byte) bool {
	*s = sessionState{}
	in := cryptobyte.String(data)
	var v, flag uint8
	var alpn []byte
	if !in.ReadUint8(&v) || v != sessionStateVersion || !in.ReadUint16(&s.suite) || !in.ReadUint64(&s.createdAt) ||
		!in.ReadUint64(&s.authAt) || !in.ReadUint32(&s.lifetime) || !in.ReadUint32(&s.ageAdd) || !in.CopyBytes(s.secret[:]) ||
		!in.CopyBytes(s.site[:]) || !in.ReadUint8(&flag) {
		return false
	}
	switch flag {
	case clientNone:
	case clientPresented, clientVerifiedCA:
		s.client.presented, s.client.verified = true, flag == clientVerifiedCA
		if !in.CopyBytes(s.client.leafHash[:]) || !in.ReadUint64(&s.client.notAfter) || !in.CopyBytes(s.client.auth[:]) {
			return false
		}
	default:
		return false
	}
	if !in.ReadUint8LengthPrefixed((*cryptobyte.String)(&alpn)) || len(alpn) > maxTicketALPN || !in.Empty() {
		return false
	}
	s.alpn = string(alpn)
	return cipherSuiteByID(s.suite) != nil
}

// peerChains is the server-side cache of client chains, keyed by the SM3
// hash of the client leaf that tickets carry. It only restores
// PeerCertificates and VerifiedChains on resumption: on a miss (another
// instance issued the ticket, a restart, or eviction) the resumed connection
// still reports the client identity from the ticket (ConnectionState's
// ClientCertificate, ClientVerified, ClientLeafHash) but no certificates.
type peerChains struct {
	certs  []*smx509.Certificate
	chains [][]*smx509.Certificate
}

var clientChainCache = lru.New[[hashSize]byte, peerChains](4096, maxTicketLifetime)

func leafHash(der []byte) [hashSize]byte { return sm3.Sum(der) }

func unixTime(t time.Time) uint64 {
	if t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}

// TicketEventKind says what happened to a session ticket on the server
// (the same type as tlcp.TicketEventKind).
type TicketEventKind = record.TicketEventKind

const (
	// TicketIssued: a NewSessionTicket was sent.
	TicketIssued = record.TicketIssued
	// TicketAccepted: an offered ticket was used to resume (its binder verified).
	TicketAccepted = record.TicketAccepted
	// TicketRejected: the client offered tickets but none was used; the
	// handshake falls back to a full one, or fails for a bad binder.
	TicketRejected = record.TicketRejected
)

// Reasons of a TicketRejected event: a small fixed set, safe as a metric label.
const (
	// TicketReasonDisabled: tickets are disabled on this server.
	TicketReasonDisabled = record.TicketReasonDisabled
	// TicketReasonPSKMode: no usable psk_key_exchange_modes (psk_ke only
	// without AllowPSKOnly, or psk_dhe_ke without a shared group).
	TicketReasonPSKMode = record.TicketReasonPSKMode
	// TicketReasonUndecryptable: unknown or retired ticket key, a damaged or
	// forged ticket, or one not made by this service.
	TicketReasonUndecryptable = record.TicketReasonUndecryptable
	// TicketReasonMalformed: the ticket decrypted but its contents are not a
	// session this version understands.
	TicketReasonMalformed = record.TicketReasonMalformed
	// TicketReasonExpired: older than its lifetime or the configured
	// TicketLifetime, or issued in the future.
	TicketReasonExpired = record.TicketReasonExpired
	// TicketReasonAgeMismatch: the client's obfuscated ticket age is off by
	// more than the allowed skew (RFC 8446 §8.3).
	TicketReasonAgeMismatch = record.TicketReasonAgeMismatch
	// TicketReasonClientAuth: the server's ClientAuth policy is not met by
	// the ticket's session (no certificate where one is required, or a
	// certificate that was not verified where verification is required).
	TicketReasonClientAuth = record.TicketReasonClientAuth
	// TicketReasonClientCertExpired: the session's verified client leaf
	// certificate has expired since the ticket was issued.
	TicketReasonClientCertExpired = record.TicketReasonClientCertExpired
	// TicketReasonIdentity: the ticket was issued for another server name
	// (compared without regard to case) or another server certificate — a
	// ticket key set shared between sites.
	TicketReasonIdentity = record.TicketReasonIdentity
	// TicketReasonClientCert: the session has a client certificate checked
	// under other client-auth settings (ClientAuth, ClientCAs; a reload
	// changed them) and this process cannot verify its chain again against
	// the current ClientCAs, or it no longer verifies; or
	// ResumeNeedsClientChain is set and this process does not hold the
	// chain.
	TicketReasonClientCert = record.TicketReasonClientCert
	// TicketReasonSuite: Strict mode and the ticket's suite differs from the
	// negotiated one.
	TicketReasonSuite = record.TicketReasonSuite
	// TicketReasonBadBinder: the PSK binder did not verify; the handshake
	// fails with decrypt_error.
	TicketReasonBadBinder = record.TicketReasonBadBinder
)

// TicketEvent is passed to Config.OnTicket (server side). A handshake
// whose ClientHello offers tickets reports exactly one TicketAccepted or
// TicketRejected (with the reason of the first identity examined); a
// handshake that sends a NewSessionTicket reports TicketIssued.
type TicketEvent = record.TicketEvent

// ticketEvent reports e to the server's OnTicket hook, if any.
func (hs *serverHandshakeState) ticketEvent(kind TicketEventKind, reason string, stale bool) {
	if f := hs.config.OnTicket; f != nil {
		f(TicketEvent{Kind: kind, Reason: reason, Stale: stale, DidHRR: hs.sentHRR})
	}
}
