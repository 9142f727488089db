package tls13sm

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"errors"
	"hash"
	"io"
	"slices"
	"sync"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/asciifold"
	"github.com/gmproxy/gmproxy/internal/sm3state"
	"github.com/gmproxy/gmproxy/internal/wire"
)

// clientHandshakeState holds the state of one client handshake (RFC 8446
// §4, client side).
type clientHandshakeState struct {
	c      *Conn
	ctx    context.Context
	config *Config

	hello     *clientHelloMsg
	sm2Key    *gmecdh.PrivateKey
	x25519Key *ecdh.PrivateKey
	session   *ClientSessionState
	sentCCS   bool
	// chains and trust are the session's verified chains and what they
	// were verified for, verified again when RootCAs changed (trusted).
	chains [][]*smx509.Certificate
	trust  serverTrust

	serverHello *serverHelloMsg
	suite       *cipherSuite
	usingPSK    bool
	certReq     *certificateRequestMsg

	transcript hash.Hash // &tr
	tr         sm3state.Transcript
	th         [hashSize]byte
	ks         keySchedule
	msgBuf     []byte // where CertificateVerify and Finished are marshalled

	handshakeSecrets
}

func (hs *clientHandshakeState) transcriptHash() []byte { return hs.transcript.Sum(hs.th[:0]) }

func (c *Conn) clientHandshake(ctx context.Context) (err error) {
	cfg := c.config
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		return errors.New("tls13sm: either ServerName or InsecureSkipVerify must be set in the client Config")
	}
	hs := &clientHandshakeState{c: c, ctx: ctx, config: cfg}
	hs.tr.Init(hs.ks.m.Compressor())
	hs.transcript = &hs.tr
	c.serverName = cfg.ServerName
	if err := hs.makeClientHello(); err != nil {
		return err
	}
	hs.loadSession()
	if hs.session != nil {
		// A handshake that offered a ticket and failed drops it, as
		// crypto/tls does: a server that fails it, resuming (a corrupted
		// PSK, a broken backend; §4.2.11 has it abort on a wrong binder),
		// would otherwise fail every connection the same way for as long
		// as the ticket lasts.
		defer func() {
			if err != nil {
				cfg.ClientSessionCache.Put(c.sessionCacheKey, nil)
			}
		}()
	}
	if err := hs.computeBinders(); err != nil {
		return err
	}
	if err := c.writeHandshake(hs.hello.raw, hs.transcript); err != nil {
		return err
	}
	if cfg.testEarlyData {
		// A 0-RTT record the server cannot decrypt (it never accepts early data).
		fake := append([]byte{recordTypeApplicationData, 3, 3, 0, 40}, make([]byte, 40)...)
		if _, err := c.core.Raw.Write(fake); err != nil {
			return err
		}
	}
	if err := hs.readServerHello(); err != nil {
		return err
	}
	if hs.serverHello.isHRR() {
		if err := hs.processHelloRetryRequest(); err != nil {
			return err
		}
	}
	if err := hs.processServerHello(); err != nil {
		return err
	}
	if err := hs.establishHandshakeKeys(); err != nil {
		return err
	}
	if err := hs.readServerParameters(); err != nil {
		return err
	}
	if err := hs.readServerCertificate(); err != nil {
		return err
	}
	if err := hs.readServerFinished(); err != nil {
		return err
	}
	c.buffering = true
	if err := hs.sendClientCertificate(); err != nil {
		return err
	}
	if err := hs.sendClientFinished(); err != nil {
		return err
	}
	c.buffering = false
	return c.flush()
}

func (hs *clientHandshakeState) makeClientHello() error {
	c, cfg := hs.c, hs.config
	h := &clientHelloMsg{
		vers: 0x0303, random: make([]byte, 32), cipherSuites: cfg.cipherSuites(),
		compressionMethods: []uint8{0}, serverName: wire.SNIHostName(cfg.ServerName),
		supportedGroups: cfg.supportedGroups(), signatureAlgorithms: []uint16{SM2SigSM3},
		supportedVersions: []uint16{VersionTLS13}, alpnProtocols: cfg.NextProtos,
	}
	if _, err := io.ReadFull(cfg.rand(), h.random); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if !cfg.DisableMiddleboxCompat {
		h.sessionID = make([]byte, 32)
		if _, err := io.ReadFull(cfg.rand(), h.sessionID); err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
	}
	if !cfg.SessionTicketsDisabled && cfg.ClientSessionCache != nil {
		h.pskModes = []uint8{pskModeDHE}
		if cfg.AllowPSKOnly {
			h.pskModes = append(h.pskModes, pskModePlain)
		}
		if cfg.testPSKOnly {
			h.pskModes = []uint8{pskModePlain}
		}
	}
	h.earlyData = cfg.testEarlyData
	hs.hello = h
	first := CurveSM2
	if cfg.testShareX25519 {
		first = X25519 // tests: provoke a HelloRetryRequest for curveSM2
	}
	return hs.generateKeyShare(first)
}

// generateKeyShare makes our only key share, for group.
func (hs *clientHandshakeState) generateKeyShare(group uint16) error {
	hs.sm2Key, hs.x25519Key = nil, nil
	var pub []byte
	switch group {
	case CurveSM2:
		k, err := hs.sm2KeyShare()
		if err != nil {
			return hs.c.sendAlert(AlertInternalError, err)
		}
		hs.sm2Key, pub = k, k.PublicKey().Bytes()
	case X25519:
		k, err := ecdh.X25519().GenerateKey(hs.config.rand())
		if err != nil {
			return hs.c.sendAlert(AlertInternalError, err)
		}
		hs.x25519Key, pub = k, k.PublicKey().Bytes()
	default:
		return hs.c.fail(AlertIllegalParameter, "unsupported group %#04x", group)
	}
	hs.hello.keyShares = []keyShare{{group: group, data: pub}}
	return nil
}

// loadGenKey is the one SM2 key share of Config.InsecureLoadGenerator
// clients, made at the first use.
var loadGenKey struct {
	once sync.Once
	k    *gmecdh.PrivateKey
	err  error
}

// sm2KeyShare returns a new SM2 key share, or for a
// Config.InsecureLoadGenerator client the same one every time.
func (hs *clientHandshakeState) sm2KeyShare() (*gmecdh.PrivateKey, error) {
	if !hs.config.InsecureLoadGenerator {
		return gmecdh.P256().GenerateKey(hs.config.rand())
	}
	loadGenKey.once.Do(func() { loadGenKey.k, loadGenKey.err = gmecdh.P256().GenerateKey(hs.config.rand()) })
	return loadGenKey.k, loadGenKey.err
}

func (hs *clientHandshakeState) cacheKey() string {
	if hs.config.ServerName != "" {
		return hs.config.ServerName
	}
	return hs.c.core.Raw.RemoteAddr().String()
}

// loadSession adds a cached ticket as a PSK identity (§4.2.11).
func (hs *clientHandshakeState) loadSession() {
	cfg := hs.config
	if cfg.SessionTicketsDisabled || cfg.ClientSessionCache == nil {
		return
	}
	hs.c.sessionCacheKey = hs.cacheKey()
	cs, ok := cfg.ClientSessionCache.Get(hs.c.sessionCacheKey)
	if !ok || cs == nil {
		return
	}
	now := cfg.time()
	if now.Sub(cs.receivedAt) > cs.lifetime || !slices.Contains(hs.hello.cipherSuites, cs.suite) {
		cfg.ClientSessionCache.Put(hs.c.sessionCacheKey, nil)
		return
	}
	if !hs.trusted(cs) {
		return
	}
	age := uint32(now.Sub(cs.receivedAt) / time.Millisecond)
	hs.session = cs
	hs.hello.pskIdentities = []pskIdentity{{label: cs.ticket, obfuscatedTicketAge: age + cs.ageAdd}}
	hs.hello.pskBinders = [][]byte{make([]byte, hashSize)}
}

// trusted reports whether cs may be offered under cfg's verification
// settings as they are now, as crypto/tls checks a session before
// offering it: with InsecureSkipVerify off, the server's certificate must
// have been verified (a session made with verification off is not), for
// this ServerName, and still be valid; when RootCAs is another pool than
// the one it was verified against (a reload), it is verified again
// against it. Otherwise a ticket would carry a server the current
// settings refuse past them for as long as it is renewed. It sets
// hs.chains and hs.trust for the connection if it resumes.
func (hs *clientHandshakeState) trusted(cs *ClientSessionState) bool {
	cfg := hs.config
	hs.chains, hs.trust = cs.verifiedChains, cs.trust
	if cfg.InsecureSkipVerify {
		return true
	}
	t := cs.trust
	now := cfg.time()
	if len(cs.verifiedChains) == 0 || len(cs.peerCertificates) == 0 || !asciifold.Equal(t.serverName, cfg.ServerName) ||
		now.Before(t.from) || now.After(t.until) {
		return false
	}
	if t.roots == cfg.RootCAs {
		return true
	}
	raw := make([][]byte, len(cs.peerCertificates))
	for i, c := range cs.peerCertificates {
		raw[i] = c.Raw
	}
	_, chains, _, err := verifyChain(cfg, raw, true, true)
	if err != nil {
		return false
	}
	hs.chains, hs.trust = chains, trustOf(cfg, chains)
	return true
}

// computeBinders marshals the hello and fills in the PSK binder over the
// transcript so far plus the truncated hello (§4.2.11.2).
func (hs *clientHandshakeState) computeBinders() error {
	hs.hello.raw = nil
	if _, err := hs.hello.marshal(); err != nil {
		return hs.c.sendAlert(AlertInternalError, err)
	}
	if hs.session == nil {
		return nil
	}
	var bk binderKey
	var binder [hashSize]byte
	hs.ks.pskSecrets(&hs.earlySecret, &bk, &hs.derivedEarly, &hs.session.secret)
	tr := hs.tr // a copy, to hash the truncated hello without disturbing the transcript
	tr.Write(hs.hello.raw[:len(hs.hello.raw)-hs.hello.bindersLen()])
	var th [hashSize]byte
	hs.ks.binderMAC(binder[:], &bk, tr.Sum(th[:0]))
	hs.hello.updateBinders([][]byte{binder[:]})
	return nil
}

func (hs *clientHandshakeState) readServerHello() error {
	c := hs.c
	sh := new(serverHelloMsg)
	if _, err := c.readHandshakeMsg(typeServerHello, sh.unmarshal, "ServerHello"); err != nil {
		return err
	}
	if sh.supportedVersion == 0 {
		// The server negotiated TLS 1.2 or lower: check the downgrade
		// sentinel (§4.1.3) before refusing the version.
		tail := string(sh.random[24:])
		if tail == downgradeTLS12 || tail == downgradeTLS11 {
			return c.fail(AlertIllegalParameter, "downgrade attempt detected (ServerHello.random sentinel)")
		}
		return c.fail(AlertProtocolVersion, "server selected a version before TLS 1.3 (ServerHello without supported_versions)")
	}
	if sh.supportedVersion != VersionTLS13 {
		// §4.2.1: a version prior to TLS 1.3 in supported_versions, or
		// one that was not offered, is illegal_parameter.
		return c.fail(AlertIllegalParameter, "server selected version %#04x, not TLS 1.3", sh.supportedVersion)
	}
	if sh.vers != 0x0303 || sh.compression != 0 {
		return c.fail(AlertIllegalParameter, "bad legacy fields in ServerHello")
	}
	if !bytes.Equal(sh.sessionID, hs.hello.sessionID) {
		return c.fail(AlertIllegalParameter, "ServerHello does not echo the session ID")
	}
	if sh.unknownExtensions {
		return c.fail(AlertUnsupportedExtension, "ServerHello with an extension that was not offered")
	}
	if !slices.Contains(hs.hello.cipherSuites, sh.cipherSuite) {
		return c.fail(AlertIllegalParameter, "server chose cipher suite %#04x that was not offered", sh.cipherSuite)
	}
	if hs.suite != nil && hs.suite.id != sh.cipherSuite {
		return c.fail(AlertIllegalParameter, "ServerHello suite differs from HelloRetryRequest")
	}
	// Config.CipherSuites may list an ID this package does not implement
	// (it is offered as given); a server choosing it cannot be followed.
	hs.suite = cipherSuiteByID(sh.cipherSuite)
	if hs.suite == nil {
		return c.fail(AlertIllegalParameter, "server chose cipher suite %#04x, which this client does not implement", sh.cipherSuite)
	}
	hs.serverHello = sh
	return nil
}

// processHelloRetryRequest answers HRR with a second ClientHello (§4.1.4).
func (hs *clientHandshakeState) processHelloRetryRequest() error {
	c, hrr := hs.c, hs.serverHello
	if hrr.selectedGroup == 0 && len(hrr.cookie) == 0 {
		return c.fail(AlertIllegalParameter, "HelloRetryRequest changes nothing")
	}
	if hrr.serverShare.group != 0 || hrr.hasSelectedIdent {
		return c.fail(AlertIllegalParameter, "HelloRetryRequest with ServerHello-only extensions")
	}
	c.didHRR = true
	ch1 := sm3.Sum(hs.hello.raw)
	hs.transcript.Reset()
	hs.transcript.Write([]byte{typeMessageHash, 0, 0, hashSize})
	hs.transcript.Write(ch1[:])
	hs.transcript.Write(hrr.raw)

	h := hs.hello
	if g := hrr.selectedGroup; g != 0 {
		if !slices.Contains(h.supportedGroups, g) || g == h.keyShares[0].group {
			return c.fail(AlertIllegalParameter, "HelloRetryRequest selected group %#04x", g)
		}
		if err := hs.generateKeyShare(g); err != nil {
			return err
		}
	}
	h.cookie = hrr.cookie
	h.earlyData = false
	// The PSK stays offered: every suite here uses SM3, so its hash matches.
	if err := hs.computeBinders(); err != nil {
		return err
	}
	if len(h.sessionID) > 0 && !hs.sentCCS {
		hs.sentCCS = true
		if err := c.writeCCS(); err != nil {
			return err
		}
	}
	if err := c.writeHandshake(h.raw, hs.transcript); err != nil {
		return err
	}
	if err := hs.readServerHello(); err != nil {
		return err
	}
	if hs.serverHello.isHRR() {
		return c.fail(AlertUnexpectedMessage, "second HelloRetryRequest")
	}
	return nil
}

func (hs *clientHandshakeState) processServerHello() error {
	c, sh := hs.c, hs.serverHello
	if len(sh.cookie) > 0 || sh.selectedGroup != 0 {
		return c.fail(AlertUnsupportedExtension, "ServerHello with HelloRetryRequest extensions")
	}
	if sh.hasSelectedIdent {
		if hs.session == nil || sh.selectedIdentity != 0 {
			return c.fail(AlertIllegalParameter, "server selected PSK identity %d that was not offered", sh.selectedIdentity)
		}
		hs.usingPSK = true
		c.didResume = true
		c.peerCertificates, c.verifiedChains, c.serverTrust = hs.session.peerCertificates, hs.chains, hs.trust
	}
	if sh.serverShare.group == 0 {
		if !hs.usingPSK {
			return c.fail(AlertMissingExtension, "ServerHello without key_share")
		}
		if !slices.Contains(hs.hello.pskModes, pskModePlain) {
			// §4.2.11: the PSK's mode, psk_dhe_ke (all this client
			// offered), needs a key share.
			return c.fail(AlertIllegalParameter, "ServerHello selects a PSK without the key_share psk_dhe_ke requires")
		}
		return nil
	}
	if sh.serverShare.group != hs.hello.keyShares[0].group {
		return c.fail(AlertIllegalParameter, "server key share for group %#04x that was not shared", sh.serverShare.group)
	}
	if hs.config.Strict && sh.serverShare.group != CurveSM2 {
		return c.fail(AlertIllegalParameter, "strict mode: server group is not curveSM2")
	}
	c.group = sh.serverShare.group
	return nil
}

func (hs *clientHandshakeState) establishHandshakeKeys() error {
	c, sh, ks := hs.c, hs.serverHello, &hs.ks
	var shared []byte
	var err error
	switch sh.serverShare.group {
	case CurveSM2:
		var pk *gmecdh.PublicKey
		if len(sh.serverShare.data) != 65 {
			err = errors.New("curveSM2 share is not a 65-byte point")
		} else if pk, err = gmecdh.P256().NewPublicKey(sh.serverShare.data); err == nil {
			shared, err = hs.sm2Key.ECDH(pk)
		}
	case X25519:
		var pk *ecdh.PublicKey
		if pk, err = ecdh.X25519().NewPublicKey(sh.serverShare.data); err == nil {
			shared, err = hs.x25519Key.ECDH(pk)
		}
	case 0:
		shared = zeroKey[:]
	}
	if err != nil {
		return c.fail(AlertIllegalParameter, "server key share: %v", err)
	}
	hs.transcript.Write(sh.raw)

	if hs.usingPSK {
		ks.extractHandshake(&hs.handshakeSecret, &hs.derivedEarly, shared)
	} else {
		ks.extractHandshakeNoPSK(&hs.handshakeSecret, shared)
	}
	if sh.serverShare.group != 0 {
		clear(shared) // the (EC)DHE output, in the handshake secret now (as the server's release)
	}
	ks.handshakeTrafficSecrets(&hs.clientHSSecret, &hs.serverHSSecret, &hs.derivedHS, &hs.handshakeSecret, hs.transcriptHash())
	if err := c.checkKeyChangeBoundary(); err != nil {
		return err
	}
	var key [keyLen]byte
	var iv [ivLen]byte
	ks.trafficKeysFinished(key[:], iv[:], &hs.serverFinishedKey, &hs.serverHSSecret)
	if err := c.in.setKeys(hs.suite, &hs.serverHSSecret, key[:], iv[:]); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	c.cipherSuite = hs.suite.id
	// The middlebox CCS goes out in plaintext before our first encrypted
	// record; from here on alerts are encrypted.
	if len(hs.hello.sessionID) > 0 && !hs.sentCCS {
		hs.sentCCS = true
		c.buffering = true // send it together with our second flight
		if err := c.writeCCS(); err != nil {
			return err
		}
	}
	ks.trafficKeysFinished(key[:], iv[:], &hs.clientFinishedKey, &hs.clientHSSecret)
	c.out.Lock()
	err = c.out.setKeys(hs.suite, &hs.clientHSSecret, key[:], iv[:])
	c.out.Unlock()
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	return nil
}

func (hs *clientHandshakeState) readServerParameters() error {
	c := hs.c
	var ee encryptedExtensionsMsg
	msg, err := c.readHandshakeMsg(typeEncryptedExtensions, ee.unmarshal, "EncryptedExtensions")
	if err != nil {
		return err
	}
	if ee.earlyData {
		return c.fail(AlertUnsupportedExtension, "server accepted early data that was not offered")
	}
	// §4.2: an extension response the client did not request aborts the
	// handshake with unsupported_extension.
	if ee.forbidden {
		return c.fail(AlertIllegalParameter, "server sent an extension EncryptedExtensions may not carry (§4.3.1)")
	}
	if ee.unknownExtensions || ee.serverNameAck && hs.hello.serverName == "" {
		return c.fail(AlertUnsupportedExtension, "server sent an extension in EncryptedExtensions that was not offered")
	}
	if ee.alpnProtocol != "" {
		if !slices.Contains(hs.hello.alpnProtocols, ee.alpnProtocol) {
			return c.fail(AlertUnsupportedExtension, "server selected ALPN %q that was not offered", ee.alpnProtocol)
		}
		c.alpn = ee.alpnProtocol
	}
	hs.transcript.Write(msg)
	return nil
}

func (hs *clientHandshakeState) readServerCertificate() error {
	c := hs.c
	if hs.usingPSK {
		return nil
	}
	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	if msg[0] == typeCertificateRequest {
		cr := new(certificateRequestMsg)
		if !cr.unmarshal(msg) {
			return c.fail(AlertDecodeError, "malformed CertificateRequest")
		}
		if len(cr.context) != 0 {
			return c.fail(AlertIllegalParameter, "CertificateRequest with a context during the handshake")
		}
		if hs.config.Strict && (len(cr.signatureAlgorithms) != 1 || cr.signatureAlgorithms[0] != SM2SigSM3) {
			return c.fail(AlertIllegalParameter, "strict mode: CertificateRequest lists schemes other than sm2sig_sm3")
		}
		hs.certReq = cr
		hs.transcript.Write(msg)
		if msg, err = c.readHandshakeBytes(); err != nil {
			return err
		}
	}
	if msg[0] != typeCertificate {
		return c.fail(AlertUnexpectedMessage, "expected Certificate, got message type %d", msg[0])
	}
	var cm certificateMsg
	if !cm.unmarshal(msg) {
		return c.fail(AlertDecodeError, "malformed Certificate")
	}
	if len(cm.certificates) == 0 || len(cm.context) != 0 {
		return c.fail(AlertDecodeError, "server Certificate is empty or has a context")
	}
	certs, chains, alert, err := verifyChain(hs.config, cm.certificates, true, !hs.config.InsecureSkipVerify)
	if err != nil {
		return c.sendAlert(alert, err)
	}
	hs.transcript.Write(msg)
	msg, err = c.readCertificateVerify(&hs.ks, certs[0].PublicKey, serverSignatureContext, hs.transcriptHash(), "CertificateVerify", hs.config.InsecureLoadGenerator)
	if err != nil {
		return err
	}
	hs.transcript.Write(msg)
	c.peerCertificates, c.verifiedChains, c.serverTrust = certs, chains, trustOf(hs.config, chains)
	return nil
}

func (hs *clientHandshakeState) readServerFinished() error {
	c, ks := hs.c, &hs.ks
	var want [hashSize]byte
	msg, err := c.readFinished(ks, &hs.serverFinishedKey, hs.transcriptHash(), want[:], nil, "server Finished")
	if err != nil {
		return err
	}
	hs.transcript.Write(msg)
	hs.deriveApplicationSecrets(ks, hs.transcriptHash())
	if err := c.checkKeyChangeBoundary(); err != nil {
		return err
	}
	if err := c.in.setTrafficSecret(ks, hs.suite, &hs.serverAppSecret); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	return nil
}

func (hs *clientHandshakeState) sendClientCertificate() error {
	c := hs.c
	if hs.certReq == nil {
		return nil
	}
	var cert *Certificate
	if slices.Contains(hs.certReq.signatureAlgorithms, SM2SigSM3) {
		if hs.config.GetClientCertificate != nil {
			cc, err := hs.config.GetClientCertificate(hs.certReq.certificateAuths)
			if err != nil {
				return c.fail(AlertInternalError, "GetClientCertificate: %v", err)
			}
			cert = cc
		} else if len(hs.config.Certificates) > 0 {
			cert = &hs.config.Certificates[0]
		}
	}
	if cert != nil && (len(cert.Certificate) == 0 || cert.PrivateKey == nil || !isSM2PublicKey(cert.PrivateKey.Public())) {
		cert = nil
	}
	cm := &certificateMsg{}
	if cert != nil {
		cm.certificates = cert.Certificate
	}
	raw, err := cm.marshal()
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if err := c.writeHandshake(raw, hs.transcript); err != nil {
		return err
	}
	if cert == nil {
		return nil
	}
	return c.sendCertificateVerify(hs.ctx, hs.config, &hs.ks, &hs.msgBuf, cert.PrivateKey, clientSignatureContext, hs.transcriptHash(), hs.transcript)
}

func (hs *clientHandshakeState) sendClientFinished() error {
	c, ks := hs.c, &hs.ks
	var vd [hashSize]byte
	if err := c.sendFinished(ks, &hs.clientFinishedKey, hs.transcriptHash(), vd[:], &hs.msgBuf, hs.transcript); err != nil {
		return err
	}
	c.out.Lock()
	err := c.out.setTrafficSecret(ks, hs.suite, &hs.clientAppSecret)
	c.out.Unlock()
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	ks.m.LoadState(&hs.masterState)
	ks.resumptionMasterKeyed(&c.resumptionSecret, hs.transcriptHash())
	return nil
}

// handleNewSessionTicket stores a ticket in the client cache (§4.6.1).
func (c *Conn) handleNewSessionTicket(m *newSessionTicketMsg) error {
	cfg := c.config
	if cfg.SessionTicketsDisabled || cfg.ClientSessionCache == nil || m.lifetime == 0 {
		return nil
	}
	life := time.Duration(m.lifetime) * time.Second
	if life > maxTicketLifetime {
		return c.fail(AlertIllegalParameter, "NewSessionTicket lifetime above 7 days")
	}
	cs := &ClientSessionState{
		ticket: append([]byte(nil), m.label...), suite: c.cipherSuite, receivedAt: cfg.time(),
		lifetime: life, ageAdd: m.ageAdd, alpn: c.alpn,
		peerCertificates: c.peerCertificates, verifiedChains: c.verifiedChains, trust: c.serverTrust,
	}
	var ks keySchedule
	ks.resumptionPSK(&cs.secret, &c.resumptionSecret, m.nonce)
	key := c.sessionCacheKey
	if key == "" {
		key = c.core.Raw.RemoteAddr().String()
	}
	cfg.ClientSessionCache.Put(key, cs)
	return nil
}
