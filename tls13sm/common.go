// Package tls13sm implements TLS 1.3 (RFC 8446) restricted to the Chinese
// commercial cryptography suites of RFC 8998: TLS_SM4_GCM_SM3 and
// TLS_SM4_CCM_SM3 with the curveSM2 group and sm2sig_sm3 signatures, client
// and server, with HelloRetryRequest, client authentication, PSK resumption
// through session tickets, KeyUpdate and a Tongsuo-compatible strict mode.
//
// The API follows crypto/tls: Config, Conn, Server, Client, Listen, Dial.
// Private keys are used only through crypto.Signer; the handshake's context
// reaches keys implementing smkey.ContextSigner (offload engines).
package tls13sm

import (
	"crypto"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/internal/validity"
)

// Limits.
const (
	maxPlaintext          = record.MaxPlaintext // 2^14 (RFC 8446 §5.1)
	maxCiphertext         = maxPlaintext + 256  // 2^14 + 256 (§5.2)
	recordHeaderLen       = record.HeaderLen
	maxHandshakeMsg       = 65536 // largest handshake message accepted
	maxCertChain          = 10    // certificates in a Certificate message
	maxUselessRecords     = 16    // consecutive empty / CCS / warning records
	maxEarlyDataSkip      = 1 << 16
	maxTicketLifetime     = 7 * 24 * time.Hour // RFC 8446 §4.6.1
	defaultTicketLife     = 2 * time.Hour
	maxPSKIdentities      = 8
	maxTicketAgeSkew      = 60 * time.Second
	maxPostHandshakeNoApp = 32
	maxServerName         = 255 // bytes of a server_name host name (RFC 1035 §2.3.4)
)

// sm2TLS13ID is the SM2 distinguishing ID for TLS 1.3 CertificateVerify
// (RFC 8998 §3.2.1).
const sm2TLS13ID = "TLSv1.3+GM+Cipher+Suite"

var sm2SignerOpts = smkey.NewSM2SignerOpts([]byte(sm2TLS13ID))

// ClientAuthType says whether and how a server asks for a client certificate.
type ClientAuthType int

const (
	// NoClientCert: no CertificateRequest is sent.
	NoClientCert ClientAuthType = iota
	// RequestClientCert: a certificate is requested but not required or verified.
	RequestClientCert
	// RequireAnyClientCert: a certificate is required but not verified against ClientCAs.
	RequireAnyClientCert
	// VerifyClientCertIfGiven: a certificate, if sent, must verify against ClientCAs.
	VerifyClientCertIfGiven
	// RequireAndVerifyClientCert: a certificate is required and must verify against ClientCAs.
	RequireAndVerifyClientCert
)

// Certificate is a certificate chain with its private key.
type Certificate struct {
	// Certificate is the DER chain, leaf first.
	Certificate [][]byte
	// PrivateKey signs CertificateVerify; an *sm2.PrivateKey, or any
	// crypto.Signer (smkey.ContextSigner for offload) producing SM2
	// signatures for smkey.SM2SignerOpts.
	PrivateKey crypto.Signer
	// Leaf is the parsed leaf, filled by X509KeyPair, for the caller (the
	// daemon reads names and expiry from it); the handshake sends
	// Certificate and does not read Leaf.
	Leaf *smx509.Certificate
}

// X509KeyPair parses a PEM certificate chain (leaf first) and a PEM private
// key (PKCS#8, SEC 1 or encrypted PKCS#8 with password).
func X509KeyPair(certPEM, keyPEM, password []byte) (Certificate, error) {
	certs, err := smkey.ParseCertificatesPEM(certPEM)
	if err != nil {
		return Certificate{}, fmt.Errorf("tls13sm: certificate: %w", err)
	}
	if len(certs) == 0 {
		return Certificate{}, errors.New("tls13sm: no certificate in PEM data")
	}
	key, err := smkey.ParsePrivateKeyPEM(keyPEM, password)
	if err != nil {
		return Certificate{}, fmt.Errorf("tls13sm: private key: %w", err)
	}
	if !smkey.PublicKeysEqual(key, certs[0].PublicKey) {
		return Certificate{}, errors.New("tls13sm: private key does not match the certificate")
	}
	c := Certificate{PrivateKey: key, Leaf: certs[0]}
	for _, x := range certs {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c, nil
}

// LoadX509KeyPair reads X509KeyPair input from files. They must be
// regular files of at most 64 MiB: a FIFO (whose open waits for a writer)
// or a device such as /dev/zero (which never ends) is refused at once.
func LoadX509KeyPair(certFile, keyFile string, password []byte) (Certificate, error) {
	cp, err := namedfile.Read(certFile, namedfile.Max)
	if err != nil {
		return Certificate{}, fmt.Errorf("tls13sm: %w", err)
	}
	kp, err := namedfile.Read(keyFile, namedfile.Max)
	if err != nil {
		return Certificate{}, fmt.Errorf("tls13sm: %w", err)
	}
	return X509KeyPair(cp, kp, password)
}

// ClientHelloInfo is what certificate and config selection callbacks see.
type ClientHelloInfo struct {
	ServerName        string
	CipherSuites      []uint16
	SupportedProtos   []string
	SupportedGroups   []uint16
	SignatureSchemes  []uint16
	SupportedVersions []uint16
	Conn              net.Conn
	config            *Config
}

// HandshakeResult is passed to Config.OnHandshake once per handshake.
type HandshakeResult struct {
	State    ConnectionState
	Err      error
	Duration time.Duration
	// Alert is the alert sent (Remote false) or received (Remote true) when
	// the handshake failed with one; HasAlert says whether there was one.
	Alert    Alert
	HasAlert bool
	Remote   bool
	// Reason is a short fixed label for metrics: "", "timeout", "eof",
	// "peer_alert", "bad_certificate", "no_shared_cipher", "protocol_error",
	// "internal_error".
	Reason string
}

// Config configures a client or server. A Config may be reused; do not
// modify it after first use.
type Config struct {
	// Rand is the entropy source; default crypto/rand.Reader.
	Rand io.Reader
	// Time returns the current time; default time.Now.
	Time func() time.Time

	// Certificates are the server's (or client's) chains; the first one is
	// used unless GetCertificate picks another. Session tickets are bound to
	// the server name and to the first certificate (see TicketKeys).
	Certificates []Certificate
	// GetCertificate, if set, selects the server certificate by ClientHello
	// (SNI). Returning nil, nil falls back to Certificates.
	GetCertificate func(*ClientHelloInfo) (*Certificate, error)
	// GetConfigForClient, if set, may return a different Config for this
	// ClientHello (virtual hosts); nil, nil keeps this one.
	GetConfigForClient func(*ClientHelloInfo) (*Config, error)
	// GetClientCertificate, if set, picks the client certificate when asked.
	GetClientCertificate func(cas [][]byte) (*Certificate, error)

	// RootCAs verify server chains (client side); nil means the system pool.
	RootCAs *smx509.CertPool
	// ClientCAs verify client chains (server side) and are listed in
	// certificate_authorities of the CertificateRequest. Unlike RootCAs,
	// nil is not the system pool: a ClientAuth that verifies refuses every
	// client certificate without ClientCAs.
	ClientCAs *smx509.CertPool
	// ClientAuth is the server's client-certificate policy; default NoClientCert.
	ClientAuth ClientAuthType
	// ClientCAsFingerprint identifies the certificates in ClientCAs, for
	// example CertificatesFingerprint of them. A session ticket carrying a
	// client certificate records it together with ClientAuth and resumes
	// only under the same pair; after a change (a CA removed by a reload)
	// the session's chain, if this process still has it, is verified again
	// against the current ClientCAs, else the client makes a full
	// handshake. Default: a digest of ClientCAs' subject names, which does
	// not see a CA replaced by another of the same name.
	ClientCAsFingerprint []byte
	// ResumeNeedsClientChain declines a ticket whose client certificate
	// chain this process does not hold (another instance sharing the
	// ticket keys issued it, or a restart or eviction emptied the cache):
	// the client makes a full handshake and presents its certificate again
	// (RFC 8446 §4.2.11 lets a server decline any PSK). Set it when the
	// application needs the certificates themselves (a proxy forwarding
	// the client's subject and issuer), not only the identity a ticket
	// carries (ConnectionState's ClientCertificate, ClientVerified).
	ResumeNeedsClientChain bool

	// ServerName is checked against the server certificate and sent as SNI
	// (client side).
	ServerName string
	// InsecureSkipVerify disables server chain verification (client side;
	// tests only). The leaf's key-usage check remains.
	InsecureSkipVerify bool
	// VerifyPeerCertificate, if set, is called after chain verification
	// with the raw certificates and the verified chains; an error it
	// returns fails the handshake with bad_certificate, or with the alert
	// and cause of an *AlertError it returns (certificate_revoked, say). A
	// server also calls it on the verified client chain of every session
	// it resumes, as cached in this process (a ticket whose chain is not
	// cached, or that the hook refuses, is not resumed).
	VerifyPeerCertificate func(rawCerts [][]byte, verifiedChains [][]*smx509.Certificate) error
	// InsecureLoadGenerator makes a client cheap enough to load a server
	// to its peak from a single core (gmproxy s_time -loadgen): it does not
	// check the server's CertificateVerify signature and offers the same
	// SM2 key share on every connection. The server's work is unchanged. A
	// client so configured has no security at all: benchmarks only.
	// Default false.
	InsecureLoadGenerator bool

	// NextProtos are the ALPN protocols, most preferred first.
	NextProtos []string
	// CipherSuites in preference order; default TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3.
	CipherSuites []uint16

	// SessionTicketsDisabled turns off ticket issuance (server) and
	// resumption (both sides).
	SessionTicketsDisabled bool
	// TicketKeys seal and open tickets (newest key encrypts, all decrypt);
	// default a process-wide in-memory ticket.Rotator. One key set may be
	// shared by several Configs (sites): a ticket holds the server name it
	// was issued for (compared without regard to case) and a hash of the
	// first of Certificates, and resumes only where both match.
	TicketKeys ticket.Source
	// TicketLifetime is the lifetime advertised in NewSessionTicket and
	// enforced on resumption; default 2h, at most 7 days.
	TicketLifetime time.Duration
	// AllowPSKOnly permits psk_ke resumption (no fresh ECDHE, no forward
	// secrecy for the resumed session). Default false: psk_dhe_ke only.
	AllowPSKOnly bool
	// ClientSessionCache stores tickets for resumption (client side); nil
	// disables client resumption. See NewLRUClientSessionCache.
	ClientSessionCache ClientSessionCache

	// Strict follows Tongsuo's enable_sm_tls13_strict: only SM suites,
	// sm2sig_sm3 and curveSM2 are offered and accepted; the server sends
	// HelloRetryRequest for a curveSM2 share, and the client requires an SM2
	// server certificate signed with SM2-with-SM3.
	Strict bool

	// DisableMiddleboxCompat stops the client from sending a legacy session
	// ID and dummy ChangeCipherSpec (GmSSL's server needs this).
	DisableMiddleboxCompat bool

	// OnHandshake, if set, is called once per handshake with its outcome.
	OnHandshake func(HandshakeResult)
	// OnTicket, if set, is called on the server for session-ticket events:
	// issued, accepted, rejected with a bounded reason (see TicketEvent). It
	// runs synchronously inside the handshake and must not block. Default nil.
	OnTicket func(TicketEvent)

	testShareX25519 bool // tests: client's first key share is X25519
	testEarlyData   bool // tests: client offers early_data and sends a fake 0-RTT record
	testPSKOnly     bool // tests: client offers psk_ke only

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

func (c *Config) cipherSuites() []uint16 {
	if len(c.CipherSuites) > 0 {
		return c.CipherSuites
	}
	return defaultCipherSuites
}

func (c *Config) ticketLifetime() time.Duration {
	l := c.TicketLifetime
	if l <= 0 {
		return defaultTicketLife
	}
	if l > maxTicketLifetime {
		return maxTicketLifetime
	}
	return l
}

var defaultTicketKeys = ticket.NewRotator(time.Hour, 7*24*time.Hour)

func (c *Config) ticketKeys() ticket.Source {
	if c.TicketKeys != nil {
		return c.TicketKeys
	}
	return defaultTicketKeys
}

// supportedGroups returns the groups this config accepts, preferred first.
func (c *Config) supportedGroups() []uint16 {
	if c.Strict {
		return []uint16{CurveSM2}
	}
	return []uint16{CurveSM2, X25519}
}

// ConnectionState describes a connection after (or during) its handshake.
type ConnectionState struct {
	Version            uint16
	HandshakeComplete  bool
	DidResume          bool
	CipherSuite        uint16
	NegotiatedProtocol string
	ServerName         string
	// Group is the key-exchange group (CurveSM2 normally; 0 for psk_ke).
	Group uint16
	// HelloRetry is true when the server sent HelloRetryRequest.
	HelloRetry bool
	// PeerCertificates and VerifiedChains are the peer's chain as sent and
	// as verified (VerifiedChains is empty when verification was not
	// required). On a resumed server connection they come from a bounded
	// per-process cache (4096 chains, up to the ticket lifetime) and are nil
	// when this process no longer has the chain — another instance sharing
	// the ticket keys issued the ticket, the process restarted, or the entry
	// was evicted — because a chain does not fit in a ticket of at most 256
	// bytes. Use ClientCertificate, ClientVerified and ClientLeafHash, which
	// are always set from the ticket, to decide whether the client
	// authenticated.
	PeerCertificates []*smx509.Certificate
	VerifiedChains   [][]*smx509.Certificate

	// ClientCertificate (server side) is true when the client presented a
	// certificate, in this handshake or in the one that issued the ticket
	// of a resumed connection.
	ClientCertificate bool
	// ClientVerified (server side) is true when that certificate's chain
	// verified against ClientCAs (ClientAuth VerifyClientCertIfGiven or
	// RequireAndVerifyClientCert), in this handshake or in the one that
	// issued the ticket; a ticket is not resumed once that certificate has
	// expired. Instances sharing ticket keys should share ClientCAs.
	ClientVerified bool
	// ClientLeafHash (server side) is the SM3 hash of the client's leaf
	// certificate (DER) when ClientCertificate is true: a stable client
	// identity on resumed connections without PeerCertificates.
	ClientLeafHash [32]byte
}

// Stats counts application data moved on a connection: plaintext bytes and
// application_data records (the inner content type), as in package tlcp.
type Stats = record.Stats

// ClientSessionState is a resumable session held by a client.
type ClientSessionState struct {
	ticket           []byte
	secret           resumptionPSK
	suite            uint16
	receivedAt       time.Time
	lifetime         time.Duration
	ageAdd           uint32
	alpn             string
	peerCertificates []*smx509.Certificate
	verifiedChains   [][]*smx509.Certificate
	// trust is what verifiedChains were verified for (the client checks
	// it against its Config before offering the ticket).
	trust serverTrust
}

// serverTrust is what a client verified the server's certificate for:
// the ServerName, the RootCAs pool (nil: the system roots) and the window
// in which the verified chain is valid.
type serverTrust struct {
	serverName  string
	roots       *smx509.CertPool
	from, until time.Time
}

// trustOf is the serverTrust of chains verified under cfg.
func trustOf(cfg *Config, chains [][]*smx509.Certificate) serverTrust {
	if len(chains) == 0 {
		return serverTrust{}
	}
	t := serverTrust{serverName: cfg.ServerName, roots: cfg.RootCAs}
	t.from, t.until = validity.Of(chains[0])
	return t
}

// ClientSessionCache stores client sessions by server key (SNI or address).
type ClientSessionCache interface {
	Get(key string) (*ClientSessionState, bool)
	Put(key string, cs *ClientSessionState)
}

type lruSessionCache struct {
	c *lru.Cache[string, *ClientSessionState]
}

// NewLRUClientSessionCache returns a ClientSessionCache holding up to
// capacity sessions (64 if capacity ≤ 0), each until its ticket lifetime ends.
func NewLRUClientSessionCache(capacity int) ClientSessionCache {
	if capacity <= 0 {
		capacity = 64
	}
	return &lruSessionCache{c: lru.New[string, *ClientSessionState](capacity, maxTicketLifetime)}
}

func (l *lruSessionCache) Get(key string) (*ClientSessionState, bool) { return l.c.Get(key) }

func (l *lruSessionCache) Put(key string, cs *ClientSessionState) {
	if cs == nil {
		l.c.Delete(key)
		return
	}
	l.c.Put(key, cs)
}
