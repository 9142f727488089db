package tls13sm

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// Misbehaving-peer tests in the manner of BoGo's shim tests: one in-repo
// endpoint breaks one rule under correct keys (through
// Config.testHandshakeOut, or by writing raw records after its handshake)
// and the honest endpoint must send exactly the expected alert, the
// misbehaving endpoint must receive that alert, and no application data
// may reach the honest side.

// misCase is one misbehaviour.
type misCase struct {
	name string
	// server: the server misbehaves (default: the client).
	server bool
	// suite restricts both sides to one suite (default: TLS_SM4_GCM_SM3).
	suite uint16
	// clientAuth: the server requires a client certificate.
	clientAuth bool
	// unverified: the server requests a client certificate it does not
	// verify (RequestClientCert, nginx's optional_no_ca).
	unverified bool
	// resume: a first, honest, handshake leaves a ticket that the
	// misbehaving handshake offers.
	resume bool
	// hrr: the client shares X25519 only, so that the server (preferring
	// curveSM2) answers with a HelloRetryRequest.
	hrr bool
	// msgs rewrites the misbehaving side's outgoing handshake messages,
	// after hashing them unless beforeHash.
	beforeHash bool
	msgs       testpeer.Rewrite
	// records builds raw records the misbehaving side writes once its
	// handshake succeeded.
	records func(c *Conn) []byte
	// alert is what the honest side must send.
	alert Alert
	// eof: the honest side must instead see a clean end of stream.
	eof bool
	// diverged: the two sides' keys differ, so the misbehaving side cannot
	// read the alert.
	diverged bool
}

const misSecret = testpeer.MisbehaveSecret

var (
	onType   = testpeer.OnType
	flipLast = testpeer.FlipLast
	flipAt   = testpeer.FlipAt
	truncate = testpeer.Truncate
)

func TestMisbehavingPeer(t *testing.T) {
	cases := []misCase{
		// ---- Finished ----
		{name: "client-finished-wrong-verify-data", msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "client-finished-wrong-verify-data-ccm", suite: TLS_SM4_CCM_SM3, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "client-finished-wrong-verify-data-resumed", resume: true, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "client-finished-truncated", msgs: onType(typeFinished, truncate(1)), alert: AlertDecodeError},
		{name: "client-finished-extended", msgs: onType(typeFinished, testpeer.Extend(1)), alert: AlertDecodeError},
		{name: "server-finished-wrong-verify-data", server: true, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "server-finished-wrong-verify-data-resumed", server: true, resume: true, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "server-finished-truncated", server: true, msgs: onType(typeFinished, truncate(3)), alert: AlertDecodeError},
		// ---- PSK binder ----
		{name: "client-psk-binder-wrong", beforeHash: true, resume: true, msgs: onType(typeClientHello, flipLast), alert: AlertDecryptError},
		// ---- transcript ----
		{name: "server-hello-random-altered-after-hashing", server: true, msgs: onType(typeServerHello, testpeer.FlipRandom), alert: AlertBadRecordMAC, diverged: true},
		{name: "server-hello-suite-not-offered", server: true, suite: TLS_SM4_GCM_SM3, msgs: onType(typeServerHello, testpeer.ServerHelloSuite(TLS_SM4_CCM_SM3)), alert: AlertIllegalParameter},
		{name: "server-encrypted-extensions-altered-after-hashing", server: true, msgs: onType(typeEncryptedExtensions, eeWith(extServerName)), alert: AlertDecryptError},
		{name: "server-encrypted-extensions-unsolicited", server: true, msgs: onType(typeEncryptedExtensions, eeWith(0xff00)), alert: AlertUnsupportedExtension},
		// ---- signatures and certificates ----
		{name: "client-certificate-verify-wrong", beforeHash: true, clientAuth: true, msgs: onType(typeCertificateVerify, flipAt(-3)), alert: AlertDecryptError},
		// A certificate taken unverified must still be the client's:
		// its key signs the handshake.
		{name: "client-certificate-verify-wrong-unverified", beforeHash: true, unverified: true, msgs: onType(typeCertificateVerify, flipAt(-3)), alert: AlertDecryptError},
		{name: "client-certificate-verify-truncated", clientAuth: true, msgs: onType(typeCertificateVerify, truncate(2)), alert: AlertDecodeError},
		{name: "server-certificate-verify-wrong", beforeHash: true, server: true, msgs: onType(typeCertificateVerify, flipAt(-3)), alert: AlertDecryptError},
		{name: "server-certificate-verify-truncated", server: true, msgs: onType(typeCertificateVerify, truncate(2)), alert: AlertDecodeError},
		{name: "server-certificate-signature-corrupt", server: true, msgs: onType(typeCertificate, flipAt(-10)), alert: AlertUnknownCA},
		// ---- order ----
		{name: "client-certificate-chain-too-long", clientAuth: true, msgs: onType(typeCertificate, repeatFirstCertificate(maxCertChain+1)), alert: AlertBadCertificate},
		{name: "client-certificate-dropped", clientAuth: true, msgs: onType(typeCertificate, testpeer.Drop), alert: AlertUnexpectedMessage},
		{name: "client-certificate-verify-before-certificate", clientAuth: true, msgs: testpeer.SwapNext(typeCertificate, typeCertificateVerify), alert: AlertUnexpectedMessage},
		{name: "client-hello-duplicated", msgs: onType(typeClientHello, testpeer.Twice), alert: AlertUnexpectedMessage},
		{name: "client-finished-duplicated", msgs: onType(typeFinished, testpeer.Twice), alert: AlertUnexpectedMessage},
		{name: "server-certificate-verify-dropped", server: true, msgs: onType(typeCertificateVerify, testpeer.Drop), alert: AlertUnexpectedMessage},
		{name: "server-encrypted-extensions-duplicated", server: true, msgs: onType(typeEncryptedExtensions, testpeer.Twice), alert: AlertUnexpectedMessage},
		{name: "server-certificate-verify-before-certificate", server: true, msgs: testpeer.SwapNext(typeCertificate, typeCertificateVerify), alert: AlertUnexpectedMessage},
		{name: "client-unknown-message-type", msgs: onType(typeFinished, testpeer.SetType(99)), alert: AlertUnexpectedMessage},
		{name: "server-unknown-message-type", server: true, msgs: onType(typeEncryptedExtensions, testpeer.SetType(99)), alert: AlertUnexpectedMessage},
		{name: "handshake-length-over-limit", msgs: onType(typeFinished, testpeer.OverLength), alert: AlertIllegalParameter},
		{name: "server-hello-legacy-version", server: true, msgs: onType(typeServerHello, testpeer.SetU16(4, 0x0302)), alert: AlertIllegalParameter},
		// ServerHello fields the client did not offer or must see (§4.1.3, §4.2).
		{name: "server-hello-without-key-share", server: true, msgs: onType(typeServerHello, editServerHello(func(sh *serverHelloMsg) { sh.serverShare = keyShare{} })), alert: AlertMissingExtension},
		// §4.2.11: a PSK selected without the key_share the client's
		// psk_key_exchange_modes (psk_dhe_ke only) require.
		{name: "server-hello-psk-without-key-share", server: true, resume: true, msgs: onType(typeServerHello, editServerHello(func(sh *serverHelloMsg) { sh.serverShare = keyShare{} })), alert: AlertIllegalParameter},
		{name: "server-hello-key-share-not-shared", server: true, msgs: onType(typeServerHello, editServerHello(func(sh *serverHelloMsg) { sh.serverShare = keyShare{group: X25519, data: x25519Point} })), alert: AlertIllegalParameter},
		{name: "server-hello-session-id-not-echoed", server: true, msgs: onType(typeServerHello, editServerHello(otherSessionID)), alert: AlertIllegalParameter},
		{name: "server-hello-psk-identity-not-offered", server: true, resume: true, msgs: onType(typeServerHello, editServerHello(func(sh *serverHelloMsg) { sh.selectedIdentity = 1 })), alert: AlertIllegalParameter},
		{name: "server-hello-cookie", server: true, msgs: onType(typeServerHello, editServerHello(func(sh *serverHelloMsg) { sh.cookie = []byte{1} })), alert: AlertUnsupportedExtension},
		// HelloRetryRequest (§4.1.4).
		{name: "hello-retry-request-changes-nothing", server: true, hrr: true, msgs: onType(typeServerHello, editHRR(true, func(sh *serverHelloMsg) { sh.selectedGroup = 0 })), alert: AlertIllegalParameter},
		{name: "hello-retry-request-selects-psk", server: true, hrr: true, msgs: onType(typeServerHello, editHRR(true, func(sh *serverHelloMsg) { sh.hasSelectedIdent = true })), alert: AlertIllegalParameter},
		{name: "hello-retry-request-group-already-shared", server: true, hrr: true, msgs: onType(typeServerHello, editHRR(true, func(sh *serverHelloMsg) { sh.selectedGroup = X25519 })), alert: AlertIllegalParameter},
		{name: "hello-retry-request-twice", server: true, hrr: true, msgs: onType(typeServerHello, editHRR(false, func(sh *serverHelloMsg) {
			sh.random, sh.serverShare, sh.selectedGroup = helloRetryRequestRandom[:], keyShare{}, CurveSM2
		})), alert: AlertUnexpectedMessage},
		{name: "server-hello-suite-other-than-hello-retry-request", server: true, hrr: true, msgs: onType(typeServerHello, editHRR(false, func(sh *serverHelloMsg) { sh.cipherSuite = TLS_SM4_CCM_SM3 })), alert: AlertIllegalParameter},
		{name: "server-hello-unknown-extension", server: true, msgs: onType(typeServerHello, serverHelloExtension(0xff00)), alert: AlertUnsupportedExtension},
		{name: "server-encrypted-extensions-alpn-not-offered", server: true, msgs: onType(typeEncryptedExtensions, eeWithBody(extALPN, []byte{0, 3, 2, 'h', '2'})), alert: AlertUnsupportedExtension},
		{name: "server-encrypted-extensions-early-data-not-offered", server: true, msgs: onType(typeEncryptedExtensions, eeWith(extEarlyData)), alert: AlertUnsupportedExtension},
		{name: "server-certificate-with-context", server: true, msgs: onType(typeCertificate, withRequestContext), alert: AlertDecodeError},
		{name: "server-certificate-request-with-context", server: true, clientAuth: true, msgs: onType(typeCertificateRequest, withRequestContext), alert: AlertIllegalParameter},
		{name: "server-certificate-verify-other-scheme", server: true, msgs: onType(typeCertificateVerify, testpeer.SetU16(4, 0x0403)), alert: AlertIllegalParameter},
		{name: "client-certificate-with-context", clientAuth: true, msgs: onType(typeCertificate, withRequestContext), alert: AlertIllegalParameter},
		{name: "client-hello-compression", msgs: onType(typeClientHello, clientHelloCompression(1)), alert: AlertIllegalParameter},
		// ---- records after the handshake ----
		{name: "oversize-inner-plaintext", records: func(c *Conn) []byte {
			return seal(c, recordTypeApplicationData, make([]byte, maxPlaintext+1), 0)
		}, alert: AlertRecordOverflow},
		{name: "oversize-inner-plaintext-ccm", suite: TLS_SM4_CCM_SM3, records: func(c *Conn) []byte {
			return seal(c, recordTypeApplicationData, make([]byte, maxPlaintext+1), 0)
		}, alert: AlertRecordOverflow},
		{name: "oversize-inner-plaintext-from-server", server: true, records: func(c *Conn) []byte {
			return seal(c, recordTypeApplicationData, make([]byte, maxPlaintext+1), 0)
		}, alert: AlertRecordOverflow},
		// §5.4: the padding counts; 2^14 bytes of content with 200 of
		// padding is within the ciphertext limit, not the inner one.
		{name: "inner-plaintext-padded-over-limit", records: func(c *Conn) []byte {
			return seal(c, recordTypeApplicationData, make([]byte, maxPlaintext), 200)
		}, alert: AlertRecordOverflow},
		{name: "oversize-ciphertext-header", records: func(c *Conn) []byte {
			hdr := []byte{recordTypeApplicationData, 3, 3, 0, 0}
			binary.BigEndian.PutUint16(hdr[3:], maxCiphertext+1)
			return append(hdr, make([]byte, 64)...)
		}, alert: AlertRecordOverflow},
		{name: "record-wrong-version", records: func(c *Conn) []byte {
			r := seal(c, recordTypeApplicationData, []byte(misSecret), 0)
			r[1] = 2
			return r
		}, alert: AlertProtocolVersion},
		{name: "record-bad-tag", records: func(c *Conn) []byte { return flipLast(seal(c, recordTypeApplicationData, []byte(misSecret), 0)) }, alert: AlertBadRecordMAC},
		{name: "record-no-content-type", records: func(c *Conn) []byte { return seal(c, 0, nil, 16) }, alert: AlertUnexpectedMessage},
		{name: "record-unknown-inner-type", records: func(c *Conn) []byte { return seal(c, 99, []byte(misSecret), 0) }, alert: AlertUnexpectedMessage},
		{name: "record-plaintext-handshake-after-keys", records: func(c *Conn) []byte {
			return []byte{recordTypeHandshake, 3, 3, 0, 5, typeKeyUpdate, 0, 0, 1, 0}
		}, alert: AlertUnexpectedMessage},
		{name: "empty-handshake-record", records: func(c *Conn) []byte {
			return append(seal(c, recordTypeHandshake, nil, 0), seal(c, recordTypeApplicationData, []byte(misSecret), 0)...)
		}, alert: AlertUnexpectedMessage},
		{name: "new-session-ticket-lifetime-over-seven-days", server: true, resume: true, records: func(c *Conn) []byte {
			// lifetime 604801, age_add, nonce<1>, ticket<2>, extensions<2>
			body := []byte{0, 9, 0x3a, 0x81, 0, 0, 0, 0, 1, 0, 0, 1, 7, 0, 0}
			return seal(c, recordTypeHandshake, append([]byte{typeNewSessionTicket, 0, 0, byte(len(body))}, body...), 0)
		}, alert: AlertIllegalParameter},
		{name: "change-cipher-spec-after-handshake", records: func(c *Conn) []byte { return []byte{recordTypeChangeCipherSpec, 3, 3, 0, 1, 1} }, alert: AlertUnexpectedMessage},
		{name: "alert-of-three-bytes", records: func(c *Conn) []byte { return seal(c, recordTypeAlert, []byte{2, 10, 0}, 0) }, alert: AlertDecodeError},
		// §5.1: no other record type between a handshake message's
		// records; a warning alert (user_canceled) is no exception.
		{name: "alert-inside-handshake-message", records: func(c *Conn) []byte {
			ku := []byte{typeKeyUpdate, 0, 0, 1, 0}
			b := seal(c, recordTypeHandshake, ku[:2], 0)
			b = append(b, seal(c, recordTypeAlert, []byte{1, byte(AlertUserCanceled)}, 0)...)
			return append(b, seal(c, recordTypeHandshake, ku[2:], 0)...)
		}, alert: AlertUnexpectedMessage},
		{name: "key-update-bad-request", records: func(c *Conn) []byte {
			return seal(c, recordTypeHandshake, []byte{typeKeyUpdate, 0, 0, 1, 2}, 0)
		}, alert: AlertIllegalParameter},
		{name: "new-session-ticket-from-client", records: func(c *Conn) []byte {
			return seal(c, recordTypeHandshake, []byte{typeNewSessionTicket, 0, 0, 0}, 0)
		}, alert: AlertUnexpectedMessage},
		{name: "server-finished-after-handshake", server: true, records: func(c *Conn) []byte {
			return seal(c, recordTypeHandshake, append([]byte{typeFinished, 0, 0, 32}, make([]byte, 32)...), 0)
		}, alert: AlertUnexpectedMessage},
		{name: "empty-records-flood", records: func(c *Conn) []byte {
			var b []byte
			for range maxUselessRecords + 1 {
				b = append(b, seal(c, recordTypeApplicationData, nil, 0)...)
			}
			return b
		}, alert: AlertUnexpectedMessage},
		{name: "records-after-close-notify", records: func(c *Conn) []byte {
			b := seal(c, recordTypeAlert, []byte{1, byte(AlertCloseNotify)}, 0)
			return append(b, seal(c, recordTypeApplicationData, []byte(misSecret), 0)...)
		}, eof: true},
	}
	for _, mc := range cases {
		t.Run(mc.name, func(t *testing.T) {
			t.Parallel()
			runMisbehaving(t, mc)
		})
	}
}

func runMisbehaving(t *testing.T, mc misCase) {
	scfg, ccfg := testConfigs(t)
	if mc.suite != 0 {
		ccfg.CipherSuites = []uint16{mc.suite}
		scfg.CipherSuites = []uint16{mc.suite}
	}
	if mc.clientAuth {
		scfg.ClientAuth = RequireAndVerifyClientCert
	}
	if mc.unverified {
		scfg.ClientAuth = RequestClientCert
	}
	ccfg.testShareX25519 = mc.hrr
	if mc.resume {
		if _, cs, serr, cerr := runPair(t, scfg, ccfg); serr != nil || cerr != nil || cs.DidResume {
			t.Fatalf("first handshake: server %v, client %v", serr, cerr)
		}
	}
	if mc.name == "server-hello-suite-not-offered" {
		scfg.CipherSuites = nil // the server's rewrite picks a suite the client did not offer
	}
	bad := ccfg
	if mc.server {
		bad = scfg
	}
	bad.testHandshakeOut, bad.testRewriteBeforeHash = mc.msgs, mc.beforeHash

	a, b := tcpPair(t)
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	srv, cli := Server(a, scfg), Client(b, ccfg)
	honest, misb := srv, cli
	if mc.server {
		honest, misb = cli, srv
	}
	var records func() error
	if mc.records != nil {
		records = func() error { _, err := misb.core.Raw.Write(mc.records(misb)); return err }
	}
	// A misbehaving client reads the server's tickets before the alert.
	herr, merr, done := testpeer.RunMisbehaving(t, honest, misb, records, 4, mc.eof)
	if done {
		return
	}
	testpeer.WantAlerts(t, herr, merr, mc.alert, mc.diverged)
}

// editServerHello rewrites a ServerHello through edit.
func editServerHello(edit func(*serverHelloMsg)) testpeer.Rewrite {
	return func(m []byte) []byte {
		var sh serverHelloMsg
		if !sh.unmarshal(m) {
			panic("malformed ServerHello")
		}
		edit(&sh)
		sh.raw = nil
		b, err := sh.marshal()
		if err != nil {
			panic(err)
		}
		return b
	}
}

// x25519Point is a valid X25519 public value (the base point).
var x25519Point = append([]byte{9}, make([]byte, 31)...)

// editHRR is editServerHello applied to the HelloRetryRequest only (hrr)
// or to the ServerHello after it only.
func editHRR(hrr bool, edit func(*serverHelloMsg)) testpeer.Rewrite {
	return editServerHello(func(sh *serverHelloMsg) {
		if sh.isHRR() == hrr {
			edit(sh)
		}
	})
}

// otherSessionID makes a ServerHello's legacy_session_id differ from the
// client's.
func otherSessionID(sh *serverHelloMsg) {
	if len(sh.sessionID) == 0 {
		sh.sessionID = []byte{1}
		return
	}
	sh.sessionID = bytes.Clone(sh.sessionID)
	sh.sessionID[0] ^= 1
}

// helloSessionEnd is the offset past a hello's legacy_session_id (header,
// version, random, session_id<1>).
func helloSessionEnd(m []byte) int { return 4 + 2 + 32 + 1 + int(m[4+2+32]) }

// serverHelloExtension adds an empty extension of type typ to a ServerHello.
func serverHelloExtension(typ uint16) testpeer.Rewrite {
	return func(m []byte) []byte {
		off := helloSessionEnd(m) + 3 // cipher_suite, legacy_compression_method
		n := binary.BigEndian.Uint16(m[off:])
		binary.BigEndian.PutUint16(m[off:], n+4)
		return testpeer.SetLen(append(bytes.Clone(m), byte(typ>>8), byte(typ), 0, 0))
	}
}

// clientHelloCompression rewrites a ClientHello's one compression method.
func clientHelloCompression(v byte) testpeer.Rewrite {
	return func(m []byte) []byte {
		off := helloSessionEnd(m)
		off += 2 + int(binary.BigEndian.Uint16(m[off:]))
		if m[off] != 1 {
			panic("ClientHello without exactly one compression method")
		}
		m[off+1] = v
		return m
	}
}

// withRequestContext gives a Certificate or CertificateRequest (whose body
// starts with certificate_request_context<0..255>, empty during the
// handshake) a one-byte context.
func withRequestContext(m []byte) []byte {
	if m[4] != 0 {
		panic("message already has a context")
	}
	out := append([]byte{m[0], 0, 0, 0, 1, 0x2a}, m[5:]...)
	return testpeer.SetLen(out)
}

// eeWithBody makes EncryptedExtensions carry one extension, typ with body.
func eeWithBody(typ uint16, body []byte) testpeer.Rewrite {
	return func([]byte) []byte {
		ext := append([]byte{byte(typ >> 8), byte(typ), byte(len(body) >> 8), byte(len(body))}, body...)
		m := append([]byte{typeEncryptedExtensions, 0, 0, 0, byte(len(ext) >> 8), byte(len(ext))}, ext...)
		return testpeer.SetLen(m)
	}
}

// eeWith makes EncryptedExtensions carry one empty extension of type typ
// (a server_name acknowledgement when typ is server_name).
func eeWith(typ uint16) testpeer.Rewrite {
	return func([]byte) []byte {
		return []byte{typeEncryptedExtensions, 0, 0, 6, 0, 4, byte(typ >> 8), byte(typ), 0, 0}
	}
}

// seal protects content of type typ, followed by pad zero bytes, as one
// record of c's write side, with no size limit.
func seal(c *Conn, typ uint8, content []byte, pad int) []byte {
	c.out.Lock()
	defer c.out.Unlock()
	inner := append(append([]byte(nil), content...), typ)
	inner = append(inner, make([]byte, pad)...)
	hdr := []byte{recordTypeApplicationData, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(hdr[3:], uint16(len(inner)+aeadOver))
	rec := c.out.aead.Seal(hdr, c.out.makeNonce(), inner, hdr)
	if err := c.out.incSeq(); err != nil {
		panic(err)
	}
	return rec
}

// TestPSKIdentitiesBounded: the server looks at the first
// maxPSKIdentities identities of a ClientHello only. A client whose valid
// ticket comes after that many unknown ones gets a full handshake; were
// the server to reach it, its binder (made for the hello before the
// others were added) would fail the handshake.
func TestPSKIdentitiesBounded(t *testing.T) {
	scfg, ccfg := testConfigs(t)
	if _, cs, serr, cerr := runPair(t, scfg, ccfg); serr != nil || cerr != nil || cs.DidResume {
		t.Fatalf("first handshake: server %v, client %v", serr, cerr)
	}
	ccfg.testHandshakeOut, ccfg.testRewriteBeforeHash = onType(typeClientHello, prependPSKIdentities(maxPSKIdentities)), true
	_, cs, serr, cerr := runPair(t, scfg, ccfg)
	if serr != nil || cerr != nil {
		t.Fatalf("server %v, client %v; want a full handshake", serr, cerr)
	}
	if cs.DidResume {
		t.Fatal("resumed with a ticket past the identities the server looks at")
	}
}

// prependPSKIdentities rewrites a ClientHello's pre_shared_key extension
// (the last one, RFC 8446 §4.2.11) to start with n unknown identities,
// each with a zero binder.
func prependPSKIdentities(n int) testpeer.Rewrite {
	return func(m []byte) []byte {
		u16 := func(b []byte) int { return int(b[0])<<8 | int(b[1]) }
		p := 4 + 2 + 32
		p += 1 + int(m[p])  // legacy_session_id
		p += 2 + u16(m[p:]) // cipher_suites
		p += 1 + int(m[p])  // legacy_compression_methods
		extStart := p + 2   // extensions
		for q := extStart; q+4 <= len(m); q += 4 + u16(m[q+2:]) {
			if u16(m[q:]) != 0x0029 {
				continue
			}
			body := m[q+4 : q+4+u16(m[q+2:])]
			ids := body[2 : 2+u16(body)]
			binders := body[2+len(ids)+2:]
			var newIDs, newBinders []byte
			for i := range n {
				label := bytes.Repeat([]byte{byte(0xa0 + i)}, 32)
				newIDs = append(newIDs, 0, byte(len(label)))
				newIDs = append(newIDs, label...)
				newIDs = append(newIDs, 0, 0, 0, 0) // obfuscated_ticket_age
				newBinders = append(newBinders, 32)
				newBinders = append(newBinders, make([]byte, 32)...)
			}
			newIDs = append(newIDs, ids...)
			newBinders = append(newBinders, binders...)
			ext := binary.BigEndian.AppendUint16(nil, uint16(len(newIDs)))
			ext = append(ext, newIDs...)
			ext = binary.BigEndian.AppendUint16(ext, uint16(len(newBinders)))
			ext = append(ext, newBinders...)
			out := append([]byte{}, m[:q]...)
			out = binary.BigEndian.AppendUint16(out, 0x0029)
			out = binary.BigEndian.AppendUint16(out, uint16(len(ext)))
			out = append(out, ext...)
			binary.BigEndian.PutUint16(out[extStart-2:], uint16(len(out)-extStart))
			n := len(out) - 4
			out[1], out[2], out[3] = byte(n>>16), byte(n>>8), byte(n)
			return out
		}
		return m
	}
}

// repeatFirstCertificate rewrites a Certificate message (RFC 8446 §4.4.2:
// context, then u24-prefixed entries of u24-prefixed cert_data and
// u16-prefixed extensions) to list its first entry n times.
func repeatFirstCertificate(n int) testpeer.Rewrite {
	return func(m []byte) []byte {
		u24 := func(b []byte) int { return int(b[0])<<16 | int(b[1])<<8 | int(b[2]) }
		p := 4 + 1 + int(m[4]) // certificate_request_context
		list := m[p+3:]
		if len(list) < 3 {
			return m
		}
		certLen := u24(list)
		entry := list[:3+certLen+2+(int(list[3+certLen])<<8|int(list[3+certLen+1]))]
		out := append([]byte{}, m[:p]...)
		out = append(out, 0, 0, 0)
		for range n {
			out = append(out, entry...)
		}
		l := len(out) - p - 3
		out[p], out[p+1], out[p+2] = byte(l>>16), byte(l>>8), byte(l)
		l = len(out) - 4
		out[1], out[2], out[3] = byte(l>>16), byte(l>>8), byte(l)
		return out
	}
}
