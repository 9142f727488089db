// Package tlcp implements TLCP, the Chinese commercial-cryptography transport
// protocol of GB/T 38636-2020 (GM/T 0024 "NTLS 1.1", version 01 01), client
// and server, for the four SM2 suites ECC/ECDHE × SM4-CBC-SM3/SM4-GCM-SM3.
//
// The package is shaped after crypto/tls: a Config, a Conn that is a
// net.Conn, Server/Client/Listen/Dial. It interoperates with Tongsuo and
// GmSSL; the protocol facts it relies on are in docs/protocol-notes.md
// (§1–§8) with the interop differences of §11.
//
// Every private-key operation of a handshake goes through internal/smkey
// (smkey.Sign, smkey.Decrypt, smkey.AsKeyAgreement) with the handshake's
// context, so keys can live behind an offload engine, a key server or
// hardware.
package tlcp

import (
	"context"
	"crypto"
	"io"
	"net"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/internal/wire"
)

// VersionTLCP is the protocol version of GB/T 38636-2020 in record headers
// and hellos (GM/T 0024-2014 §6.3.2.1 as cited by implementers).
const VersionTLCP = 0x0101

// versionTLS12 is the client_version of the TLS hellos accepted with
// Config.AllowTLSRecordHello.
const versionTLS12 = 0x0303

// Record content types (GB/T 38636 §6.3.3.2, same numbers as TLS).
type recordType uint8

const (
	recordTypeChangeCipherSpec recordType = record.TypeChangeCipherSpec
	recordTypeAlert            recordType = record.TypeAlert
	recordTypeHandshake        recordType = record.TypeHandshake
	recordTypeApplicationData  recordType = record.TypeApplicationData
)

// Handshake message types.
const (
	typeHelloRequest       uint8 = 0
	typeClientHello        uint8 = 1
	typeServerHello        uint8 = 2
	typeNewSessionTicket   uint8 = 4
	typeCertificate        uint8 = 11
	typeServerKeyExchange  uint8 = 12
	typeCertificateRequest uint8 = 13
	typeServerHelloDone    uint8 = 14
	typeCertificateVerify  uint8 = 15
	typeClientKeyExchange  uint8 = 16
	typeFinished           uint8 = 20
)

// Extensions (GM/T 0024-2023 list plus Tongsuo's session_ticket).
const (
	extensionServerName           = wire.ExtensionServerName
	extensionALPN                 = wire.ExtensionALPN
	extensionSessionTicket uint16 = 35
)

// Certificate types in CertificateRequest.
const (
	certTypeRSASign   = 1
	certTypeECDSASign = 64
)

// Size limits.
const (
	maxPlaintext       = record.MaxPlaintext // 2^14
	maxCiphertext      = 16384 + 2048        // 2^14 + 2048
	recordHeaderLen    = record.HeaderLen
	maxHandshake       = 65536 // largest handshake message accepted
	maxCertChain       = 10    // certificates in one Certificate message
	defaultMaxEmpty    = 32    // empty records and warning alerts in a row
	masterSecretLength = 48
	finishedVerifyLen  = 12
	sessionIDLen       = 32
	maxServerName      = 255 // bytes of a server_name host name (RFC 1035 §2.3.4)
)

// ClientAuthType declares the server's policy for client certificates, with
// the meaning it has in crypto/tls. ECDHE suites always require a client
// certificate pair, whose encryption key takes part in the key exchange
// (GB/T 38636 §6.4.5.8 as cited by gotlcp), and verify it against
// Config.ClientCAs when that is set, unless the policy is
// RequestClientCert or RequireAnyClientCert, which verify no chain (the
// caller does, as nginx's optional_no_ca); with no ClientCAs and
// NoClientCert the pair only serves the key exchange and identifies no
// one: ConnectionState.VerifiedChains stays empty. Every policy checks
// the client's CertificateVerify, its proof of the signing key.
type ClientAuthType int

const (
	// NoClientCert: no CertificateRequest is sent (ECC suites).
	NoClientCert ClientAuthType = iota
	// RequestClientCert: a certificate is requested but not required nor verified.
	RequestClientCert
	// RequireAnyClientCert: a certificate is required but not verified.
	RequireAnyClientCert
	// VerifyClientCertIfGiven: a certificate is verified if one is sent.
	VerifyClientCertIfGiven
	// RequireAndVerifyClientCert: a certificate is required and verified against ClientCAs.
	RequireAndVerifyClientCert
)

func (t ClientAuthType) requires() bool {
	return t == RequireAnyClientCert || t == RequireAndVerifyClientCert
}

func (t ClientAuthType) verifies() bool {
	return t == VerifyClientCertIfGiven || t == RequireAndVerifyClientCert
}

// Certificate is one TLCP identity: a signing certificate with its chain and
// an encryption certificate, each with its private key.
type Certificate struct {
	// SignCertificate holds DER certificates: the signing leaf first, then
	// its chain (CA certificates; the root may be omitted).
	SignCertificate [][]byte
	// SignKey signs ServerKeyExchange (server) or CertificateVerify (client).
	// It may implement smkey.ContextSigner.
	SignKey crypto.Signer
	// EncCertificate is the DER encryption certificate.
	EncCertificate []byte
	// EncKey is the encryption key: a crypto.Decrypter for ECC suites
	// (optionally smkey.ContextDecrypter), and an *sm2.PrivateKey or an
	// smkey.KeyAgreement for ECDHE suites.
	EncKey crypto.PrivateKey
	// Leaf and EncLeaf are the parsed leaves (set by X509KeyPair). When Leaf
	// is nil the server parses the signing certificate per handshake where
	// it needs it (SNI matching among several certificates).
	Leaf, EncLeaf *smx509.Certificate
}

// ClientHelloInfo is what the server knows about a client when it selects a
// certificate or a configuration.
type ClientHelloInfo struct {
	// ServerName is the SNI host name, or "".
	ServerName string
	// CipherSuites lists the suites the client offered, in its order.
	CipherSuites []uint16
	// SupportedProtos lists the ALPN protocols offered.
	SupportedProtos []string
	// Conn is the underlying connection.
	Conn net.Conn

	ctx context.Context
}

// Context returns the handshake's context.
func (i *ClientHelloInfo) Context() context.Context {
	if i.ctx == nil {
		return context.Background()
	}
	return i.ctx
}

// ConnectionState describes an established (or failed) connection.
type ConnectionState struct {
	Version            uint16
	HandshakeComplete  bool
	DidResume          bool
	CipherSuite        uint16
	NegotiatedProtocol string
	ServerName         string
	// PeerCertificates are the peer's certificates as sent: server — sign,
	// enc, chain; client — sign[, enc, chain].
	PeerCertificates []*smx509.Certificate
	// VerifiedChains are the chains built for the peer's signing certificate.
	VerifiedChains [][]*smx509.Certificate
}

// HandshakeResult reports the outcome of one handshake to Config.OnHandshake.
type HandshakeResult struct {
	IsClient bool
	State    ConnectionState
	// Err is nil on success.
	Err error
	// Duration runs from the start of Handshake to its end (or failure).
	Duration time.Duration
	// Alert is the alert sent to (or received from, if PeerAlert) the peer,
	// or 0 when none.
	Alert     Alert
	PeerAlert bool
	// Reason is a short fixed label for a failure ("timeout", "eof",
	// "bad_certificate", "no_shared_cipher", "protocol_error", "peer_alert",
	// "internal_error"), "" on success.
	Reason string
}

// Stats counts application data moved on a connection: plaintext bytes and
// application_data records, including the empty records peers send.
type Stats = record.Stats

// Config configures a TLCP client or server. A Config may be reused; it must
// not be modified once passed to the package.
type Config struct {
	// Rand provides randomness; default crypto/rand.Reader.
	Rand io.Reader
	// Time returns the current time; default time.Now.
	Time func() time.Time

	// Certificates are the server's identities (or the client's for client
	// authentication). The server uses the first unless GetCertificate is set
	// or a certificate's names match the SNI.
	Certificates []Certificate
	// GetCertificate returns the server identity for a ClientHello (for
	// example by SNI). A nil certificate with nil error falls back to
	// Certificates.
	GetCertificate func(*ClientHelloInfo) (*Certificate, error)
	// GetConfigForClient may return a different Config for this client; nil
	// keeps this one.
	GetConfigForClient func(*ClientHelloInfo) (*Config, error)

	// RootCAs verify server certificates (client); nil means the system
	// pool, which rarely holds SM2 roots.
	RootCAs *smx509.CertPool
	// ClientCAs verify client certificates (server); their subjects are
	// listed in CertificateRequest (GmSSL clients require them).
	ClientCAs *smx509.CertPool
	// ClientAuth is the server's client-certificate policy for ECC suites;
	// default NoClientCert. ECDHE suites always require the client's
	// sign/enc pair, verified against ClientCAs when it is set (unless
	// ClientAuth is RequestClientCert or RequireAnyClientCert). The verifying
	// policies need ClientCAs: without it a client certificate is refused
	// with unknown_ca.
	ClientAuth ClientAuthType
	// ServerName is the host name the client sends as SNI and checks in the
	// server certificate.
	ServerName string
	// InsecureSkipVerify turns off the client's verification of the server's
	// certificates (the key-usage checks remain).
	InsecureSkipVerify bool
	// VerifyPeerCertificate, if set, is called after normal verification;
	// an error it returns fails the handshake with bad_certificate, or with
	// the alert and cause of an *AlertError it returns (certificate_revoked,
	// say). A server calls it again on the re-verified chains of a resumed
	// session (session ID or ticket), and an error then declines the
	// resumption: the client makes a full handshake, so a policy the hook
	// enforces (revocation) is not passed by resuming.
	VerifyPeerCertificate func(rawCerts [][]byte, verifiedChains [][]*smx509.Certificate) error
	// InsecureLoadGenerator makes a client cheap enough to load a server
	// to its peak from a single core (gmproxy s_time -loadgen): it does not
	// check the ServerKeyExchange signature, and under ECC suites it
	// encrypts one pre-master per server encryption certificate and sends
	// that same ClientKeyExchange on every connection. The server's work is
	// unchanged. A client so configured has no security at all: benchmarks
	// only. Default false.
	InsecureLoadGenerator bool

	// NextProtos are the ALPN protocols, in preference order.
	NextProtos []string
	// CipherSuites are the enabled suites: the server's preference order, the
	// client's offer order. Default: ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3,
	// ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3 (GCM first). The server skips
	// suites the certificate's EncKey cannot serve (ECC needs a
	// crypto.Decrypter, ECDHE an SM2 key agreement).
	CipherSuites []uint16

	// SessionStore keeps server sessions for session-ID resumption; default an
	// in-memory LRU of 10,000 sessions shared by all Configs
	// (NewLRUSessionStore). Sessions (and tickets) are bound to the server's
	// signing certificate and SNI, so sharing a store or ticket keys between
	// sites never resumes one site's session on another. Set
	// SessionCacheDisabled to turn session IDs off.
	SessionStore SessionStore
	// SessionCacheDisabled stops the server from issuing resumable session IDs.
	SessionCacheDisabled bool
	// SessionTicketsDisabled stops the server issuing tickets and the client
	// offering the session_ticket extension.
	SessionTicketsDisabled bool
	// TicketKeys seal and open session tickets (first key encrypts, all
	// decrypt); nil uses a package-wide ticket.Rotator (hourly keys).
	TicketKeys ticket.Source
	// SessionLifetime bounds resumption; default 2 hours.
	SessionLifetime time.Duration
	// ClientSessionCache lets a client resume (by session ID or ticket); nil
	// disables client-side resumption.
	ClientSessionCache ClientSessionCache

	// ClientECDHEParamsAsVector makes the client send the GmSSL 71-byte
	// ECDHE ClientKeyExchange (with a u16 length); default is Tongsuo's 69
	// bytes. The server accepts both.
	ClientECDHEParamsAsVector bool
	// NoClientExtensions makes the client send no extensions block at all
	// (GmSSL's TLCP server drops hellos with extensions it does not know).
	NoClientExtensions bool
	// ClientSignCertOnly makes the client send only its signing certificate
	// (and chain) under ECC suites: GmSSL servers reject [sign, enc] lists.
	// Default: sign, enc, chain (Tongsuo servers require the enc certificate).
	// ECDHE suites always send both.
	ClientSignCertOnly bool
	// ClientRawCertificateVerify makes the client sign the raw handshake
	// messages in CertificateVerify, as GmSSL 3.3 servers expect; default is
	// SM3(handshake_messages) as Tongsuo and GB/T 38636 §6.4.5.9 do.
	ClientRawCertificateVerify bool
	// AcceptRawCertificateVerify makes the server also accept GmSSL's client
	// CertificateVerify computed over the raw handshake messages.
	AcceptRawCertificateVerify bool
	// AllowTLSRecordHello lets the server accept a first ClientHello carried in
	// a TLS record (03 01 / 03 03) with client_version 03 03 that offers TLCP
	// suites, answering in TLCP (the 360-browser pattern).
	AllowTLSRecordHello bool
	// MaxEmptyRecords bounds records that carry nothing (empty application
	// data records and warning alerts) in a row; default 32.
	MaxEmptyRecords int

	// OnHandshake, if set, is called once per handshake with its outcome.
	OnHandshake func(HandshakeResult)
	// OnTicket, if set, is called on the server for session-ticket events:
	// issued, accepted (Stale after a key rotation), or rejected with a
	// bounded reason when the client offered a non-empty ticket that was
	// not used (see TicketEvent). It runs synchronously inside the
	// handshake and must not block. Session-ID lookups are not reported
	// here; a SessionStore sees those. Default nil.
	OnTicket func(TicketEvent)

	// testHandshakeOut, set only by tests, makes this endpoint misbehave:
	// it gets a copy of each outgoing handshake message (header included)
	// and returns the bytes to send instead (altered, several messages, or
	// none). It runs after the message went into this side's transcript,
	// or before with testRewriteBeforeHash (both transcripts then agree).
	testHandshakeOut      func(msg []byte) []byte
	testRewriteBeforeHash bool
}

// Clone returns a shallow copy of c.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	n := *c
	return &n
}

func (c *Config) rand() io.Reader { return record.Rand(c.Rand) }

func (c *Config) time() time.Time { return record.Now(c.Time) }

func (c *Config) maxEmpty() int {
	if c.MaxEmptyRecords > 0 {
		return c.MaxEmptyRecords
	}
	return defaultMaxEmpty
}

func (c *Config) lifetime() time.Duration {
	if c.SessionLifetime > 0 {
		return c.SessionLifetime
	}
	return 2 * time.Hour
}

func (c *Config) cipherSuites() []uint16 {
	if len(c.CipherSuites) > 0 {
		return c.CipherSuites
	}
	return defaultCipherSuites
}

var (
	defaultTicketKeysOnce sync.Once
	defaultTicketKeys     *ticket.Rotator
	defaultStoreOnce      sync.Once
	defaultStore          SessionStore
)

func (c *Config) ticketKeys() ticket.Source {
	if c.TicketKeys != nil {
		return c.TicketKeys
	}
	defaultTicketKeysOnce.Do(func() { defaultTicketKeys = ticket.NewRotator(time.Hour, 12*time.Hour) })
	return defaultTicketKeys
}

func (c *Config) sessionStore() SessionStore {
	if c.SessionCacheDisabled {
		return nil
	}
	if c.SessionStore != nil {
		return c.SessionStore
	}
	defaultStoreOnce.Do(func() { defaultStore = NewLRUSessionStore(10000, 2*time.Hour) })
	return defaultStore
}
