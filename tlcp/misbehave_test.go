package tlcp

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/record"
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
	// suite restricts both sides to one suite (default: ECC_SM4_GCM_SM3).
	suite uint16
	// clientAuth: the server requires a client certificate.
	clientAuth bool
	// unverified: the server requests a client certificate it does not
	// verify (RequestClientCert, nginx's optional_no_ca).
	unverified bool
	// noClientExtensions: the client sends no extensions (no server_name).
	noClientExtensions bool
	// msgs rewrites the misbehaving side's outgoing handshake messages,
	// after hashing them unless beforeHash.
	beforeHash bool
	msgs       func(msg []byte) []byte
	// records builds raw records the misbehaving side writes once its
	// handshake succeeded.
	records func(c *Conn) []byte
	// alert is what the honest side must send.
	alert Alert
	// eof: the honest side must instead see a clean end of stream.
	eof bool
}

const misSecret = testpeer.MisbehaveSecret

func TestMisbehavingPeer(t *testing.T) {
	cases := []misCase{
		// ---- Finished ----
		{name: "client-finished-wrong-verify-data", msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "client-finished-wrong-verify-data-cbc", suite: ECC_SM4_CBC_SM3, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "client-finished-wrong-verify-data-ecdhe", suite: ECDHE_SM4_GCM_SM3, clientAuth: true, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "client-finished-truncated", msgs: onType(typeFinished, truncate(1)), alert: AlertDecodeError},
		{name: "client-finished-extended", msgs: onType(typeFinished, extend(1)), alert: AlertDecodeError},
		{name: "server-finished-wrong-verify-data", server: true, msgs: onType(typeFinished, flipLast), alert: AlertDecryptError},
		{name: "server-finished-truncated", server: true, msgs: onType(typeFinished, truncate(4)), alert: AlertDecodeError},
		// ---- transcript ----
		{name: "client-hello-altered-after-hashing", msgs: onType(typeClientHello, testpeer.AppendSuite(0x1234)), alert: AlertDecryptError},
		{name: "client-hello-altered-after-hashing-client-auth", clientAuth: true, msgs: onType(typeClientHello, testpeer.AppendSuite(0x1234)), alert: AlertDecryptError},
		{name: "server-random-altered-after-hashing", server: true, msgs: onType(typeServerHello, testpeer.FlipRandom), alert: AlertDecryptError},
		// ---- key exchange and signatures ----
		{name: "client-key-exchange-bad-sm2-ciphertext", msgs: onType(typeClientKeyExchange, flipAt(-5)), alert: AlertBadRecordMAC},
		{name: "client-key-exchange-empty", msgs: onType(typeClientKeyExchange, func([]byte) []byte { return []byte{typeClientKeyExchange, 0, 0, 0} }), alert: AlertDecodeError},
		{name: "client-key-exchange-bad-ecdhe-point", suite: ECDHE_SM4_GCM_SM3, clientAuth: true, msgs: onType(typeClientKeyExchange, badECDHEPoint), alert: AlertDecodeError},
		{name: "client-key-exchange-ecdhe-trailing-byte", suite: ECDHE_SM4_GCM_SM3, clientAuth: true, beforeHash: true, msgs: onType(typeClientKeyExchange, extend(1)), alert: AlertDecodeError},
		{name: "client-certificate-verify-wrong", beforeHash: true, clientAuth: true, msgs: onType(typeCertificateVerify, flipAt(-3)), alert: AlertDecryptError},
		// A certificate taken unverified must still be the client's:
		// its key signs the handshake (ECDHE needs the pair all the same).
		{name: "client-certificate-verify-wrong-unverified", beforeHash: true, unverified: true, msgs: onType(typeCertificateVerify, flipAt(-3)), alert: AlertDecryptError},
		{name: "client-certificate-verify-wrong-unverified-ecdhe", suite: ECDHE_SM4_GCM_SM3, beforeHash: true, unverified: true, msgs: onType(typeCertificateVerify, flipAt(-3)), alert: AlertDecryptError},
		{name: "client-certificate-verify-truncated", clientAuth: true, msgs: onType(typeCertificateVerify, truncate(2)), alert: AlertDecodeError},
		{name: "client-certificate-without-enc-ecdhe", suite: ECDHE_SM4_GCM_SM3, clientAuth: true, msgs: onType(typeCertificate, firstCertificateOnly), alert: AlertHandshakeFailure},
		// The server's ephemeral point (last byte of Y: 4 header bytes, 03 00 29 41 04, X, Y) off the curve.
		{name: "server-key-exchange-bad-ecdhe-point", suite: ECDHE_SM4_GCM_SM3, clientAuth: true, server: true, msgs: onType(typeServerKeyExchange, flipAt(4+5+64-1)), alert: AlertDecodeError},
		{name: "server-key-exchange-signature-wrong", beforeHash: true, server: true, msgs: onType(typeServerKeyExchange, flipAt(-3)), alert: AlertDecryptError},
		{name: "server-certificate-signature-corrupt", server: true, msgs: onType(typeCertificate, flipAt(-20)), alert: AlertUnknownCA},
		// ---- versions and parameters ----
		{name: "client-hello-tls10-version", msgs: onType(typeClientHello, setU16(4, 0x0301)), alert: AlertProtocolVersion},
		{name: "server-hello-tls12-version", server: true, msgs: onType(typeServerHello, setU16(4, versionTLS12)), alert: AlertProtocolVersion},
		{name: "server-hello-suite-not-offered", server: true, msgs: onType(typeServerHello, testpeer.ServerHelloSuite(ECC_SM4_CBC_SM3)), alert: AlertIllegalParameter},
		{name: "handshake-length-over-limit", msgs: onType(typeClientKeyExchange, testpeer.OverLength), alert: AlertIllegalParameter},
		{name: "client-hello-without-null-compression", msgs: onType(typeClientHello, clientHelloCompression(1)), alert: AlertDecodeError},
		{name: "server-hello-compression", server: true, msgs: onType(typeServerHello, serverHelloCompression(1)), alert: AlertIllegalParameter},
		// Extensions the client did not offer (it offers neither tickets
		// nor ALPN here): RFC 5246 §7.4.1.4.
		{name: "server-hello-unsolicited-session-ticket", server: true, msgs: onType(typeServerHello, serverHelloExtension(extensionSessionTicket, nil)), alert: AlertUnsupportedExtension},
		{name: "server-hello-unsolicited-alpn", server: true, msgs: onType(typeServerHello, serverHelloExtension(extensionALPN, []byte{0, 3, 2, 'h', '2'})), alert: AlertUnsupportedExtension},
		{name: "server-hello-unsolicited-server-name", server: true, noClientExtensions: true, msgs: onType(typeServerHello, serverHelloExtension(extensionServerName, nil)), alert: AlertUnsupportedExtension},
		// ---- certificates ----
		{name: "server-certificate-without-enc", server: true, msgs: onType(typeCertificate, firstCertificateOnly), alert: AlertBadCertificate},
		{name: "client-certificate-empty-required", clientAuth: true, msgs: chain(onType(typeCertificate, emptyCertificate), onType(typeCertificateVerify, drop)), alert: AlertHandshakeFailure},
		// ---- order ----
		{name: "client-key-exchange-before-certificate", clientAuth: true, msgs: swapNext(typeCertificate, typeClientKeyExchange), alert: AlertUnexpectedMessage},
		{name: "client-certificate-verify-dropped", clientAuth: true, msgs: onType(typeCertificateVerify, drop), alert: AlertUnexpectedMessage},
		{name: "client-hello-duplicated", msgs: onType(typeClientHello, twice), alert: AlertUnexpectedMessage},
		// The client's Finished ends its flight: a second one in the same
		// record was dropped unseen with the handshake's leftover bytes.
		{name: "client-finished-duplicated", msgs: onType(typeFinished, twice), alert: AlertUnexpectedMessage},
		{name: "client-finished-duplicated-cbc", suite: ECC_SM4_CBC_SM3, clientAuth: true, msgs: onType(typeFinished, twice), alert: AlertUnexpectedMessage},
		// The same for the server's Finished, which ends a full
		// handshake; a HelloRequest after it is no excuse for more.
		{name: "server-finished-duplicated", server: true, msgs: onType(typeFinished, twice), alert: AlertUnexpectedMessage},
		{name: "server-finished-duplicated-cbc", server: true, suite: ECC_SM4_CBC_SM3, clientAuth: true, msgs: onType(typeFinished, twice), alert: AlertUnexpectedMessage},
		{name: "server-finished-hello-request-finished", server: true, msgs: onType(typeFinished, func(m []byte) []byte {
			return append(append(bytes.Clone(m), helloRequestMsg...), m...)
		}), alert: AlertUnexpectedMessage},
		{name: "client-key-exchange-duplicated", clientAuth: true, msgs: onType(typeClientKeyExchange, twice), alert: AlertUnexpectedMessage},
		{name: "server-hello-done-duplicated", server: true, msgs: onType(typeServerHelloDone, twice), alert: AlertUnexpectedMessage},
		{name: "server-key-exchange-before-certificate", server: true, msgs: swapNext(typeCertificate, typeServerKeyExchange), alert: AlertUnexpectedMessage},
		{name: "client-unknown-message-type", msgs: onType(typeClientKeyExchange, testpeer.SetType(99)), alert: AlertUnexpectedMessage},
		{name: "server-unknown-message-type", server: true, msgs: onType(typeServerHelloDone, testpeer.SetType(99)), alert: AlertUnexpectedMessage},
		// ---- records after the handshake ----
		{name: "oversize-plaintext-gcm", records: oversize, alert: AlertRecordOverflow},
		{name: "oversize-plaintext-cbc", suite: ECC_SM4_CBC_SM3, records: oversize, alert: AlertRecordOverflow},
		{name: "oversize-ciphertext-header", records: func(c *Conn) []byte {
			hdr := []byte{byte(recordTypeApplicationData), VersionTLCP >> 8, VersionTLCP & 0xff, 0, 0}
			binary.BigEndian.PutUint16(hdr[3:], maxCiphertext+1)
			return append(hdr, make([]byte, 64)...)
		}, alert: AlertRecordOverflow},
		{name: "record-wrong-version", records: func(c *Conn) []byte {
			r := seal(c, recordTypeApplicationData, []byte(misSecret), 0)
			r[1], r[2] = 3, 3
			return r
		}, alert: AlertProtocolVersion},
		{name: "record-bad-tag-gcm", records: func(c *Conn) []byte { return flipLast(seal(c, recordTypeApplicationData, []byte(misSecret), 0)) }, alert: AlertBadRecordMAC},
		{name: "record-bad-mac-cbc", suite: ECC_SM4_CBC_SM3, records: func(c *Conn) []byte {
			return cbcRecordBad(c, []byte(misSecret), false, true)
		}, alert: AlertBadRecordMAC},
		{name: "record-bad-padding-cbc", suite: ECC_SM4_CBC_SM3, records: func(c *Conn) []byte {
			return cbcRecordBad(c, []byte(misSecret), true, false)
		}, alert: AlertBadRecordMAC},
		{name: "record-unknown-type", records: func(c *Conn) []byte { return seal(c, 99, []byte(misSecret), 0) }, alert: AlertUnexpectedMessage},
		{name: "empty-handshake-record", records: func(c *Conn) []byte {
			return append(seal(c, recordTypeHandshake, nil, 0), seal(c, recordTypeApplicationData, []byte(misSecret), 0)...)
		}, alert: AlertUnexpectedMessage},
		{name: "change-cipher-spec-after-handshake", records: func(c *Conn) []byte { return seal(c, recordTypeChangeCipherSpec, []byte{1}, 0) }, alert: AlertUnexpectedMessage},
		{name: "alert-of-three-bytes", records: func(c *Conn) []byte { return seal(c, recordTypeAlert, []byte{2, 10, 0}, 0) }, alert: AlertDecodeError},
		// Level 3 is neither warning nor fatal (RFC 5246 §7.2); it was
		// taken for the client's fatal handshake_failure.
		{name: "alert-of-unknown-level", records: func(c *Conn) []byte {
			return seal(c, recordTypeAlert, []byte{3, byte(AlertHandshakeFailure)}, 0)
		}, alert: AlertIllegalParameter},
		{name: "server-finished-after-handshake", server: true, records: func(c *Conn) []byte {
			return seal(c, recordTypeHandshake, []byte{typeFinished, 0, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0)
		}, alert: AlertUnexpectedMessage},
		{name: "empty-records-flood", records: func(c *Conn) []byte {
			var b []byte
			for range defaultMaxEmpty + 1 {
				b = append(b, seal(c, recordTypeApplicationData, nil, 0)...)
			}
			return b
		}, alert: AlertUnexpectedMessage},
		{name: "warning-alerts-flood", records: func(c *Conn) []byte {
			var b []byte
			for range defaultMaxEmpty + 1 {
				b = append(b, seal(c, recordTypeAlert, []byte{record.AlertLevelWarning, byte(AlertUserCanceled)}, 0)...)
			}
			return b
		}, alert: AlertUnexpectedMessage},
		// Warning alerts do not restart the count of empty records: they
		// are counted with them.
		{name: "empty-records-between-warning-alerts", records: func(c *Conn) []byte {
			var b []byte
			for range 4 {
				for range defaultMaxEmpty / 2 {
					b = append(b, seal(c, recordTypeApplicationData, nil, 0)...)
				}
				b = append(b, seal(c, recordTypeAlert, []byte{record.AlertLevelWarning, byte(AlertUserCanceled)}, 0)...)
			}
			return b
		}, alert: AlertUnexpectedMessage},
		// Application data inside a post-handshake handshake message (the
		// first byte of a ClientHello, data, the rest) would stay pending in
		// the record reader's buffer while the rest is read into it.
		{name: "application-data-inside-renegotiation-hello", records: appDataInsideHello(6000), alert: AlertUnexpectedMessage},
		{name: "application-data-inside-small-renegotiation-hello", records: appDataInsideHello(40), alert: AlertUnexpectedMessage},
		{name: "records-after-close-notify", records: func(c *Conn) []byte {
			b := seal(c, recordTypeAlert, []byte{record.AlertLevelWarning, byte(AlertCloseNotify)}, 0)
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

// TestClientIgnoresHelloRequestAfterServerFinished: a server may send a
// HelloRequest at any time, and the client ignores one that comes while
// it is negotiating (RFC 5246 §7.4.1.1), so one in the record of the
// server's Finished does not fail the handshake that refuses any other
// message there (TestMisbehavingPeer/server-finished-duplicated).
func TestClientIgnoresHelloRequestAfterServerFinished(t *testing.T) {
	p := loadPKI(t)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	sent := 0
	scfg.testHandshakeOut = func(m []byte) []byte {
		if m[0] != typeFinished {
			return m
		}
		sent++
		return append(bytes.Clone(m), helloRequestMsg...)
	}
	r := runPair(t, scfg, ccfg, []byte("ping"))
	if r.cerr != nil || r.serr != nil {
		t.Fatalf("HelloRequest after the server's Finished: client %v, server %v; want it ignored", r.cerr, r.serr)
	}
	if sent != 1 {
		t.Fatalf("the server's Finished was rewritten %d times, want 1", sent)
	}
}

// TestClientRefusesDuplicatedFinishedWhenResuming: a resumed handshake's
// server flight ends with its Finished too (RFC 5246 §7.3, Figure 2), and
// a second one in the same record is refused as in a full handshake
// (TestMisbehavingPeer/server-finished-duplicated).
func TestClientRefusesDuplicatedFinishedWhenResuming(t *testing.T) {
	p := loadPKI(t)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	scfg.SessionStore = NewLRUSessionStore(4, time.Hour)
	scfg.SessionTicketsDisabled = true
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	if r := runPair(t, scfg, ccfg, []byte("x")); r.cerr != nil || r.serr != nil {
		t.Fatalf("first handshake: client %v, server %v", r.cerr, r.serr)
	}
	certs := &testpeer.Recorder{Type: typeCertificate}
	scfg.testHandshakeOut = chain(certs.Out, onType(typeFinished, twice))
	r := runPair(t, scfg, ccfg, []byte("x"))
	if n := len(certs.Msgs()); n != 0 {
		t.Fatalf("second handshake sent %d Certificate messages: not resumed", n)
	}
	if a, ok := alertOf(r.cerr); !ok || a != AlertUnexpectedMessage {
		t.Fatalf("resumed handshake with the server's Finished twice: client %v; want unexpected_message", r.cerr)
	}
}

func runMisbehaving(t *testing.T, mc misCase) {
	p := loadPKI(t)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	suite := mc.suite
	if suite == 0 {
		suite = ECC_SM4_GCM_SM3
	}
	ccfg.CipherSuites = []uint16{suite}
	if mc.clientAuth {
		scfg.ClientAuth = RequireAndVerifyClientCert
	}
	if mc.unverified {
		scfg.ClientAuth = RequestClientCert
	}
	ccfg.NoClientExtensions = mc.noClientExtensions
	bad := ccfg
	if mc.server {
		bad = scfg
	}
	bad.testHandshakeOut, bad.testRewriteBeforeHash = mc.msgs, mc.beforeHash

	c1, c2 := tcpPair(t)
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	c1.SetDeadline(deadline)
	c2.SetDeadline(deadline)
	cli, srv := Client(c1, ccfg), Server(c2, scfg)
	honest, misb := srv, cli
	if mc.server {
		honest, misb = cli, srv
	}
	var records func() error
	if mc.records != nil {
		records = func() error { _, err := misb.core.Raw.Write(mc.records(misb)); return err }
	}
	herr, merr, done := testpeer.RunMisbehaving(t, honest, misb, records, 1, mc.eof)
	if done {
		return
	}
	testpeer.WantAlerts(t, herr, merr, mc.alert, false)
}

// Rewrites of the misbehaving side's handshake messages.
var (
	onType   = testpeer.OnType
	flipLast = testpeer.FlipLast
	flipAt   = testpeer.FlipAt
	truncate = testpeer.Truncate
	extend   = testpeer.Extend
	setU16   = testpeer.SetU16
	drop     = testpeer.Drop
	twice    = testpeer.Twice
	swapNext = testpeer.SwapNext
	// badECDHEPoint moves the point of an ECDHE ClientKeyExchange, which
	// ends with it, off the curve: the last byte of Y.
	badECDHEPoint = testpeer.FlipLast
)

// firstCertificateOnly rewrites a Certificate message (type, u24 length,
// u24 list length, then u24-prefixed certificates) to carry its first
// certificate alone: a client that leaves out its encryption certificate.
func firstCertificateOnly(m []byte) []byte {
	u24 := func(b []byte) int { return int(b[0])<<16 | int(b[1])<<8 | int(b[2]) }
	put24 := func(b []byte, n int) { b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n) }
	if len(m) < 10 || len(m) < 10+u24(m[7:]) {
		return m
	}
	first := m[7 : 10+u24(m[7:])]
	out := append([]byte{m[0], 0, 0, 0, 0, 0, 0}, first...)
	put24(out[1:], 3+len(first))
	put24(out[4:], len(first))
	return out
}

// chain applies the rewrites in turn (none after one dropped the message).
func chain(fs ...testpeer.Rewrite) testpeer.Rewrite {
	return func(m []byte) []byte {
		for _, f := range fs {
			if m = f(m); m == nil {
				return nil
			}
		}
		return m
	}
}

// emptyCertificate rewrites a Certificate message to an empty list: a
// client that has no certificate to give.
func emptyCertificate([]byte) []byte { return []byte{typeCertificate, 0, 0, 3, 0, 0, 0} }

// helloSessionEnd is the offset past a hello's session_id (header,
// version, random, session_id<1>).
func helloSessionEnd(m []byte) int { return 4 + 2 + 32 + 1 + int(m[4+2+32]) }

// serverHelloCompression rewrites the compression method a ServerHello selects.
func serverHelloCompression(v byte) testpeer.Rewrite {
	return func(m []byte) []byte { m[helloSessionEnd(m)+2] = v; return m }
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

// serverHelloExtension adds an extension to a ServerHello (and the
// extensions block when it has none).
func serverHelloExtension(typ uint16, body []byte) testpeer.Rewrite {
	return func(m []byte) []byte {
		end := helloSessionEnd(m) + 3 // cipher_suite, compression_method
		ext := binary.BigEndian.AppendUint16(nil, typ)
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(body)))
		ext = append(ext, body...)
		var exts []byte
		if len(m) > end {
			exts = m[end+2:]
		}
		out := binary.BigEndian.AppendUint16(bytes.Clone(m[:end]), uint16(len(exts)+len(ext)))
		out = append(append(out, exts...), ext...)
		return testpeer.SetLen(out)
	}
}

// ---- raw records ----

// appDataInsideHello returns records that carry a ClientHello of n body
// bytes (zeros: the server refuses it before parsing) in two fragments,
// with an application data record between them.
func appDataInsideHello(n int) func(c *Conn) []byte {
	return func(c *Conn) []byte {
		hello := append([]byte{typeClientHello, byte(n >> 16), byte(n >> 8), byte(n)}, make([]byte, n)...)
		b := seal(c, recordTypeHandshake, hello[:1], 0)
		b = append(b, seal(c, recordTypeApplicationData, []byte(misSecret), 0)...)
		return append(b, seal(c, recordTypeHandshake, hello[1:], 0)...)
	}
}

// seal protects data as one record of c's write side (recSize 0: the
// normal limit; larger values make oversize records).
func seal(c *Conn, typ recordType, data []byte, recSize int) []byte {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if recSize == 0 {
		recSize = max(len(data), 1)
	}
	out, _, err := c.out.appendRecords(nil, typ, data, recSize, rand.Reader)
	if err != nil {
		panic(err)
	}
	return out
}

// oversize is an application data record of 2^14+1 plaintext bytes.
func oversize(c *Conn) []byte {
	return seal(c, recordTypeApplicationData, make([]byte, maxPlaintext+1), maxPlaintext+1)
}

// cbcRecordBad builds a CBC application data record by hand, with malformed
// padding or a wrong MAC.
func cbcRecordBad(c *Conn, frag []byte, badPadding, badMAC bool) []byte {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	hc := &c.out
	rc := hc.cipher
	hc.setAAD(recordTypeApplicationData, len(frag))
	rc.mac.Begin()
	rc.mac.Write(hc.aad[:])
	rc.mac.Write(frag)
	p := rc.mac.Finish(append([]byte(nil), frag...))
	if badMAC {
		p[len(frag)] ^= 0x01
	}
	padLen := blockLen - len(p)%blockLen
	for range padLen {
		p = append(p, byte(padLen-1))
	}
	if badPadding {
		p[len(p)-2] ^= 0x01 // padLen >= 2 for the fragments used here
	}
	rec := make([]byte, recordHeaderLen+cbcIVLen+len(p))
	rec[0], rec[1], rec[2] = byte(recordTypeApplicationData), VersionTLCP>>8, VersionTLCP&0xff
	binary.BigEndian.PutUint16(rec[3:], uint16(cbcIVLen+len(p)))
	prev := rec[recordHeaderLen : recordHeaderLen+cbcIVLen]
	rand.Read(prev)
	ct := rec[recordHeaderLen+cbcIVLen:]
	for i := 0; i < len(p); i += blockLen {
		var x [blockLen]byte
		for j := range x {
			x[j] = p[i+j] ^ prev[j]
		}
		rc.ecbEnc.CryptBlocks(ct[i:i+blockLen], x[:])
		prev = ct[i : i+blockLen]
	}
	hc.incSeq()
	return rec
}

// TestChangeCipherSpecReplacedByWarning: the misbehaving side sends a
// warning alert where its ChangeCipherSpec belongs, then its Finished and
// everything after it unprotected. A ChangeCipherSpec must come before
// Finished (GB/T 38636-2020 6.4.5.10; RFC 5246 §7.1), so the honest side
// must fail with unexpected_message instead of taking the warning for it
// and reading the rest without the new keys.
func TestChangeCipherSpecReplacedByWarning(t *testing.T) {
	for _, server := range []bool{false, true} {
		name := "client"
		if server {
			name = "server"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := loadPKI(t)
			scfg, ccfg := p.serverConfig(), p.clientConfig()
			c1, c2 := tcpPair(t)
			deadline := time.Now().Add(testwait.Bound(10 * time.Second))
			c1.SetDeadline(deadline)
			c2.SetDeadline(deadline)
			cli, srv := Client(c1, ccfg), Server(c2, scfg)
			defer cli.Close()
			defer srv.Close()
			bad, badCfg, honest := cli, ccfg, srv
			if server {
				bad, badCfg, honest = srv, scfg, cli
			}
			plain := func(typ recordType, body []byte) []byte {
				return append([]byte{byte(typ), VersionTLCP >> 8, VersionTLCP & 0xff, byte(len(body) >> 8), byte(len(body))}, body...)
			}
			badCfg.testHandshakeOut = func(msg []byte) []byte {
				if msg[0] != typeFinished {
					return msg
				}
				// The flight ends with the ChangeCipherSpec, sent before the
				// new keys: swap it for a warning and go on unprotected.
				bad.outMu.Lock()
				defer bad.outMu.Unlock()
				buf := bad.core.Flight.Room(64)
				ccs := plain(recordTypeChangeCipherSpec, ccsBody)
				if !bytes.HasSuffix(buf, ccs) {
					t.Error("the flight does not end with a ChangeCipherSpec")
					return msg
				}
				buf = append(buf[:len(buf)-len(ccs)], plain(recordTypeAlert, []byte{record.AlertLevelWarning, byte(AlertUserCanceled)})...)
				bad.core.Flight.Set(append(buf, plain(recordTypeHandshake, msg)...))
				bad.out.cipher = nil
				return nil
			}
			wantUnexpectedMessage(t, honest, bad)
		})
	}
}

// TestClientFlightBeforeFinishedAltered: the records the client sends
// before its Finished, as the server reads them with expectCCS: a
// ChangeCipherSpec whose one byte is not 1 (RFC 5246 §7.1), or
// application data before it (before the handshake ended), is
// unexpected_message, not a switch to the new keys or data taken.
func TestClientFlightBeforeFinishedAltered(t *testing.T) {
	ccs := []byte{byte(recordTypeChangeCipherSpec), VersionTLCP >> 8, VersionTLCP & 0xff, 0, 1, 1}
	for name, alter := range map[string]func(flight []byte) []byte{
		"change-cipher-spec-of-value-2": func(b []byte) []byte { b[len(b)-1] = 2; return b },
		"application-data-before-change-cipher-spec": func(b []byte) []byte {
			data := append([]byte{byte(recordTypeApplicationData), VersionTLCP >> 8, VersionTLCP & 0xff, 0, byte(len(misSecret))}, misSecret...)
			return append(append(b[:len(b)-len(ccs):len(b)-len(ccs)], data...), ccs...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := loadPKI(t)
			scfg, ccfg := p.serverConfig(), p.clientConfig()
			c1, c2 := tcpPair(t)
			deadline := time.Now().Add(testwait.Bound(10 * time.Second))
			c1.SetDeadline(deadline)
			c2.SetDeadline(deadline)
			cli, srv := Client(c1, ccfg), Server(c2, scfg)
			defer cli.Close()
			defer srv.Close()
			ccfg.testHandshakeOut = func(msg []byte) []byte {
				if msg[0] == typeFinished {
					// The flight ends with the ChangeCipherSpec; the
					// Finished follows under the new keys.
					cli.outMu.Lock()
					defer cli.outMu.Unlock()
					buf := cli.core.Flight.Room(len(misSecret) + recordHeaderLen)
					if !bytes.HasSuffix(buf, ccs) {
						t.Error("the flight does not end with a ChangeCipherSpec")
						return msg
					}
					cli.core.Flight.Set(alter(buf))
				}
				return msg
			}
			wantUnexpectedMessage(t, srv, cli)
		})
	}
}

// wantUnexpectedMessage runs the handshake of honest against bad, whose
// flight a test altered, and requires honest to fail it with
// unexpected_message; a handshake that completes is reported with what
// bad's next write then delivers.
func wantUnexpectedMessage(t *testing.T, honest, bad *Conn) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- bad.Handshake() }()
	herr := honest.Handshake()
	if herr == nil {
		go bad.Write([]byte(misSecret))
		b := make([]byte, 64)
		n, err := honest.Read(b)
		t.Fatalf("handshake completed despite the altered flight; then read %q, %v", b[:n], err)
	}
	if a, ok := alertOf(herr); !ok || a != AlertUnexpectedMessage {
		t.Fatalf("honest side: %v, want unexpected_message", herr)
	}
	bad.Close()
	<-errc
}
