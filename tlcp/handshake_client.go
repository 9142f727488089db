package tlcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmproxy/gmproxy/internal/asciifold"
	"github.com/gmproxy/gmproxy/internal/validity"
	"github.com/gmproxy/gmproxy/internal/wire"
)

// clientHandshakeState is one client handshake (GB/T 38636 §6.4.3).
type clientHandshakeState struct {
	c              *Conn
	ctx            context.Context
	config         *Config
	hello          *clientHelloMsg
	sh             *serverHelloMsg
	suite          *cipherSuite
	ks             *keySchedule
	tr             *transcript
	session        *ClientSessionState
	cacheKey       string
	ticket         []byte // received NewSessionTicket
	ticketLifetime time.Duration
	serverCerts    []*smx509.Certificate
	chains         [][]*smx509.Certificate
	// validFrom and validUntil bound the validity of the verified chains.
	validFrom, validUntil time.Time
	// rechecked holds the chains of the session offered, verified again
	// against RootCAs when the session's were verified against another
	// pool (trusted).
	rechecked *ClientSessionState
}

func (c *Conn) clientHandshake(ctx context.Context) (err error) {
	cfg := c.config
	// Verification checks the certificate for ServerName: without one it
	// would accept any server RootCAs vouch for, under any name. A
	// VerifyPeerCertificate hook runs after verification and is no
	// substitute (crypto/tls refuses this configuration too).
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		return errorf(AlertInternalError, "either ServerName or InsecureSkipVerify must be set")
	}
	hs := &clientHandshakeState{c: c, ctx: ctx, config: cfg, tr: newTranscript()}
	hs.tr.keepRaw = cfg.ClientRawCertificateVerify
	defer func() {
		if hs.ks != nil {
			hs.ks.release()
		}
	}()
	if err := hs.sendClientHello(); err != nil {
		return err
	}
	if hs.session != nil {
		// A handshake that offered a session and failed drops it (RFC
		// 5246 §7.2.2: a session of a connection ended by a fatal alert
		// is not resumed), as crypto/tls does: a server that failed it,
		// resuming, would otherwise fail every connection the same way
		// for as long as the session lasts.
		defer func() {
			if err != nil {
				cfg.ClientSessionCache.Put(hs.cacheKey, nil)
			}
		}()
	}
	if err := hs.readServerHello(); err != nil {
		return err
	}
	if hs.resumed() {
		c.didResume = true
		hs.ks = scheduleFromMaster(hs.session.master)
		if err := hs.establishKeys(); err != nil {
			return err
		}
		if err := hs.readTicketAndFinished(); err != nil {
			return err
		}
		if err := hs.sendFinished(); err != nil {
			return err
		}
		c.peerCertificates, c.verifiedChains = hs.session.serverCerts, hs.session.verifiedChains
		if hs.rechecked != nil {
			c.verifiedChains = hs.rechecked.verifiedChains
		}
	} else {
		if err := hs.doFullHandshake(); err != nil {
			return err
		}
		if err := hs.sendFinished(); err != nil {
			return err
		}
		if err := hs.readTicketAndFinished(); err != nil {
			return err
		}
		c.peerCertificates, c.verifiedChains = hs.serverCerts, hs.chains
	}
	hs.saveSession()
	c.vers = VersionTLCP
	c.suite = hs.suite
	c.alpn = hs.sh.alpnProtocol
	c.serverName = cfg.ServerName
	c.core.SetHandshakeComplete()
	return nil
}

func (hs *clientHandshakeState) sendClientHello() error {
	c, cfg := hs.c, hs.config
	hello := &clientHelloMsg{
		vers:               VersionTLCP,
		random:             make([]byte, 32),
		cipherSuites:       cfg.cipherSuites(),
		compressionMethods: []byte{0},
	}
	if _, err := io.ReadFull(cfg.rand(), hello.random); err != nil {
		return wrapErr(AlertInternalError, "client random", err)
	}
	if !cfg.NoClientExtensions {
		hello.serverName = wire.SNIHostName(cfg.ServerName)
		hello.alpnProtocols = cfg.NextProtos
		hello.ticketSupported = cfg.ClientSessionCache != nil && !cfg.SessionTicketsDisabled
		hello.hasExtensions = hello.serverName != "" || len(hello.alpnProtocols) > 0 || hello.ticketSupported
	}
	if cache := cfg.ClientSessionCache; cache != nil {
		hs.cacheKey = cfg.ServerName
		if hs.cacheKey == "" {
			hs.cacheKey = c.core.Raw.RemoteAddr().String()
		}
		if s, ok := cache.Get(hs.cacheKey); ok && hs.usable(s) {
			hs.session = s
			switch {
			case len(s.ticket) > 0 && hello.ticketSupported:
				hello.sessionTicket = s.ticket
				// A random session ID tells us whether the ticket was
				// accepted (RFC 5077 §3.4).
				hello.sessionID = make([]byte, sessionIDLen)
				if _, err := io.ReadFull(cfg.rand(), hello.sessionID); err != nil {
					return wrapErr(AlertInternalError, "session id", err)
				}
			case len(s.sessionID) > 0:
				hello.sessionID = s.sessionID
			default:
				hs.session = nil
			}
		}
	}
	hs.hello = hello
	b, err := hello.marshal()
	if err != nil {
		return wrapErr(AlertInternalError, "marshal ClientHello", err)
	}
	if err := c.sendHandshake(hs.tr, b); err != nil {
		return err
	}
	return c.flush()
}

func (hs *clientHandshakeState) usable(s *ClientSessionState) bool {
	if s == nil || s.vers != VersionTLCP || len(s.master) != masterSecretLength {
		return false
	}
	if s.lifetime > 0 && hs.config.time().After(s.receivedAt.Add(s.lifetime)) {
		return false
	}
	return slices.Contains(hs.config.cipherSuites(), s.cipherSuite) && hs.trusted(s)
}

func (hs *clientHandshakeState) readServerHello() error {
	c := hs.c
	hs.sh = &serverHelloMsg{}
	if _, err := c.readHandshakeMsg(typeServerHello, hs.sh, hs.tr); err != nil {
		return err
	}
	sh := hs.sh
	if sh.vers != VersionTLCP {
		return errorf(AlertProtocolVersion, "server selected version %04x, want TLCP 0101", sh.vers)
	}
	if sh.compressionMethod != 0 {
		return errorf(AlertIllegalParameter, "server selected compression %d", sh.compressionMethod)
	}
	offered := false
	for _, id := range hs.hello.cipherSuites {
		if id == sh.cipherSuite {
			offered = true
		}
	}
	hs.suite = cipherSuiteByID(sh.cipherSuite)
	if !offered || hs.suite == nil {
		return errorf(AlertIllegalParameter, "server selected suite %s that was not offered", CipherSuiteName(sh.cipherSuite))
	}
	if sh.ticketSupported && !hs.hello.ticketSupported {
		return errorf(AlertUnsupportedExtension, "server sent session_ticket that was not offered")
	}
	if sh.serverNameAck && hs.hello.serverName == "" {
		return errorf(AlertUnsupportedExtension, "server acknowledged a server_name that was not sent")
	}
	if sh.alpnProtocol != "" {
		ok := false
		for _, p := range hs.hello.alpnProtocols {
			ok = ok || p == sh.alpnProtocol
		}
		if !ok {
			return errorf(AlertUnsupportedExtension, "server selected ALPN %q that was not offered", sh.alpnProtocol)
		}
	}
	if hs.session != nil && hs.resumed() && sh.cipherSuite != hs.session.cipherSuite {
		return errorf(AlertIllegalParameter, "server resumed a session with a different suite")
	}
	return nil
}

// resumed reports whether the server echoed our session ID.
func (hs *clientHandshakeState) resumed() bool {
	return hs.session != nil && len(hs.hello.sessionID) > 0 && bytes.Equal(hs.sh.sessionID, hs.hello.sessionID)
}

func (hs *clientHandshakeState) queue(m handshakeMessage) error {
	return hs.c.queueMsg(hs.tr, m)
}

func (hs *clientHandshakeState) doFullHandshake() error {
	c, cfg := hs.c, hs.config
	cm := &certificateMsg{}
	if _, err := c.readHandshakeMsg(typeCertificate, cm, hs.tr); err != nil {
		return err
	}
	if err := hs.verifyServerCertificates(cm.certificates); err != nil {
		return err
	}
	ka := &clientKeyAgreement{suite: hs.suite, serverSign: hs.serverCerts[0], serverEnc: hs.serverEnc(), asVector: cfg.ClientECDHEParamsAsVector, loadGen: cfg.InsecureLoadGenerator}
	ske := &serverKeyExchangeMsg{}
	if _, err := c.readHandshakeMsg(typeServerKeyExchange, ske, hs.tr); err != nil {
		return err
	}
	if err := ka.processServerKeyExchange(ske.key, hs.hello.random, hs.sh.random); err != nil {
		return err
	}
	data, err := c.readHandshake()
	if err != nil {
		return err
	}
	var req *certificateRequestMsg
	if data[0] == typeCertificateRequest {
		req = &certificateRequestMsg{}
		if !req.unmarshal(data) {
			return errorf(AlertDecodeError, "malformed CertificateRequest")
		}
		hs.tr.write(data)
		if data, err = c.readHandshake(); err != nil {
			return err
		}
	}
	if data[0] != typeServerHelloDone {
		return errorf(AlertUnexpectedMessage, "got handshake message type %d, want ServerHelloDone", data[0])
	}
	if !(&serverHelloDoneMsg{}).unmarshal(data) {
		return errorf(AlertDecodeError, "malformed ServerHelloDone")
	}
	hs.tr.write(data)
	if hs.suite.ecdhe && req == nil {
		return errorf(AlertHandshakeFailure, "ECDHE server did not request the client certificate pair")
	}

	var cert *Certificate
	if req != nil {
		if len(cfg.Certificates) > 0 {
			cert = &cfg.Certificates[0]
			if err := cert.complete(); err != nil {
				return wrapErr(AlertInternalError, "client certificate", err)
			}
		}
		out := &certificateMsg{}
		if cert != nil {
			out.certificates = certificateList(cert, hs.suite.ecdhe || !cfg.ClientSignCertOnly)
		}
		if err := hs.queue(out); err != nil {
			return err
		}
	}
	ka.clientCert = cert
	preMaster, ckeBody, err := ka.generateClientKeyExchange(hs.ctx, cfg.rand())
	if err != nil {
		return err
	}
	if !cfg.InsecureLoadGenerator {
		// As on the server: the pre-master serves only to derive the
		// master secret. (The load generator reuses its pre-masters.)
		defer clear(preMaster)
	}
	if err := hs.queue(&clientKeyExchangeMsg{ciphertext: ckeBody}); err != nil {
		return err
	}
	if cert != nil {
		signed := hs.tr.sum()
		if cfg.ClientRawCertificateVerify {
			signed = hs.tr.raw
		}
		sig, err := signSM2(hs.ctx, cert.SignKey, cfg.rand(), signed)
		if err != nil {
			return wrapErr(AlertInternalError, "signing CertificateVerify", err)
		}
		if err := hs.queue(&certificateVerifyMsg{signature: sig}); err != nil {
			return err
		}
	}
	hs.ks = masterFromPreMaster(preMaster, hs.hello.random, hs.sh.random)
	return hs.establishKeys()
}

// serverEnc returns the server's encryption certificate.
func (hs *clientHandshakeState) serverEnc() *smx509.Certificate { return serverEncCert(hs.serverCerts) }

// serverEncCert returns the encryption certificate of the server's list
// certs (at least two): normally the second certificate; TASSL 1.1.1k puts
// it last, so classify by key usage.
func serverEncCert(certs []*smx509.Certificate) *smx509.Certificate {
	for _, c := range certs[1:] {
		if isEncCert(c) {
			return c
		}
	}
	return certs[1]
}

// verifyServerPair verifies the server's signing certificate for
// cfg.ServerName and its encryption certificate against cfg.RootCAs at
// cfg's time, certs being the list as sent; it returns the signing
// certificate's chains and the time window in which both first chains
// stay valid.
func verifyServerPair(cfg *Config, certs []*smx509.Certificate) (chains [][]*smx509.Certificate, from, until time.Time, err error) {
	sign, enc := certs[0], serverEncCert(certs)
	var others []*smx509.Certificate
	for _, c := range certs[1:] {
		if c != enc {
			others = append(others, c)
		}
	}
	chains, err = verifyChain(sign, others, cfg.RootCAs, cfg.ServerName, cfg.time(), smx509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, from, until, wrapErr(certAlert(err), "server signing certificate does not verify", err)
	}
	encChains, err := verifyChain(enc, others, cfg.RootCAs, "", cfg.time(), smx509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, from, until, wrapErr(certAlert(err), "server encryption certificate does not verify", err)
	}
	if err := checkPairEntity(sign, enc, cfg.ServerName); err != nil {
		return nil, from, until, wrapErr(AlertBadCertificate, "server encryption certificate", err)
	}
	from, until = validity.Of(chains[0])
	from, until = validity.Narrow(encChains[0], from, until)
	return chains, from, until, nil
}

// checkPairEntity checks that the server's encryption certificate enc
// belongs to the entity its signing certificate sign names: the client
// encrypts the pre-master secret to enc's key (ECC suites) or agrees keys
// with it (ECDHE), and a chain to a trusted root says only that the CA
// issued enc to someone. A server holding a signing certificate for the
// name could otherwise present an encryption certificate the CA issued to
// another entity, whose holder would then read the session. As GmSSL's
// client (x509_tlcp_cert_pair_entity_match), the subjects must be the same
// name, compared as RFC 5280 §7.1 compares names (sameName: a CA may
// encode the same name differently in the two, a PrintableString for a
// UTF8String, another case or spacing; GmSSL compares the bytes); the
// server names enc carries, if any, must cover serverName as the signing
// certificate's do. Server names are DNS names and IP addresses, the only
// ones the signing certificate's check (x509 VerifyHostname) reads: an
// e-mail address or URI in either certificate names no server, so an
// encryption certificate whose subjectAltName has only such names is, as
// one without subjectAltName (some CAs issue them so), bound by its
// subject alone (RFC 6125 §6.4.4's fallback to the subject, here the
// whole of it and equal to the verified signing certificate's), which
// then must name someone.
func checkPairEntity(sign, enc *smx509.Certificate, serverName string) error {
	if !sameName(enc.RawSubject, sign.RawSubject) {
		return fmt.Errorf("subject %q is not the signing certificate's %q: the pair names two entities", enc.Subject, sign.Subject)
	}
	if len(enc.DNSNames) == 0 && len(enc.IPAddresses) == 0 {
		if len(enc.Subject.Names) == 0 {
			return errors.New("it has neither a subject nor a DNS name or IP address in its subjectAltName to bind it to the server")
		}
		return nil
	}
	return enc.VerifyHostname(serverName)
}

// trusted reports whether s may be resumed under cfg's verification
// settings as they are now, as crypto/tls checks a session before
// offering it: with InsecureSkipVerify off, the session's certificates
// must have been verified (a session made with verification off is not),
// for this ServerName, and still be valid; when RootCAs is another pool
// than the one they were verified against (a reload), they are verified
// again against it. Otherwise a session would carry a server the
// current settings refuse past them for as long as it is resumed.
func (hs *clientHandshakeState) trusted(s *ClientSessionState) bool {
	cfg := hs.config
	if cfg.InsecureSkipVerify {
		return true
	}
	if len(s.verifiedChains) == 0 || len(s.serverCerts) < 2 || !asciifold.Equal(s.serverName, cfg.ServerName) {
		return false
	}
	now := cfg.time()
	if now.Before(s.validFrom) || now.After(s.validUntil) {
		return false
	}
	if s.roots == cfg.RootCAs {
		return true
	}
	chains, from, until, err := verifyServerPair(cfg, s.serverCerts)
	if err != nil {
		return false
	}
	hs.rechecked = &ClientSessionState{verifiedChains: chains, roots: cfg.RootCAs, validFrom: from, validUntil: until}
	return true
}

func (hs *clientHandshakeState) verifyServerCertificates(raw [][]byte) error {
	cfg := hs.config
	if len(raw) < 2 {
		return errorf(AlertBadCertificate, "server sent %d certificates; TLCP needs a signing and an encryption certificate", len(raw))
	}
	certs, err := parsePeerCertificates(raw, "server")
	if err != nil {
		return err
	}
	hs.serverCerts = certs
	enc := hs.serverEnc()
	if _, err := sm2Public(enc); err != nil {
		return wrapErr(AlertUnsupportedCertificate, "server encryption certificate", err)
	}
	if err := checkEncUsage(enc); err != nil {
		return wrapErr(AlertBadCertificate, "server certificate", err)
	}
	// Under the ECC suites the client encrypts the pre-master secret to
	// enc's key (GB/T 38636-2020 §6.4.5.8), which keyAgreement alone does
	// not allow (Tongsuo loads no encryption certificate without
	// keyEncipherment or dataEncipherment; GmSSL's client requires
	// keyEncipherment). ECDHE's SM2 key agreement is what keyAgreement is.
	const encipher = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment
	if !hs.suite.ecdhe && enc.KeyUsage != 0 && enc.KeyUsage&encipher == 0 {
		return errorf(AlertBadCertificate, "server encryption certificate %q lacks the keyEncipherment/dataEncipherment key usage the ECC suites encrypt the pre-master secret under", enc.Subject.CommonName)
	}
	if !cfg.InsecureSkipVerify {
		hs.chains, hs.validFrom, hs.validUntil, err = verifyServerPair(cfg, certs)
		if err != nil {
			return err
		}
	}
	return cfg.verifyPeerHook(raw, hs.chains)
}

func (hs *clientHandshakeState) establishKeys() error {
	return hs.c.stageKeys(hs.ks, hs.suite, hs.hello.random, hs.sh.random, true)
}

// sendFinished queues ChangeCipherSpec and Finished and writes the
// client's flight.
func (hs *clientHandshakeState) sendFinished() error {
	if err := hs.c.sendFinishedMsg(hs.ks, hs.tr, true); err != nil {
		return err
	}
	return hs.c.flush()
}

// readTicketAndFinished reads the server's last flight: NewSessionTicket
// (when the server announced one), ChangeCipherSpec and Finished.
func (hs *clientHandshakeState) readTicketAndFinished() error {
	if err := hs.readSessionTicket(); err != nil {
		return err
	}
	return hs.readFinished()
}

func (hs *clientHandshakeState) readSessionTicket() error {
	if !hs.sh.ticketSupported {
		return nil
	}
	m := &newSessionTicketMsg{}
	if _, err := hs.c.readHandshakeMsg(typeNewSessionTicket, m, hs.tr); err != nil {
		return err
	}
	hs.ticket = m.ticket
	hs.ticketLifetime = time.Duration(m.lifetimeHint) * time.Second
	return nil
}

func (hs *clientHandshakeState) readFinished() error {
	// A full handshake ends with the server's Finished.
	c := hs.c
	if err := c.readFinishedMsg(hs.ks, hs.tr, false, !hs.resumed(), &finishedMsg{}); err != nil {
		return err
	}
	// The server's Finished ends its flight (GB/T 38636-2020 §6.4.3; RFC
	// 5246 §7.3, Figures 1 and 2). The end of the handshake drops its
	// pending bytes, so anything left (a second Finished in the same
	// record) would go unseen. Only a HelloRequest may come at any time,
	// and one that arrives while negotiating is ignored (RFC 5246
	// §7.4.1.1).
	if rest := c.core.Hand; len(rest) > 0 && !bytes.Equal(rest, helloRequestMsg) {
		return errorf(AlertUnexpectedMessage, "handshake data after the server's Finished")
	}
	return nil
}

// helloRequestMsg is a HelloRequest: type 0, an empty body.
var helloRequestMsg = []byte{typeHelloRequest, 0, 0, 0}

func (hs *clientHandshakeState) saveSession() {
	cache := hs.config.ClientSessionCache
	if cache == nil {
		return
	}
	s := &ClientSessionState{
		vers:        VersionTLCP,
		cipherSuite: hs.suite.id,
		master:      append([]byte(nil), hs.ks.master[:]...),
		receivedAt:  hs.config.time(),
		lifetime:    hs.config.lifetime(),
	}
	if hs.resumed() {
		s.serverCerts, s.serverName, s.ticket, s.sessionID = hs.session.serverCerts, hs.session.serverName, hs.session.ticket, hs.session.sessionID
		s.verifiedChains, s.roots, s.validFrom, s.validUntil = hs.session.verifiedChains, hs.session.roots, hs.session.validFrom, hs.session.validUntil
		if r := hs.rechecked; r != nil {
			s.verifiedChains, s.roots, s.validFrom, s.validUntil = r.verifiedChains, r.roots, r.validFrom, r.validUntil
		}
	} else {
		s.serverCerts, s.verifiedChains, s.serverName = hs.serverCerts, hs.chains, hs.config.ServerName
		if hs.chains != nil {
			s.roots, s.validFrom, s.validUntil = hs.config.RootCAs, hs.validFrom, hs.validUntil
		}
	}
	switch {
	case len(hs.ticket) > 0:
		s.ticket, s.sessionID = hs.ticket, nil
		if hs.ticketLifetime > 0 {
			// The server's hint may shorten the client's own bound on
			// resumption, never lengthen it (RFC 5077 §3.3: a hint).
			s.lifetime = min(hs.ticketLifetime, s.lifetime)
		}
	case len(hs.sh.sessionID) > 0 && !hs.resumed():
		s.sessionID, s.ticket = hs.sh.sessionID, nil
	case hs.resumed():
		// No new ticket (or a session ID): keep what was resumed, and its
		// age, so that it is not offered after the server dropped it.
		s.receivedAt, s.lifetime = hs.session.receivedAt, hs.session.lifetime
	default:
		return
	}
	cache.Put(hs.cacheKey, s)
}
