package tls13sm

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"sync"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/sm3state"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/internal/validity"
)

// serverHandshakeState holds the state of one server handshake (RFC 8446
// §4, server side). Each method is one step of the flow.
type serverHandshakeState struct {
	c      *Conn
	ctx    context.Context
	config *Config

	hello     *clientHelloMsg
	site      [bindingSize]byte // siteBinding, once siteKnown
	siteKnown bool
	suite     *cipherSuite
	cert      *Certificate
	group     uint16
	sharedKey []byte
	sentHRR   bool
	sentCCS   bool
	pskMode   uint8
	usingPSK  bool
	pskIndex  int
	session   *sessionState
	client    clientIdentity // from this handshake's certificate, or the ticket's
	// retryUnlessResumed: the HelloRetryRequest waits for checkForResumption
	// (a psk_ke-only client without a share of hs.group).
	retryUnlessResumed bool

	transcript hash.Hash // &tr
	tr         sm3state.Transcript
	th         [hashSize]byte // transcript hash scratch
	ks         keySchedule
	random     [32]byte
	msgBuf     []byte // where outgoing messages are marshalled
	helloBuf   clientHelloMsg
	helloRaw   []byte // holds the first ClientHello's bytes

	handshakeSecrets
	binderHash       [hashSize]byte // transcript up to the binders
	scratch          [2][hashSize]byte
	key              [keyLen]byte
	iv               [ivLen]byte
	clientAppAEAD    cipher.AEAD // made with the server's application key
	clientAppIV      [ivLen]byte
	sessionBuf       sessionState
	thServerFinished [hashSize]byte
	// ticketPlain and ticketSealed hold a session state and its ticket
	// (at most maxSessionState and maxTicketSize bytes, see sessionState).
	ticketPlain  [maxSessionState]byte
	ticketSealed [maxTicketSize]byte
}

func (hs *serverHandshakeState) transcriptHash() []byte {
	return hs.transcript.Sum(hs.th[:0])
}

// serverStates recycles handshake states (about 3 KiB, with the SM3
// compressor, the parsed ClientHello and the message buffers); nothing
// refers to a state after its handshake returns.
var serverStates = sync.Pool{New: func() any { return new(serverHandshakeState) }}

// maxPooledMsgBuf bounds the message buffer a pooled state keeps.
const maxPooledMsgBuf = 8192

func newServerHandshakeState(c *Conn, ctx context.Context) *serverHandshakeState {
	hs := serverStates.Get().(*serverHandshakeState)
	// The HMAC keeps its compressor (and so gmsm's digest) across
	// handshakes. release wiped the state when it was pooled; wiping
	// again is cheap and holds for states pooled by other code (tests).
	mac, buf, raw := hs.ks.m, hs.msgBuf, hs.helloRaw
	*hs = serverHandshakeState{c: c, ctx: ctx, config: c.config, msgBuf: buf[:0], helloRaw: raw[:0]}
	hs.ks.m = mac
	hs.ks.m.Wipe()
	hs.tr.Init(hs.ks.m.Compressor())
	hs.transcript = &hs.tr
	return hs
}

// release wipes hs and returns it to serverStates, on every path out of
// the handshake: a pooled state is idle for an unbounded time, and may be
// reachable from a heap or core dump, so it must not keep the key
// schedule's HMAC key, the derived secrets, the (EC)DHE shared secret,
// record keys or the plaintext of the ticket it issued (its resumption
// PSK). Only the SM3 compressor (wiped by HMAC.Wipe) and the message
// buffers, which hold no secret, are kept.
func (hs *serverHandshakeState) release() {
	clear(hs.sharedKey)
	// Wiped before it is copied out, so that the copy holds no key.
	hs.ks.m.Wipe()
	mac, buf, raw := hs.ks.m, hs.msgBuf, hs.helloRaw
	if cap(buf) > maxPooledMsgBuf {
		buf = nil
	}
	if cap(raw) > maxPooledMsgBuf {
		raw = nil
	}
	*hs = serverHandshakeState{msgBuf: buf[:0], helloRaw: raw[:0]}
	hs.ks.m = mac
	serverStates.Put(hs)
}

func (c *Conn) serverHandshake(ctx context.Context) error {
	hs := newServerHandshakeState(c, ctx)
	defer hs.release()
	if err := hs.readClientHello(); err != nil {
		return err
	}
	if err := hs.processClientHello(); err != nil {
		return err
	}
	hs.addHelloToTranscript()
	if err := hs.checkForResumption(); err != nil {
		return err
	}
	if err := hs.retryIfNotResumed(); err != nil {
		return err
	}
	if err := hs.pickCertificate(); err != nil {
		return err
	}
	c.buffering = true
	if err := hs.sendServerParameters(); err != nil {
		return err
	}
	if err := hs.sendServerCertificate(); err != nil {
		return err
	}
	if err := hs.sendServerFinished(); err != nil {
		return err
	}
	c.buffering = false
	if err := c.flush(); err != nil {
		return err
	}
	if err := hs.readClientCertificate(); err != nil {
		return err
	}
	if err := hs.readClientFinished(); err != nil {
		return err
	}
	return hs.sendSessionTickets()
}

// readClientHello reads the first ClientHello and applies GetConfigForClient.
func (hs *serverHandshakeState) readClientHello() error {
	c := hs.c
	hs.hello = &hs.helloBuf
	msg, err := c.readHandshakeBytesInto(hs.helloRaw[:0])
	if err != nil {
		return err
	}
	hs.helloRaw = msg
	c.helloRead = true
	if msg[0] != typeClientHello {
		return c.fail(AlertUnexpectedMessage, "expected ClientHello, got message type %d", msg[0])
	}
	if !hs.hello.unmarshal(msg) {
		if hs.hello.pskNotLast {
			return c.fail(AlertIllegalParameter, "pre_shared_key not the last extension of the ClientHello")
		}
		return c.fail(AlertDecodeError, "malformed ClientHello")
	}
	// No DNS host name is longer (RFC 1035 §2.3.4); OpenSSL refuses such
	// a name the same way (RFC 6066 §3 allows unrecognized_name), rather
	// than keep up to 64 KiB of it for the connection's life.
	if len(hs.hello.serverName) > maxServerName {
		return c.fail(AlertUnrecognizedName, "server_name of %d bytes is no host name", len(hs.hello.serverName))
	}
	if hs.config.GetConfigForClient != nil {
		cfg, err := hs.config.GetConfigForClient(hs.clientHelloInfo())
		if err != nil {
			return c.fail(AlertInternalError, "GetConfigForClient: %v", err)
		}
		if cfg != nil {
			hs.config = cfg
			c.config = cfg
		}
	}
	return nil
}

// clientHelloInfo describes the ClientHello for callbacks, with copies of
// its lists (the hello's storage is recycled after the handshake).
func (hs *serverHandshakeState) clientHelloInfo() *ClientHelloInfo {
	h := hs.hello
	return &ClientHelloInfo{
		ServerName: h.serverName, CipherSuites: slices.Clone(h.cipherSuites), SupportedProtos: slices.Clone(h.alpnProtocols),
		SupportedGroups: slices.Clone(h.supportedGroups), SignatureSchemes: slices.Clone(h.signatureAlgorithms),
		SupportedVersions: slices.Clone(h.supportedVersions), Conn: hs.c.core.Raw, config: hs.config,
	}
}

// processClientHello negotiates version, suite and group (§4.1.1), sending
// a HelloRetryRequest when the client has no share for the chosen group.
func (hs *serverHandshakeState) processClientHello() error {
	c, h := hs.c, hs.hello
	// §D.5: a hello of SSL 3.0 or older is refused whatever
	// supported_versions offers (a TLS 1.3 client sends 0x0303).
	if h.vers <= 0x0300 {
		return c.fail(AlertProtocolVersion, "ClientHello legacy_version %#04x", h.vers)
	}
	if !slices.Contains(h.supportedVersions, VersionTLS13) {
		return c.fail(AlertProtocolVersion, "client does not offer TLS 1.3 (supported_versions %s)", offeredList(h.supportedVersions, "%x"))
	}
	if len(h.compressionMethods) != 1 || h.compressionMethods[0] != 0 {
		return c.fail(AlertIllegalParameter, "TLS 1.3 ClientHello with compression")
	}
	// §9.2 (and §4.2.9): the extensions a TLS 1.3 ClientHello must carry.
	switch psk := len(h.pskIdentities) > 0; {
	case psk && len(h.pskModes) == 0:
		return c.fail(AlertMissingExtension, "pre_shared_key without psk_key_exchange_modes")
	case h.hasGroups != h.hasKeyShareExt:
		return c.fail(AlertMissingExtension, "supported_groups and key_share not both present")
	case !psk && (!h.hasSigAlgs || !h.hasGroups):
		return c.fail(AlertMissingExtension, "no pre_shared_key, and no signature_algorithms or supported_groups")
	}
	c.serverName = h.serverName
	for _, id := range hs.config.cipherSuites() {
		if slices.Contains(h.cipherSuites, id) {
			hs.suite = cipherSuiteByID(id)
			break
		}
	}
	if hs.suite == nil {
		return c.fail(AlertHandshakeFailure, "no shared cipher suite (client offers %s)", offeredList(h.cipherSuites, "%x"))
	}
	c.cipherSuite = hs.suite.id
	if hs.config.Strict {
		// enable_sm_tls13_strict: curveSM2 and sm2sig_sm3 are mandatory.
		if !slices.Contains(h.supportedGroups, CurveSM2) || !slices.Contains(h.signatureAlgorithms, SM2SigSM3) {
			return c.fail(AlertHandshakeFailure, "strict mode: client does not offer curveSM2 and sm2sig_sm3")
		}
	}
	if err := hs.checkKeyShares(); err != nil {
		return err
	}
	// Pick the group: the server's preference among the client's groups.
	needHRR := false
	for _, g := range hs.config.supportedGroups() {
		if !slices.Contains(h.supportedGroups, g) {
			continue
		}
		hs.group = g
		needHRR = true
		for _, ks := range h.keyShares {
			if ks.group == g {
				needHRR = false
				break
			}
		}
		break
	}
	hs.pskMode = 0xff
	if slices.Contains(h.pskModes, pskModeDHE) && hs.group != 0 {
		hs.pskMode = pskModeDHE
	} else if hs.config.AllowPSKOnly && slices.Contains(h.pskModes, pskModePlain) {
		hs.pskMode = pskModePlain
	}
	if hs.group == 0 {
		if hs.pskMode == pskModePlain && len(h.pskIdentities) > 0 && !hs.config.SessionTicketsDisabled {
			return nil // psk_ke may still succeed; checked in checkForResumption
		}
		return c.fail(AlertHandshakeFailure, "no shared key exchange group (client offers %s)", offeredList(h.supportedGroups, "%x"))
	}
	if needHRR {
		// psk_ke needs no key share (§4.2.9; §4.1.1: the ServerHello has
		// none): a client offering only it (pskMode is psk_ke only then)
		// is asked for one only if its ticket does not resume, as
		// OpenSSL's final_key_share does.
		if hs.pskMode == pskModePlain {
			hs.retryUnlessResumed = true
			return nil
		}
		if err := hs.doHelloRetryRequest(); err != nil {
			return err
		}
	}
	return nil
}

// retryIfNotResumed sends the HelloRetryRequest processClientHello put off
// for a psk_ke client whose ticket has now not resumed: the full
// handshake needs the share. The second ClientHello's PSK is not tried
// again (the first's ticket was judged; §4.1.2 lets it only be updated).
func (hs *serverHandshakeState) retryIfNotResumed() error {
	if !hs.retryUnlessResumed || hs.usingPSK {
		return nil
	}
	if err := hs.doHelloRetryRequest(); err != nil {
		return err
	}
	hs.addHelloToTranscript()
	return nil
}

// checkKeyShares applies §4.2.8: every share must be for an offered group,
// and no group twice. Past maxScannedShares shares it takes time linear in
// the lists (a hostile hello may carry thousands of groups and shares,
// whose pairwise scans would take tens of milliseconds).
func (hs *serverHandshakeState) checkKeyShares() error {
	h := hs.hello
	if len(h.keyShares) > maxScannedShares {
		offered, shared := new(codeSet), new(codeSet)
		for _, g := range h.supportedGroups {
			offered.add(g)
		}
		for _, ks := range h.keyShares {
			if !offered.has(ks.group) {
				return hs.c.fail(AlertIllegalParameter, "key share for group %#04x not in supported_groups", ks.group)
			}
			if !shared.add(ks.group) {
				return hs.c.fail(AlertIllegalParameter, "two key shares for group %#04x", ks.group)
			}
		}
		return nil
	}
	for i, ks := range h.keyShares {
		if !slices.Contains(h.supportedGroups, ks.group) {
			return hs.c.fail(AlertIllegalParameter, "key share for group %#04x not in supported_groups", ks.group)
		}
		for _, o := range h.keyShares[:i] {
			if o.group == ks.group {
				return hs.c.fail(AlertIllegalParameter, "two key shares for group %#04x", ks.group)
			}
		}
	}
	return nil
}

// maxScannedShares bounds the key shares checked by scans (real clients
// send one to three).
const maxScannedShares = 8

// offeredList formats a client's list for an error message: the first 16
// entries (a hostile hello offers up to 32 000).
func offeredList[T any](list []T, verb string) string {
	if len(list) <= 16 {
		return fmt.Sprintf(verb, list)
	}
	return fmt.Sprintf(verb+"… (%d in all)", list[:16], len(list))
}

// doHelloRetryRequest sends HRR for hs.group and reads the second
// ClientHello (§4.1.4). The transcript restarts with message_hash (§4.4.1).
func (hs *serverHandshakeState) doHelloRetryRequest() error {
	c := hs.c
	if hs.sentHRR {
		return c.fail(AlertIllegalParameter, "second ClientHello still lacks a usable key share")
	}
	hs.sentHRR = true
	c.didHRR = true
	ch1 := sm3.Sum(hs.hello.raw)
	hs.transcript.Reset()
	hs.transcript.Write([]byte{typeMessageHash, 0, 0, hashSize})
	hs.transcript.Write(ch1[:])

	hrr := &serverHelloMsg{
		vers: 0x0303, random: helloRetryRequestRandom[:], sessionID: hs.hello.sessionID,
		cipherSuite: hs.suite.id, supportedVersion: VersionTLS13, selectedGroup: hs.group,
	}
	raw, err := hrr.marshal()
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	c.buffering = true
	if err := c.writeHandshake(raw, hs.transcript); err != nil {
		return err
	}
	if len(hs.hello.sessionID) > 0 {
		hs.sentCCS = true
		if err := c.writeCCS(); err != nil {
			return err
		}
	}
	c.buffering = false
	if err := c.flush(); err != nil {
		return err
	}
	if hs.hello.earlyData {
		// Early data sent after the first ClientHello is skipped (§4.2.10).
		c.skipAppData, c.earlyDataSkip = true, maxEarlyDataSkip
	}

	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	c.skipAppData, c.earlyDataSkip = false, 0
	if msg[0] != typeClientHello {
		return c.fail(AlertUnexpectedMessage, "expected second ClientHello, got message type %d", msg[0])
	}
	h2 := new(clientHelloMsg)
	if !h2.unmarshal(msg) {
		if h2.pskNotLast {
			return c.fail(AlertIllegalParameter, "pre_shared_key not the last extension of the second ClientHello")
		}
		return c.fail(AlertDecodeError, "malformed second ClientHello")
	}
	if len(h2.keyShares) != 1 || h2.keyShares[0].group != hs.group {
		return c.fail(AlertIllegalParameter, "second ClientHello has no single key share for group %#04x", hs.group)
	}
	if h2.earlyData {
		return c.fail(AlertIllegalParameter, "early_data in the second ClientHello")
	}
	// §4.1.2: a cookie only "if one was provided in the HelloRetryRequest"
	// (§4.2.2), and this server's never carries one.
	if len(h2.cookie) > 0 {
		return c.fail(AlertIllegalParameter, "cookie in the second ClientHello, which the HelloRetryRequest did not send")
	}
	// §4.1.2: pre_shared_key is updated "if present" in the first; a PSK
	// the first did not offer could resume a session the hello that chose
	// the configuration never named.
	if len(h2.pskIdentities) > 0 && len(hs.hello.pskIdentities) == 0 {
		return c.fail(AlertIllegalParameter, "pre_shared_key in the second ClientHello but not in the first")
	}
	if !sameClientHello(hs.hello, h2) {
		return c.fail(AlertIllegalParameter, "second ClientHello inconsistent with the first")
	}
	hs.hello = h2
	return hs.checkKeyShares()
}

// addHelloToTranscript hashes the ClientHello, keeping the hash of its part
// before the PSK binders for binder verification (§4.2.11.2).
func (hs *serverHandshakeState) addHelloToTranscript() {
	raw := hs.hello.raw
	if len(hs.hello.pskIdentities) == 0 {
		hs.transcript.Write(raw)
		return
	}
	cut := len(raw) - hs.hello.bindersLen()
	hs.transcript.Write(raw[:cut])
	hs.transcript.Sum(hs.binderHash[:0])
	hs.transcript.Write(raw[cut:])
}

// checkForResumption looks for a ticket it can use (§4.2.11), verifying
// the binder of the identity it selects.
func (hs *serverHandshakeState) checkForResumption() error {
	c, h := hs.c, hs.hello
	if len(h.pskIdentities) == 0 {
		return nil
	}
	if hs.config.SessionTicketsDisabled {
		hs.ticketEvent(TicketRejected, TicketReasonDisabled, false)
		return nil
	}
	if hs.pskMode == 0xff || (hs.pskMode == pskModePlain && !hs.config.AllowPSKOnly) {
		hs.ticketEvent(TicketRejected, TicketReasonPSKMode, false)
		if hs.group == 0 {
			return c.fail(AlertHandshakeFailure, "no usable PSK and no shared key exchange group")
		}
		return nil
	}
	now := hs.config.time()
	keys := hs.config.ticketKeys()
	site := hs.siteBinding()
	reason := ""
	reject := func(r string) {
		if reason == "" {
			reason = r
		}
	}
	for i, id := range h.pskIdentities {
		if i >= maxPSKIdentities {
			break
		}
		plain, ok, stale := ticket.OpenTo(hs.ticketPlain[:0], keys, ticket.TLS13SM, id.label)
		if !ok {
			reject(TicketReasonUndecryptable)
			continue
		}
		ss := &hs.sessionBuf
		if !ss.unmarshal(plain) {
			reject(TicketReasonMalformed)
			continue
		}
		created := time.Unix(int64(ss.createdAt), 0)
		age := now.Sub(created)
		life := time.Duration(ss.lifetime) * time.Second
		// The session, not only this ticket, must be younger than the
		// lifetime: renewed tickets keep its start (authAt).
		sessionAge := now.Sub(time.Unix(int64(ss.authAt), 0))
		if age < -maxTicketAgeSkew || age > life || age > hs.config.ticketLifetime() || sessionAge > hs.config.ticketLifetime() {
			reject(TicketReasonExpired)
			continue
		}
		// Obfuscated age check (§4.2.11.1, §8.3): the client's view of the
		// age must match ours within the allowed skew.
		clientAge := time.Duration(id.obfuscatedTicketAge-ss.ageAdd) * time.Millisecond
		if d := clientAge - age; d > maxTicketAgeSkew || d < -maxTicketAgeSkew {
			reject(TicketReasonAgeMismatch)
			continue
		}
		if ss.site != site {
			reject(TicketReasonIdentity)
			continue
		}
		if r := hs.clientPolicyRejects(&ss.client, now); r != "" {
			reject(r)
			continue
		}
		chains, cached, ok := hs.resumedClient(&ss.client)
		if !ok || (ss.client.presented && !cached && hs.config.ResumeNeedsClientChain) {
			reject(TicketReasonClientCert)
			continue
		}
		if hs.config.Strict && ss.suite != hs.suite.id {
			reject(TicketReasonSuite)
			continue
		}
		// Binder (§4.2.11.2) over the ClientHello up to the binders list.
		bk, want := (*binderKey)(&hs.scratch[0]), hs.scratch[1][:]
		hs.ks.pskSecrets(&hs.earlySecret, bk, &hs.derivedEarly, &ss.secret)
		hs.ks.binderMAC(want, bk, hs.binderHash[:])
		if !hmac.Equal(want, h.pskBinders[i]) {
			hs.ticketEvent(TicketRejected, TicketReasonBadBinder, false)
			return c.fail(AlertDecryptError, "invalid PSK binder")
		}
		hs.usingPSK, hs.pskIndex, hs.session = true, i, ss
		c.didResume = true
		hs.client, c.client = ss.client, ss.client
		if cached {
			// The chain itself only if this process still has it; the
			// identity above comes from the ticket either way.
			c.peerCertificates = chains.certs
			if ss.client.verified {
				c.verifiedChains = chains.chains
			}
		}
		hs.ticketEvent(TicketAccepted, "", stale)
		return nil
	}
	hs.ticketEvent(TicketRejected, reason, false)
	if hs.group == 0 {
		return c.fail(AlertHandshakeFailure, "no usable PSK and no shared key exchange group")
	}
	return nil
}

// clientPolicyRejects says why a ticket's client identity does not satisfy
// this server's ClientAuth policy ("" when it does). A verified identity
// must not outlive the leaf certificate (as crypto/tls does).
func (hs *serverHandshakeState) clientPolicyRejects(id *clientIdentity, now time.Time) string {
	switch hs.config.ClientAuth {
	case RequireAnyClientCert:
		if !id.presented {
			return TicketReasonClientAuth
		}
	case RequireAndVerifyClientCert:
		if !id.verified {
			return TicketReasonClientAuth
		}
	case VerifyClientCertIfGiven:
		if id.presented && !id.verified {
			return TicketReasonClientAuth
		}
	}
	if id.verified && unixTime(now) > id.notAfter {
		return TicketReasonClientCertExpired
	}
	return ""
}

// pickCertificate selects the server certificate for a full handshake.
func (hs *serverHandshakeState) pickCertificate() error {
	c := hs.c
	if hs.usingPSK {
		return nil
	}
	if !slices.Contains(hs.hello.signatureAlgorithms, SM2SigSM3) {
		return c.fail(AlertHandshakeFailure, "client does not offer sm2sig_sm3")
	}
	if hs.config.GetCertificate != nil {
		cert, err := hs.config.GetCertificate(hs.clientHelloInfo())
		if err != nil {
			return c.fail(AlertInternalError, "GetCertificate: %v", err)
		}
		hs.cert = cert
	}
	if hs.cert == nil {
		if len(hs.config.Certificates) == 0 {
			return c.fail(AlertInternalError, "no server certificate configured")
		}
		hs.cert = &hs.config.Certificates[0]
	}
	if len(hs.cert.Certificate) == 0 || hs.cert.PrivateKey == nil || !isSM2PublicKey(hs.cert.PrivateKey.Public()) {
		return c.fail(AlertHandshakeFailure, "server certificate is not an SM2 certificate with a key")
	}
	return nil
}

// keyShare generates our share for group and computes the shared secret.
func keyExchange(cfg *Config, group uint16, peer []byte) (pub, shared []byte, err error) {
	switch group {
	case CurveSM2:
		if len(peer) != 65 {
			return nil, nil, errors.New("curveSM2 key share is not a 65-byte point")
		}
		pk, err := gmecdh.P256().NewPublicKey(peer)
		if err != nil {
			return nil, nil, err
		}
		k, err := gmecdh.P256().GenerateKey(cfg.rand())
		if err != nil {
			return nil, nil, err
		}
		shared, err := k.ECDH(pk)
		if err != nil {
			return nil, nil, err
		}
		return k.PublicKey().Bytes(), shared, nil
	case X25519:
		pk, err := ecdh.X25519().NewPublicKey(peer)
		if err != nil {
			return nil, nil, err
		}
		k, err := ecdh.X25519().GenerateKey(cfg.rand())
		if err != nil {
			return nil, nil, err
		}
		shared, err := k.ECDH(pk)
		if err != nil {
			return nil, nil, err
		}
		return k.PublicKey().Bytes(), shared, nil
	}
	return nil, nil, errors.New("unsupported group")
}

// sendServerParameters sends ServerHello, the compatibility CCS and
// EncryptedExtensions, and switches to handshake keys (§4.1.3, §7.1).
func (hs *serverHandshakeState) sendServerParameters() error {
	c, h := hs.c, hs.hello
	random := hs.random[:]
	if _, err := io.ReadFull(hs.config.rand(), random); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	sh := &serverHelloMsg{vers: 0x0303, random: random, sessionID: h.sessionID, cipherSuite: hs.suite.id, supportedVersion: VersionTLS13}
	if !hs.usingPSK || hs.pskMode == pskModeDHE {
		var peer []byte
		for _, ks := range h.keyShares {
			if ks.group == hs.group {
				peer = ks.data
			}
		}
		pub, shared, err := keyExchange(hs.config, hs.group, peer)
		if err != nil {
			return c.fail(AlertIllegalParameter, "client key share: %v", err)
		}
		sh.serverShare = keyShare{group: hs.group, data: pub}
		hs.sharedKey = shared
		c.group = hs.group
	}
	if hs.usingPSK {
		sh.hasSelectedIdent, sh.selectedIdentity = true, uint16(hs.pskIndex)
	}
	hs.msgBuf = sh.appendFast(hs.msgBuf[:0])
	if err := c.writeHandshake(hs.msgBuf, hs.transcript); err != nil {
		return err
	}
	if len(h.sessionID) > 0 && !hs.sentCCS {
		hs.sentCCS = true
		if err := c.writeCCS(); err != nil {
			return err
		}
	}

	// Handshake Secret (§7.1).
	ks := &hs.ks
	ikm := hs.sharedKey
	if ikm == nil {
		ikm = zeroKey[:]
	}
	if hs.usingPSK {
		ks.extractHandshake(&hs.handshakeSecret, &hs.derivedEarly, ikm)
	} else {
		ks.extractHandshakeNoPSK(&hs.handshakeSecret, ikm)
	}
	ks.handshakeTrafficSecrets(&hs.clientHSSecret, &hs.serverHSSecret, &hs.derivedHS, &hs.handshakeSecret, hs.transcriptHash())
	key, iv := hs.key[:], hs.iv[:]
	ks.trafficKeysFinished(key, iv, &hs.serverFinishedKey, &hs.serverHSSecret)
	if err := c.out.setKeys(hs.suite, &hs.serverHSSecret, key, iv); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if err := c.checkKeyChangeBoundary(); err != nil {
		return err
	}
	ks.trafficKeysFinished(key, iv, &hs.clientFinishedKey, &hs.clientHSSecret)
	err := c.in.setKeys(hs.suite, &hs.clientHSSecret, key, iv)
	clear(key)
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if h.earlyData && !hs.sentHRR {
		c.earlyDataSkip = maxEarlyDataSkip // reject 0-RTT: skip what does not decrypt
	}

	ee := &encryptedExtensionsMsg{}
	if len(h.alpnProtocols) > 0 && len(hs.config.NextProtos) > 0 {
		for _, p := range hs.config.NextProtos {
			if slices.Contains(h.alpnProtocols, p) {
				ee.alpnProtocol = p
				break
			}
		}
		if ee.alpnProtocol == "" {
			return c.fail(AlertNoApplicationProtocol, "no shared ALPN protocol (client offers %s)", offeredList(h.alpnProtocols, "%q"))
		}
	}
	c.alpn = ee.alpnProtocol
	hs.msgBuf = ee.appendFast(hs.msgBuf[:0])
	return c.writeHandshake(hs.msgBuf, hs.transcript)
}

func (hs *serverHandshakeState) requestClientCert() bool {
	return hs.config.ClientAuth >= RequestClientCert && !hs.usingPSK
}

// sendServerCertificate sends CertificateRequest, Certificate and
// CertificateVerify on full handshakes (§4.3.2, §4.4.2, §4.4.3).
func (hs *serverHandshakeState) sendServerCertificate() error {
	c := hs.c
	if hs.usingPSK {
		return nil
	}
	if hs.requestClientCert() {
		cr := &certificateRequestMsg{signatureAlgorithms: []uint16{SM2SigSM3}}
		if hs.config.ClientCAs != nil {
			// Subjects is deprecated for system pools only; ClientCAs is the
			// configured pool, whose raw subjects are what the message carries.
			cr.certificateAuths = fitCANames(hs.config.ClientCAs.Subjects())
		}
		raw, err := cr.marshal()
		if err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
		if err := c.writeHandshake(raw, hs.transcript); err != nil {
			return err
		}
	}
	cm := &certificateMsg{certificates: hs.cert.Certificate}
	raw, err := cm.appendFast(hs.msgBuf[:0])
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	hs.msgBuf = raw
	if err := c.writeHandshake(raw, hs.transcript); err != nil {
		return err
	}
	return c.sendCertificateVerify(hs.ctx, hs.config, &hs.ks, &hs.msgBuf, hs.cert.PrivateKey, serverSignatureContext, hs.transcriptHash(), hs.transcript)
}

// sendServerFinished sends Finished and derives the application secrets.
func (hs *serverHandshakeState) sendServerFinished() error {
	c, ks := hs.c, &hs.ks
	if err := c.sendFinished(ks, &hs.serverFinishedKey, hs.transcriptHash(), hs.scratch[0][:], &hs.msgBuf, hs.transcript); err != nil {
		return err
	}
	th := hs.transcriptHash()
	hs.deriveApplicationSecrets(ks, th)
	hs.thServerFinished = [hashSize]byte(th)
	c.out.Lock()
	err := c.out.setTrafficSecret(ks, hs.suite, &hs.serverAppSecret)
	if err != nil {
		err = c.out.setErrorLocked(err)
	}
	c.out.Unlock()
	if err != nil {
		return err
	}
	// The client's application key is made now, next to the server's (the
	// same work, while its code is warm), and installed once the client
	// Finished verifies.
	ks.trafficKeys(hs.key[:], hs.clientAppIV[:], &hs.clientAppSecret)
	hs.clientAppAEAD, err = hs.suite.aead(hs.key[:])
	clear(hs.key[:])
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	return nil
}

// maxCANames is the most bytes of CA names (each with its 2-byte length)
// a CertificateRequest carries: with its signature_algorithms, the
// message stays within the 64 KiB that peers (this package, crypto/tls)
// accept, and the certificate_authorities extension within its u16
// length.
const maxCANames = maxHandshakeMsg - (1 + 2 + 8 + 4 + 2)

// fitCANames returns names, or none when they do not fit a
// CertificateRequest (maxCANames): certificate_authorities is optional
// (RFC 8446 §4.2.4), and without it the client chooses its certificate
// itself, where names that do not fit would fail every handshake that
// asks for one.
func fitCANames(names [][]byte) [][]byte {
	n := 0
	for _, dn := range names {
		n += 2 + len(dn)
	}
	if n > maxCANames {
		return nil
	}
	return names
}

// CANamesFit reports whether the subject names of a ClientCAs pool fit a
// CertificateRequest; when they do not, it goes without them.
func CANamesFit(names [][]byte) bool { return len(names) == 0 || fitCANames(names) != nil }

// readClientCertificate reads the client's Certificate and
// CertificateVerify when one was requested (§4.4.2, §4.4.3).
func (hs *serverHandshakeState) readClientCertificate() error {
	c := hs.c
	if !hs.requestClientCert() {
		return nil
	}
	var cm certificateMsg
	msg, err := c.readHandshakeMsg(typeCertificate, cm.unmarshal, "client Certificate")
	if err != nil {
		return err
	}
	if len(cm.context) != 0 {
		return c.fail(AlertIllegalParameter, "client Certificate with a request context")
	}
	hs.transcript.Write(msg)
	if len(cm.certificates) == 0 {
		if hs.config.ClientAuth == RequireAnyClientCert || hs.config.ClientAuth == RequireAndVerifyClientCert {
			return c.fail(AlertCertificateRequired, "client sent no certificate")
		}
		return nil
	}
	verify := hs.config.ClientAuth == VerifyClientCertIfGiven || hs.config.ClientAuth == RequireAndVerifyClientCert
	certs, chains, alert, err := verifyChain(hs.config, cm.certificates, false, verify)
	if err != nil {
		return c.sendAlert(alert, err)
	}
	msg, err = c.readCertificateVerify(&hs.ks, certs[0].PublicKey, clientSignatureContext, hs.transcriptHash(), "client CertificateVerify", false)
	if err != nil {
		return err
	}
	hs.transcript.Write(msg)
	c.peerCertificates, c.verifiedChains = certs, chains
	// The identity ends with the first certificate of its verified chain
	// to expire, the leaf or a CA (RFC 5280 §6.1.3(a)(2)): a resumption
	// after that is refused as a full handshake would be.
	notAfter := certs[0].NotAfter
	if len(chains) > 0 {
		_, notAfter = validity.Narrow(chains[0], time.Time{}, notAfter)
	}
	hs.client = clientIdentity{
		presented: true, verified: verify && len(chains) > 0,
		leafHash: leafHash(cm.certificates[0]), notAfter: unixTime(notAfter),
	}
	hs.client.auth = hs.config.clientAuthBinding()
	c.client = hs.client
	clientChainCache.Put(hs.client.leafHash, peerChains{certs: certs, chains: chains})
	return nil
}

// readClientFinished checks the client Finished and switches to the
// client's application key (§4.4.4).
func (hs *serverHandshakeState) readClientFinished() error {
	c, ks := hs.c, &hs.ks
	th := hs.thServerFinished[:] // nothing was added since the server Finished
	if hs.requestClientCert() {
		th = hs.transcriptHash()
	}
	msg, err := c.readFinished(ks, &hs.clientFinishedKey, th, hs.scratch[0][:], hs.msgBuf[:0], "client Finished")
	if err != nil {
		return err
	}
	hs.transcript.Write(msg)
	if err := c.checkKeyChangeBoundary(); err != nil {
		return err
	}
	c.in.setAEAD(hs.suite, &hs.clientAppSecret, hs.clientAppAEAD, hs.clientAppIV[:])
	return nil
}

// sendSessionTickets sends one NewSessionTicket (§4.6.1) when the client
// can use it.
func (hs *serverHandshakeState) sendSessionTickets() error {
	c, ks := hs.c, &hs.ks
	if hs.config.SessionTicketsDisabled {
		return nil
	}
	canUse := slices.Contains(hs.hello.pskModes, pskModeDHE) ||
		(hs.config.AllowPSKOnly && slices.Contains(hs.hello.pskModes, pskModePlain))
	if !canUse {
		return nil
	}
	resMaster := (*resumptionMasterSecret)(&hs.scratch[1])
	ks.m.LoadState(&hs.masterState)
	ks.resumptionMasterKeyed(resMaster, hs.transcriptHash())
	var nonce = []byte{0}
	now := hs.config.time()
	ss := &sessionState{
		suite: hs.suite.id, createdAt: unixTime(now), authAt: unixTime(now),
		lifetime: uint32(hs.config.ticketLifetime() / time.Second), alpn: c.alpn,
		site: hs.siteBinding(), client: hs.client,
	}
	if hs.usingPSK && hs.session != nil {
		// A resumed session keeps its start, and the new ticket lasts no
		// longer than what is left of it.
		ss.authAt = hs.session.authAt
		left := time.Unix(int64(ss.authAt), 0).Add(hs.config.ticketLifetime()).Sub(now)
		if left < time.Second {
			return nil
		}
		ss.lifetime = min(ss.lifetime, uint32(left/time.Second))
	}
	var rnd [4]byte
	if _, err := io.ReadFull(hs.config.rand(), rnd[:]); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	ss.ageAdd = binary.BigEndian.Uint32(rnd[:])
	ks.resumptionPSK(&ss.secret, resMaster, nonce)
	plain := ss.marshalFast(hs.ticketPlain[:0])
	label, err := ticket.Seal(hs.ticketSealed[:0], hs.config.ticketKeys(), ticket.TLS13SM, plain)
	if err != nil {
		return nil // no ticket key: just do not issue tickets
	}
	m := &newSessionTicketMsg{lifetime: ss.lifetime, ageAdd: ss.ageAdd, nonce: nonce, label: label}
	hs.msgBuf = m.appendFast(hs.msgBuf[:0])
	if err := c.writeHandshake(hs.msgBuf, nil); err != nil {
		return err
	}
	hs.ticketEvent(TicketIssued, "", false)
	return nil
}

var _ = smx509.SM2WithSM3

// sameClientHello reports whether the ClientHello after a
// HelloRetryRequest, b, is the first, a, but for what §4.1.2 lets change:
// key_share, early_data, cookie, pre_shared_key (and padding). What
// GetConfigForClient saw, and the suite and group chosen from it, hold.
// (doHelloRetryRequest checks those four.) Extensions the server does not
// parse (status_request, signed_certificate_timestamp,
// certificate_authorities, post_handshake_auth, record_size_limit...)
// change nothing it does and are not compared, as crypto/tls's
// illegalClientHelloChange compares only what its server uses.
func sameClientHello(a, b *clientHelloMsg) bool {
	return a.vers == b.vers && bytes.Equal(a.random, b.random) && bytes.Equal(a.sessionID, b.sessionID) &&
		slices.Equal(a.cipherSuites, b.cipherSuites) && bytes.Equal(a.compressionMethods, b.compressionMethods) &&
		a.serverName == b.serverName && slices.Equal(a.supportedGroups, b.supportedGroups) &&
		slices.Equal(a.signatureAlgorithms, b.signatureAlgorithms) && slices.Equal(a.sigAlgsCert, b.sigAlgsCert) &&
		slices.Equal(a.alpnProtocols, b.alpnProtocols) && slices.Equal(a.supportedVersions, b.supportedVersions) &&
		bytes.Equal(a.pskModes, b.pskModes)
}
