package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/asciifold"
	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/sm3state"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// serverHandshakeState is one server handshake (GB/T 38636 §6.4.3; protocol-notes §4):
//
//	C: ClientHello
//	S: ServerHello, Certificate, ServerKeyExchange, [CertificateRequest], ServerHelloDone
//	C: [Certificate], ClientKeyExchange, [CertificateVerify], CCS, Finished
//	S: [NewSessionTicket], CCS, Finished
//
// or, resuming: ClientHello / ServerHello, [NewSessionTicket], CCS, Finished /
// CCS, Finished.
type serverHandshakeState struct {
	c              *Conn
	ctx            context.Context
	config         *Config
	hello          *clientHelloMsg
	sh             *serverHelloMsg
	suite          *cipherSuite
	cert           *Certificate
	ks             *keySchedule
	tr             *transcript
	session        *sessionState
	prepared       *preparedSession // session is prepared.s (read-only)
	sendTicket     bool
	ticketSent     bool // NewSessionTicket queued, reported once flushed
	clientAuth     ClientAuthType
	peerCerts      []*smx509.Certificate
	verifiedChains [][]*smx509.Certificate // of a resumed session, re-verified
	chainKey       chainCacheKey           // verify-cache key of peerCerts (hasChainKey)
	hasChainKey    bool
	clientEnc      *smx509.Certificate

	// Storage for the above, so that one pooled allocation serves a
	// handshake. Nothing outside the handshake keeps pointers into it.
	helloMsg    clientHelloMsg
	shMsg       serverHelloMsg
	random      [32]byte
	suitesBuf   [16]uint16 // backs helloMsg.cipherSuites
	shBuf       [160]byte  // the marshaled ServerHello (queueServerHello)
	ticketBuf   [512]byte  // NewSessionTicket (sendSessionTicket)
	stateBuf    [256]byte  // serialized session state to seal
	trState     transcript
	storedState sessionState
	fin         finishedMsg
}

var serverHandshakePool = sync.Pool{New: func() any { return new(serverHandshakeState) }}

func (c *Conn) serverHandshake(ctx context.Context) error {
	hs := serverHandshakePool.Get().(*serverHandshakeState)
	hs.c, hs.ctx, hs.config = c, ctx, c.config
	hs.tr = &hs.trState
	hs.tr.init()
	// Keep the raw messages while GmSSL's raw CertificateVerify may be
	// needed (GetConfigForClient may switch it on).
	hs.tr.keepRaw = c.config.AcceptRawCertificateVerify || c.config.GetConfigForClient != nil
	defer hs.release()
	if err := hs.readClientHello(); err != nil {
		return err
	}
	if hs.session != nil {
		if err := hs.doResumeHandshake(); err != nil {
			return err
		}
		if err := hs.sendTicketAndFinished(); err != nil {
			return err
		}
		if err := hs.readFinished(); err != nil {
			return err
		}
	} else {
		if err := hs.doFullHandshake(); err != nil {
			return err
		}
		if err := hs.readFinished(); err != nil {
			return err
		}
		if err := hs.sendTicketAndFinished(); err != nil {
			return err
		}
		hs.storeSession()
	}
	c.vers = VersionTLCP
	c.suite = hs.suite
	c.core.SetHandshakeComplete()
	return nil
}

// release wipes the state and returns it to the pool.
func (hs *serverHandshakeState) release() {
	if hs.ks != nil {
		hs.ks.release()
	}
	comp := hs.trState.c
	*hs = serverHandshakeState{}
	hs.trState.c = comp
	serverHandshakePool.Put(hs)
}

// readHandshakeMsg reads the next message, which must be of type typ.
func (c *Conn) readHandshakeMsg(typ uint8, m handshakeMessage, tr *transcript) ([]byte, error) {
	data, err := c.readHandshake()
	if err != nil {
		return nil, err
	}
	if data[0] != typ {
		return nil, errorf(AlertUnexpectedMessage, "got handshake message type %d, want %d", data[0], typ)
	}
	if !m.unmarshal(data) {
		return nil, errorf(AlertDecodeError, "malformed handshake message type %d", typ)
	}
	if tr != nil {
		tr.write(data)
	}
	return data, nil
}

// queueMsg marshals m, adds it to the transcript and queues it for the
// next flight.
func (c *Conn) queueMsg(tr *transcript, m handshakeMessage) error {
	b, err := m.marshal()
	if err != nil {
		return wrapErr(AlertInternalError, "marshal", err)
	}
	return c.sendHandshake(tr, b)
}

// stageKeys derives the record keys of ks (GB/T 38636 §6.5) and stages
// them as the pending read and write states that ChangeCipherSpec
// switches on; isClient says which side of the connection c is.
func (c *Conn) stageKeys(ks *keySchedule, suite *cipherSuite, clientRandom, serverRandom []byte, isClient bool) error {
	cMAC, sMAC, cKey, sKey, cIV, sIV := ks.keys(suite, clientRandom, serverRandom)
	pair := new([2]recordCipher) // one allocation for both directions
	clientWrite, serverWrite := &pair[0], &pair[1]
	if err := clientWrite.init(suite, cMAC, cKey, cIV); err != nil {
		return wrapErr(AlertInternalError, "record keys", err)
	}
	if err := serverWrite.init(suite, sMAC, sKey, sIV); err != nil {
		return wrapErr(AlertInternalError, "record keys", err)
	}
	if isClient {
		c.in.next, c.out.next = serverWrite, clientWrite
	} else {
		c.in.next, c.out.next = clientWrite, serverWrite
	}
	return nil
}

// sendFinishedMsg queues ChangeCipherSpec and this side's Finished over
// the transcript so far (GB/T 38636 §6.4.5.10).
func (c *Conn) sendFinishedMsg(ks *keySchedule, tr *transcript, isClient bool) error {
	if err := c.queueChangeCipherSpec(); err != nil {
		return err
	}
	msg := ks.finishedMsg(isClient, tr.sum())
	return c.sendHandshake(tr, msg)
}

// readFinishedMsg reads the peer's ChangeCipherSpec and Finished into fin
// and checks its verify_data in constant time; fromClient says whether
// the peer is the client. last says it is the handshake's last message,
// which then is not added to the transcript (nothing hashes it).
func (c *Conn) readFinishedMsg(ks *keySchedule, tr *transcript, fromClient, last bool, fin *finishedMsg) error {
	if err := c.readChangeCipherSpec(); err != nil {
		return err
	}
	want := ks.finished(fromClient, tr.sum())
	if last {
		tr = nil
	}
	if _, err := c.readHandshakeMsg(typeFinished, fin, tr); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(want, fin.verifyData) != 1 {
		if fromClient {
			return errorf(AlertDecryptError, "client Finished is wrong")
		}
		return errorf(AlertDecryptError, "server Finished is wrong")
	}
	return nil
}

// parsePeerCertificates parses the peer's certificate list and checks its
// first, signing, certificate: an SM2 key allowed to sign (GB/T 38636
// §6.4.5.3); peer ("client" or "server") names it in errors.
func parsePeerCertificates(raw [][]byte, peer string) ([]*smx509.Certificate, error) {
	certs, err := parseCertificates(raw)
	if err != nil {
		return nil, wrapErr(AlertBadCertificate, peer+" certificate", err)
	}
	if _, err := sm2Public(certs[0]); err != nil {
		return nil, wrapErr(AlertUnsupportedCertificate, peer+" signing certificate", err)
	}
	if err := checkSignUsage(certs[0]); err != nil {
		return nil, wrapErr(AlertBadCertificate, peer+" certificate", err)
	}
	return certs, nil
}

// verifyPeerHook runs Config.VerifyPeerCertificate, when set, on the
// peer's raw certificates and the verified chains. The hook may choose
// the alert by returning an *AlertError.
func (cfg *Config) verifyPeerHook(raw [][]byte, chains [][]*smx509.Certificate) error {
	if cfg.VerifyPeerCertificate == nil {
		return nil
	}
	if err := cfg.VerifyPeerCertificate(raw, chains); err != nil {
		alert := AlertBadCertificate
		if ae := (*AlertError)(nil); errors.As(err, &ae) && !ae.Remote {
			alert, err = ae.Alert, ae.Err
		}
		return wrapErr(alert, "VerifyPeerCertificate", err)
	}
	return nil
}

// certificateList is the Certificate message body of a TLCP identity:
// signing certificate, encryption certificate (when withEnc), then the
// signing certificate's chain (GB/T 38636 §6.4.5.3).
func certificateList(cert *Certificate, withEnc bool) [][]byte {
	certs := make([][]byte, 0, len(cert.SignCertificate)+1)
	certs = append(certs, cert.SignCertificate[0])
	if withEnc {
		certs = append(certs, cert.EncCertificate)
	}
	return append(certs, cert.SignCertificate[1:]...)
}

func (hs *serverHandshakeState) readClientHello() error {
	c := hs.c
	hs.hello = &hs.helloMsg
	hs.helloMsg.cipherSuites = hs.suitesBuf[:0]
	if _, err := c.readHandshakeMsg(typeClientHello, hs.hello, hs.tr); err != nil {
		return err
	}
	hello := hs.hello
	// client_version: 01 01; a 360-style TLS record hello carries 03 03.
	if c.tlsRecordHello {
		if hello.vers != versionTLS12 && hello.vers != VersionTLCP {
			return errorf(AlertProtocolVersion, "client_version %04x in a TLS record", hello.vers)
		}
	} else if hello.vers < VersionTLCP || hello.vers >= 0x0300 && hello.vers < versionTLS12 {
		return errorf(AlertProtocolVersion, "client offered version %04x, want TLCP 0101", hello.vers)
	}
	if !bytes.Contains(hello.compressionMethods, []byte{0}) {
		return errorf(AlertDecodeError, "client does not support null compression")
	}
	// No DNS name is longer than 255 bytes (RFC 1035 §2.3.4) or holds a
	// NUL; Tongsuo's NTLS server refuses such a server_name the same way
	// (RFC 6066 §3 allows unrecognized_name), rather than keep up to 64
	// KiB of it for the connection's life.
	if len(hello.serverName) > maxServerName || strings.IndexByte(hello.serverName, 0) >= 0 {
		return errorf(AlertUnrecognizedName, "server_name of %d bytes is no host name", len(hello.serverName))
	}
	// ClientHelloInfo is built only for the callbacks that want it.
	var info *ClientHelloInfo
	helloInfo := func() *ClientHelloInfo {
		if info == nil {
			info = &ClientHelloInfo{ServerName: hello.serverName, CipherSuites: slices.Clone(hello.cipherSuites), SupportedProtos: hello.alpnProtocols, Conn: c.core.Raw, ctx: hs.ctx}
		}
		return info
	}
	if f := hs.config.GetConfigForClient; f != nil {
		nc, err := f(helloInfo())
		if err != nil {
			return wrapErr(AlertInternalError, "GetConfigForClient", err)
		}
		if nc != nil {
			hs.config = nc
			c.config = nc
		}
	}
	cert, err := hs.config.serverCertificate(hello.serverName, helloInfo)
	if err != nil {
		return err
	}
	hs.cert = cert
	// The first suite in server preference that the client offered and
	// this certificate's encryption key can serve.
	for _, id := range hs.config.cipherSuites() {
		if s := mutualCipherSuite([]uint16{id}, hello.cipherSuites); s != nil && cert.supports(s) {
			hs.suite = s
			break
		}
	}
	if hs.suite == nil {
		return wrapErr(AlertHandshakeFailure, "client offered no enabled TLCP suite", errNoSharedCipher)
	}
	c.serverName = hello.serverName

	hs.shMsg = serverHelloMsg{vers: VersionTLCP, cipherSuite: hs.suite.id, random: hs.random[:]}
	hs.sh = &hs.shMsg
	if _, err := io.ReadFull(hs.config.rand(), hs.sh.random); err != nil {
		return wrapErr(AlertInternalError, "server random", err)
	}
	if hello.serverName != "" && hello.hasExtensions {
		hs.sh.serverNameAck = true
	}
	if len(hs.config.NextProtos) > 0 && len(hello.alpnProtocols) > 0 {
	alpn:
		for _, p := range hs.config.NextProtos {
			for _, q := range hello.alpnProtocols {
				if p == q {
					hs.sh.alpnProtocol = p
					break alpn
				}
			}
		}
		if hs.sh.alpnProtocol == "" {
			// RFC 7301 §3.2 (as crypto/tls and tls13sm do).
			return errorf(AlertNoApplicationProtocol, "client offered ALPN %q, none of %q", hello.alpnProtocols, hs.config.NextProtos)
		}
	}
	c.alpn = hs.sh.alpnProtocol
	hs.clientAuth = hs.config.ClientAuth
	if hs.suite.ecdhe {
		// The key exchange needs the client's pair: required, and
		// verified unless the policy verifies nothing (the caller
		// verifies what it requested; CertificateVerify is checked all
		// the same).
		hs.clientAuth = RequireAndVerifyClientCert
		if c := hs.config.ClientAuth; c == RequestClientCert || c == RequireAnyClientCert {
			hs.clientAuth = RequireAnyClientCert
		}
	}
	hs.sendTicket = hello.ticketSupported && !hs.config.SessionTicketsDisabled
	hs.sh.ticketSupported = hs.sendTicket
	if hs.clientAuth == NoClientCert || !hs.config.AcceptRawCertificateVerify {
		hs.tr.keepRaw, hs.tr.raw = false, nil
	}
	hs.checkForResumption()
	return nil
}

// serverCertificate selects the identity for a ClientHello. It never
// modifies the configured certificates (handshakes run concurrently).
func (cfg *Config) serverCertificate(serverName string, info func() *ClientHelloInfo) (*Certificate, error) {
	if cfg.GetCertificate != nil {
		cert, err := cfg.GetCertificate(info())
		if err != nil {
			return nil, wrapErr(AlertInternalError, "GetCertificate", err)
		}
		if cert != nil {
			if err := cert.complete(); err != nil {
				return nil, wrapErr(AlertInternalError, "selected certificate", err)
			}
			return cert, nil
		}
	}
	if len(cfg.Certificates) == 0 {
		return nil, errorf(AlertInternalError, "no server certificate configured")
	}
	if serverName != "" && len(cfg.Certificates) > 1 {
		for i := range cfg.Certificates {
			c := &cfg.Certificates[i]
			if leaf, err := c.leaf(); err == nil && c.complete() == nil && leaf.VerifyHostname(serverName) == nil {
				return c, nil
			}
		}
	}
	c := &cfg.Certificates[0]
	if err := c.complete(); err != nil {
		return nil, wrapErr(AlertInternalError, "server certificate", err)
	}
	return c, nil
}

// supports reports whether the encryption key can serve the suite: a
// crypto.Decrypter for ECC, an SM2 key agreement for ECDHE.
func (c *Certificate) supports(s *cipherSuite) bool {
	if s.ecdhe {
		return smkey.AsKeyAgreement(c.EncKey) != nil
	}
	_, ok := c.EncKey.(crypto.Decrypter)
	return ok
}

// complete checks that both certificates are present.
func (c *Certificate) complete() error {
	if len(c.SignCertificate) == 0 || len(c.SignCertificate[0]) == 0 || len(c.EncCertificate) == 0 {
		return errors.New("certificate pair incomplete (sign and enc certificates are both needed)")
	}
	if c.SignKey == nil || c.EncKey == nil {
		return errors.New("certificate pair without its private keys")
	}
	return nil
}

// leaf returns the parsed signing certificate (Leaf, or parsed now).
func (c *Certificate) leaf() (*smx509.Certificate, error) {
	if c.Leaf != nil {
		return c.Leaf, nil
	}
	if len(c.SignCertificate) == 0 {
		return nil, errors.New("no signing certificate")
	}
	return smx509.ParseCertificate(c.SignCertificate[0])
}

// certMsgs caches the server's Certificate message (sign, enc, chain), which
// is the same in every handshake of a Certificate.
var certMsgs = lru.New[*byte, cachedCertMsg](256, 0)

type cachedCertMsg struct {
	enc   *byte
	chain []*byte // the chain certificates' DER addresses
	msg   []byte
}

func (m *cachedCertMsg) matches(cert *Certificate) bool {
	if m.enc != &cert.EncCertificate[0] || len(m.chain) != len(cert.SignCertificate)-1 {
		return false
	}
	for i, c := range cert.SignCertificate[1:] {
		if len(c) == 0 || m.chain[i] != &c[0] {
			return false
		}
	}
	return true
}

func serverCertificateMsg(cert *Certificate) ([]byte, error) {
	key := &cert.SignCertificate[0][0]
	if m, ok := certMsgs.Get(key); ok && m.matches(cert) {
		return m.msg, nil
	}
	msg, err := (&certificateMsg{certificates: certificateList(cert, true)}).marshal()
	if err != nil {
		return nil, err
	}
	entry := cachedCertMsg{enc: &cert.EncCertificate[0], msg: msg}
	for _, c := range cert.SignCertificate[1:] {
		if len(c) == 0 {
			return msg, nil // not cacheable; the peer will reject the empty certificate
		}
		entry.chain = append(entry.chain, &c[0])
	}
	certMsgs.Put(key, entry)
	return msg, nil
}

// certHashes caches SM3 of signing certificates by the address of their DER.
var certHashes = lru.New[*byte, [sm3.Size]byte](256, 0)

// certHash identifies the server identity a session belongs to.
func (hs *serverHandshakeState) certHash() [sm3.Size]byte {
	der := hs.cert.SignCertificate[0]
	h, ok := certHashes.Get(&der[0])
	if !ok {
		h = sm3.Sum(der)
		certHashes.Put(&der[0], h)
	}
	return h
}

// checkForResumption picks the session to resume, if any: the offered
// ticket when tickets are on (RFC 5077 §3.1; a ticket that does not open
// means a full handshake, as in Tongsuo), else the session ID through the
// SessionStore. A non-empty ticket is reported to OnTicket as accepted or
// rejected with the reason.
func (hs *serverHandshakeState) checkForResumption() {
	hello := hs.hello
	offered := len(hello.sessionTicket) > 0
	byTicket := offered && hs.sendTicket
	var (
		s      *sessionState
		stale  bool
		reason string
	)
	switch {
	case byTicket:
		s = &hs.storedState
		if stale, reason = openTicket(hs.config.ticketKeys(), hello.sessionTicket, s); reason != "" {
			s = nil
		}
	case offered:
		// Tickets are disabled here; the session ID may still resume.
		hs.ticketEvent(TicketRejected, TicketReasonDisabled, false)
		s = hs.lookupSessionID()
	default:
		s = hs.lookupSessionID()
	}
	if s != nil {
		reason = hs.sessionRejects(s)
	}
	if byTicket {
		if reason == "" {
			hs.ticketEvent(TicketAccepted, "", stale)
		} else {
			hs.ticketEvent(TicketRejected, reason, false)
		}
	}
	if s == nil || reason != "" {
		hs.newSessionID()
		return
	}
	hs.session = s
	if !byTicket {
		hs.c.rememberSessionID(hello.sessionID)
	}
	// Echo the client's session ID (RFC 5077 §3.4 for tickets).
	hs.sh.sessionID = hello.sessionID
	// "When resuming a session, the server MUST NOT include a
	// server_name extension in the server hello" (RFC 6066 §3).
	hs.sh.serverNameAck = false
	// A resumed session gets a new ticket only when the client's was
	// sealed under an older key, so that it outlives that key's
	// retirement (RFC 5077 §3.3 leaves renewal to the server; OpenSSL,
	// and so Tongsuo, renews the same way). A new ticket under the current
	// key would hold the same session, creation time included, and cost a
	// sealing and a larger flight on every resumption. Without a new
	// ticket the ServerHello has no SessionTicket extension (§3.2).
	if !byTicket || !stale {
		hs.sendTicket = false
		hs.sh.ticketSupported = false
	}
}

// lookupSessionID returns the stored session of the client's session ID,
// or nil.
func (hs *serverHandshakeState) lookupSessionID() *sessionState {
	if len(hs.hello.sessionID) == 0 {
		return nil
	}
	store := hs.config.sessionStore()
	if store == nil {
		return nil
	}
	if ps, ok := store.(preparedStore); ok {
		if p, ok := ps.getPrepared(hs.hello.sessionID); ok {
			hs.prepared = p
			return &p.s
		}
	}
	b, ok := storeGet(store, hs.hello.sessionID)
	if !ok {
		return nil
	}
	s := &hs.storedState
	if !s.unmarshal(b) {
		return nil
	}
	return s
}

// sessionRejects says why session s cannot be resumed in this handshake
// (one of the TicketReason constants), or "" when it can; on success the
// session's client certificates are parsed into hs.peerCerts.
func (hs *serverHandshakeState) sessionRejects(s *sessionState) string {
	cfg := hs.config
	if s.vers != VersionTLCP {
		return TicketReasonMalformed
	}
	now := cfg.time()
	created := time.Unix(int64(s.createdAt), 0)
	if now.Sub(created) > cfg.lifetime() || now.Before(created.Add(-time.Minute)) {
		return TicketReasonExpired
	}
	// Host names compare without regard to ASCII case (RFC 6066 §3, RFC
	// 4343 §3), not Unicode's: strings.EqualFold takes "ſecure.example"
	// (U+017F) for "secure.example", where frontdoor, choosing a site by
	// SNI, does not, so a session made for one site would resume on
	// another that has the same certificate.
	if h := hs.certHash(); !asciifold.Equal(s.serverName, hs.hello.serverName) || !bytes.Equal(s.serverCert, h[:]) {
		return TicketReasonIdentity
	}
	if s.cipherSuite != hs.suite.id {
		return TicketReasonSuite
	}
	if hs.clientAuth.requires() && len(s.certs) == 0 {
		return TicketReasonClientAuth
	}
	if hs.prepared != nil && s == &hs.prepared.s {
		// A copy: the connection's PeerCertificates must not share the
		// stored slice with other connections.
		hs.peerCerts = slices.Clone(hs.prepared.peerCerts)
	} else if len(s.certs) > 0 {
		certs, err := parseCertificates(s.certs)
		if err != nil {
			return TicketReasonMalformed
		}
		hs.peerCerts = certs
	}
	return hs.reverifyClientChains(s)
}

// reverifyClientChains verifies a resumed session's client certificates
// again when this server verifies client certificates: against today's
// Config.ClientCAs (a reload may have removed a CA) and at today's time (a
// certificate may have expired since). The verified-chain cache makes this
// a lookup while the CA pool and the chain are unchanged. The
// VerifyPeerCertificate hook runs on them as after a full handshake (a
// certificate revoked since must not resume). On success the connection
// gets the verified chains, as after a full handshake.
func (hs *serverHandshakeState) reverifyClientChains(s *sessionState) string {
	cfg := hs.config
	if len(hs.peerCerts) == 0 {
		return ""
	}
	if cfg.ClientAuth.verifies() && cfg.ClientCAs == nil {
		// As a full handshake: nothing to verify with (unknown_ca).
		hs.peerCerts = nil
		return TicketReasonClientCert
	}
	if !hs.clientAuth.verifies() || cfg.ClientCAs == nil {
		return ""
	}
	certs := hs.peerCerts
	var enc *smx509.Certificate
	if len(certs) >= 2 && isEncCert(certs[1]) {
		enc = certs[1]
	}
	var key chainCacheKey
	if p := hs.prepared; p != nil && s == &p.s && p.hasChainKey {
		key = p.chainKey
	} else {
		key = clientChainKey(s.certs, enc != nil)
	}
	chains, _, err := verifyClientChainsKeyed(key, certs, enc, cfg.ClientCAs, cfg.time())
	if err != nil {
		hs.peerCerts = nil
		return TicketReasonClientCert
	}
	if err := cfg.verifyPeerHook(s.certs, chains); err != nil {
		hs.peerCerts = nil
		return TicketReasonClientCert
	}
	hs.verifiedChains = chains
	return ""
}

func (hs *serverHandshakeState) newSessionID() {
	if hs.sendTicket {
		hs.sh.sessionID = nil // Tongsuo: empty session_id when issuing a ticket
		return
	}
	if hs.config.sessionStore() == nil {
		return
	}
	hs.sh.sessionID = make([]byte, sessionIDLen)
	if _, err := io.ReadFull(hs.config.rand(), hs.sh.sessionID); err != nil {
		hs.sh.sessionID = nil
	}
}

func (hs *serverHandshakeState) queue(m handshakeMessage) error {
	return hs.c.queueMsg(hs.tr, m)
}

// queueServerHello queues the ServerHello, marshaled into hs.shBuf.
func (hs *serverHandshakeState) queueServerHello() error {
	b, err := hs.sh.appendTo(hs.shBuf[:0])
	if err != nil {
		return wrapErr(AlertInternalError, "marshal", err)
	}
	return hs.c.sendHandshake(hs.tr, b)
}

func (hs *serverHandshakeState) doResumeHandshake() error {
	c := hs.c
	c.didResume = true
	c.peerCertificates, c.verifiedChains = hs.peerCerts, hs.verifiedChains
	if err := hs.queueServerHello(); err != nil {
		return err
	}
	if p := hs.prepared; p != nil && hs.session == &p.s {
		hs.ks = scheduleFromState(p.s.master, &p.macState)
	} else {
		hs.ks = scheduleFromMaster(hs.session.master)
	}
	return hs.establishKeys()
}

func (hs *serverHandshakeState) doFullHandshake() error {
	c, cfg := hs.c, hs.config
	if err := hs.queueServerHello(); err != nil {
		return err
	}
	certMsg, err := serverCertificateMsg(hs.cert)
	if err != nil {
		return wrapErr(AlertInternalError, "marshal Certificate", err)
	}
	if err := c.sendHandshake(hs.tr, certMsg); err != nil {
		return err
	}
	ka := &serverKeyAgreement{suite: hs.suite, cert: hs.cert}
	ske, err := ka.generateServerKeyExchange(hs.ctx, cfg.rand(), hs.hello.random, hs.sh.random)
	if err != nil {
		return err
	}
	if err := hs.queue(&serverKeyExchangeMsg{key: ske}); err != nil {
		return err
	}
	if hs.clientAuth != NoClientCert {
		req := &certificateRequestMsg{certificateTypes: []byte{certTypeRSASign, certTypeECDSASign}}
		if cfg.ClientCAs != nil {
			req.certificateAuthorities = fitCANames(cfg.ClientCAs.Subjects())
		}
		if err := hs.queue(req); err != nil {
			return err
		}
	}
	if err := hs.queue(&serverHelloDoneMsg{}); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}

	if hs.clientAuth != NoClientCert {
		if err := hs.readClientCertificate(); err != nil {
			return err
		}
	}
	cke := &clientKeyExchangeMsg{}
	if _, err := c.readHandshakeMsg(typeClientKeyExchange, cke, hs.tr); err != nil {
		return err
	}
	preMaster, err := ka.processClientKeyExchange(hs.ctx, cfg.rand(), cke.ciphertext, hs.clientEnc)
	if err != nil {
		return err
	}
	// The pre-master serves only to derive the master secret (which the
	// pooled key schedule wipes): wipe it too, whether or not the
	// handshake goes on, rather than leave it in freed memory.
	defer clear(preMaster)
	if len(hs.peerCerts) > 0 {
		if err := hs.readCertificateVerify(); err != nil {
			return err
		}
	}
	hs.ks = masterFromPreMaster(preMaster, hs.hello.random, hs.sh.random)
	return hs.establishKeys()
}

// readClientCertificate reads the client's Certificate: [sign] (GmSSL with
// ECC) or [sign, enc, chain…] (Tongsuo); ECDHE needs the enc certificate.
func (hs *serverHandshakeState) readClientCertificate() error {
	c, cfg := hs.c, hs.config
	cm := &certificateMsg{}
	if _, err := c.readHandshakeMsg(typeCertificate, cm, hs.tr); err != nil {
		return err
	}
	if len(cm.certificates) == 0 {
		if hs.clientAuth.requires() {
			return errorf(AlertHandshakeFailure, "client sent no certificate but one is required")
		}
		return nil
	}
	certs, err := parsePeerCertificates(cm.certificates, "client")
	if err != nil {
		return err
	}
	var enc *smx509.Certificate
	if len(certs) >= 2 && isEncCert(certs[1]) {
		enc = certs[1]
	}
	if hs.suite.ecdhe {
		if enc == nil {
			return errorf(AlertHandshakeFailure, "ECDHE needs the client's encryption certificate as the second certificate")
		}
		if err := checkEncUsage(enc); err != nil {
			return wrapErr(AlertBadCertificate, "client certificate", err)
		}
	}
	var chains [][]*smx509.Certificate
	if cfg.ClientAuth.verifies() && cfg.ClientCAs == nil {
		return errorf(AlertUnknownCA, "client certificate cannot be verified: Config.ClientAuth verifies but Config.ClientCAs is nil")
	}
	if hs.clientAuth.verifies() && cfg.ClientCAs != nil {
		var encFailed bool
		hs.chainKey, hs.hasChainKey = clientChainKey(cm.certificates, enc != nil), true
		chains, encFailed, err = verifyClientChainsKeyed(hs.chainKey, certs, enc, cfg.ClientCAs, cfg.time())
		if err != nil {
			if encFailed {
				return wrapErr(certAlert(err), "client encryption certificate does not verify", err)
			}
			return wrapErr(certAlert(err), "client signing certificate does not verify", err)
		}
	}
	if err := cfg.verifyPeerHook(cm.certificates, chains); err != nil {
		return err
	}
	hs.peerCerts, hs.clientEnc = certs, enc
	c.peerCertificates, c.verifiedChains = certs, chains
	return nil
}

// isEncCert tells an encryption certificate from a CA certificate that
// follows the signing certificate.
func isEncCert(c *smx509.Certificate) bool {
	if c.IsCA || c.KeyUsage&smx509.KeyUsageCertSign != 0 {
		return false
	}
	return true
}

// readCertificateVerify checks the client's signature: SM2 over
// SM3(handshake_messages) (Tongsuo, GB/T 38636 §6.4.5.9), or with
// AcceptRawCertificateVerify also over the raw messages (GmSSL master).
func (hs *serverHandshakeState) readCertificateVerify() error {
	c := hs.c
	digest := hs.tr.sum()
	raw := hs.tr.raw
	cv := &certificateVerifyMsg{}
	if _, err := c.readHandshakeMsg(typeCertificateVerify, cv, hs.tr); err != nil {
		return err
	}
	pub := hs.peerCerts[0].PublicKey
	if verifySM2(pub, digest, cv.signature) {
		return nil
	}
	if hs.config.AcceptRawCertificateVerify && raw != nil && verifySM2(pub, raw, cv.signature) {
		return nil
	}
	return errorf(AlertDecryptError, "client CertificateVerify signature does not verify")
}

func (hs *serverHandshakeState) establishKeys() error {
	return hs.c.stageKeys(hs.ks, hs.suite, hs.hello.random, hs.sh.random, false)
}

// maxCANames is the most bytes of CA names (each with its 2-byte length)
// a CertificateRequest carries: with its two certificate types, the
// message stays within the 64 KiB peers accept (maxHandshake), and the
// list within its 2-byte length.
const maxCANames = maxHandshake - (1 + 2 + 2)

// fitCANames returns names, or none when they do not fit a
// CertificateRequest (maxCANames). The list is part of the message (GB/T
// 38636-2020 §6.4.5.5), but an empty one lets the client send a
// certificate of any CA (RFC 5246 §7.4.4), where names that do not fit
// would fail every handshake that asks for a certificate.
func fitCANames(names [][]byte) [][]byte {
	n := 0
	for _, dn := range names {
		if n += 2 + len(dn); n > maxCANames {
			return nil
		}
	}
	return names
}

// CANamesFit reports whether the subject names of a ClientCAs pool fit a
// CertificateRequest; when they do not, it carries an empty list (any
// CA), with which clients that choose their certificate by the list
// (GmSSL's) may send none.
func CANamesFit(names [][]byte) bool { return len(names) == 0 || fitCANames(names) != nil }

func (hs *serverHandshakeState) readFinished() error {
	// A resumed handshake ends with the client's Finished.
	if err := hs.c.readFinishedMsg(hs.ks, hs.tr, true, hs.session != nil, &hs.fin); err != nil {
		return err
	}
	// The client's Finished ends its flight (GB/T 38636-2020 §6.4.3; RFC
	// 5246 §7.3, Figures 1 and 2): nothing may follow it before the
	// server's answer, or, resuming, before the handshake is over. The
	// end of the handshake drops its pending bytes, so anything left
	// (a second Finished in the same record) would go unseen.
	if len(hs.c.core.Hand) > 0 {
		return errorf(AlertUnexpectedMessage, "handshake data after the client's Finished")
	}
	return nil
}

func (hs *serverHandshakeState) sendSessionTicket() error {
	if !hs.sendTicket {
		return nil
	}
	// NewSessionTicket (RFC 5077 §3.3), built in place around the ticket:
	// type || u24 length || lifetime_hint u32 || ticket<u16>.
	const hdr = 4 + 4 + 2
	b := append(hs.ticketBuf[:0], make([]byte, hdr)...)
	b, err := sealTicket(b, hs.config.ticketKeys(), hs.sessionToStore(), hs.stateBuf[:])
	if err != nil {
		return wrapErr(AlertInternalError, "sealing session ticket", err)
	}
	n := len(b) - hdr
	lifetime := uint32(hs.config.lifetime() / time.Second)
	if n > 0xffff {
		// The session (a client chain near the 64 KiB a Certificate
		// message may hold) does not fit a ticket: "If the server
		// determines that it does not want to include a ticket after it
		// has included the SessionTicket extension in the ServerHello,
		// then it sends a zero-length ticket" (RFC 5077 §3.3).
		b, n, lifetime = b[:hdr], 0, 0
	}
	b[0] = typeNewSessionTicket
	b[1], b[2], b[3] = byte((n+6)>>16), byte((n+6)>>8), byte(n+6)
	binary.BigEndian.PutUint32(b[4:], lifetime)
	b[8], b[9] = byte(n>>8), byte(n)
	if err := hs.c.sendHandshake(hs.tr, b); err != nil {
		return err
	}
	hs.ticketSent = n > 0
	return nil
}

// ticketWritten reports TicketIssued once the flight carrying the
// NewSessionTicket has been written.
func (hs *serverHandshakeState) ticketWritten() {
	if hs.ticketSent {
		hs.ticketEvent(TicketIssued, "", false)
	}
}

func (hs *serverHandshakeState) sessionToStore() *sessionState {
	if hs.session != nil {
		return hs.session
	}
	s := &sessionState{vers: VersionTLCP, cipherSuite: hs.suite.id, createdAt: uint64(hs.config.time().Unix()), master: hs.ks.master[:], serverName: hs.hello.serverName}
	h := hs.certHash()
	s.serverCert = h[:]
	for _, c := range hs.peerCerts {
		s.certs = append(s.certs, c.Raw)
	}
	return s
}

func (hs *serverHandshakeState) sendFinished() error {
	return hs.c.sendFinishedMsg(hs.ks, hs.tr, false)
}

// sendTicketAndFinished writes the server's last flight: NewSessionTicket
// (when issuing one), ChangeCipherSpec and Finished.
func (hs *serverHandshakeState) sendTicketAndFinished() error {
	if err := hs.sendSessionTicket(); err != nil {
		return err
	}
	if err := hs.sendFinished(); err != nil {
		return err
	}
	if err := hs.c.flush(); err != nil {
		return err
	}
	hs.ticketWritten()
	return nil
}

func (hs *serverHandshakeState) storeSession() {
	if len(hs.sh.sessionID) == 0 || hs.session != nil {
		return
	}
	store := hs.config.sessionStore()
	if store == nil {
		return
	}
	b, err := hs.sessionToStore().marshal() // exactly sized: the store keeps it
	if err != nil {
		return
	}
	if ps, ok := store.(preparedStore); ok && !anyParsedInPlace(hs.peerCerts) {
		var st sm3state.HMACState
		hs.ks.masterState(&st) // keyed with the master secret
		var key *chainCacheKey
		if hs.hasChainKey {
			key = &hs.chainKey
		}
		if p, ok := newPreparedSession(b, &st, hs.peerCerts, key); ok {
			ps.putPrepared(string(hs.sh.sessionID), b, p, hs.config.lifetime())
			hs.c.rememberSessionID(hs.sh.sessionID)
			return
		}
	}
	store.Put(string(hs.sh.sessionID), b, hs.config.lifetime())
	hs.c.rememberSessionID(hs.sh.sessionID)
}

// anyParsedInPlace reports whether a certificate of certs was parsed in
// place from its handshake flight (one over maxCachedCert bytes, which
// parseCertificates neither copies nor caches) and so keeps the whole
// flight: a prepared session must not hold such a certificate for its
// lifetime, on top of the serialized state.
func anyParsedInPlace(certs []*smx509.Certificate) bool {
	for _, c := range certs {
		if len(c.Raw) > maxCachedCert {
			return true
		}
	}
	return false
}
