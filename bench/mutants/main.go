// Command mutants checks that the tests catch the bugs that matter. It
// applies each mutant of a curated list of security-relevant bugs (a
// Finished check removed, a record limit off by one, a forged header let
// through...), one at a time, and runs the tests meant to catch it; every
// mutant must make them fail. Most mutants share one build, in which the
// environment switches each on (schema.go); the others are applied alone
// to a scratch copy of the module. With
// -j (default 3), that many copies test mutants at once: many tests wait
// on timeouts, which the other copies' builds and tests fill. The test
// binaries are all built in one more copy, never changed, the mutant
// given as an overlay: the packages it does not change are compiled once
// for all the copies.
//
// Mutants are exact search/replace strings on source lines: when the code
// moves and a search string is no longer found exactly once, the run stops
// with an error, so that the list is updated rather than silently testing
// nothing. The selected tests must pass on the unmutated copy (a test
// failing for another reason would otherwise pass for a caught mutant):
// these baselines run first, the mutants as the jobs are free of them,
// and a failed one fails the run; a mutant that does not compile is an
// error too.
//
// Usage, from the module root (.ci/run runs it):
//
//	go run ./bench/mutants [-v] [-only regexp] [-j N] [-check] [-alone] [-null]
//
// The tests run with GMPROXY_TEST_WAIT=0.3 (unless the environment sets
// it): their waits for what should happen soon are shortened
// (internal/testwait), since a mutant that stops the awaited event costs
// the whole wait; the baselines run so too.
//
// It prints one line per mutant and "caught X of Y", and exits non-zero
// when a mutant survives (its tests pass three times) or the list is
// stale; a mutant caught only on a rerun is named as a timing-dependent
// test.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// mutant is one deliberate bug and the tests that must catch it.
type mutant struct {
	name     string
	file     string // relative to the module root
	old, new string // exact text; old must occur exactly once in file
	run      string // -test.run filter of the tests of file's package, or "./pkg:filter" for another package's
}

// perMutant bounds one mutant's test run; a mutant that makes a test hang
// fails by this timeout (the test binary panics), which counts as caught
// but costs the time: keep the tests' own waits bounded.
const perMutant = 120 * time.Second

// reruns is how many more times a surviving mutant's tests run.
const reruns = 2

// testWait is the scale of the tests' waits (GMPROXY_TEST_WAIT) unless
// the environment sets one.
const testWait = "0.3"

var mutants = []mutant{
	// ---- tlcp ----
	{"tlcp: Finished verify_data not checked", "tlcp/handshake_server.go",
		"if subtle.ConstantTimeCompare(want, fin.verifyData) != 1 {", "if false && subtle.ConstantTimeCompare(want, fin.verifyData) != 1 {",
		"TestMisbehavingPeer"},
	{"tlcp: client CertificateVerify not checked", "tlcp/handshake_server.go",
		"if verifySM2(pub, digest, cv.signature) {", "if true || verifySM2(pub, digest, cv.signature) {",
		"TestMisbehavingPeer"},
	{"tlcp: ServerKeyExchange signature not checked", "tlcp/key_agreement.go",
		"if !verifySM2(ka.serverSign.PublicKey, signed, sig) {", "if false && !verifySM2(ka.serverSign.PublicKey, signed, sig) {",
		"TestMisbehavingPeer"},
	{"tlcp: every client skips the ServerKeyExchange signature as the load generator does", "tlcp/handshake_client.go",
		"loadGen: cfg.InsecureLoadGenerator}", "loadGen: true}",
		"TestMisbehavingPeer"},
	{"tlcp: plaintext limit off by one (2^14+1 accepted)", "tlcp/conn.go",
		"if len(data) > maxPlaintext {\n\t\tc.sendAlert(AlertRecordOverflow)", "if len(data) > maxPlaintext+1 {\n\t\tc.sendAlert(AlertRecordOverflow)",
		"TestMisbehavingPeer"},
	{"tlcp: CBC MAC not checked", "tlcp/record.go",
		"if subtle.ConstantTimeByteEq(good, 0xff)&macOK != 1 {", "if subtle.ConstantTimeByteEq(good, 0xff)&(macOK|1) != 1 {",
		"TestMisbehavingPeer"},
	{"tlcp: record version not checked", "tlcp/conn.go",
		"okTLS := first && !c.isClient", "okTLS := true || first && !c.isClient",
		"TestMisbehavingPeer"},
	{"tlcp: CBC padding bytes not checked", "tlcp/record.go",
		"good &^= inPad & (p[len(p)-i] ^ last)", "good &^= inPad & (p[len(p)-i] ^ last) & 0",
		"TestMisbehavingPeer"},
	{"tlcp: client certificate chain not verified", "tlcp/handshake_server.go",
		"chains, encFailed, err = verifyClientChainsKeyed(hs.chainKey, certs, enc, cfg.ClientCAs, cfg.time())\n\t\tif err != nil {", "chains, encFailed, err = verifyClientChainsKeyed(hs.chainKey, certs, enc, cfg.ClientCAs, cfg.time())\n\t\tif false && err != nil {",
		"TestWrongCA|TestWrongKeyUsage"},
	{"tlcp: session lifetime ignored", "tlcp/handshake_server.go",
		"if now.Sub(created) > cfg.lifetime() || now.Before(created.Add(-time.Minute)) {", "if false && now.Sub(created) > cfg.lifetime() || now.Before(created.Add(-time.Minute)) {",
		"TestTicketEvents"},

	{"tlcp: a session resumes under another site's signing certificate", "tlcp/handshake_server.go",
		"!asciifold.Equal(s.serverName, hs.hello.serverName) || !bytes.Equal(s.serverCert, h[:])", "!asciifold.Equal(s.serverName, hs.hello.serverName) || false && !bytes.Equal(s.serverCert, h[:])",
		"TestSessionBoundToIdentity"},
	{"tlcp: a session without client certificates resumes where they are required", "tlcp/handshake_server.go",
		"if hs.clientAuth.requires() && len(s.certs) == 0 {", "if false && hs.clientAuth.requires() && len(s.certs) == 0 {",
		"TestTicketEvents"},
	{"tlcp: a resumed session's client chain not verified against today's CAs", "tlcp/handshake_server.go",
		"chains, _, err := verifyClientChainsKeyed(key, certs, enc, cfg.ClientCAs, cfg.time())\n\tif err != nil {", "chains, _, err := verifyClientChainsKeyed(key, certs, enc, cfg.ClientCAs, cfg.time())\n\tif false && err != nil {",
		"TestResumptionReverifiesClientCerts"},

	{"tlcp: a client accepts a server signing certificate that does not verify", "tlcp/handshake_client.go",
		"if err != nil {\n\t\treturn nil, from, until, wrapErr(certAlert(err), \"server signing certificate does not verify\", err)", "if false && err != nil {\n\t\treturn nil, from, until, wrapErr(certAlert(err), \"server signing certificate does not verify\", err)",
		"TestServerNameMismatch"},
	{"tlcp: a client accepts a server encryption certificate that does not verify", "tlcp/handshake_client.go",
		"encChains, err := verifyChain(enc, others, cfg.RootCAs, \"\", cfg.time(), smx509.ExtKeyUsageServerAuth)", "encChains, err := chains, error(nil)",
		"TestMisbehavingPeer"},

	{"tlcp: empty records not bounded", "tlcp/conn.go",
		"if c.useless > c.config.maxEmpty() {", "if false && c.useless > c.config.maxEmpty() {",
		"TestEmptyRecordsBounded|TestMisbehavingPeer"},
	{"tlcp: warning alerts not bounded", "tlcp/conn.go",
		"return c.uselessRecord(\"warning alerts and empty records\")", "return nil",
		"TestMisbehavingPeer"},
	{"tlcp: a warning alert restarts the count of empty records", "tlcp/conn.go",
		"if typ != recordTypeAlert && (typ != recordTypeApplicationData || len(data) > 0) {", "if typ != recordTypeApplicationData || len(data) > 0 {",
		"TestMisbehavingPeer"},
	{"tlcp: application data inside a handshake message left pending in the reader's buffer", "tlcp/conn.go",
		"if len(c.core.Input) != 0 {\n\t\tc.sendAlert(AlertUnexpectedMessage)", "if false && len(c.core.Input) != 0 {\n\t\tc.sendAlert(AlertUnexpectedMessage)",
		"TestMisbehavingPeer"},
	{"tlcp: any record taken for the ChangeCipherSpec", "tlcp/conn.go",
		"for !c.ccsRead {", "for range 1 {",
		"TestChangeCipherSpecReplacedByWarning"},
	{"tlcp: renegotiation attempts not bounded", "tlcp/conn.go",
		"if c.renegotiationRefusals > maxRenegotiationRefusals {", "if false && c.renegotiationRefusals > maxRenegotiationRefusals {",
		"TestRenegotiationRefused"},
	{"tlcp: handshake message size not bounded", "tlcp/conn.go",
		"if n > maxHandshake {", "if n > 4*maxHandshake {",
		"TestMalformedClientHello"},
	{"tlcp: ECDHE without the client's encryption certificate", "tlcp/handshake_server.go",
		"return errorf(AlertHandshakeFailure, \"ECDHE needs the client's encryption certificate as the second certificate\")", "_ = 0",
		"TestMisbehavingPeer"},

	// ---- tls13sm ----
	{"tls13sm: an encryption certificate authenticates its holder", "tls13sm/auth.go",
		"if ku := certs[0].KeyUsage; ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 {", "if ku := certs[0].KeyUsage; false && ku&smx509.KeyUsageDigitalSignature == 0 {",
		"TestEncryptionCertificateDoesNotAuthenticate"},
	{"tls13sm: Finished verify_data not checked", "tls13sm/handshake_tls13.go",
		"if !hmac.Equal(want, fin.verifyData) {", "if false && !hmac.Equal(want, fin.verifyData) {",
		"TestMisbehavingPeer"},
	{"tls13sm: every client skips CertificateVerify as the load generator does", "tls13sm/handshake_client_tls13.go",
		"hs.transcriptHash(), \"CertificateVerify\", hs.config.InsecureLoadGenerator)", "hs.transcriptHash(), \"CertificateVerify\", true)",
		"TestMisbehavingPeer"},
	{"tls13sm: PSK binder not checked", "tls13sm/handshake_server_tls13.go",
		"if !hmac.Equal(want, h.pskBinders[i]) {", "if false && !hmac.Equal(want, h.pskBinders[i]) {",
		"TestMisbehavingPeer"},
	{"tls13sm: CertificateVerify not checked", "tls13sm/handshake_tls13.go",
		"if err := verifyCertificateVerifyWith(ks, pub, sigContext, th, cv.signature); err != nil {", "if err := verifyCertificateVerifyWith(ks, pub, sigContext, th, cv.signature); false && err != nil {",
		"TestMisbehavingPeer"},
	{"tls13sm: peer certificate chain not verified", "tls13sm/auth.go",
		"chains, err = certs[0].Verify(opts)\n\t\tif err != nil {", "chains, err = certs[0].Verify(opts)\n\t\tif false && err != nil {",
		"TestMisbehavingPeer|TestTicketClientAuthBinding"},
	{"tls13sm: SM4-CCM tag not checked", "tls13sm/ccm.go",
		"if subtle.ConstantTimeCompare(c.mac[:], tag[:]) != 1 {", "if false && subtle.ConstantTimeCompare(c.mac[:], tag[:]) != 1 {",
		"TestCCM"},
	{"tls13sm: inner plaintext limit off by one (2^14+1 accepted)", "tls13sm/conn.go",
		"if len(plain) > maxPlaintext+1 {", "if len(plain) > maxPlaintext+2 {",
		"TestMisbehavingPeer"},
	{"tls13sm: padding not counted in the inner plaintext limit", "tls13sm/conn.go",
		"if len(plain) > maxPlaintext+1 {", "if i := len(plain) - 1; i > maxPlaintext && plain[i] != 0 {",
		"TestMisbehavingPeer"},
	{"tls13sm: an alert between the records of a handshake message taken", "tls13sm/conn.go",
		"\t\tif len(c.core.Hand) != 0 {\n\t\t\treturn c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, \"alert inside", "\t\tif false {\n\t\t\treturn c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, \"alert inside",
		"TestMisbehavingPeer"},
	{"tls13sm: unsolicited EncryptedExtensions accepted", "tls13sm/handshake_client_tls13.go",
		"if ee.unknownExtensions || ee.serverNameAck", "if false && ee.unknownExtensions || ee.serverNameAck",
		"TestMisbehavingPeer"},
	{"tls13sm: ticket expiry ignored", "tls13sm/handshake_server_tls13.go",
		"if age < -maxTicketAgeSkew || age > life || age > hs.config.ticketLifetime() || sessionAge", "if age < -maxTicketAgeSkew || false && age > life || false && age > hs.config.ticketLifetime() || false && sessionAge",
		"TestOnTicket|TestTicket"},

	{"tls13sm: a ticket resumes on another site", "tls13sm/handshake_server_tls13.go",
		"if ss.site != site {", "if false && ss.site != site {",
		"TestTicketBoundToSite"},
	{"tls13sm: a ticket resumes after its client CA is removed", "tls13sm/ticket_binding.go",
		"if err != nil || len(chains) == 0 {\n\t\treturn peerChains{}, false, false", "if false && (err != nil || len(chains) == 0) {\n\t\treturn peerChains{}, false, false",
		"TestTicketClientAuthBinding"},
	{"tls13sm: a ticket's client outside today's client policy resumes", "tls13sm/handshake_server_tls13.go",
		"if r := hs.clientPolicyRejects(&ss.client, now); r != \"\" {", "if r := hs.clientPolicyRejects(&ss.client, now); false && r != \"\" {",
		"TestTicketClientPolicy"},
	{"tls13sm: obfuscated ticket age not checked", "tls13sm/handshake_server_tls13.go",
		"if d := clientAge - age; d > maxTicketAgeSkew || d < -maxTicketAgeSkew {", "if d := clientAge - age; false && (d > maxTicketAgeSkew || d < -maxTicketAgeSkew) {",
		"TestTicketAgeMismatchFallsBackToFull"},

	{"tls13sm: record size not bounded", "tls13sm/conn.go",
		"if n > maxCiphertext || (c.in.aead == nil && n > maxPlaintext) {", "if n > 4*maxCiphertext {",
		"TestNegativeHandshakes|TestMisbehavingPeer"},
	{"tls13sm: records without content not bounded", "tls13sm/conn.go",
		"if c.useless > maxUselessRecords {", "if false && c.useless > maxUselessRecords {",
		"TestMisbehavingPeer"},
	{"tls13sm: KeyUpdate messages without data not bounded", "tls13sm/conn.go",
		"if c.keyUpdatesNoApp > maxKeyUpdatesNoApp {", "if false && c.keyUpdatesNoApp > maxKeyUpdatesNoApp {",
		"TestKeyUpdateFloodRefused"},
	{"tls13sm: handshake message size not bounded", "tls13sm/conn.go",
		"if n > maxHandshakeMsg {\n\t\treturn nil, c.in.setErrorLocked", "if n > 4*maxHandshakeMsg {\n\t\treturn nil, c.in.setErrorLocked",
		"TestNegativeHandshakes"},
	{"tls13sm: PSK identities tried not bounded", "tls13sm/handshake_server_tls13.go",
		"if i >= maxPSKIdentities {\n\t\t\tbreak", "if false && i >= maxPSKIdentities {\n\t\t\tbreak",
		"TestPSKIdentitiesBounded"},
	{"tls13sm: certificate chain length not bounded", "tls13sm/auth.go",
		"if len(raw) > maxCertChain {", "if len(raw) > 100*maxCertChain {",
		"TestMisbehavingPeer"},

	// ---- frontdoor ----
	{"frontdoor: a Handshake caller's Conn gives back on Close what Serve never took", "frontdoor/server.go",
		"obs: s.obs, listener: cfg.Name, start: start}", "obs: s.obs, srv: s, listener: cfg.Name, start: start}",
		"TestHandshakeConnCloseGivesNothingBack"},
	{"frontdoor: a Serve connection's Close gives back nothing", "frontdoor/server.go",
		"c.srv, c.cl = s, cl", "c.cl = cl",
		"TestServerGaugesReturnToZero|TestServerPerClientConnections"},
	{"frontdoor: a first flight the sniffer refused closed without an alert", "frontdoor/server.go",
		"if desc, ok := sniffAlert(err); ok {", "if desc, ok := sniffAlert(err); false && ok {",
		"TestMalformedHelloGetsAlert"},
	{"frontdoor: WaitHandshakes lets go of a connection before its handler took it", "frontdoor/server.go",
		"\tc.unsettled.Store(true) // s.wg's count passes to c (Settled)", "\ts.wg.Done()",
		"TestWaitHandshakesUntilSettled"},
	{"h1server: ServeConnCounted reports before the server counts the connection", "internal/h1server/server.go",
		"\tok := s.track(cc)\n\tif counted != nil {\n\t\tcounted()\n\t}", "\tif counted != nil {\n\t\tcounted()\n\t}\n\tok := s.track(cc)",
		"TestServeConnCounted"},
	{"h1server: a pooled connection starts out in the state its last use ended in", "internal/h1server/conn.go",
		"\tc.state.Store(stateNew) // a pooled conn ended in another state\n", "",
		"TestServeConnCounted|TestNewConnStartsNew"},
	{"frontdoor: handshake_timeout not applied", "frontdoor/server.go",
		"raw.SetDeadline(deadline)", "raw.SetDeadline(deadline.Add(time.Hour))",
		"TestServerHandshakeDeadline"},
	{"frontdoor: a refused connection at max_handshakes never frees its slot", "frontdoor/server.go",
		"s.handshaking.Add(-1)\n\t\ts.clients.release(cl, true, true)\n\t\ts.refuse(raw, name, RefuseMaxHandshakes)", "s.clients.release(cl, true, true)\n\t\ts.refuse(raw, name, RefuseMaxHandshakes)",
		"TestServerGaugesReturnToZero"},
	{"frontdoor: max_handshakes_per_client not enforced", "frontdoor/limits.go",
		"case cfg.MaxHandshakesPerClient > 0 && c.handshakes >= cfg.MaxHandshakesPerClient:", "case false:",
		"TestServerPerClientHandshakes"},
	{"frontdoor: max_connections_per_client not enforced", "frontdoor/limits.go",
		"case cfg.MaxConnsPerClient > 0 && c.conns >= cfg.MaxConnsPerClient:", "case false:",
		"TestServerPerClientConnections"},
	{"frontdoor: pending hellos not charged to max_handshake_bytes", "frontdoor/sniff.go",
		"if !s.budget.take(c - cap(s.buf)) {", "if false && !s.budget.take(c - cap(s.buf)) {",
		"TestServerHandshakeBytesBound"},
	{"frontdoor: max_connections not enforced", "frontdoor/server.go",
		"if cfg.MaxConns > 0 && n > int64(cfg.MaxConns) {", "if false && cfg.MaxConns > 0 && n > int64(cfg.MaxConns) {",
		"TestServerMax"},

	{"frontdoor: a key operation's wait outlives the handshake deadline", "frontdoor/deadline.go",
		"c.timer = time.AfterFunc(d, c.expire)", "c.timer = time.AfterFunc(d+time.Hour, c.expire)",
		"TestServeHandshakeDeadlineEndsKeyWait"},
	{"frontdoor: the handshake context's Err and Done disagree", "frontdoor/deadline.go",
		"c.expire()\n\treturn context.DeadlineExceeded", "return context.DeadlineExceeded",
		"TestDeadlineContext"},
	{"frontdoor: a ClientHello's declared length not bounded", "frontdoor/sniff.go",
		"if l > maxHelloBytes {\n\t\t\t\treturn s, errHelloTooLarge", "if l > 256*maxHelloBytes {\n\t\t\t\treturn s, errHelloTooLarge",
		"TestSniffDeclaredLengthTooLarge"},

	// ---- keyserver ----
	{"keyserver: a request too large for a frame fails the shared connection", "keyserver/client.go",
		"if frameSize(keyID, payload) > MaxFrame {", "if false && frameSize(keyID, payload) > MaxFrame {",
		"TestOversizedRequestFailsAlone"},
	{"keyserver: an open connection keeps the grant a reload took from its certificate", "keyserver/server.go",
		"if p := s.policy.Load(); p != pol {", "if p := s.policy.Load(); false && p != pol {",
		"TestReloadReidentifiesOpenConnections"},
	{"keyserver: an open connection outlives its client certificate", "keyserver/server.go",
		"case cert != nil && time.Now().After(notAfter):", "case false && cert != nil && time.Now().After(notAfter):",
		"TestExpiredCertificateEndsAccess"},
	{"keyserver: a removed client's refused request not audited", "keyserver/server.go",
		"s.finish(client, request{op: Op(typ), keyName: \"unknown\", code: CodeForbidden}, 0)", "",
		"TestRemovedClientRefusalAudited"},
	{"keyserver: a frame buffered without a fresh write deadline", "keyserver/protocol.go",
		"w.c.SetWriteDeadline(deadline)\n\t\tw.bw.Write(h[:])", "w.bw.Write(h[:])",
		"TestFrameWriter"},
	{"keyserver: a key agreement answer of the wrong length believed", "keyserver/remotekey.go",
		"if err == nil && len(out) != keyLen {", "if false && err == nil && len(out) != keyLen {",
		"TestRemoteKeyAgreementLengthChecked"},
	{"keyserver: a remote signature not verified", "keyserver/remotekey.go",
		"if !sm2.VerifyASN1(k.pub, e, sig) {", "if false && !sm2.VerifyASN1(k.pub, e, sig) {",
		"TestRemoteSignatureVerified"},
	{"keyserver: a request written past its operation's deadline", "keyserver/client.go",
		"if d, ok := ctx.Deadline(); ok && d.Before(deadline) {", "if d, ok := ctx.Deadline(); false && ok && d.Before(deadline) {",
		"TestStalledWriteBoundedByTimeout"},
	{"keyserver: an unverified client certificate identifies a client", "keyserver/server.go",
		"if len(st.PeerCertificates) == 0 || len(st.VerifiedChains) == 0 {", "if len(st.PeerCertificates) == 0 {",
		"TestUnverifiedCertificateRefused"},
	{"keyserver: an open connection not verified against reloaded client CAs", "keyserver/server.go",
		"if cert != nil && !p.verifies(chain) {", "if false && cert != nil && !p.verifies(chain) {",
		"TestReloadedClientCAsCutOpenConnections"},
	{"keyserver: a client uses a key not granted to it", "keyserver/server.go",
		"if !cp.allow[r.key] {", "if false && !cp.allow[r.key] {",
		"TestAllowList"},
	{"keyserver: a key used outside its role", "keyserver/server.go",
		"if !r.key.Roles.allows(op) {", "if false && !r.key.Roles.allows(op) {",
		"TestRoleEnforced"},
	{"tlcp client: a cached session offered whatever the current trust settings", "tlcp/handshake_client.go",
		"return slices.Contains(hs.config.cipherSuites(), s.cipherSuite) && hs.trusted(s)", "return slices.Contains(hs.config.cipherSuites(), s.cipherSuite)",
		"TestClientResumesOnlyTrustedSessions|TestUpstreamSessionAfterVerificationReload"},
	{"tlcp client: a session verified against other roots not verified again", "tlcp/handshake_client.go",
		"\tif s.roots == cfg.RootCAs {\n\t\treturn true\n\t}", "\tif s.roots == cfg.RootCAs || true {\n\t\treturn true\n\t}",
		"TestClientResumesOnlyTrustedSessions"},
	{"tlcp server: a session ID kept after the connection sent a fatal alert", "tlcp/conn.go",
		"\tc.forgetSession()\n\treturn c.out.setErr(&AlertError{Alert: a})", "\treturn c.out.setErr(&AlertError{Alert: a})",
		"TestFatalAlertInvalidatesSessionID"},
	{"tlcp server: a session ID kept after the connection received a fatal alert", "tlcp/conn.go",
		"\t\tc.forgetSession()\n\t\treturn c.in.setErr(&AlertError{Alert: a, Remote: true})", "\t\treturn c.in.setErr(&AlertError{Alert: a, Remote: true})",
		"TestFatalAlertInvalidatesSessionID"},
	{"tls13sm client: a cached ticket offered whatever the current trust settings", "tls13sm/handshake_client_tls13.go",
		"\tif !hs.trusted(cs) {\n\t\treturn\n\t}", "",
		"TestClientResumesOnlyTrustedSessions|TestUpstreamSessionAfterVerificationReload"},
	{"tls13sm client: a session verified against other roots not verified again", "tls13sm/handshake_client_tls13.go",
		"\tif t.roots == cfg.RootCAs {\n\t\treturn true\n\t}", "\tif t.roots == cfg.RootCAs || true {\n\t\treturn true\n\t}",
		"TestClientResumesOnlyTrustedSessions"},
	{"tls13sm server: a ticket issued on resumption restarts the session's clock", "tls13sm/handshake_server_tls13.go",
		"\t\tss.authAt = hs.session.authAt\n", "",
		"TestRenewedTicketKeepsSessionStart"},
	{"tls13sm server: the session's age not checked", "tls13sm/handshake_server_tls13.go",
		" || sessionAge > hs.config.ticketLifetime() {", " || sessionAge < 0 {",
		"TestSessionAgeCheckedAfterLifetimeShrinks"},
	{"tls13sm server: a ticket resumed without the client chain the application needs", "tls13sm/handshake_server_tls13.go",
		"if !ok || (ss.client.presented && !cached && hs.config.ResumeNeedsClientChain) {", "if !ok {",
		"TestResumeNeedsClientChain"},
	{"daemon: identity headers do not make tickets need the client chain", "internal/daemon/engines.go",
		"ResumeNeedsClientChain: forwardsClientCert(b.site),", "",
		"TestResumedIdentityHeadersAcrossInstances"},
	{"daemon: random ticket keys kept 12 rotations", "internal/daemon/build.go",
		"keep := rot + life\n", "keep := 12 * rot\n",
		"TestTicketKeysDroppedWithTheirTickets"},
	{"ticket: keys past their lifetime kept until the next rotation", "internal/ticket/ticket.go",
		"if n := len(r.keys); n > 1 && now.Sub(r.keys[n-1].Created) >= r.lifetime {", "if n := len(r.keys); false && n > 1 && now.Sub(r.keys[n-1].Created) >= r.lifetime {",
		"TestRotatorDropsKeysPastTheirLifetime"},
	{"proxy: a Host that names no host as a site could forwarded", "proxy/handler.go",
		"case r.Host != \"\" && !ValidAuthority(r.Host):", "case false && r.Host != \"\" && !ValidAuthority(r.Host):",
		"TestAbsoluteFormAuthorityValidated|TestHostWithInvalidPortRefused|TestHostListRefused|TestH2InvalidAuthorityRefused"},
	{"proxy: a Host port not checked for digits", "proxy/hygiene.go",
		"if port[i] < '0' || port[i] > '9' {", "if false && port[i] < '0' || port[i] > '9' && false {",
		"TestHostWithInvalidPortRefused"},
	{"proxy: a comma taken in a Host", "proxy/hygiene.go",
		"c == '-' || c == '.' || c == '_') {", "c == '-' || c == '.' || c == '_' || c == ',') {",
		"TestHostListRefused"},
	{"proxy: path parameters may route a request past a route", "proxy/handler.go",
		"case strings.IndexByte(r.URL.Path, ';') >= 0 && s.match(", "case false && strings.IndexByte(r.URL.Path, ';') >= 0 && s.match(",
		"TestPathParametersDoNotPassDenyRoute"},
	{"proxy: segment parameters kept when routing without them", "proxy/path.go",
		"\t\t\tseg = seg[:i]\n", "\t\t\t_ = i\n",
		"TestPathParametersDoNotPassDenyRoute"},
	{"proxy: every Connection option walks the header", "proxy/reverseproxy.go",
		"if n++; n <= maxFoldOptions {", "if n++; n <= maxFoldOptions || true {",
		"TestConnectionOptionsCostLinear"},
	{"proxy: a backend status outside 100-599 passed to the client", "proxy/reverseproxy.go",
		"if err == nil && (res.StatusCode < 100 || res.StatusCode > 599) {", "if false && err == nil && (res.StatusCode < 100 || res.StatusCode > 599) {",
		"TestStatusOutOfRangeIs502"},
	{"h1head: Fill drops a Connection field that says close", "internal/h1head/response.go",
		"\tres.Header = h.fs.header(h.text, nil)\n", "\tres.Header = h.fs.header(h.text, nil)\n\tif res.Close && res.ProtoMinor == 1 {\n\t\tdelete(res.Header, \"Connection\")\n\t}\n",
		"TestResponseHead"},
	{"proxy: an idle TLCP/TLS 1.3-SM connection with buffered records reused", "proxy/alive_sock.go",
		"if b, ok := c.(interface{ Buffered() int }); ok && b.Buffered() > 0 {", "if b, ok := c.(interface{ Buffered() int }); false && ok && b.Buffered() > 0 {",
		"TestSMUnsolicitedResponseNotReused"},
	{"proxy: time spent writing to a slow client counted as the backend's silence", "proxy/timeouts.go",
		"\tif !b.reading.Load() {\n", "\tif false {\n",
		"TestSlowClientDoesNotChargeBackend"},
	{"tls13sm server: a ticket's client identity outlives an expired CA of its chain", "tls13sm/handshake_server_tls13.go",
		"leafHash: leafHash(cm.certificates[0]), notAfter: unixTime(notAfter),", "leafHash: leafHash(cm.certificates[0]), notAfter: unixTime(certs[0].NotAfter),",
		"TestResumptionEndsWithTheChain"},
	{"proxy: a health probe whose body stalls or is cut counts as passed", "proxy/healthchecks.go",
		"\tif berr != nil {\n\t\treturn fmt.Errorf(\"body: %w\", berr)\n\t}\n", "\t_ = berr\n",
		"TestHealthProbeNeedsItsWholeBody"},
	{"proxy: a 101 passes the backend's hop-by-hop fields", "proxy/streaming.go",
		"\tremoveHopByHop(hdr)\n\thdr[\"Connection\"], hdr[\"Upgrade\"] = []string{\"Upgrade\"}, upgrade\n", "\t_ = upgrade\n",
		"TestUpgradeResponseHopByHopRemoved"},
	{"clientshare: an admission does not bump its slot's version", "internal/clientshare/clientshare.go",
		"if !t.bump(s, tag) {", "if tagOf(t.id(s).Load()) != tag {",
		"TestReclaimLosesToAnAdmission"},
	{"clientshare: a slot claimed for a client already in the window kept", "internal/clientshare/clientshare.go",
		"if s := t.holder(tag, start); s >= 0 && s != free {", "if s := t.holder(tag, start); false && s >= 0 && s != free {",
		"TestOneSlotPerClient"},
	{"clientshare: a second slot claimed for a client not given back", "internal/clientshare/clientshare.go",
		"\t\t\tt.id(free).CompareAndSwap(word, 0)\n", "",
		"TestOneSlotPerClient"},
	{"keyserver: a client's rate not limited", "keyserver/server.go",
		"if c := cp.state.rate(time.Now()); c != CodeOK {", "if c := cp.state.rate(time.Now()); false && c != CodeOK {",
		"TestRateLimit"},
	{"keyserver: refused requests not charged to the client's rate", "keyserver/server.go",
		"if c := cp.state.rate(time.Now()); c != CodeOK {", "if c := CodeRateLimited; r.op != 0 && len(body) >= 32 && p.keys[[32]byte(body[:32])] != nil && cp.allow[p.keys[[32]byte(body[:32])]] && cp.state.rate(time.Now()) != CodeOK {",
		"TestEveryRequestCharged"},
	{"keyserver: pings charged to the client's rate", "keyserver/server.go",
		"\t\treturn r\n\tcase OpSign, OpDecrypt, OpKeyAgreement:", "\t\tcp.state.rate(time.Now())\n\t\treturn r\n\tcase OpSign, OpDecrypt, OpKeyAgreement:",
		"TestPingNotCharged"},
	{"keyserver: a forbidden key's refusal names the key", "keyserver/server.go",
		"refuse(CodeForbidden, \"this client may not use this key\")", "refuse(CodeForbidden, \"client \"+cp.Name+\" may not use key \"+r.key.Name)",
		"TestEveryRequestCharged"},
	{"keyserver: handshakes not bounded in all", "keyserver/server.go",
		"if s.handshakes >= min(", "if s.handshakes < 0 && s.handshakes >= min(",
		"TestHandshakeBound"},
	{"keyserver: handshakes not bounded per address", "keyserver/server.go",
		"if addr.IsValid() && s.byAddr[addr] >= ", "if !addr.IsValid() && s.byAddr[addr] >= ",
		"TestHandshakeBound"},
	{"keyserver: an identified connection still counted as a handshake", "keyserver/server.go",
		"\tcp, pol, chain, notAfter := s.greet(c, br, to.handshake)\n\tidentified()\n", "\tcp, pol, chain, notAfter := s.greet(c, br, to.handshake)\n\tif cp == nil {\n\t\tidentified()\n\t}\n",
		"TestHandshakeBound"},
	{"keyserver: a lowered max_connections leaves the newest connections open", "keyserver/policy.go",
		"\t\t\tc.SetReadDeadline(time.Unix(1, 0))\n", "",
		"TestLoweredMaxConnsShedsNewest|TestRemovedClientConnectionsClosed"},
	{"keyserver: a lowered max_connections sheds the oldest connections", "keyserver/policy.go",
		"s.shedLocked(s.open[min(l.MaxConns, len(s.open)):], shedLowered)", "s.shedLocked(s.open[:max(len(s.open)-l.MaxConns, 0)], shedLowered)",
		"TestLoweredMaxConnsShedsNewest"},
	{"keyserver: a removed client's connections left open until their next request", "keyserver/policy.go",
		"\t\t\tst.shedAll()\n", "",
		"TestRemovedClientConnectionsClosed"},
	{"keyserver: a removed client's state kept", "keyserver/policy.go",
		"\t\t\tdelete(states, k)\n", "\t\t\t_ = k\n",
		"TestRemovedClientConnectionsClosed"},
	{"keyserver: a refused policy still changes client limits", "keyserver/policy.go",
		"limits = append(limits, staged{st, c.Limits})", "limits = append(limits, staged{st, c.Limits}); st.setLimits(c.Limits)",
		"TestRefusedPolicyChangesNoLimits"},
	{"keyserver: every refused connection logged", "keyserver/server.go",
		"if now.Sub(l.last[reason]) < time.Second {", "if now.Sub(l.last[reason]) < 0 {",
		"TestRefusalLog"},
	{"gmproxy keyserver: max_handshakes_per_address not passed on", "cmd/gmproxy/keyserver.go",
		"MaxHandshakesPerAddr: cfg.MaxHandshakesPerAddress}", "}",
		"TestKeyServerHandshakeLimits"},
	{"gmproxy keyserver: max_handshakes not passed on", "cmd/gmproxy/keyserver.go",
		"MaxHandshakes: cfg.MaxHandshakes, ", "",
		"TestKeyServerHandshakeLimits"},
	{"keyserver: a grant's subject not matched", "keyserver/policy.go",
		"if (c.Subject == \"\" || c.Subject == subject) && (c.spki == \"\" || c.spki == spki) {", "if (c.Subject == \"\" || len(subject) >= 0) && (c.spki == \"\" || c.spki == spki) {",
		"TestAllowList|TestOperations|TestSetPolicy"},
	{"keyserver: a grant's public key hash not matched", "keyserver/policy.go",
		"if (c.Subject == \"\" || c.Subject == subject) && (c.spki == \"\" || c.spki == spki) {", "if (c.Subject == \"\" || c.Subject == subject) && (c.spki == \"\" || len(spki) >= 0) {",
		"TestAllowList|TestOperations|TestSetPolicy"},

	{"keyserver: a client's operations in flight not bounded", "keyserver/policy.go",
		"if n := s.inFlight.Add(1); limit > 0 && n > int64(limit) {", "if n := s.inFlight.Add(1); false && limit > 0 && n > int64(limit) {",
		"TestInFlightBound"},
	{"keyserver: connections not bounded", "keyserver/server.go",
		"if len(s.conns) >= maxConns {", "if false && len(s.conns) >= maxConns {",
		"TestConnectionBound"},
	{"keyserver: frame length not bounded", "keyserver/protocol.go",
		"if n < headerLen-4 || n > MaxFrame {", "if n < headerLen-4 || n > 64*MaxFrame {",
		"TestFrameReaderBound"},
	{"keyserver: a TLS client takes the Local grant of its name", "keyserver/policy.go",
		"\tif cert == nil {\n\t\treturn p.local\n\t}", "\tif cert == nil || cert != nil {\n\t\treturn p.local\n\t}",
		"TestLocalGrantNotForTLSClients"},
	{"keyserver: a subject matched as pkix.Name.String prints it", "keyserver/policy.go",
		"subject := SubjectString(cert)", "subject := cert.Subject.String()",
		"TestSubjectMatchesEveryAttribute"},
	{"keyserver: an in-flight slot given back before its answer is written", "keyserver/server.go",
		"werr := w.write(id, byte(r.code), out, nil)\n\t\t\tstate.release()", "state.release()\n\t\t\twerr := w.write(id, byte(r.code), out, nil)",
		"TestUnreadAnswersHoldTheirSlots"},

	// ---- sm2sign ----
	{"sm2sign: s without (1+d)⁻¹", "internal/sm2sign/sm2sign.go",
		"sn := kn.Sub(rd, n).Mul(k.inv, n)", "sn := kn.Sub(rd, n)",
		"TestSignVerifies|TestSignMatchesReference"},
	{"sm2sign: the nonce does not depend on the digest", "internal/sm2sign/sm2sign.go",
		"copy(sc.in[scalarLen:], digest)", "",
		"TestSignNonceIsHedged"},
	{"sm2sign: a failing random source signs anyway", "internal/sm2sign/sm2sign.go",
		"if _, err := io.ReadFull(rand, sc.in[:scalarLen]); err != nil {\n\t\treturn nil, err", "if _, err := io.ReadFull(rand, sc.in[:scalarLen]); err != nil {\n\t\t_ = err",
		"TestSignNonceIsHedged"},

	// ---- proxy ----
	{"proxy: a WebSocket tunnel counted only once the connection is hijacked", "proxy/streaming.go",
		"\tif !s.p.trackAdd(backConn) {\n\t\ts.errorResponse(rs, r, http.StatusServiceUnavailable", "\tif false {\n\t\ts.errorResponse(rs, r, http.StatusServiceUnavailable",
		"TestShutdownWaitsForUpgradeInFlight"},
	{"proxy: a 101 that could not be written still makes a tunnel", "proxy/streaming.go",
		"\tif err = res.Write(brw); err == nil {", "\tif err := res.Write(brw); err == nil {",
		"TestUpgrade101WriteFails"},
	{"proxy: a drained Shutdown still takes new tunnels", "proxy/proxy.go",
		"p.closed, p.drained = true, true", "p.drained = true",
		"TestShutdownTracking"},
	{"proxy: a PROXY header accepted from an untrusted source", "proxy/proxyproto.go",
		"if !l.trusted(c.RemoteAddr()) {", "if false && !l.trusted(c.RemoteAddr()) {",
		"TestProxyProtocolListener"},
	{"proxy: forged X-Ssl-Client-I-Dn not stripped", "proxy/hygiene.go",
		"HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,", "HeaderClientSDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,",
		"TestForgedHeaders"},
	{"proxy: forged X-Ssl-Client-Cert not stripped", "proxy/hygiene.go",
		"HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,", "HeaderClientSerial,\n\tHeaderForwarded,",
		"TestForgedHeaders"},
	{"proxy: forged Forwarded not stripped", "proxy/hygiene.go",
		"HeaderClientCert,\n\tHeaderForwarded,\n}", "HeaderClientCert,\n}",
		"TestForgedHeaders"},
	{"proxy: a forged X_Ssl_Client_Verify ('_' for '-') copied to the backend", "proxy/reverseproxy.go",
		"if !(strings.IndexByte(k, '_') >= 0 && isSetHeaderName(k)) {", "if true {",
		"TestForgedHeaderSpellings"},
	{"proxy: a hop-by-hop request field copied to the backend", "proxy/reverseproxy.go",
		"\tfor _, k := range hopHeaders {\n\t\tm[k] = copyDropped\n\t}\n", "",
		"TestInboundRequestKeptAsSent"},
	{"proxy: a header value of the client overwritten for the backend", "proxy/handler.go",
		"store[0] = v\n\th[k] = store", "if old := h[k]; len(old) == 1 {\n\t\told[0] = v\n\t\treturn\n\t}\n\tstore[0] = v\n\th[k] = store",
		"TestInboundRequestKeptAsSent"},
	{"proxy: a client's malformed or cut request body charged to the target", "proxy/reverseproxy.go",
		"if berr := body.readError(); berr != nil {", "if berr := body.readError(); false && berr != nil {",
		"TestClientBodyErrorNotTargetFailure"},
	{"proxy: a cut request body answered as if the upload arrived", "proxy/timeouts.go",
		"panic(http.ErrAbortHandler)\n\t}", "return\n\t}",
		"TestClientBodyErrorNotTargetFailure"},
	{"proxy: a client gone mid-body logged as 502", "proxy/handler.go",
		"if rs.w.status == 0 && !rs.clientGone {", "if rs.w.status == 0 {",
		"TestClientBodyErrorNotTargetFailure"},
	{"proxy: a client's body broken during a full-duplex response charged to the target", "proxy/reverseproxy.go",
		"if berr := rs.body.readError(); berr != nil {", "if berr := rs.body.readError(); false && berr != nil {",
		"TestClientBodyErrorFullDuplex"},
	{"proxy: a client's body stalled during a full-duplex response charged to the target", "proxy/reverseproxy.go",
		"if rs.body != nil && rs.body.timedOut.Load() {\n\t\t\t// A full-duplex", "if false && rs.body != nil && rs.body.timedOut.Load() {\n\t\t\t// A full-duplex",
		"TestClientBodyErrorFullDuplex"},
	{"proxy: a plain CONNECT forwarded to the target", "proxy/handler.go",
		"case r.Method == http.MethodConnect && !isExtendedConnect(r):", "case false && r.Method == http.MethodConnect && !isExtendedConnect(r):",
		"TestConnectRefused"},
	{"proxy: the connection kept open after a refused HTTP/1.1 CONNECT", "proxy/handler.go",
		"(code == http.StatusRequestTimeout || code == http.StatusMisdirectedRequest || r.Method == http.MethodConnect) && r.ProtoMajor == 1", "(code == http.StatusRequestTimeout || code == http.StatusMisdirectedRequest) && r.ProtoMajor == 1",
		"TestConnectRefused"},
	{"proxy: :protocol on a request other than CONNECT forwarded", "proxy/handler.go",
		"case r.Header[\":protocol\"] != nil && r.Method != http.MethodConnect:", "case false && r.Header[\":protocol\"] != nil && r.Method != http.MethodConnect:",
		"TestProtocolPseudoHeaderOnlyOnConnect"},
	{"proxy: an extended CONNECT's 2xx without a switch taken as the tunnel", "proxy/streaming.go",
		"if res.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resUp, proto) || !ok {", "if !ok {",
		"TestExtendedConnectNeedsTheSwitch"},
	{"proxy: an extended CONNECT's switch to another protocol taken as the tunnel", "proxy/streaming.go",
		"|| !strings.EqualFold(resUp, proto) || !ok {", "|| !ok {",
		"TestExtendedConnectNeedsTheSwitch"},
	{"proxy: an extended CONNECT's refusal hidden behind a 502", "proxy/streaming.go",
		"if sc := res.StatusCode; sc != http.StatusSwitchingProtocols && (sc < 200 || sc > 299) {", "if false {",
		"TestExtendedConnectNeedsTheSwitch"},
	{"proxy: an extended CONNECT's Sec-WebSocket-Accept not checked", "proxy/streaming.go",
		"if wantAccept != \"\" && res.Header.Get(\"Sec-Websocket-Accept\") != wantAccept {", "if wantAccept == \"unchecked\" {",
		"TestExtendedConnectNeedsTheSwitch"},
	{"proxy: Sec-WebSocket-Accept computed with another GUID", "proxy/streaming.go",
		"key + \"258EAFA5-E914-47DA-95CA-C5AB0DC85B11\"", "key + \"258EAFA5-E914-47DA-95CA-C5AB0DC85B12\"",
		"TestWebSocketOverH2ExtendedConnect"},
	{"proxy: an Upgrade request with a body tunnelled", "proxy/reverseproxy.go",
		"if upType = upgradeType(in); upType != \"\" && !hasBody(r) {", "if upType = upgradeType(in); upType != \"\" {",
		"TestUpgradeRequestWithBody"},
	{"proxy: POST treated as idempotent", "proxy/reverseproxy.go",
		"http.MethodPut, http.MethodDelete:", "http.MethodPut, http.MethodDelete, http.MethodPost:",
		"TestRetryRules"},
	{"proxy: MaxFails < 0 (off) treated as 1", "proxy/upstreams.go",
		"if u.passive.MaxFails == 0 {", "if u.passive.MaxFails <= 0 {",
		"TestPassiveHealthOff"},

	{"proxy: POST on a pooled connection the backend closed", "proxy/h1client.go",
		"if !alive(pc.c) {", "if false && !alive(pc.c) {",
		"TestH1ClientStalePooledConn"},
	{"proxy: a GET on a pooled connection with stray bytes unread", "proxy/h1client.go",
		"if !alive(pc.c) {", "if !alive(pc.c) && false {",
		"TestH1ClientStrayBytesOnIdleConnection"},
	{"proxy: a connection switched by a 101 back in the pool", "proxy/h1client.go",
		" && res.StatusCode != http.StatusSwitchingProtocols && ", " && ",
		"TestH1ClientSwitchedConnectionNotPooled"},
	{"proxy: a connection kept after an HTTP/1.0 response", "proxy/h1client.go",
		" && res.ProtoAtLeast(1, 1)\n", "\n",
		"TestH1ClientHTTP10ResponseNotPooled"},
	{"proxy: a Host with a final dot names no site (past the 421 rule)", "proxy/handler.go",
		"return strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, \"[\"), \"]\"), \".\")", "return strings.TrimSuffix(strings.TrimPrefix(h, \"[\"), \"]\")",
		"TestMisdirectedToClientAuthSite"},
	{"proxy: a configured server name's final dot kept", "proxy/handler.go",
		"s.names = append(s.names, frontdoor.NormalizeName(n))", "s.names = append(s.names, strings.ToLower(n))",
		"TestMisdirectedSiteNames"},
	{"proxy: a wildcard of the connection's site hides another site's exact name", "proxy/proxy.go",
		"if !strings.HasPrefix(n, \"*.\") && asciifold.Equal(n, host) {", "if false && asciifold.Equal(n, host) {",
		"TestMisdirectedSiteNames"},
	{"conf: an SM2-only client CA file gives TLS no pool (crypto/tls: the system roots)", "conf/material.go",
		"\treturn p, n\n}", "\tif n == 0 {\n\t\treturn nil, 0\n\t}\n\treturn p, n\n}",
		"TestMaterial|TestSM2OnlyClientCAWithTLS"},
	{"proxy: routes match the path with its dot segments", "proxy/handler.go",
		"normalPath(r.URL.Path); changed {", "normalPath(r.URL.Path); false && changed {",
		"TestRoutesMatchNormalPath"},
	{"proxy: a backend's forbidden response trailer passed on", "proxy/reverseproxy.go",
		"\tif !validTrailer(k) || rt.resOps.names(k) {\n\t\treturn false", "\tif rt.resOps.names(k) {\n\t\treturn false",
		"TestResponseTrailersFiltered"},
	{"proxy: request body longer than its Content-Length sent", "proxy/h1client.go",
		"if k > 0 {\n\t\treturn fmt.Errorf", "if false && k > 0 {\n\t\treturn fmt.Errorf",
		"TestH1ClientBodyErrors"},
	{"proxy: a blocked request body write not interrupted by the request's end", "proxy/h1client.go",
		"\t\tc.SetDeadline(aLongTimeAgo)\n\t}", "\t\tc.SetReadDeadline(aLongTimeAgo)\n\t}",
		"TestH1ClientCancelBodyWrite"},
	{"proxy: the response header timeout left on a body still to come", "proxy/h1client.go",
		"if !(res.Body == http.NoBody || res.Body == nil && int64(pc.br.Buffered()) >= res.ContentLength) {", "if false {",
		"TestH1ClientHeaderTimeoutSpansHeadOnly"},
	{"proxy: a small body sent again after http.Request.Write sent it with the head", "proxy/h1client.go",
		"if err == nil && req.Body != nil && !sent {", "if err == nil && req.Body != nil && (!sent || sent) {",
		"TestH1ClientBodyWithHeadWrittenByNetHTTP"},
	{"proxy: a tunnel's idle time measured on the wall clock", "proxy/streaming.go",
		"\t\t\tlast.Store(monoclock.Now())\n\t\t\tw, werr := dst.Write(buf[:nr])\n\t\t\tif w > 0 {\n\t\t\t\t// A write to a slow reader moves data until it\n\t\t\t\t// returns: the idle time counts from its end.\n\t\t\t\tlast.Store(monoclock.Now())",
		"\t\t\tlast.Store(time.Now().UnixNano())\n\t\t\tw, werr := dst.Write(buf[:nr])\n\t\t\tif w > 0 {\n\t\t\t\tlast.Store(time.Now().UnixNano())",
		"TestTunnelTimesOnMonotonicClock"},
	{"proxy: passive failures and cool-downs timed on the wall clock", "proxy/upstreams.go",
		"\tnow := monoclock.Now()\n\tt.failMu.Lock()", "\tnow := time.Now().UnixNano()\n\tt.failMu.Lock()",
		"TestPassiveStateOnMonotonicClock"},
	{"proxy: the age of an upstream header deadline read on the wall clock", "proxy/h1client.go",
		"if n := monoclock.Now(); pc.hdrArmed == 0", "if n := time.Now().UnixNano() + 0*monoclock.Now(); pc.hdrArmed == 0",
		"TestH1ClientDeadlinesOnMonotonicClock"},
	{"proxy: a header-timeout deadline cleared for a body taken as still set", "proxy/h1client.go",
		"\t\tpc.hdrArmed = 0\n", "\n",
		"TestH1ClientHeaderTimeoutKept"},
	{"proxy: the upstream exchange of a request h1server serves not interrupted when its client goes", "proxy/h1client.go",
		"h1server.OnClientGone(ctx, interrupt)", "h1server.OnClientGone(ctx, func() {})",
		"TestClientGoneCancelsUpstream"},
	{"proxy: send_timeout not armed when a request starts (a 100 Continue goes out without it)", "proxy/timeouts.go",
		"\t\t}\n\t}\n\tsd.arm()\n}", "\t\t}\n\t}\n}",
		"TestSendTimeoutKeepAlive|TestSendDeadlineKept"},
	{"proxy: a backend response with hop-by-hop fields passed on as it came", "proxy/h1client.go",
		"if _, ok := h.Get(k); ok {\n\t\t\treturn true", "if _, ok := h.Get(k); ok && k == \"\" {\n\t\t\treturn true",
		"TestPassOnHeader"},
	{"proxy: backend fields passed on although the route edits response fields", "proxy/reverseproxy.go",
		"if !rt.resOps.empty() || r.ProtoMajor != 1", "if r.ProtoMajor != 1",
		"TestPassOnHeader"},
	{"h1server: WriteFields takes a head with a Connection field", "internal/h1server/response.go",
		"[...]string{\"Connection\", \"Transfer-Encoding\", \"Trailer\"}", "[...]string{\"Transfer-Encoding\", \"Trailer\"}",
		"TestWriteFields"},
	{"h1server: WriteFields sniffs a Content-Type for a head that has none", "internal/h1server/response.go",
		"w.hasCT = true // no sniffed type", "_, w.hasCT = f.Get(\"Content-Type\") // no sniffed type",
		"TestWriteFields"},
	{"proxy: an untyped backend response gets a sniffed Content-Type", "proxy/reverseproxy.go",
		"\t\th[\"Content-Type\"] = nil", "\t\t_ = h",
		"TestUntypedResponseNotSniffed"},
	{"proxy: a Content-Type the route removed is sniffed on a fixed response", "proxy/handler.go",
		"\t\tnoSniff(h)\n", "",
		"TestRemovedContentTypeNotSniffed"},
	{"proxy: a Content-Type the route removed is sniffed", "proxy/reverseproxy.go",
		"\trt.resOps.apply(dst)\n\t}\n\tnoSniff(dst)", "\trt.resOps.apply(dst)\n\t}",
		"TestRemovedContentTypeNotSniffed"},
	{"proxy: a target's response head bounded at 1 MiB whatever max_response_header_bytes says", "proxy/httptransport.go",
		"MaxResponseHeaderBytes: max(intOr(tc.MaxResponseHeaderBytes, DefaultMaxResponseHeaderBytes), 1<<10),", "MaxResponseHeaderBytes: 1 << 20,",
		"TestResponseHeadBounded"},
	{"proxy: the field lines of a target's response head not counted", "proxy/reverseproxy.go",
		"if n := responseFields(res); n > u.maxFields {", "if n := responseFields(res); n > u.maxFields && n < 0 {",
		"TestResponseHeadBounded"},
	{"proxy: a head passed on as it came not counted", "proxy/reverseproxy.go",
		"\t\treturn h.Len()\n", "\t\treturn 0\n",
		"TestResponseHeadBounded"},
	{"proxy: writes to a target without a deadline (write_timeout)", "proxy/sendtimeout.go",
		"w.c.SetWriteDeadline(time.Now().Add(w.d + w.d/8))", "w.c.SetWriteDeadline(time.Time{})",
		"TestH1ClientWriteTimeout|TestUpstreamWriteTimeout"},
	{"proxy: a write_timeout deadline set once, not moved before later writes", "proxy/sendtimeout.go",
		"if a := w.armed.Load(); !force && a != 0 && t-a < int64(w.d/8) {", "if a := w.armed.Load(); !force && a != 0 {",
		"TestWriteTimeoutNotChargedWithClientPauses"},
	{"proxy: a whole Transport buffer written under one write_timeout deadline", "proxy/sendtimeout.go",
		"\t\t\tk = min(k, sendChunk)\n", "",
		"TestWriteTimeoutKeepsSteadyProgress"},
	{"proxy: net/http's Transport writes to HTTP/1.1 targets without write_timeout", "proxy/httptransport.go",
		"\t\t\tt.DialContext = sendTimeouts(t.DialContext, wt)", "\t\t\t_ = wt",
		"TestUpstreamWriteTimeout"},
	{"proxy: no write_timeout watch for HTTP/2 targets' flow control", "proxy/reverseproxy.go",
		"if body != nil && u.writeTimeout > 0 && u.speaksH2 {", "if false {",
		"TestUpstreamWriteTimeout"},
	{"proxy: a client pausing its body counted as the target not taking it (HTTP/2)", "proxy/sendwatch.go",
		"case w.reading.Load():", "case false:",
		"TestUpstreamWriteTimeout"},
	{"proxy: a target that stopped taking the body answered 502, not 504", "proxy/reverseproxy.go",
		"if sw.stalled.Load() {", "if sw.stalled.Load() && false {",
		"TestUpstreamWriteTimeout"},
	{"proxy: the write_timeout watch's context ended with the attempt, under the response", "proxy/reverseproxy.go",
		"rs.send = sw // its context is the response's", "sw.end()",
		"TestUpstreamWriteTimeout"},
	{"proxy: h1Client's http.ReadResponse fallback loses the Connection field saying close", "proxy/h1client.go",
		"\t\tres.Header[\"Connection\"] = v\n", "\t\t_ = v\n",
		"TestConnectionCloseOptionsRemovedEverywhere"},
	{"proxy: h1Client scans only the buffered part of a head", "proxy/h1client.go",
		"pc.lr.scan = &pc.scan", "pc.lr.scan = nil",
		"TestConnectionCloseOptionsRemovedEverywhere"},
	{"proxy: the Transport's connections keep no Connection field", "proxy/httptransport.go",
		"if scansHeads(uc.Protocol) {\n\t\t// The Transport speaks", "if scansHeads(uc.Protocol) && false {\n\t\t// The Transport speaks",
		"TestConnectionCloseOptionsRemovedEverywhere"},
	{"proxy: an informational head's Connection field taken for the final head's", "proxy/connscan.go",
		"code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {", "code < 0 {",
		"TestConnectionCloseOptionsRemovedEverywhere"},
	{"h1head: a folded Connection field's continuation lost", "internal/h1head/headscan.go",
		"\t\t\ts.field = append(s.field, bytes.Trim(line, \" \\t\")...)", "",
		"TestHeadScan"},
	{"proxy: a client's True-Client-IP, X-Original-URL... passed to the backend", "proxy/handler.go",
		"if !trusted && rs.trustedOnly {", "if false && rs.trustedOnly {",
		"TestTrustedOnlyHeadersFromClients"},
	{"proxy: a trusted proxy's X-Forwarded-Port, True-Client-IP... removed", "proxy/handler.go",
		"if !trusted && rs.trustedOnly {", "if rs.trustedOnly {",
		"TestTrustedOnlyHeadersFromClients"},
	{"proxy: trusted-only headers not noted when copied", "proxy/reverseproxy.go",
		"rs.trustedOnly = true", "rs.trustedOnly = false",
		"TestTrustedOnlyHeadersFromClients"},
	{"proxy: trusted-only headers spelled with '_' passed on", "proxy/hygiene.go",
		"for _, k := range TrustedOnlyRequestHeaders {\n\t\tm[foldName(k)] = true", "for _, k := range TrustedOnlyRequestHeaders {\n\t\t_ = k",
		"TestTrustedOnlyHeadersFromClients"},
	{"proxy: h1Client takes a response with Content-Length and Transfer-Encoding", "proxy/h1client.go",
		"if pc.scan.LengthAndCoding() && res.ProtoAtLeast(1, 1) {", "if false {",
		"TestLengthAndCodingRefused"},
	{"proxy: the Transport's response with Content-Length and Transfer-Encoding taken", "proxy/connscan.go",
		"\tif both && res.ProtoAtLeast(1, 1) {", "\tif both && false {",
		"TestLengthAndCodingRefused"},
	{"h1head: a Transfer-Encoding field not noted by the head scan", "internal/h1head/headscan.go",
		"s.coding = true", "s.coding = false",
		"TestHeadScan"},
	{"validity: a chain's window ends with its leaf, not with an earlier-expiring CA", "internal/validity/validity.go",
		"if c.NotAfter.Before(until) {", "if c.NotAfter.Before(until) && c == chain[0] {",
		"TestNarrow"},
	{"keyserver: SetServerLimits leaves the bounds as they were", "keyserver/server.go",
		"\ts.MaxConns, s.MaxHandshakes, s.MaxHandshakesPerAddr = l.MaxConns, l.MaxHandshakes, l.MaxHandshakesPerAddr\n", "",
		"TestServerLimitsChangeWhileServing"},
	{"keyserver: SetServerLimits leaves the timeouts as they were", "keyserver/server.go",
		"\ts.IdleTimeout, s.HandshakeTimeout = l.IdleTimeout, l.HandshakeTimeout\n", "",
		"TestServerLimitsChangeWhileServing"},
	{"gmproxy keyserver: SIGHUP leaves the limits as they were", "cmd/gmproxy/keyserver.go",
		"\tks.SetServerLimits(keyServerLimits(cfg))\n\tif changed", "\tif changed",
		"TestKeyServerReloadsLimits"},
	{"proxy: an HTTP/2 client that stops reading its connection holds it past send_timeout", "proxy/proxy.go",
		"\t\tWriteByteTimeout:     H2WriteByteTimeout(l),\n", "",
		"TestH2SendTimeoutClientNotReading"},
	{"daemon: an HTTP/2 client that stops reading its connection holds it past send_timeout", "internal/daemon/serve.go",
		"MaxReadFrameSize: proxy.H2MaxReadFrameSize, WriteByteTimeout: proxy.H2WriteByteTimeout(s.proxyLim)}", "MaxReadFrameSize: proxy.H2MaxReadFrameSize}",
		"TestH2SendTimeoutClientNotReading"},
	{"proxy: the tls and h2 protocols' HTTP/1.1 connections keep no Connection field", "proxy/httptransport.go",
		"return &scanConn{Conn: tc}, nil", "return tc, nil",
		"TestConnectionCloseOptionsRemovedOverTLS"},
	{"proxy: net/http's Transport makes the tls protocol's connections itself", "proxy/httptransport.go",
		"\t\tt.DialTLSContext = timedDial(ownTLS, connected)\n", "\t\t_ = ownTLS\n",
		"TestConnectionCloseOptionsRemovedOverTLS"},
	{"proxy: a WebSocket upgrade to a tls upstream offered h2", "proxy/httptransport.go",
		"if ctx.Value(http1Only{}) != nil {", "if false {",
		"TestTLSUpstreamUpgradeOverHTTP1"},
	{"proxy: a backend's trailer section not bounded", "proxy/reverseproxy.go",
		"if n := fieldCount(res.Trailer); n > u.maxFields {", "if n := fieldCount(res.Trailer); n > u.maxFields && false {",
		"TestResponseTrailerBounded"},
	{"frontdoor: a hello claiming a large record grows the buffer by 4 KiB, not to twice what was sent", "frontdoor/sniff.go",
		"\t\tc = 2 * have\n", "\t\tc = max(have+growStep, 2*have)\n",
		"TestHandshakeBytesPerHelloBound"},
	{"proxy: a tls or h2 hook's connection hidden from the Transport by the write_timeout wrapper", "proxy/httptransport.go",
		"\t\t\tif scansHeads(uc.Protocol) {\n\t\t\t\tt.DialTLSContext = sendTimeouts", "\t\t\tif true {\n\t\t\t\tt.DialTLSContext = sendTimeouts",
		"TestDialTLSHookKeepsHTTP2"},
	{"tls13sm: a server_name acknowledgement the client did not ask for accepted", "tls13sm/handshake_client_tls13.go",
		"ee.serverNameAck && hs.hello.serverName == \"\"", "false",
		"TestUnsolicitedServerNameAckRefused"},
	{"tls13sm: an extension EncryptedExtensions may not carry answered unsupported_extension", "tls13sm/handshake_client_tls13.go",
		"if ee.forbidden {", "if false {",
		"TestForbiddenExtensionInEncryptedExtensions"},
	{"tls13sm: a ClientHello without the extensions §9.2 requires served", "tls13sm/handshake_server_tls13.go",
		"case h.hasGroups != h.hasKeyShareExt:", "case false:",
		"TestMandatoryExtensionsChecked"},
	{"tls13sm: pre_shared_key without psk_key_exchange_modes served", "tls13sm/handshake_server_tls13.go",
		"case psk && len(h.pskModes) == 0:", "case false:",
		"TestMandatoryExtensionsChecked"},
	{"tls13sm: a second ClientHello that changed its random or ALPN served", "tls13sm/handshake_server_tls13.go",
		"if !sameClientHello(hs.hello, h2) {", "if h2.serverName != hs.hello.serverName {",
		"TestSecondClientHelloMustMatchFirst"},
	{"tls13sm: pre_shared_key not last answered decode_error", "tls13sm/handshake_server_tls13.go",
		"if hs.hello.pskNotLast {", "if false {",
		"TestPreSharedKeyNotLastAlert"},
	{"tls13sm: a ChangeCipherSpec between the records of a handshake message dropped", "tls13sm/conn.go",
		"len(c.core.Hand) != 0 || !c.isClient && !c.helloRead", "false",
		"TestChangeCipherSpecOutsideItsWindow"},
	{"tlcp: no shared ALPN protocol served without one", "tlcp/handshake_server.go",
		"if hs.sh.alpnProtocol == \"\" {", "if false {",
		"TestNoSharedALPNRefused"},
	{"tlcp: a client ends the connection on a HelloRequest", "tlcp/conn.go",
		"|| c.isClient && msg[0] == typeHelloRequest && len(msg) == 4 {", "{",
		"TestClientAnswersHelloRequestWithoutFatalAlert"},
	{"keyserver: a frame writer returns before the flush carrying its frame", "keyserver/protocol.go",
		"for w.gen == gen && w.err == nil {", "for w.gen == gen && w.err == nil && false {",
		"TestFrameWriterReturnsAfterItsFrameIsSent|TestUnreadAnswersHoldTheirSlots"},
	{"proxy: max_requests_per_client not enforced", "proxy/handler.go",
		"if !l.ClientRequests.acquire(ci.client, l.MaxRequestsPerClient) {", "if !l.ClientRequests.acquire(ci.client, l.MaxRequestsPerClient) && false {",
		"TestMaxRequestsPerClient"},
	{"proxy: a request's max_requests_per_client count never given back", "proxy/handler.go",
		"defer l.ClientRequests.release(ci.client)", "",
		"TestMaxRequestsPerClient"},
	{"daemon: max_requests_per_client counted per configuration, not per listener", "internal/daemon/serve.go",
		"MaxRequestsPerClient: lim.MaxRequestsPerClient, ClientRequests: &l.requests,", "MaxRequestsPerClient: lim.MaxRequestsPerClient,",
		"TestMaxRequestsPerClientAcrossReload"},
	{"daemon: max_requests_per_client not passed to the listener", "internal/daemon/build.go",
		"MaxRequestsPerClient: l.HTTP.MaxRequestsPerClient,", "",
		"TestMaxRequestsPerClientAcrossReload"},
	{"proxy: an opaque request target forwarded", "proxy/handler.go",
		"case u.Opaque != \"\":", "case false:",
		"TestOpaqueTargetRefused"},
	{"proxy: an asterisk-form target forwarded for any method", "proxy/handler.go",
		"if r.Method != http.MethodOptions {", "if false {",
		"TestAsteriskFormOnlyForOptions"},
	{"proxy: spaces and controls in a request target forwarded", "proxy/handler.go",
		"if c := r.RequestURI[i]; c <= ' ' || c == 0x7f {", "if c := r.RequestURI[i]; false && (c <= ' ' || c == 0x7f) {",
		"TestH2PathWithSpaceRefused"},
	{"proxy: a method that is not a token forwarded", "proxy/handler.go",
		"case !httpguts.ValidHeaderFieldName(r.Method):", "case !httpguts.ValidHeaderFieldName(r.Method) && false:",
		"TestH2MethodMustBeToken"},
	{"proxy: a request without a host forwarded without the site's", "proxy/handler.go",
		"\t\tr.Host = host\n\t}", "\t}",
		"TestMissingHostGetsSiteHost"},
	{"proxy: a request with no host to give the target forwarded", "proxy/handler.go",
		"case r.Host == \"\" && rt != nil && rt.up != nil:", "case false:",
		"TestMissingHostGetsSiteHost"},
	{"proxy: a client's Client-IP passed to the target", "proxy/hygiene.go",
		"\"Client-Ip\", \"Cluster-Client-Ip\",", "\"Cluster-Client-Ip\",",
		"TestClientAddressAndCertHeadersFromClientsRemoved"},
	{"proxy: a client's ssl_client_cert (Tomcat SSLValve) passed to the target", "proxy/hygiene.go",
		"\"Ssl-Client-Cert\", ", "",
		"TestClientAddressAndCertHeadersFromClientsRemoved"},
	{"supervisor: workers not given the key passwords of key_password_env", "cmd/gmproxy/supervisor.go",
		"cmd.Env = append(cmd.Env, conf.PasswordEnviron()...)", "",
		"TestWorkersTakeKeyPasswordFromEnv"},
	{"supervisor: admin.pprof not served in worker mode", "cmd/gmproxy/supervisor.go",
		"\t\tmetrics.MountPprof(mux)\n", "\t\t_ = metrics.MountPprof\n",
		"TestSupervisorPprofOnlyWhenOn|TestWorkersTakeKeyPasswordFromEnv"},
	{"supervisor: a worker's profiles not served through the supervisor", "cmd/gmproxy/supervisor.go",
		"mux.HandleFunc(\"GET /workers/{i}/debug/pprof/{what...}\", s.workerPprof)", "",
		"TestWorkersTakeKeyPasswordFromEnv"},
	{"supervisor: a worker profile's seconds not bounded", "cmd/gmproxy/supervisor.go",
		"|| sec > maxProfileSeconds {", "{",
		"TestWorkersTakeKeyPasswordFromEnv"},
	{"supervisor: a reload keeps the dead workers' series of removed routes", "cmd/gmproxy/supervisor.go",
		"s.retainSeries(configNames(next))", "",
		"TestWorkersReloadDropsRetiredSeries"},
	{"supervisor: retired series not filtered by the configuration's names", "cmd/gmproxy/supervisor_metrics.go",
		"if !keep(lp.GetName(), lp.GetValue()) {", "if !keep(lp.GetName(), lp.GetValue()) && false {",
		"TestRetiredSeriesFollowReload|TestWorkersReloadDropsRetiredSeries"},
	{"supervisor: a dead worker's per-client counts kept until its restart", "cmd/gmproxy/supervisor.go",
		"\t\ts.clientsTable.ClearWorker(p.index)\n", "",
		"TestDeadWorkerCountsClearedAtDeath|TestWorkersPerClientLimit"},
	{"supervisor: the workers share a port another process listens on with SO_REUSEPORT", "cmd/gmproxy/supervisor.go",
		"func portsFree(addrs []string) error {\n", "func portsFree(addrs []string) error {\n\treturn nil\n",
		"TestWorkersRefusePortTakenByAnother|TestWorkersReloadRefusesPortTakenByAnother"},
	{"supervisor: the network namespace's counters summed over the workers", "cmd/gmproxy/supervisor_metrics.go",
		"case t == dto.MetricType_COUNTER && namespaceCounters[name]:", "case t == dto.MetricType_COUNTER && namespaceCounters[name] && false:",
		"TestMergedNetworkCountersNotMultiplied"},
	{"supervisor: a reload refused before asking the workers not in /metrics", "cmd/gmproxy/supervisor.go",
		"s.reloadFailed = err != nil && !errors.As(err, &split)", "s.reloadFailed = false && err != nil && !errors.As(err, &split)",
		"TestWorkersRefusedReloadInMetrics"},
	{"supervisor: the workers' memory limit leaves no room for the shared tables", "cmd/gmproxy/supervisor.go",
		"return max(limit-shared, limit/2)", "return limit",
		"TestWorkerMemoryLimitLeavesSharedTables"},
	{"proxy: a connection served after a reload changed its site's client authentication", "proxy/proxy.go",
		"case s.clientAuth && s.clientAuthPolicy != ci.state.ClientAuthPolicy:", "case false:",
		"TestClientAuthPolicyChangedGets421"},
	{"proxy: a 421 leaves the HTTP/1.1 connection open", "proxy/handler.go",
		"|| code == http.StatusMisdirectedRequest ||", "||",
		"TestClientAuthPolicyChangedGets421"},
	{"proxy: a connection whose site a reload removed routed by Host", "proxy/proxy.go",
		"return p.sites[0], \"the connection was made for a site a reload removed or renamed\"", "return p.sites[0], \"\"",
		"TestMisdirectedToClientAuthSite"},
	{"frontdoor: a connection does not carry its site's client authentication", "frontdoor/server.go",
		"ps.Listener, ps.Site, ps.ClientAuthPolicy, ps.HandshakeStart = st.Listener, st.Site, st.ClientAuthPolicy, start", "ps.Listener, ps.Site, ps.HandshakeStart = st.Listener, st.Site, start",
		"TestServerTLSBySNI"},
	{"daemon: a site's client authentication not named for its connections", "internal/daemon/engines.go",
		"return s.ClientAuth.Mode + \":\" + hex.EncodeToString(tls13sm.CertificatesFingerprint(s.Material.ClientCAs))", "return s.ClientAuth.Mode + \":\" + hex.EncodeToString(nil)",
		"TestReloadRemovingClientCAReachesOpenConnections"},
	{"frontdoor: NAT64 clients counted as one /64", "frontdoor/limits.go",
		"if v4, ok := NAT64Client(ip); ok {", "if v4, ok := NAT64Client(ip); false && ok {",
		"TestNAT64ClientsCountedByTheirIPv4Address"},
	{"keyserver config: a file of several keys served with one entry's roles", "conf/keyservers.go",
		"if len(keys) > 1 {", "if false {",
		"TestKeyServerMultiKeyFileRefused"},
	{"keyserver: a handshake across a reload not verified under the new client CAs", "keyserver/server.go",
		"if cp != nil && cert != nil && !p.verifies(chain) {", "if false {",
		"TestHandshakeAcrossReloadVerifiedUnderNewCAs"},
	{"keyserver: a connection outlives its client's intermediate CA", "keyserver/server.go",
		"case cert != nil && time.Now().After(notAfter):", "case cert != nil && time.Now().After(cert.NotAfter) && !notAfter.IsZero():",
		"TestExpiredIntermediateEndsAccess"},
	{"keyserver client: an attempt takes the whole time with another endpoint up", "keyserver/client.go",
		"time.Now().Add(time.Until(dl)/2), errAttemptTimeout)", "time.Now().Add(time.Until(dl)), errAttemptTimeout)",
		"TestStalledEndpointFailsOver"},
	{"keyserver client: an endpoint that leaves an operation unanswered stays up", "keyserver/client.go",
		"(ctx.Err() == nil || errors.Is(err, errNoAnswer))", "ctx.Err() == nil",
		"TestStalledEndpointFailsOver"},
	{"tlcp: a key that cannot be used taken for a bad ciphertext", "tlcp/key_agreement.go",
		"if errors.Is(err, smkey.ErrKeyUnavailable) {", "if false {",
		"TestECCDecryptKeyUnavailable"},
	{"keyserver: a key server refusing a ciphertext reported as unavailable", "keyserver/remotekey.go",
		"if err != nil && !(errors.As(err, &ke) && ke.Code == CodeFailed) && !errors.Is(err, errRequestTooLarge) {", "if err != nil && (ke == nil || true) {",
		"TestRemoteDecryptUnavailableIsInternalError"},
	{"tlcp: a client takes a stream cut without close_notify for its end", "tlcp/conn.go",
		"if err == io.EOF && c.isClient {", "if false && err == io.EOF && c.isClient {",
		"TestClientTruncationIsUnexpectedEOF"},
	{"tls13sm: a client takes a stream cut without close_notify for its end", "tls13sm/conn.go",
		"if err == io.EOF && (!c.core.HandshakeComplete() || c.isClient) {", "if err == io.EOF && !c.core.HandshakeComplete() {",
		"TestClientTruncationIsUnexpectedEOF"},
	{"tls13sm: a client takes a plaintext alert under the handshake keys", "tls13sm/conn.go",
		"plainAlertOK := typ == recordTypeAlert && !c.isClient && !c.core.HandshakeComplete() && c.in.seq == 0", "plainAlertOK := typ == recordTypeAlert && !c.core.HandshakeComplete()",
		"TestClientRefusesPlaintextAlertUnderHandshakeKeys"},
	{"tlcp: a server's ticket lifetime hint lengthens the client's bound", "tlcp/handshake_client.go",
		"s.lifetime = min(hs.ticketLifetime, s.lifetime)", "s.lifetime = hs.ticketLifetime",
		"TestTicketLifetimeHintBoundedByClient"},
	{"daemon: upstream client sessions resumed under another client identity", "internal/daemon/dial.go",
		"\"tls13sm-client/\"+u.Name+\"/\"+presentedIdentity(m.ClientCert)", "\"tls13sm-client/\"+u.Name",
		"TestUpstreamClientIdentityFollowsReload"},
	{"proxy: a tunnel's half-close not passed through the head-scanning connection", "proxy/connscan.go",
		"func (c *scanConn) CloseWrite() error { return closeWriteOf(c.Conn) }", "func (c *scanConn) CloseWrite() error { return closeWriteOf(nil) }",
		"TestUpgradeTunnelClientHalfClose|TestExtendedConnectClientHalfClose"},
	{"proxy: extended CONNECT ignores the route's strip_prefix", "proxy/streaming.go",
		"rs.setURL(r, rt)\n\toutreq := rs.newOutgoing(r, rt, nil)", "rs.url = *r.URL\n\trs.url.Scheme = rt.up.scheme\n\toutreq := rs.newOutgoing(r, rt, nil)",
		"TestExtendedConnectRouteRewrites"},
	{"proxy: a route's host_header not applied", "proxy/reverseproxy.go",
		"if rt.host == hostFixed {\n\t\tout.Host = rt.hostValue", "if false {\n\t\tout.Host = rt.hostValue",
		"TestExtendedConnectRouteRewrites"},
	{"proxy: a stream's PROXY header names gmproxy's socket as the destination", "proxy/proxyproto.go",
		"if c.hdr != nil && !c.hdr.Local && c.hdr.Destination != nil {", "if false {",
		"TestStreamProxyHeaderDestination"},
	{"proxy: a request over an HTTP/2 target's header limit marks the target down", "proxy/reverseproxy.go",
		"if requestHeadersTooLarge(err) {", "if false && requestHeadersTooLarge(err) {",
		"TestH2TargetHeaderListLimit"},
	{"redisstore: a stored value read whole", "internal/sessionstore/redisstore/redisstore.go",
		"return c.GetRange(ctx, key, 0, MaxValue-1)", "return c.Get(ctx, key)",
		"TestStoredValueReadCapped"},
	{"redisstore: a reply go-redis cannot allocate ends the process", "internal/sessionstore/redisstore/redisstore.go",
		"\tif v := recover(); v != nil {\n\t\t*err = fmt.Errorf(\"%w (%v)\", errMalformed, v)", "\tif v := recover(); v != nil {\n\t\tpanic(v)",
		"TestRogueReplyIsAnError"},
	{"redisstore: an ACL without GETRANGE fails every lookup", "internal/sessionstore/redisstore/redisstore.go",
		"\tif s.refusedRange(err) {\n\t\tb, err = s.read(ctx, s.c, key).Bytes()\n\t}", "",
		"TestStoreWithACLUser"},
	{"proxy: the handler returns while the Transport still reads the client's body", "proxy/reverseproxy.go",
		"\t\tb.reading.Lock()\n\t}\n\tb.reading.Unlock()", "\t\treturn\n\t}\n\tb.reading.Unlock()",
		"TestHandlerDoneWaitsForBodyRead"},
	{"proxy: every target down refuses every request for the cool-down", "proxy/upstreams.go",
		"\treturn u.soonestBack(tried)\n}", "\treturn nil\n}",
		"TestLoneTargetTriedDuringCoolDown|TestBackupOnlyWhenPrimariesDown"},
	{"daemon: a route's retries ignored", "internal/daemon/proxycfg.go",
		"\t\trc.Retries = &rp", "\t\t_ = rp",
		"TestRouteRetriesApplied"},
	{"daemon: retry_non_idempotent ignored", "internal/daemon/proxycfg.go",
		"NonIdempotent: r.RetryNonIdempotent}", "NonIdempotent: false}",
		"TestRetryNonIdempotentApplied"},
	{"proxy: a cool-down inherited by a reload never reported over", "proxy/healthchecks.go",
		"\t\t\tu.reportCoolDownEnd(t, left)", "\t\t\t_ = left",
		"TestCoolDownEndReportedAfterReload"},
	{"conf: a target weight that overflows least_conn accepted", "conf/validate.go",
		"} else if t.Weight > balance.MaxWeight {", "} else if false {",
		"TestBadConfigs"},
	{"sessionstore: an idle instance's fleet key encrypts for three rotations", "internal/sessionstore/fleetkeys.go",
		"\t\t\tif s.epoch == ep-1 {\n\t\t\t\treturn s.keys\n\t\t\t}", "\t\t\tif true {\n\t\t\t\treturn s.keys\n\t\t\t}",
		"TestIdleFleetKeyEncryptsTwoRotationsAtMost"},
	{"daemon: a rewritten wrap key file ignored by a reload", "internal/daemon/fleet.go",
		"s.TicketKeys.WrapKeyFile, wrapKeysID(s.TicketKeys.WrapKeys), s.TicketRotation", "s.TicketKeys.WrapKeyFile, \"\", s.TicketRotation",
		"TestFleetReloadFollowsFileContents"},
	{"daemon: renewed store TLS files ignored by a reload", "internal/daemon/fleet.go",
		"\t\t\t\th.Write(b)\n", "\t\t\t\t_ = b\n",
		"TestFleetReloadFollowsFileContents"},
	{"sessionstore: the key set a reload replaced opens none of its tickets", "internal/sessionstore/fleetkeys.go",
		"\t\ts.keys = append(s.keys, f.prev...)", "\t\ts.keys = append(s.keys, f.prev[:0]...)",
		"TestReplacedFleetKeysOpenTheirTickets"},
	{"sessionstore: the replaced key set's tickets refused while the store has not answered", "internal/sessionstore/fleetkeys.go",
		"\t\t\treturn append(slices.Clip(fb), f.prev...)", "\t\t\treturn fb",
		"TestReplacedFleetKeysOpenTheirTickets"},
	{"sessionstore: the replaced key set's keys open tickets forever", "internal/sessionstore/fleetkeys.go",
		"return len(f.prev) > 0 && now.Before(f.prevUntil)", "return len(f.prev) > 0",
		"TestReplacedFleetKeysOpenTheirTickets"},
	{"sessionstore: the replaced key set's keys kept until the epoch turns", "internal/sessionstore/fleetkeys.go",
		"if s.prev && !f.prevLive(now) {", "if false {",
		"TestReplacedFleetKeysOpenTheirTickets"},
	{"daemon: a reload that changes the ticket rotation drops the fleet's ticket keys", "internal/daemon/fleet.go",
		"fc.Previous, fc.PreviousUntil = cur.Retiring()", "_, _ = cur.Retiring()",
		"TestFleetReloadKeepsOpeningTickets"},
	{"conf: a target's 503s counted as its failures by default", "conf/defaults.go",
		"\tp.CoolDown = DefaultPassiveCoolDown\n}", "\tp.CoolDown = DefaultPassiveCoolDown\n\tp.UnhealthyStatus = []int{503}\n}",
		"TestGoodConfigs"},
	{"proxy: an upstream's targets probed one after the other (each silent one delays the rest by a timeout)", "proxy/healthchecks.go",
		"sem := make(chan struct{}, maxProbesAtOnce)", "sem := make(chan struct{}, 1)",
		"TestActiveProbesRunAtOnce"},
	{"proxy: a target's early answer to an upload it reset lost (502, the target charged)", "proxy/h1client.go",
		"if pc.cw.err == nil || req.Body == nil || ctx.Err() != nil {", "if true {",
		"TestEarlyRejectionPassedOn"},
	{"proxy: a reset write's error raced against net/http's reading of the early answer", "proxy/connscan.go",
		"\t\ttime.Sleep(earlyAnswerWait)", "\t\ttime.Sleep(0)",
		"TestResetWriteErrorHeldBack"},
	{"sessionstore: another fleet's sealed ticket key (another key prefix) opens", "internal/sessionstore/fleetkeys.go",
		"string(pt[len(wrapLabel)+10:head]) != f.prefix {", "false {",
		"TestFleetKeysRefuseAnotherFleetsKey"},
	{"conf: a key_prefix of any length taken", "conf/sessionstore.go",
		"} else if len(st.KeyPrefix) > MaxKeyPrefix {", "} else if len(st.KeyPrefix) > 1<<20 {",
		"TestBadConfigs"},
	{"proxy: a tls or h2 hook's HTTP/1.1 connections not scanned (a Connection: close's named fields reach the client)", "proxy/httptransport.go",
		"} else if uc.DialTLSContext != nil && ownTLS == nil {", "} else if false {",
		"TestConnectionCloseOptionsRemovedOverTLS"},
	{"proxy: a hook's h2 *tls.Conn hidden from the Transport by the head scan", "proxy/connscan.go",
		"if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == \"h2\" {", "if tc, ok := c.(*tls.Conn); ok && tc == nil {",
		"TestDialTLSHookKeepsHTTP2"},
	{"sessionstore: a session ended with a fatal alert not announced to the fleet", "internal/sessionstore/ended.go",
		"\treturn b.Publish(ctx, endedChannel(t.prefix), msg)", "\t_, _ = b, msg\n\treturn nil",
		"./internal/sessionstore/redisstore:TestEndedSessionForgottenByTheFleet"},
	{"sessionstore: an announced ended session kept by the other instances", "internal/sessionstore/ended.go",
		"\t\t\t\tu.local.Delete(id)", "\t\t\t\t_, _ = u, id",
		"./internal/sessionstore/redisstore:TestEndedSessionForgottenByTheFleet"},
	{"sessionstore: an ended-session message opened without its label", "internal/sessionstore/ended.go",
		" || string(pt[:len(endedLabel)]) != endedLabel {", " {",
		"./internal/sessionstore/redisstore:TestEndedSessionForgottenByTheFleet"},
	{"sessionstore: oversized ended-session messages opened", "internal/sessionstore/ended.go",
		"\tif len(msg) > maxEnded {", "\tif false {",
		"./internal/sessionstore/redisstore:TestEndedSessionForgottenByTheFleet"},
	{"sessionstore: a cache that may have missed ended sessions kept", "internal/sessionstore/ended.go",
		"\t\tc.Clear()", "\t\t_ = c",
		"./internal/sessionstore/redisstore:TestEndedSessionForgottenByTheFleet"},
	{"redisstore: one address of a Cluster taken for a server", "internal/sessionstore/redisstore/redisstore.go",
		"\t\tIsClusterMode: o.Cluster,", "\t\tIsClusterMode: false,",
		"TestClusterThroughOneAddress"},
	{"redisstore: a resubscription does not report the messages it may have missed", "internal/sessionstore/redisstore/redisstore.go",
		"\t\t\t\t\tif !f.clean {\n\t\t\t\t\t\tf.lost()", "\t\t\t\t\tif false {\n\t\t\t\t\t\tf.lost()",
		"TestSubscriptionSurvivesARestart"},
	{"redisstore: a subscription's unanswered check never noticed (a silent drop, a failover's old master kept)", "internal/sessionstore/redisstore/redisstore.go",
		"\t\tif awaited != \"\" {\n\t\t\t// The last check", "\t\tif false {\n\t\t\t// The last check",
		"TestSubscriptionNoticesASilentDrop|TestSubscriptionFollowsASentinelFailover"},
	{"redisstore: a subscription checked with PING only (a Sentinel failover's old master kept)", "internal/sessionstore/redisstore/redisstore.go",
		"\tif time.Now().After(f.noProbe) {\n\t\tvar nonce", "\tif false {\n\t\tvar nonce",
		"TestSubscriptionFollowsASentinelFailover"},
	{"redisstore: a refused probe leaves the subscription unchecked (no PING)", "internal/sessionstore/redisstore/redisstore.go",
		"\tif f.noPing {\n\t\treturn \"\", nil\n\t}\n\tif err := ps.Ping(ctx)", "\tif true {\n\t\treturn \"\", nil\n\t}\n\tif err := ps.Ping(ctx)",
		"TestSubscriptionNoticesASilentDrop"},
	{"redisstore: the subscriptions' probes delivered as messages", "internal/sessionstore/redisstore/redisstore.go",
		"\t\t\t\tcase strings.HasPrefix(m.Payload, probePrefix):\n", "",
		"TestSubscriptionNoticesASilentDrop"},
	{"redisstore: stop leaves the subscription's read in progress", "internal/sessionstore/redisstore/redisstore.go",
		"\t\tif ps != nil {\n\t\t\tgo ps.Close()", "\t\tif false {\n\t\t\tgo ps.Close()",
		"TestSubscriptionSurvivesARestart"},
	{"redisstore: a refused PUBLISH counts as a store failure", "internal/sessionstore/redisstore/redisstore.go",
		"\tcase refused(err):\n\t\tif s.publishRefused.Swap(", "\tcase false:\n\t\tif s.publishRefused.Swap(",
		"TestEndedSessionsWithoutChannels"},
	{"shmstore: a worker's message never reaches the others", "internal/sessionstore/shmstore/broadcast.go",
		"\treturn s.t.publish(ctx, channel, msg)", "\t_, _ = channel, msg\n\treturn nil",
		"TestRing|TestSubscribe"},
	{"shmstore: a reader a ring behind not told it lost messages", "internal/sessionstore/shmstore/broadcast.go",
		"\tif count-seen > ringSlots {\n\t\tlost = true", "\tif count-seen > ringSlots {\n\t\tlost = false",
		"TestRing|TestSubscribe"},
	{"shmstore: a damaged ring entry read as a message", "internal/sessionstore/shmstore/broadcast.go",
		"\t\tif seq.Load() != n {\n\t\t\tlost = true\n\t\t\tcontinue\n\t\t}", "\t\t_ = seq",
		"TestRing"},
	{"shmstore: messages of other channels delivered", "internal/sessionstore/shmstore/broadcast.go",
		"\t\tcase ch == h:", "\t\tcase ch == h || true:",
		"TestRing"},
	{"daemon: the session cache not emptied after a broken subscription", "internal/daemon/sessions.go",
		"\ts.c.Clear()\n\ts.report()", "\ts.report()",
		"TestSessionStore$"},
	{"daemon: a reload that sets sessions.store.cluster keeps the old store", "internal/daemon/fleet.go",
		"st.MasterName, st.Cluster, st.Username", "st.MasterName, false, st.Username",
		"TestStoreIDNamesEverySetting"},
	{"conf: cluster with master_name accepted", "conf/sessionstore.go",
		"\t\tif st.Cluster && st.MasterName != \"\" {", "\t\tif false {",
		"TestBadConfigs"},
	{"sessioncache: Clear keeps the sessions", "internal/sessioncache/sessioncache.go",
		"\tfor c.head != none {\n\t\tc.remove(c.head)\n\t}", "",
		"TestClear"},
	{"sessionstore: ended sessions reach only the newest Tiered's cache", "internal/sessionstore/ended.go",
		"\t\tif len(ts) < maxTargets && (o.local != t.local || o.names != t.names) {", "\t\tif false {",
		"TestEndedReachesEveryCacheOfTheChannel"},
	{"sessionstore: Close leaves the subscriptions running", "internal/sessionstore/ended.go",
		"\t\twg.Go(f.stop)", "\t\t_ = f",
		"TestEndedReachesEveryCacheOfTheChannel"},
	{"sessionstore: a Tiered made after Close subscribes", "internal/sessionstore/ended.go",
		"\tif s.followClosed {\n\t\treturn\n\t}\n\tf := s.followers[channel]", "\tf := s.followers[channel]",
		"TestEndedReachesEveryCacheOfTheChannel"},
	{"redisstore: a closed Store's subscription retries for ever", "internal/sessionstore/redisstore/redisstore.go",
		"\t\tcase ctx.Err() != nil || errors.Is(err, redis.ErrClosed):", "\t\tcase ctx.Err() != nil:",
		"TestClosedStoreEndsSubscriptions"},
	{"redisstore: a refused subscription never tried again", "internal/sessionstore/redisstore/redisstore.go",
		"\t\t\tcase followRefused:\n\t\t\t\twait = f.refusedWait", "\t\t\tcase followRefused:\n\t\t\t\treturn",
		"TestRefusedChannelsTriedAgain"},
	{"redisstore: a refused PUBLISH never tried again", "internal/sessionstore/redisstore/redisstore.go",
		"\tif until := s.publishRefused.Load(); until != 0 && time.Now().UnixNano() < until {", "\tif s.publishRefused.Load() != 0 {",
		"TestRefusedChannelsTriedAgain"},
	{"redisstore: a refused PING taken for a broken subscription", "internal/sessionstore/redisstore/redisstore.go",
		"\t\tcase refused(err) && awaited == awaitPong:", "\t\tcase false && awaited == awaitPong:",
		"TestRefusedPingKeepsTheSubscription"},
	{"redisstore: stop waits for a dial in progress", "internal/sessionstore/redisstore/redisstore.go",
		"\t\t\tgo ps.Close()", "\t\t\tps.Close()",
		"TestStopDuringDial"},
	{"shmstore: a reader far behind reads every number up to the count", "internal/sessionstore/shmstore/broadcast.go",
		"\t\tlost = true\n\t\tseen = count - ringSlots", "\t\tlost = true",
		"TestDamagedRingCount"},
	{"shmstore: a damaged ring entry length read past its entry", "internal/sessionstore/shmstore/broadcast.go",
		"\t\tcase l > RingMax:\n\t\t\tlost = true // damaged", "\t\tcase false:",
		"TestRing"},
	{"h1head: a field name with spaces before its colon not taken for Content-Length", "internal/h1head/headscan.go",
		"\tname = bytes.TrimRight(name, \" \\t\")\n", "",
		"./proxy:TestLengthAndCodingRefused"},
	{"h1head: a 204 with a Content-Length parsed on the fast path", "internal/h1head/response.go",
		"\tcase (code/100 == 1 || code == http.StatusNoContent) && cl >= 0:", "\tcase false:",
		"./proxy:TestNoContentWithLengthNotReused"},
	{"proxy: a 204 announcing a body leaves its connection in gmproxy's pool", "proxy/h1client.go",
		"\t\tres.Close = true\n", "",
		"TestNoContentWithLengthNotReused"},
	{"proxy: a 204 announcing a body leaves its connection in the Transport's pool", "proxy/connscan.go",
		"\t\t\t\t// returned; the next read fails.\n\t\t\t\tc.Conn.Close()\n", "",
		"TestNoContentWithLengthNotReused"},
	{"proxy: an Upgrade tunnel's writes to the client not bounded by send_timeout", "proxy/streaming.go",
		"\tif d := s.p.limitsOf(rs.ci).SendTimeout; d > 0 {", "\tif d := s.p.limitsOf(rs.ci).SendTimeout; false && d > 0 {",
		"TestUpgradeTunnelSendTimeout"},
	{"proxy: an Upgrade tunnel bounded by the proxy's send_timeout, not its listener's", "proxy/streaming.go",
		"\tif d := s.p.limitsOf(rs.ci).SendTimeout; d > 0 {", "\tif d := s.p.limits.SendTimeout; d > 0 {",
		"TestUpgradeTunnelSendTimeoutOfListener"},
	{"proxy: a stream's writes to the client not bounded by idle_timeout", "proxy/tcpstream.go",
		"\tif s.idle > 0 {\n\t\t// A write to the client", "\tif false {\n\t\t// A write to the client",
		"TestStreamSlowReaderCut"},
	{"proxy: a tunnel's bounded client side hides its half-close", "proxy/streaming.go",
		"func (c *sendBounded) NetConn() net.Conn { return c.conn }", "func (c *sendBounded) netConn() net.Conn { return c.conn }",
		"TestTunnelTargetHalfClose"},
	{"keyserver client: a down endpoint whose connection lived on never comes back", "keyserver/client.go",
		"\t\t\t} else {\n\t\t\t\te.markUp()\n\t\t\t}", "\t\t\t}",
		"TestEndpointMarkedDownComesBackUp"},
	{"keyserver: an operation's end reported under the name a reload gave its connection meanwhile", "keyserver/server.go",
		"\t\tclient := client\n", "",
		"TestInFlightMetricBalancedAcrossReidentification"},
	{"gmproxy keyserver: a reload moving listen to a Unix socket installs its policy on the TCP listener", "cmd/gmproxy/keyserver.go",
		"\tif cfg.Material.Network != running.Material.Network {", "\tif false {",
		"TestKeyServerReloadOfListenKeepsServing"},
	{"daemon: a refused reload's sessions.lifetime set on the running ticket keys", "internal/daemon/build.go",
		"\t\tr := e.rotator\n\t\treturn e.keys, func() {", "\t\tr := e.rotator\n\t\tr.SetLifetime(keep)\n\t\treturn e.keys, func() {",
		"TestRefusedReloadKeepsTicketKeyRetention"},
	{"daemon: a served generation's shared changes never applied (Installed not called)", "internal/daemon/daemon.go",
		"\tif gen.Installed != nil {\n\t\tgen.Installed()", "\tif false {\n\t\tgen.Installed()",
		"TestTicketKeysDroppedWithTheirTickets|TestRefusedReloadKeepsTicketKeyRetention"},
	{"conf: a key server client entry shadowed by an earlier one accepted", "conf/keyservers.go",
		"\t\t\t\tif (e.subject == \"\" || e.subject == c.Subject)", "\t\t\t\tif false && (e.subject == \"\" || e.subject == c.Subject)",
		"TestKeyServerFile"},
	{"conf: an exposed pprof not warned about when POST /reload is", "conf/validate.go",
		"\t\tif a.Pprof {\n\t\t\tv.warnf(\"admin.pprof\", \"bind", "\t\tif a.Pprof && !(reloadHere && a.TokenFile == \"\") {\n\t\t\tv.warnf(\"admin.pprof\", \"bind",
		"TestBadConfigs"},
	{"tls13sm: a duplicate extension among many not found", "tls13sm/handshake_messages.go",
		"\tif e.many != nil {\n\t\treturn e.many.add(t)", "\tif e.many != nil {\n\t\te.many.add(t)\n\t\treturn true",
		"TestExtensionSet"},
	{"tls13sm: every extension type scanned (n²/2 comparisons per hello)", "tls13sm/handshake_messages.go",
		"\tif len(e.others) == maxScannedExtensions {", "\tif false {",
		"TestExtensionSet"},
	{"tls13sm: among many key shares, one for a group not offered accepted", "tls13sm/handshake_server_tls13.go",
		"\t\t\tif !offered.has(ks.group) {", "\t\t\tif false {",
		"TestManyKeyShares"},
	{"tls13sm: among many key shares, two for one group accepted", "tls13sm/handshake_server_tls13.go",
		"\t\t\tif !shared.add(ks.group) {", "\t\t\tif shared.add(ks.group) && false {",
		"TestManyKeyShares"},
	{"tls13sm: an error lists every group a hostile hello offers", "tls13sm/handshake_server_tls13.go",
		"\tif len(list) <= 16 {", "\tif true {",
		"TestManyKeyShares"},
	{"keyserver: a connection a reload gives another grant stays counted against the old grant's max_connections", "keyserver/server.go",
		"\t\t\t\tif cp.state != held {", "\t\t\t\tif false {",
		"TestReidentifiedConnectionsCountAgainstTheirGrant"},
	{"daemon: a refused reload's private-key engine made the current one", "internal/daemon/build.go",
		"\te.engines[eng] = struct{}{}\n\treturn eng", "\te.engines[eng] = struct{}{}\n\te.engine = eng\n\treturn eng",
		"TestRefusedReloadKeepsTicketKeyRetention"},
	{"daemon: a key server client no generation uses runs on (refused reload, key server removed)", "internal/daemon/keyservers.go",
		"\t\tif kc.refs <= 0 && e.keyClients[kc.cfg.Name] != kc {", "\t\tif false {",
		"TestKeyClientsAcrossReloads"},
	{"daemon: a reload's key server client current before its generation serves", "internal/daemon/keyservers.go",
		"\t\t\te.allKeyClients[kc] = struct{}{}\n", "\t\t\te.allKeyClients[kc] = struct{}{}\n\t\t\tif e.keyClients == nil {\n\t\t\t\te.keyClients = map[string]*keyClient{}\n\t\t\t}\n\t\t\te.keyClients[ks.Name] = kc\n",
		"TestKeyClientsAcrossReloads"},
	{"tls13sm: client certificates verified against the system pool without ClientCAs", "tls13sm/auth.go",
		"\t\t\tif cfg.ClientCAs == nil {\n\t\t\t\treturn nil, nil, AlertUnknownCA", "\t\t\tif false {\n\t\t\t\treturn nil, nil, AlertUnknownCA",
		"TestClientCAsRequiredToVerify"},
	{"proxy: a response trailer a Connection option of the backend names passed on", "proxy/reverseproxy.go",
		"\t\t\tif strings.EqualFold(strings.TrimSpace(opt), k) {\n\t\t\t\treturn false", "\t\t\tif strings.EqualFold(strings.TrimSpace(opt), k) && false {\n\t\t\t\treturn false",
		"TestResponseTrailersEditedAsTheHead"},
	{"proxy: a response trailer the route's response_headers edit passed on", "proxy/reverseproxy.go",
		"\tif !validTrailer(k) || rt.resOps.names(k) {\n", "\tif !validTrailer(k) {\n",
		"TestResponseTrailersEditedAsTheHead"},
	{"h1server: a new connection marked active before its first byte (a silent one holds up Shutdown)", "internal/h1server/conn.go",
		"\t\t} else if first && c.br.Buffered() == 0 {", "\t\t} else if false && first {",
		"TestShutdownClosesSilentNewConn"},
	{"h1server: the bytes read ahead not counted against the header limit", "internal/h1server/conn.go",
		"c.r.remain = s.maxHeaderBytes() + 4096 - int64(c.br.Buffered())", "c.r.remain = s.maxHeaderBytes() + 4096 + 0*int64(c.br.Buffered())",
		"TestBadRequests"},
	{"frontdoor: a panic in one connection's handshake ends the process", "frontdoor/server.go",
		"\t\tif p := recover(); p != nil {\n\t\t\test, err = nil", "\t\tif p := any(nil); p != nil {\n\t\t\test, err = nil",
		"TestHandshakePanicEndsOneConnection"},
	{"gmproxy run: a worker that cannot be spawned leaves empty places killAll trips on", "cmd/gmproxy/supervisor.go",
		"\t\t\ts.procs = s.procs[:i]\n", "",
		"TestStartFailureKillsWhatStarted"},
	{"smkey: a key bound to a handshake's context signs after the handshake gave up", "internal/smkey/smkey.go",
		"\treturn Sign(b.ctx, b.k, rand, digest, opts)", "\treturn b.k.Sign(rand, digest, opts)",
		"TestWithContext"},
	{"conf: one key pair for the TLCP sign and enc certificates not warned about", "conf/validate.go",
		"\tif bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo) {", "\tif false {",
		"TestSameKeyForSignAndEnc"},
	{"conf: swapped keys unnamed on a reload whose password came from the environment", "conf/validate.go",
		"\t\tpw, _ = envPassword(t.KeyPasswordEnv)", "\t\tpw = []byte(os.Getenv(t.KeyPasswordEnv))",
		"TestSwappedKeysOnReloadWithEnvPassword"},
	{"conf: a merge key referring to its own mapping expanded (200 000 problems from 31 bytes)", "conf/decode.go",
		"\t\t\t\tif d.merging[src] {", "\t\t\t\tif false {",
		"TestBadConfigs"},
	{"conf: a duration past 100 years accepted (the proxy's d + d/8 waits overflow)", "conf/decode.go",
		"\tif dur > maxDuration {", "\tif false && dur > maxDuration {",
		"TestBadConfigs"},
	{"conf: timeouts on a route without upstream not warned about", "conf/validate.go",
		"\tif r.Timeouts != nil && r.Upstream == \"\" {", "\tif false && r.Timeouts != nil {",
		"TestBadConfigs"},
	{"h1server: a closing response followed by a drain loses its close_notify coalescing", "internal/h1server/conn.go",
		"\tw.lastWrite = !(hasBody && c.body.tooBig)\n", "\tw.lastWrite = c.body == nil\n",
		"TestLastResponseWithClose"},
	{"proxy: a watched body's timer armed before it is stored (a tiny read timeout fires on a nil timer)", "proxy/timeouts.go",
		"\tb.t = time.AfterFunc(math.MaxInt64, b.expire)\n\tb.t.Reset(d + d/8)\n", "\tb.t = time.AfterFunc(d+d/8, b.expire)\n\t_ = math.MaxInt64\n",
		"TestWatchedBodyTinyTimeout"},
	{"conf: a second YAML document ignored", "conf/decode.go",
		"\tif err := yd.Decode(&next); !errors.Is(err, io.EOF) {", "\tif err := yd.Decode(&next); false && !errors.Is(err, io.EOF) {",
		"TestBadConfigs"},
	{"conf: a header name twice in a mapping, the last silently winning", "conf/decode.go",
		"\t\tif prev, dup := seen[strings.ToLower(k.Value)]; dup {", "\t\tif prev, dup := seen[strings.ToLower(k.Value)]; dup && false {",
		"TestBadConfigs"},
	{"conf: a problem of an alias reported once per use", "conf/decode.go",
		"\tif k := (problemKey{p.line, p.col, msg}); !d.reported[k] {", "\tif k := (problemKey{p.line, p.col, msg}); true || !d.reported[k] {",
		"TestBadConfigs"},
	{"conf: the admin token file readable by others not warned about", "conf/validate.go",
		"\t\t\tv.secretMode(\"admin.token_file\", a.TokenFile, \"admin token file\")\n", "",
		"TestSecretFileModes"},
	{"smkey: a legacy-encrypted PEM key parsed as a plain one", "internal/smkey/pem.go",
		"\tif strings.Contains(block.Headers[\"Proc-Type\"], \"ENCRYPTED\") {", "\tif strings.Contains(block.Headers[\"Proc-Type\"], \"ENCRYPTED\") && false {",
		"TestLegacyEncryptedPEM"},
	{"conf: an empty password file reported as no password configured", "conf/validate.go",
		"\t\tif len(pw) == 0 {\n\t\t\tv.errf(p+\".key_password_file\"", "\t\tif false {\n\t\t\tv.errf(p+\".key_password_file\"",
		"TestBadConfigs"},
	{"conf: a control character or non-UTF-8 byte reported without its line", "conf/decode.go",
		"\t\tif p, what, ok := badCharacter(data); ok {", "\t\tif p, what, ok := badCharacter(data); ok && false {",
		"TestBadConfigs"},
	{"conf: an expired CA certificate in a certificate file's chain not warned about", "conf/validate.go",
		"\t\tif v.now.After(ca.NotAfter) {", "\t\tif v.now.After(ca.NotAfter) && false {",
		"TestExpiredChainCA"},
	{"gmproxy run: a control socket another process listens on taken over", "cmd/gmproxy/run.go",
		"\t\tif c, err := net.DialTimeout(\"unix\", path, time.Second); err == nil {", "\t\tif c, err := net.DialTimeout(\"unix\", path, time.Second); err == nil && false {",
		"TestListenControlKeepsALiveSocket"},
	{"keyoffload: an operation dropped while queued missing from the metrics", "keyoffload/engine.go",
		"\t\to.observe(op, family, loc, waited, 0, err)\n", "\t\tif errors.Is(err, ErrBusy) {\n\t\t\to.observe(op, family, loc, waited, 0, err)\n\t\t}\n",
		"TestTLSHandshakeDeadlineDropsQueuedKeyOp"},
	{"gmproxy run: the access-log reopen signal sent to a worker still starting", "cmd/gmproxy/supervisor.go",
		"\t\tif ready {\n\t\t\tp.cmd.Process.Signal(reopenSignal)", "\t\tif true {\n\t\t\tp.cmd.Process.Signal(reopenSignal)",
		"TestReopenWaitsForReadyWorkers"},
	{"gmproxy run: a reopen signal that waited for a worker's readiness never sent", "cmd/gmproxy/supervisor.go",
		"\tif reopen {\n\t\tp.cmd.Process.Signal(reopenSignal)", "\tif reopen && false {\n\t\tp.cmd.Process.Signal(reopenSignal)",
		"TestReopenWaitsForReadyWorkers"},
	{"gmproxy run: a worker's answer over maxWorkerAnswer taken cut", "cmd/gmproxy/supervisor.go",
		"if len(body) > maxWorkerAnswer {", "if false && len(body) > maxWorkerAnswer {",
		"TestWorkerAnswerTooLong"},
	{"conf: a password for a key file in the clear not warned about", "conf/validate.go",
		"if len(password) == 0 || !smkey.HasUnencryptedKey(pemData) {", "if true || len(password) == 0 || !smkey.HasUnencryptedKey(pemData) {",
		"TestPasswordForUnencryptedKey"},
	{"smkey: an encrypted key block taken for one in the clear", "internal/smkey/pem.go",
		"if isKeyBlock(block) && !encrypted {", "if isKeyBlock(block) && (!encrypted || true) {",
		"./internal/smkey:TestHasUnencryptedKey"},
	{"daemon: a ticket rotation reload keeps the old keys for the old lifetime only", "internal/daemon/build.go",
		"oldKeep := e.rotation + max(e.lifetime, life)", "oldKeep := e.rotation + e.lifetime",
		"./internal/daemon:TestTicketRotationReloadKeepsOldKeysForTheNewLifetime"},
	{"conf: a session lifetime over 7 days accepted", "conf/validate.go",
		"if s.Lifetime > MaxSessionLifetime {", "if false && s.Lifetime > MaxSessionLifetime {",
		"TestBadConfigs"},
	{"sessionstore: a session state over MaxState written to the shared store", "internal/sessionstore/tiered.go",
		"if len(state) > sessioncache.MaxState {\n\t\treturn\n\t}", "if false && len(state) > sessioncache.MaxState {\n\t\treturn\n\t}",
		"./internal/sessionstore:TestTieredSkipsOversizedStates"},
	{"tlcp: a session too large for a ticket fails the handshake", "tlcp/handshake_server.go",
		"b, n, lifetime = b[:hdr], 0, 0", "return errorf(AlertInternalError, \"session ticket of %d bytes is too large\", n)",
		"TestTicketTooLargeForTheMessage"},
	{"sessionstore: a size refusal counted as a store failure by the breaker", "internal/sessionstore/shared.go",
		"if errors.Is(err, ErrTooLarge) {", "if false && errors.Is(err, ErrTooLarge) {",
		"TestSharedSizeRefusalIsNoOutcome"},
	{"memfile: the shared tables' size not sealed", "internal/memfile/memfile_linux.go",
		"unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL", "unix.F_SEAL_SEAL",
		"^TestCreateMap$"},
	{"sessionstore: a fleet key displaced by a re-seeded epoch dropped", "internal/sessionstore/fleetkeys.go",
		"k.displaced = append(slices.Clip(held.displaced), held.key)", "k.displaced = held.displaced",
		"TestFleetKeysKeepTheirKeyWhenANewcomerReseeds"},
	{"gmproxy run: the admin listeners' connections unbounded", "cmd/gmproxy/adminserver.go",
		"netutil.LimitListener(ln, adminMaxConns)", "netutil.LimitListener(ln, adminMaxConns+1000)",
		"TestAdminServerBounds"},
	{"gmproxy run: an idle admin connection kept for ever", "cmd/gmproxy/adminserver.go",
		"IdleTimeout: adminIdleTimeout}", "IdleTimeout: 0 * adminIdleTimeout}",
		"TestAdminServerBounds"},
	{"gmproxy reload: a stale pid file's process signalled", "cmd/gmproxy/reload.go",
		"if exe, ok := otherProgram(pid); !ok {", "if exe, ok := otherProgram(pid); !ok && false {",
		"TestReloadStalePIDFile"},
	{"proxy: a request for another site on a connection whose SNI chose its site served by the wrong site", "proxy/proxy.go",
		"if sni := ci.state.SNI; sni != \"\" && p.siteByHost(sni) == s {", "if sni := ci.state.SNI; sni != \"\" && p.siteByHost(sni) == s && false {",
		"TestCoalescedRequestForAnotherSite"},
	{"proxy: the access log stays broken after one write error", "proxy/accesslog.go",
		"err := l.bw.Flush()\n\tif err != nil {", "err := l.bw.Flush()\n\tif false && err != nil {",
		"TestAccessLogRecoversAfterWriteError"},
	{"metrics: a late session-cache report counted again", "metrics/metrics.go",
		"if last := m.lastEvictions[p]; evictions > last {", "if last := m.lastEvictions[p]; evictions != last {",
		"TestSessionEvictionsLateReport"},
	{"proxy: a retired generation keeps reporting its targets' health", "proxy/proxy.go",
		"func (p *Proxy) Retire(next *Proxy) {\n\tfor name, u := range p.upstreams {\n\t\tu.setQuiet(true)", "func (p *Proxy) Retire(next *Proxy) {\n\tfor name, u := range p.upstreams {\n\t\tu.setQuiet(false)",
		"TestRetiredProxyFollowsNextChecks"},
	{"daemon: a session store no serving generation uses kept for ever", "internal/daemon/build.go",
		"if se.build < build {", "if false && se.build < build {",
		"TestSessionStoresDroppedWhenUnused"},
	{"proxy: a failed access log flush not reported", "proxy/accesslog.go",
		"\t\tl.failed(err, n)\n", "\t\t_ = n\n",
		"TestAccessLogReportsWriteErrors"},
	{"s_time: a response head read without bound", "internal/stime/stime.go",
		"br.budget.n, br.budget.on = maxResponseHead, true", "br.budget.n, br.budget.on = maxResponseHead, false",
		"TestResponseHeadBounded"},
	{"get: the URL's credentials dropped", "cmd/gmproxy/get.go",
		"req.SetBasicAuth(u.User.Username(), pw)", "_ = pw",
		"TestGetURLCredentials"},
	{"record: a Close during a blocked Write waits for it to send close_notify", "internal/record/close.go",
		"if writing {\n\t\treturn conn.Close()", "if writing && false {\n\t\treturn conn.Close()",
		"./tlcp:TestCloseBreaksBlockedWrite"},
	{"tlcp: the last response written under close_notify's deadline", "tlcp/conn.go",
		"err := c.core.LastNotify(func() error {", "err := c.core.CloseNotify(func() error {",
		"TestWriteLastUnderCallersDeadline"},
	{"proxy: a connection active after the h2 shutdown gets no GOAWAY", "proxy/proxy.go",
		"if st == http.StateActive && shutting() {", "if st == http.StateActive && shutting() && false {",
		"TestH2ConnectionDuringShutdown"},
	{"proxy: an h2 extended CONNECT to a respond route gets its 2xx", "proxy/handler.go",
		"case rt.respond != nil && rt.respond.Status < 300 && isExtendedConnect(r):", "case rt.respond != nil && rt.respond.Status < 300 && isExtendedConnect(r) && false:",
		"TestExtendedConnectToRespondRoute"},
	{"proxy: an h2 tunnel keeps the request's read deadline", "proxy/streaming.go",
		"if rd, ok := rs.w.rw.(readDeadliner); ok {", "if rd, ok := rs.w.rw.(readDeadliner); ok && false {",
		"TestExtendedConnectOutlivesRequestTimeouts"},
	{"proxy: read_header_timeout not applied to h2 header blocks", "proxy/h2reset.go",
		"g.hdrTimeout = l.ReadHeaderTimeout", "g.hdrTimeout = 0 * l.ReadHeaderTimeout",
		"TestH2ReadHeaderTimeout"},
	{"keyserver: listen_group's group not given to the socket", "cmd/gmproxy/keyserver.go",
		"if gid := m.SocketGID; gid != nil {", "if gid := m.SocketGID; gid != nil && false {",
		"TestKeyServerSocketGroup"},
	{"workers: every worker given the whole GOMEMLIMIT", "cmd/gmproxy/supervisor.go",
		"limited := memLimit != math.MaxInt64 && n > 0", "limited := false && memLimit != math.MaxInt64 && n > 0",
		"TestWorkerEnvSharesMemoryLimit"},
	{"proxy: a redirect's {path} and {query} sent literally", "proxy/handler.go",
		"\"{path}\", r.URL.EscapedPath(),", "\"{path}\", \"{path}\",",
		"TestRedirectPlaceholders"},
	{"daemon: ordinary TLS sessions sealed with crypto/tls's own keys (lost at a reload)", "internal/daemon/build.go",
		"} else if tickets != nil {\n\t\t\tsealTLSSessions(", "} else if tickets != nil && false {\n\t\t\tsealTLSSessions(",
		"TestTLSResumesAcrossReload"},
	{"daemon: a TLS session resumes under another binding", "internal/daemon/tlssessions.go",
		"[32]byte(pt[:32]) != binding", "[32]byte(pt[:32]) != binding && false",
		"TestTLSSessionsSealed"},
	{"daemon: a TLS session resumes past its lifetime", "internal/daemon/tlssessions.go",
		"age < -time.Minute || age > lifetime", "age < -time.Minute",
		"TestTLSSessionsSealed"},
	{"conf: a tls certificate without digitalSignature accepted", "conf/validate.go",
		"if ku := kp.Leaf().KeyUsage; ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 {", "if ku := kp.Leaf().KeyUsage; ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 && false {",
		"TestTLSCertificateWithoutDigitalSignature"},
	{"conf: a tls key crypto/tls cannot sign with accepted", "conf/validate.go",
		"if n := k.N.BitLen(); n < 1024 {", "if n := k.N.BitLen(); n < 1024 && false {",
		"TestTLSCertificateKeyCryptoTLSCannotSign"},
	{"frontdoor: a TLS 1.3 hello without sm2sig_sm3 sent to TLS 1.3-SM", "frontdoor/server.go",
		"!(tlsOK && h.refusesSM2Signatures()):", "!(tlsOK && h.refusesSM2Signatures() && false):",
		"TestServerTLS13SMHelloWithoutSM2Signatures"},
	{"frontdoor: TLS negotiation failures counted as protocol errors", "frontdoor/reason.go",
		"\t\tisTLSNegotiationFailure(msg):", "\t\tisTLSNegotiationFailure(msg) && false:",
		"TestClassifyTLSNegotiationFailures"},
	{"tls13sm: a client crashes on a suite it listed but does not implement", "tls13sm/handshake_client_tls13.go",
		"if hs.suite == nil {\n\t\treturn c.fail(AlertIllegalParameter, \"server chose cipher suite", "if hs.suite == nil && false {\n\t\treturn c.fail(AlertIllegalParameter, \"server chose cipher suite",
		"TestClientRefusesSuiteItCannotRun"},
	{"tlcp: a client keeps the session of a failed resumption", "tlcp/handshake_client.go",
		"cfg.ClientSessionCache.Put(hs.cacheKey, nil)", "_ = hs.cacheKey",
		"TestClientDropsSessionOfFailedResumption"},
	{"tls13sm: a client keeps the ticket of a failed resumption", "tls13sm/handshake_client_tls13.go",
		"cfg.ClientSessionCache.Put(c.sessionCacheKey, nil)", "_ = c.sessionCacheKey",
		"TestClientDropsTicketOfFailedResumption"},
	{"tlcp: a client with VerifyPeerCertificate verifies no server name", "tlcp/handshake_client.go",
		"if cfg.ServerName == \"\" && !cfg.InsecureSkipVerify {", "if cfg.ServerName == \"\" && !cfg.InsecureSkipVerify && cfg.VerifyPeerCertificate == nil {",
		"TestClientNeedsServerNameWithVerifyPeerCertificate"},
	{"proxy: the targets of an upstream share one client session", "proxy/smdial.go",
		"return t.Cache.Get(t.Target + \" \" + key)", "return t.Cache.Get(key)",
		"TestSMDialerSessionsPerTarget"},
	{"tlcp: any peer certificate cached, pointing into its flight", "tlcp/auth.go",
		"cacheable := len(r) <= maxCachedCert", "cacheable := len(r) <= maxCachedCert*1000",
		"TestParsedCertsBounded"},
	{"tlcp: a cached peer certificate points into its handshake flight", "tlcp/auth.go",
		"\t\t\tr = bytes.Clone(r)\n", "\t\t\t_ = bytes.Clone\n",
		"TestParsedCertsBounded"},
	{"proxy: active probes queue behind requests at the connection cap", "proxy/healthchecks.go",
		"if tr.MaxConnsPerHost > 0 {", "if tr.MaxConnsPerHost > 0 && false {",
		"TestActiveProbeNotQueuedBehindConnCap"},
	{"proxy: stream retries ignore total_time", "proxy/tcpstream.go",
		"if n >= u.tries || (u.tryDur > 0 && time.Since(start) >= u.tryDur) {", "if n >= u.tries {",
		"TestTCPStreamRetriesBoundedByTotalTime"},
	{"proxy: a wrong Sec-WebSocket-Accept not charged to the target", "proxy/streaming.go",
		"rt.up.fail(t, \"Sec-WebSocket-Accept does not answer the key sent\")", "_ = t",
		"TestExtendedConnectWrongAcceptIsTargetFailure"},
	{"proxy: a negative active check interval accepted", "proxy/upstreams.go",
		"(a.Interval < 0 || a.Timeout < 0)", "(false && (a.Interval < 0 || a.Timeout < 0))",
		"TestActiveHealthNegativeDurations"},
	{"proxy: an unasked protocol switch not charged to the target", "proxy/streaming.go",
		"rt.up.fail(t, \"switched to protocol \"+strconv.Quote(resUp)+\" unasked\")", "_ = t",
		"TestUnaskedSwitchIsTargetFailure"},
	{"smkey: OpenSSL's and Tongsuo's hmacWithSM3 refused", "internal/smkey/pbkdf2.go",
		"alg.Equal(oidHMACWithSM3), alg.Equal(oidOpenSSLSM3HMAC):", "alg.Equal(oidHMACWithSM3), alg.Equal(oidOpenSSLSM3HMAC) && false:",
		"TestTongsuoEncryptedKey"},
	{"container: the image's build does not stamp the revision", "deploy/container/Containerfile",
		"-X main.revision=${REVISION}\"", "\"",
		"./deploy:TestContainerfile"},
	{"cmd: a revision stamped with -ldflags not printed", "cmd/gmproxy/version.go",
		"if rev == \"\" && stamped != \"\" {", "if false {",
		"TestVersionRevision"},
	{"proxy: a retired generation keeps probing", "proxy/upstreams.go",
		"func (u *Upstream) retire(next *Upstream) {\n\tu.endProbes()", "func (u *Upstream) retire(next *Upstream) {",
		"TestRetiredProxyFollowsNextChecks|TestRetiredGenerationReportsNoHealth"},
	{"proxy: a retired generation's targets do not follow the checks in force", "proxy/upstreams.go",
		"\t\t\tt.next.Store(n)", "\t\t\t_ = n",
		"TestRetiredProxyFollowsNextChecks"},
	{"proxy: a reload's targets count in flight apart from the old generation's", "proxy/healthchecks.go",
		"\t\t\tt.inflight = o.inflight", "",
		"TestRetiredProxyFollowsNextChecks"},
	{"tls13sm: the key-usage check skipped without chain verification", "tls13sm/auth.go",
		"\tif ku := certs[0].KeyUsage; ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 {", "\tif ku := certs[0].KeyUsage; verify && ku != 0 && ku&smx509.KeyUsageDigitalSignature == 0 {",
		"TestServerEncryptionCertificateRefusedWithoutVerification|TestEncryptionCertificateDoesNotAuthenticate"},
	{"sm3state: Wipe leaves the last chaining value in the digest", "internal/sm3state/sm3state.go",
		"\tif m.c.d != nil {\n\t\tm.c.d.Reset()\n\t}", "",
		"TestWipeClearsDigest"},
	{"monoclock: a far-future instant wraps to the earliest", "internal/monoclock/monoclock.go",
		"if n == math.MaxInt64 {", "if n == math.MaxInt64 && false {",
		"TestOfFarFuture"},
	{"sm2sign: smkey options passed to gmsm unchanged", "internal/sm2sign/sm2sign.go",
		"\t\t\topts = o.GMSM()", "\t\t\t_ = o",
		"TestSignMessageWithNilRand"},
	{"godebugenv: a GODEBUG entry with a leading space taken as set", "internal/godebugenv/godebugenv.go",
		"if strings.HasPrefix(f, key+\"=\") {", "if strings.HasPrefix(strings.TrimSpace(f), key+\"=\") {",
		"TestAdd"},
	{"sessioncache: an expired session dropped for room counted as an eviction", "internal/sessioncache/sessioncache.go",
		"if e := c.slots[c.tail].expires; e == 0 || now.UnixNano() < e {", "if e := c.slots[c.tail].expires; true || e == 0 || now.UnixNano() < e {",
		"TestExpiredNotCountedAsEvicted"},
	{"sessionstore: the bounded memory store ignores its byte budget", "internal/sessionstore/memory.go",
		"(len(s.m) >= s.limit || s.bytes+size > s.budget)", "(len(s.m) >= s.limit)",
		"TestBoundedMemoryBoundsBytes"},
	{"localstore: GetMany sends every key in one request", "internal/sessionstore/localstore/localstore.go",
		"len(out)+len(req.fields) < len(keys) && len(req.fields) < maxFields;", "len(out)+len(req.fields) < len(keys);",
		"TestGetManyOfManyKeys"},
	{"shmstore: a lock held by a live process never taken over", "internal/sessionstore/shmstore/shmstore.go",
		"(!t.alive(holder) || st.stale(b, word, t.now()))", "(!t.alive(holder))",
		"TestStuckLockTakenOver"},
	{"conf: ticket_rotation without a floor against lifetime", "conf/validate.go",
		"s.Lifetime/s.TicketRotation >= MaxTicketKeys {", "s.Lifetime/s.TicketRotation >= MaxTicketKeys && false {",
		"TestBadConfigs"},
	{"daemon: a refused reload's fleet store kept, the running one closed", "internal/daemon/build.go",
		"\t\t\tenv.dropFleet(fl) // a refused reload: the running fleet stays", "",
		"TestRefusedReloadKeepsRunningStore"},
	{"daemon: a store a reload replaced or removed never closed", "internal/daemon/fleet.go",
		"time.AfterFunc(retireDelay, func() { s.Close() })", "_ = s",
		"TestReloadWithoutStoreClosesIt|TestRefusedReloadKeepsRunningStore"},
	{"daemon: Close leaves the listeners a reload removed open", "internal/daemon/daemon.go",
		"\tfor l := range d.draining {\n\t\tl.close()\n\t}", "",
		"TestCloseCutsRemovedListener"},
	{"ticket: a lifetime shorter than the rotation raised to twelve rotations", "internal/ticket/ticket.go",
		"\tif lifetime <= 0 {\n\t\tlifetime = 12 * interval\n\t}", "\tif lifetime < interval {\n\t\tlifetime = 12 * interval\n\t}",
		"TestRotatorShortLifetime"},
	{"daemon: a reload moving a port refused without saying which listener holds it", "internal/daemon/daemon.go",
		"if holder := d.samePort(ls.Address); holder != \"\" && errors.Is(err, syscall.EADDRINUSE) {", "if holder := d.samePort(ls.Address); false && holder != \"\" && errors.Is(err, syscall.EADDRINUSE) {",
		"TestReloadMovingAPortSaysWhy"},
	{"tls13sm: a pooled server state keeps its secrets", "tls13sm/handshake_server_tls13.go",
		"\t*hs = serverHandshakeState{msgBuf: buf[:0], helloRaw: raw[:0]}\n", "\ths.msgBuf, hs.helloRaw = buf[:0], raw[:0]\n",
		"TestPooledServerStateWiped"},
	{"tlcp: the server's pre-master left in freed memory", "tlcp/handshake_server.go",
		"\tdefer clear(preMaster)", "",
		"TestServerPreMasterWiped"},
	{"tlcp: the client's pre-master left in freed memory", "tlcp/handshake_client.go",
		"\t\tdefer clear(preMaster)", "",
		"TestClientPreMasterWiped"},
	{"proxy: a closed watched body's timer armed again by its running function", "proxy/timeouts.go",
		"\tif b.closed.Load() {\n\t\treturn\n\t}", "",
		"TestWatchedBodyCloseStopsTimer"},
	{"proxy: a tunnel write cut before its send_timeout", "proxy/streaming.go",
		"c.conn.SetWriteDeadline(time.Now().Add(c.d + c.d/8))", "c.conn.SetWriteDeadline(time.Now().Add(c.d))",
		"TestSendBoundedNotBeforeTimeout"},
	{"proxy: uploads within request_buffer not buffered", "proxy/reverseproxy.go",
		"\t\tif !s.bufferBody(rs, r, body) {\n\t\t\treturn\n\t\t}\n", "",
		"TestSlowUploadHoldsNoTarget|TestBufferedUploadFailures"},
	{"proxy: a buffered body counted as sent, so never retried", "proxy/reverseproxy.go",
		"\tif b.pre != nil {\n\t\treturn b.preOff.Load() == 0\n\t}", "",
		"TestBufferedUploadRetried"},
	{"daemon: a listener's request_buffer not passed on", "internal/daemon/build.go",
		"RequestBuffer:        offIfZeroSize(l.HTTP.RequestBuffer),", "RequestBuffer:        0,",
		"TestListenerRequestBufferOff"},
	{"conf: request_buffer not bounded", "conf/validate.go",
		"if h.RequestBuffer < 0 || h.RequestBuffer > MaxRequestBuffer {", "if h.RequestBuffer < 0 {",
		"TestBadConfigs"},
	{"proxy: a route's header matchers after the first ignored", "proxy/handler.go",
		"for _, m := range rt.hdrs {", "for _, m := range rt.hdrs[:min(1, len(rt.hdrs))] {",
		"./internal/daemon:TestRouteHeaderMatchesAll"},
	{"daemon: one route's TLS headers given to every route of its site", "internal/daemon/proxycfg.go",
		"\t\tTLSInfoHeaders:    r.TLSInfoHeaders,", "\t\tTLSInfoHeaders:    true,",
		"./internal/daemon:TestRouteTLSHeadersPerRoute"},
	{"proxy: {uri} of an absolute-form request is the whole target", "proxy/handler.go",
		"\"{uri}\", originForm(r.RequestURI)).Replace(rt.redirTo)", "\"{uri}\", r.RequestURI).Replace(rt.redirTo)",
		"TestRedirectURIOfAbsoluteForm"},
	{"proxy: strip_prefix drops the client's escaping", "proxy/reverseproxy.go",
		"raw = \"/\" + esc[m:] // dropped by EscapedPath unless it encodes Path", "_, _ = esc, m",
		"TestStripPrefixKeepsEscapes"},
	{"proxy: respond takes a 1xx status", "proxy/handler.go",
		"if r.Status < 200 || r.Status > 599 {", "if r.Status < 100 || r.Status > 599 {",
		"TestConfigErrors"},
	{"proxy: {host} of an IPv6 literal without brackets", "proxy/handler.go",
		"uhost = \"[\" + uhost + \"]\" // an IPv6 literal (RFC 3986 §3.2.2)", "_ = uhost",
		"TestRedirectHostIPv6"},
	{"proxy: a backslash passes a route that denies the path", "proxy/handler.go",
		"case strings.IndexByte(r.URL.Path, '\\\\') >= 0 && s.routesElsewhere(r, host, backslashPath(r.URL.Path), rt):", "case false && s.routesElsewhere(r, host, backslashPath(r.URL.Path), rt):",
		"TestBackslashDoesNotPassDenyRoute"},
	{"proxy: a NUL in the path forwarded", "proxy/handler.go",
		"\tcase strings.IndexByte(u.Path, 0) >= 0:\n\t\treturn false", "",
		"TestNULInPathRefused"},
	{"proxy: an invalid host_header accepted", "proxy/handler.go",
		"if !ValidAuthority(rc.HostHeader) {", "if false {",
		"TestConfigErrors"},
	{"conf: an invalid host_header accepted", "conf/validate.go",
		"if !validHostPort(r.HostHeader) {", "if false {",
		"TestBadConfigs"},
	{"proxy: a header edit with a control character accepted", "proxy/handler.go",
		"\t\t\tif !httpguts.ValidHeaderFieldValue(v) {\n\t\t\t\treturn headerOps{}", "\t\t\tif false {\n\t\t\t\treturn headerOps{}",
		"TestConfigErrors"},
	{"proxy: an empty X-Forwarded-For from a trusted hop extended as a chain", "proxy/handler.go",
		"return strings.TrimSpace(strings.Join(fields, \", \"))", "return strings.Join(fields, \", \") + \" \"",
		"TestForwardedAndTLSHeaders"},
	{"conf: a served key's dual use from its certificate not warned", "conf/keyservers.go",
		"if roles&keyserver.RoleSign != 0 && roles&^keyserver.RoleSign != 0 {\n\t\t// The same dual use", "if false {\n\t\t// The same dual use",
		"TestKeyServerRolesFromDualUseCertWarned"},
	{"keyserver: a request with ID 0 closed without an answer", "keyserver/server.go",
		"\t\t\tw.write(0, byte(CodeMalformed), []byte(\"request ID 0\"), nil)\n", "",
		"TestBadFramingAnswered"},
	{"keyserver: Serve returns on EMFILE", "keyserver/server.go",
		"if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {", "if errors.As(err, &ne) && ne.Timeout() {",
		"TestServeSurvivesAcceptExhaustion"},
	{"keyserver: a late frame flushed under its past deadline", "keyserver/protocol.go",
		"late := !time.Now().Before(deadline)", "late := false",
		"TestExpiredCallerSparesSharedConnection"},
	{"keyserver: a connection dialled across Close kept", "keyserver/client.go",
		"if err == nil && e.c.closed.Load() {", "if false {",
		"TestCloseDuringDial"},
	{"keyserver: a reload's rate change refills the bucket", "keyserver/policy.go",
		"s.tokens, s.last = min(t, float64(l.Burst)), now", "s.tokens, s.last = max(t, float64(l.Burst)), time.Time{}",
		"TestTighterRateKeepsUsedTokens"},
	{"cmd: a key server reload silent on a changed shutdown_grace", "cmd/gmproxy/keyserver.go",
		"{\"shutdown_grace\", next.ShutdownGrace != running.ShutdownGrace},", "",
		"TestKeyServerRestartOnlyChanges"},
	{"daemon: a key served for key agreement only reported not usable", "internal/daemon/keyservers.go",
		"ke.Code == keyserver.CodeWrongRole && probeKeyAgreement(ctx, rk) == nil {", "ke.Code == keyserver.CodeWrongRole && false {",
		"TestRemoteEncKeyForKeyAgreementOnly"},
	{"proxy: a buffered body that fails counted 0 bytes in", "proxy/reverseproxy.go",
		"\t\tdefer func() { rs.bytesIn = body.n.Load() }()\n\t\trs.body = body\n\t}\n\tif body != nil && r.ContentLength > 0", "\t\trs.body = body\n\t}\n\tif body != nil && r.ContentLength > 0",
		"TestBufferedUploadBytesIn"},
	{"proxy: a probe a reload cut counted as a failure", "proxy/healthchecks.go",
		"\tselect {\n\tcase <-u.stopProbes:\n\t\t// Cut by a reload", "\tselect {\n\tcase <-make(chan struct{}):\n\t\t// Cut by a reload",
		"TestRetireCutsNoProbeIntoDown"},
	{"daemon: a port taken on another IP blamed on the running listener", "internal/daemon/daemon.go",
		"!ip.IsUnspecified() && !bound.IsUnspecified() && !ip.Equal(bound) {", "false {",
		"TestReloadPortTakenElsewhereNotBlamedOnListener"},
	{"daemon: a draining generation follows the newest checks through every generation retired since", "internal/daemon/daemon.go",
		"\t\tfor g := range d.retired {\n\t\t\tif g.Proxy != nil {\n\t\t\t\tg.Proxy.Retire(gen.Proxy)\n\t\t\t}\n\t\t}\n", "",
		"TestDrainingGenerationHoldsNoLaterOne"},
	{"proxy: retries.total_time counts a buffered body's upload", "proxy/reverseproxy.go",
		"(tryDur > 0 && time.Since(begun) >= tryDur)", "(tryDur > 0 && time.Since(rs.start) >= tryDur && !begun.IsZero())",
		"TestBufferedUploadRetryDuration"},
	{"proxy: a buffered body's Expect forwarded", "proxy/reverseproxy.go",
		"\t\tdelete(outreq.Header, \"Expect\")", "",
		"TestBufferedUploadExpectNotForwarded"},
	{"proxy: buffered request bodies unbounded in total", "proxy/reverseproxy.go",
		"\t\t\tif !bodyBuffers.take(b.client, b.budgeted, grow) {\n\t\t\t\tbreak\n\t\t\t}", "\t\t\tbodyBuffers.take(b.client, b.budgeted, grow)",
		"TestBufferedUploadsBoundedInTotal"},
	{"proxy: a buffered body's share of the bound never given back", "proxy/reverseproxy.go",
		"\t\tbodyBuffers.give(b.client, b.budgeted)\n", "",
		"TestBufferedUploadsBoundedInTotal"},
	{"proxy: an h2 body of declared length loses its trailers to an HTTP/1.1 target", "proxy/reverseproxy.go",
		"\t\t\toutreq.ContentLength = -1\n", "",
		"TestRequestTrailers"},
	{"proxy: a buffered h2 body goes upstream before its stream ends", "proxy/reverseproxy.go",
		"if err == nil && len(buf) == size && !b.preEOF {", "if false {",
		"TestBufferedUploadWaitsForEndStream"},
	{"workers: the merged GOGC summed", "cmd/gmproxy/supervisor_metrics.go",
		"strings.HasSuffix(name, \"_info\"),\n\t\tname == \"go_gc_gogc_percent\":", "strings.HasSuffix(name, \"_info\"),\n\t\tname == \"go_gc_gogc_percent_\":",
		"TestMergedGOGCNotSummed"},
	{"h1server: a connection's start read on the wall clock", "internal/h1server/conn.go",
		"\tc.started = monoclock.Now()", "\tc.started = time.Now().UnixNano() + 0*monoclock.Now()",
		"TestConnStartOnMonotonicClock"},
	{"conf: http.idle_timeout: 0 accepted (silently 75s)", "conf/validate.go",
		"\tif h.IdleTimeout <= 0 {", "\tif h.IdleTimeout < 0 {",
		"TestBadConfigs"},
	{"conf: an upstream's timeouts.idle: 0 accepted (silently 90s)", "conf/validate.go",
		"\tif u.Timeouts.Idle <= 0 {", "\tif u.Timeouts.Idle < 0 {",
		"TestBadConfigs"},
	{"keyserver: a ping answer that cannot be written keeps the connection read", "keyserver/server.go",
		"\t\t\tif w.write(id, byte(CodeOK), nil, nil) != nil {\n\t\t\t\treturn", "\t\t\tif w.write(id, byte(CodeOK), nil, nil) != nil && false {\n\t\t\t\treturn",
		"TestUnwritableConnectionEnds"},
	{"keyserver: a refusal that cannot be written keeps the connection read", "keyserver/server.go",
		"\t\t\tif w.write(id, byte(r.code), []byte(r.detail), nil) != nil {\n\t\t\t\treturn", "\t\t\tif w.write(id, byte(r.code), []byte(r.detail), nil) != nil && false {\n\t\t\t\treturn",
		"TestUnwritableConnectionEnds"},
	{"supervisor: a worker whose start hangs restarted for ever", "cmd/gmproxy/supervisor.go",
		"\tif time.Since(p.started) < restartReset || !p.served {", "\tif time.Since(p.started) < restartReset {",
		"TestWorkerFailingStartGivesUp"},
	{"supervisor: the workers' reload counts summed (one per worker per reload, and per restart)", "cmd/gmproxy/supervisor.go",
		"\t\tdelete(fams, \"gmproxy_config_reloads_total\")", "\t\t_ = fams",
		"TestWorkersRefusedReloadInMetrics"},
	{"supervisor: a worker's death during a reload seen only when the reload ends", "cmd/gmproxy/supervisor.go",
		"\t\t\tcase e := <-exits:\n\t\t\t\tif !s.died(e.p, restart) {\n\t\t\t\t\tgiveUp = true", "\t\t\tcase e := <-(<-chan workerExit)(nil):\n\t\t\t\tif !s.died(e.p, restart) {\n\t\t\t\t\tgiveUp = true",
		"TestWorkersDeathSeenDuringReload"},
	{"proxy: a site's case_insensitive_paths not given to its routes", "proxy/handler.go",
		"\t\trt.foldCase = sc.CaseInsensitivePaths", "\t\trt.foldCase = false",
		"TestCaseInsensitivePaths"},
	{"proxy: case-insensitive paths compared as written", "proxy/path.go",
		"r != pr && unicode.ToUpper(r) != unicode.ToUpper(pr)", "r != pr && unicode.ToUpper(r) != unicode.ToLower(pr)",
		"TestCaseInsensitivePaths"},
	{"proxy: strip_prefix removes only the prefix as written on a case-insensitive site", "proxy/reverseproxy.go",
		"\tif n, ok := rt.pathPrefix(rs.url.Path, rt.strip); ok {", "\tif n, ok := len(rt.strip), strings.HasPrefix(rs.url.Path, rt.strip); ok {",
		"TestCaseInsensitivePaths"},
	{"daemon: case_insensitive_paths not wired to the proxy", "internal/daemon/proxycfg.go",
		"CaseInsensitivePaths: s.CaseInsensitivePaths, ErrorPages", "CaseInsensitivePaths: false, ErrorPages",
		"TestSiteCaseInsensitivePaths"},
	{"frontdoor: an unparsable TLS client certificate skipped, the next one taken as the identity", "frontdoor/tls.go",
		"\t\t\tif err != nil {\n\t\t\t\tbreak\n\t\t\t}", "\t\t\tif err != nil {\n\t\t\t\tcontinue\n\t\t\t}",
		"TestTLSPeerCertificatesKeepTheLeaf"},
	{"tlcp: a resumed session's server name compared with Unicode case folding", "tlcp/handshake_server.go",
		"!asciifold.Equal(s.serverName, hs.hello.serverName)", "!(asciifold.Equal(s.serverName, hs.hello.serverName) || bytes.EqualFold([]byte(s.serverName), []byte(hs.hello.serverName)))",
		"TestTicketEvents"},
	{"proxy: a site a reload took off a listener still served on its open connections", "proxy/proxy.go",
		"\t\tcase !p.listenerServes(ci.state.Listener, s.name):", "\t\tcase false && !p.listenerServes(ci.state.Listener, s.name):",
		"./internal/daemon:TestReloadTakingSiteOffListenerReachesOpenConnections"},
	{"tls13sm: an established connection keeps its handshake reassembly buffer", "tls13sm/tls13sm.go",
		"\t\t// Post-handshake messages (KeyUpdate, NewSessionTicket) are small.\n\t\tc.core.Hand = nil", "\t\t// Post-handshake messages (KeyUpdate, NewSessionTicket) are small.\n\t\t_ = c.core.Hand",
		"TestHandshakeBufferReleased"},
	{"h1server: a huge header's own buffer kept with the idle connection", "internal/h1server/response.go",
		"\t}\n\tw.bufp, w.buf = nil, nil\n}", "\t\tw.bufp, w.buf = nil, nil\n\t}\n}",
		"TestHugeHeaderBufferReleased"},
	{"proxy: HTTP/2 clients may send 1 MiB frames (an idle connection pins 1 MiB)", "proxy/proxy.go",
		"const H2MaxReadFrameSize = 16 << 10", "const H2MaxReadFrameSize = 1 << 20",
		"./internal/daemon:TestH2FrameOverMaxFrameSize"},
	{"proxy: a route's TLS header matcher reads the client's forgeable copy", "proxy/handler.go",
		"\t\tif m.tls {\n\t\t\t// The proxy's own value", "\t\tif false && m.tls {\n\t\t\t// The proxy's own value",
		"TestRouteHeaderMatchOnProxyHeaders"},
	{"daemon: a route's X-Ssl-Client-Verify matcher reads the client's copy", "proxy/handler.go",
		"\t\tif m.tls {\n\t\t\t// The proxy's own value", "\t\tif false && m.tls {\n\t\t\t// The proxy's own value",
		"./internal/daemon:TestRouteMatchesVerifiedClientCertificate"},
	{"proxy: a route matching on a header the proxy sets or strips accepted", "proxy/headermatch.go",
		"\tif isSetHeaderName(name) {", "\tif false && isSetHeaderName(name) {",
		"TestRouteHeaderMatchOnProxyHeaders"},
	{"conf: a route matching on a header the proxy sets or strips accepted", "conf/validate.go",
		"\t\t} else if err != nil {\n\t\t\tv.errf(p+\".header.\"+name, \"match on X-Ssl-Client-Verify", "\t\t} else if err != nil && false {\n\t\t\tv.errf(p+\".header.\"+name, \"match on X-Ssl-Client-Verify",
		"TestBadConfigs"},
	// ---- checks of peer misbehaviour found without a mutant (rev40) ----
	{"tlcp client: a ServerHello of another version than TLCP accepted", "tlcp/handshake_client.go",
		"if sh.vers != VersionTLCP {", "if false && sh.vers != VersionTLCP {",
		"TestMisbehavingPeer"},
	{"tlcp client: a ServerHello with compression accepted", "tlcp/handshake_client.go",
		"if sh.compressionMethod != 0 {", "if false && sh.compressionMethod != 0 {",
		"TestMisbehavingPeer"},
	{"tlcp client: a suite the client did not offer accepted", "tlcp/handshake_client.go",
		"if !offered || hs.suite == nil {", "if false && !offered || hs.suite == nil {",
		"TestMisbehavingPeer"},
	{"tlcp client: a session_ticket extension the client did not offer accepted", "tlcp/handshake_client.go",
		"if sh.ticketSupported && !hs.hello.ticketSupported {", "if false && sh.ticketSupported && !hs.hello.ticketSupported {",
		"TestMisbehavingPeer"},
	{"tlcp client: an ALPN protocol the client did not offer accepted", "tlcp/handshake_client.go",
		"if !ok {\n\t\t\treturn errorf(AlertUnsupportedExtension, \"server selected ALPN", "if false {\n\t\t\treturn errorf(AlertUnsupportedExtension, \"server selected ALPN",
		"TestMisbehavingPeer"},
	{"tlcp client: a session resumed under another suite", "tlcp/handshake_client.go",
		"if hs.session != nil && hs.resumed() && sh.cipherSuite != hs.session.cipherSuite {", "if false && hs.session != nil && hs.resumed() && sh.cipherSuite != hs.session.cipherSuite {",
		"TestClientRefusesResumptionUnderAnotherSuite"},
	{"tlcp client: a server Certificate without the encryption certificate accepted", "tlcp/handshake_client.go",
		"if len(raw) < 2 {", "if len(raw) < 1 {",
		"TestMisbehavingPeer"},
	{"tlcp client: a server encryption certificate without a key-exchange key usage accepted", "tlcp/handshake_client.go",
		"if err := checkEncUsage(enc); err != nil {", "if err := checkEncUsage(enc); false && err != nil {",
		"TestWrongKeyUsage"},
	{"tlcp: a signing certificate without digitalSignature accepted", "tlcp/handshake_server.go",
		"if err := checkSignUsage(certs[0]); err != nil {", "if err := checkSignUsage(certs[0]); false && err != nil {",
		"TestWrongKeyUsage"},
	{"tlcp server: an ECDHE client encryption certificate without a key-exchange key usage accepted", "tlcp/handshake_server.go",
		"if err := checkEncUsage(enc); err != nil {", "if err := checkEncUsage(enc); false && err != nil {",
		"TestWrongKeyUsage"},
	{"tlcp server: a required client certificate may be left out", "tlcp/handshake_server.go",
		"if hs.clientAuth.requires() {\n\t\t\treturn errorf(AlertHandshakeFailure, \"client sent no certificate but one is required\")", "if false {\n\t\t\treturn errorf(AlertHandshakeFailure, \"client sent no certificate but one is required\")",
		"TestMisbehavingPeer"},
	{"tlcp server: a client certificate ClientAuth should verify accepted without ClientCAs", "tlcp/handshake_server.go",
		"if cfg.ClientAuth.verifies() && cfg.ClientCAs == nil {", "if false && cfg.ClientAuth.verifies() && cfg.ClientCAs == nil {",
		"TestClientAuthWithoutClientCAs"},
	{"tlcp server: a session of another suite resumed", "tlcp/handshake_server.go",
		"if s.cipherSuite != hs.suite.id {", "if false && s.cipherSuite != hs.suite.id {",
		"TestTicketEvents"},
	{"tlcp server: a session resumed under another server name", "tlcp/handshake_server.go",
		"if h := hs.certHash(); !asciifold.Equal(s.serverName, hs.hello.serverName) ||", "if h := hs.certHash(); false && !asciifold.Equal(s.serverName, hs.hello.serverName) ||",
		"TestTicketEvents"},
	{"tlcp server: a ClientHello of an unknown version served", "tlcp/handshake_server.go",
		"} else if hello.vers < VersionTLCP || hello.vers >= 0x0300 && hello.vers < versionTLS12 {", "} else if false {",
		"TestMisbehavingPeer"},
	{"tlcp server: a ClientHello without null compression served", "tlcp/handshake_server.go",
		"if !bytes.Contains(hello.compressionMethods, []byte{0}) {", "if false && !bytes.Contains(hello.compressionMethods, []byte{0}) {",
		"TestMisbehavingPeer"},
	{"tlcp: records of an unknown type dropped", "tlcp/conn.go",
		"default:\n\t\tc.sendAlert(AlertUnexpectedMessage)\n\t\treturn c.in.setErr(errorf(AlertUnexpectedMessage, \"unknown record type %d\", typ))", "default:",
		"TestMisbehavingPeer"},
	{"tlcp: an alert with trailing bytes taken", "tlcp/conn.go",
		"if len(data) != 2 {", "if len(data) < 2 {",
		"TestMisbehavingPeer"},
	{"tlcp: a ChangeCipherSpec of another value than 1 taken", "tlcp/conn.go",
		"len(data) != 1 || data[0] != 1 ||", "len(data) != 1 ||",
		"TestClientFlightBeforeFinishedAltered"},
	{"tlcp: application data before the handshake ended taken", "tlcp/conn.go",
		"if !c.core.HandshakeComplete() || expectCCS {", "if false {",
		"TestClientFlightBeforeFinishedAltered"},
	{"tlcp: empty handshake records not refused (nor bounded)", "tlcp/conn.go",
		"if len(data) == 0 || expectCCS {", "if expectCCS {",
		"TestMisbehavingPeer"},
	{"tlcp server: an ECC pre-master of another version than TLCP taken", "tlcp/key_agreement.go",
		"good = subtle.ConstantTimeByteEq(pm[0], VersionTLCP>>8) & subtle.ConstantTimeByteEq(pm[1], VersionTLCP&0xff)", "good = 1",
		"TestECCPreMasterNoOracle"},
	{"tlcp server: an ECDHE ClientKeyExchange with trailing bytes taken", "tlcp/key_agreement.go",
		"if err != nil || len(rest) != 0 {\n\t\treturn nil, wrapErr(AlertDecodeError, \"ECDHE ClientKeyExchange\", err)", "if err != nil || false && len(rest) != 0 {\n\t\treturn nil, wrapErr(AlertDecodeError, \"ECDHE ClientKeyExchange\", err)",
		"TestMisbehavingPeer"},
	{"tls13sm server: a ClientHello without TLS 1.3 in supported_versions served", "tls13sm/handshake_server_tls13.go",
		"if !slices.Contains(h.supportedVersions, VersionTLS13) {", "if false && !slices.Contains(h.supportedVersions, VersionTLS13) {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a TLS 1.3 ClientHello with compression served", "tls13sm/handshake_server_tls13.go",
		"if len(h.compressionMethods) != 1 || h.compressionMethods[0] != 0 {", "if false && (len(h.compressionMethods) != 1 || h.compressionMethods[0] != 0) {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a second ClientHello without the one key share asked for served", "tls13sm/handshake_server_tls13.go",
		"if len(h2.keyShares) != 1 || h2.keyShares[0].group != hs.group {", "if len(h2.keyShares) == 0 {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: early_data in the second ClientHello served", "tls13sm/handshake_server_tls13.go",
		"if h2.earlyData {", "if false && h2.earlyData {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a second ClientHello that changed its server_name served", "tls13sm/handshake_server_tls13.go",
		"a.serverName == b.serverName && ", "",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a second ClientHello that changed its cipher suites served", "tls13sm/handshake_server_tls13.go",
		"slices.Equal(a.cipherSuites, b.cipherSuites) && ", "",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a full handshake without sm2sig_sm3 offered served", "tls13sm/handshake_server_tls13.go",
		"if !slices.Contains(hs.hello.signatureAlgorithms, SM2SigSM3) {", "if false && !slices.Contains(hs.hello.signatureAlgorithms, SM2SigSM3) {",
		"TestHelloWithoutSM2SignaturesRefused"},
	{"tls13sm server: a client Certificate with a request context taken", "tls13sm/handshake_server_tls13.go",
		"if len(cm.context) != 0 {\n\t\treturn c.fail(AlertIllegalParameter, \"client Certificate with a request context\")", "if false {\n\t\treturn c.fail(AlertIllegalParameter, \"client Certificate with a request context\")",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a required client certificate may be left out", "tls13sm/handshake_server_tls13.go",
		"if hs.config.ClientAuth == RequireAnyClientCert || hs.config.ClientAuth == RequireAndVerifyClientCert {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: VerifyClientCertIfGiven does not verify the certificate given", "tls13sm/handshake_server_tls13.go",
		"verify := hs.config.ClientAuth == VerifyClientCertIfGiven || hs.config.ClientAuth == RequireAndVerifyClientCert", "verify := hs.config.ClientAuth == RequireAndVerifyClientCert",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a ticket without a client certificate resumes under RequireAnyClientCert", "tls13sm/handshake_server_tls13.go",
		"case RequireAnyClientCert:\n\t\tif !id.presented {", "case RequireAnyClientCert:\n\t\tif false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a ticket of an unverified client resumes under RequireAndVerifyClientCert", "tls13sm/handshake_server_tls13.go",
		"case RequireAndVerifyClientCert:\n\t\tif !id.verified {", "case RequireAndVerifyClientCert:\n\t\tif false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a ticket of an unverified client resumes under VerifyClientCertIfGiven", "tls13sm/handshake_server_tls13.go",
		"if id.presented && !id.verified {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a ticket issued to a client that cannot use it", "tls13sm/handshake_server_tls13.go",
		"if !canUse {\n\t\treturn nil", "if false && !canUse {\n\t\treturn nil",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a downgrade sentinel answered protocol_version", "tls13sm/handshake_client_tls13.go",
		"if tail == downgradeTLS12 || tail == downgradeTLS11 {", "if false && (tail == downgradeTLS12 || tail == downgradeTLS11) {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a ServerHello with bad legacy fields accepted", "tls13sm/handshake_client_tls13.go",
		"if sh.vers != 0x0303 || sh.compression != 0 {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a ServerHello that does not echo the session ID accepted", "tls13sm/handshake_client_tls13.go",
		"if !bytes.Equal(sh.sessionID, hs.hello.sessionID) {", "if false && !bytes.Equal(sh.sessionID, hs.hello.sessionID) {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a ServerHello with an extension not offered accepted", "tls13sm/handshake_client_tls13.go",
		"if sh.unknownExtensions {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a suite the client did not offer accepted", "tls13sm/handshake_client_tls13.go",
		"if !slices.Contains(hs.hello.cipherSuites, sh.cipherSuite) {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a ServerHello suite other than the HelloRetryRequest's accepted", "tls13sm/handshake_client_tls13.go",
		"if hs.suite != nil && hs.suite.id != sh.cipherSuite {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a HelloRetryRequest that changes nothing answered", "tls13sm/handshake_client_tls13.go",
		"if hrr.selectedGroup == 0 && len(hrr.cookie) == 0 {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a HelloRetryRequest with ServerHello-only extensions answered", "tls13sm/handshake_client_tls13.go",
		"if hrr.serverShare.group != 0 || hrr.hasSelectedIdent {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a HelloRetryRequest for a group not offered or already shared answered", "tls13sm/handshake_client_tls13.go",
		"if !slices.Contains(h.supportedGroups, g) || g == h.keyShares[0].group {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a second HelloRetryRequest answered", "tls13sm/handshake_client_tls13.go",
		"if hs.serverHello.isHRR() {\n\t\treturn c.fail(AlertUnexpectedMessage, \"second HelloRetryRequest\")", "if false {\n\t\treturn c.fail(AlertUnexpectedMessage, \"second HelloRetryRequest\")",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a ServerHello with HelloRetryRequest extensions accepted", "tls13sm/handshake_client_tls13.go",
		"if len(sh.cookie) > 0 || sh.selectedGroup != 0 {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a PSK identity the client did not offer accepted", "tls13sm/handshake_client_tls13.go",
		"if hs.session == nil || sh.selectedIdentity != 0 {", "if hs.session == nil {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a full handshake without key_share (all-zero shared secret) accepted", "tls13sm/handshake_client_tls13.go",
		"if !hs.usingPSK || !slices.Contains(hs.hello.pskModes, pskModePlain) {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a server key share for a group not shared accepted", "tls13sm/handshake_client_tls13.go",
		"if sh.serverShare.group != hs.hello.keyShares[0].group {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: early data accepted that was not offered", "tls13sm/handshake_client_tls13.go",
		"if ee.earlyData {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: an ALPN protocol the client did not offer accepted", "tls13sm/handshake_client_tls13.go",
		"if !slices.Contains(hs.hello.alpnProtocols, ee.alpnProtocol) {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a CertificateRequest with a context during the handshake answered", "tls13sm/handshake_client_tls13.go",
		"if len(cr.context) != 0 {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a server Certificate with a context accepted", "tls13sm/handshake_client_tls13.go",
		"if len(cm.certificates) == 0 || len(cm.context) != 0 {", "if len(cm.certificates) == 0 {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm client: a NewSessionTicket lifetime above 7 days accepted", "tls13sm/handshake_client_tls13.go",
		"if life > maxTicketLifetime {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: a CertificateVerify of another scheme than sm2sig_sm3 taken", "tls13sm/handshake_tls13.go",
		"if cv.sigAlg != SM2SigSM3 {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: a record version whose major byte is not 3 taken", "tls13sm/conn.go",
		"if vers>>8 != 3 {", "if false {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: a ChangeCipherSpec after the handshake dropped", "tls13sm/conn.go",
		"if c.core.HandshakeComplete() || n != 1 || payload[0] != 1 ||", "if n != 1 || payload[0] != 1 ||",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: a ChangeCipherSpec before the ClientHello dropped", "tls13sm/conn.go",
		"len(c.core.Hand) != 0 || !c.isClient && !c.helloRead {", "len(c.core.Hand) != 0 {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: a record of only padding crashes or is taken", "tls13sm/conn.go",
		"if i < 0 {\n\t\t\treturn c.in.setErrorLocked", "if false {\n\t\t\treturn c.in.setErrorLocked",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: an alert with trailing bytes taken", "tls13sm/conn.go",
		"if len(payload) != 2 {", "if len(payload) < 2 {",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: empty handshake records not refused (nor bounded)", "tls13sm/conn.go",
		"if len(payload) == 0 {\n\t\t\treturn c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, \"empty handshake record\"))", "if false {\n\t\t\treturn c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, \"empty handshake record\"))",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: records of an unknown inner type dropped", "tls13sm/conn.go",
		"return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, \"record of unknown type %d\", typ))", "return nil",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm server: a NewSessionTicket from a client ignored", "tls13sm/conn.go",
		"if !c.isClient {\n\t\t\treturn c.fail(AlertUnexpectedMessage, \"NewSessionTicket from a client\")", "if false {\n\t\t\treturn c.fail(AlertUnexpectedMessage, \"NewSessionTicket from a client\")",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},
	{"tls13sm: an unknown post-handshake message ignored", "tls13sm/conn.go",
		"return c.fail(AlertUnexpectedMessage, \"unexpected post-handshake message type %d\", msg[0])", "return nil",
		"TestMisbehavingPeer|TestNegativeHandshakes|TestStrictMode|TestClientAuthRequiredButMissing|TestTicketClientPolicy|TestClientDowngradeProtection|TestMandatoryExtensionsChecked|TestChangeCipherSpecOutsideItsWindow|TestSecondClientHelloMustMatchFirst|TestEarlyDataIgnored|TestHRRWithResumption|TestBadSignature|TestClientCAsRequiredToVerify|TestManyKeyShares|TestUnsolicitedServerNameAckRefused|TestForbiddenExtensionInEncryptedExtensions|TestPSKOnlyResumption|TestClientRefusesSuiteItCannotRun|TestTicketClientAuthBinding|TestOnTicket|TestResumeNeedsClientChain|TestKeyUpdate"},

	{"proxy: forged X-Ssl-Protocol not stripped", "proxy/hygiene.go",
		"\tHeaderRealIP, HeaderSSLProtocol, HeaderSSLCipher, HeaderSSLReused,\n\tHeaderClientVerify,", "\tHeaderRealIP, HeaderSSLCipher, HeaderSSLReused,\n\tHeaderClientVerify,",
		"TestForged|TestTrustedOnlyHeadersFromClients|TestClientAddressAndCertHeadersFromClientsRemoved|TestForwardedAndTLSHeaders"},
	{"proxy: forged X-Ssl-Cipher not stripped", "proxy/hygiene.go",
		"\tHeaderRealIP, HeaderSSLProtocol, HeaderSSLCipher, HeaderSSLReused,\n\tHeaderClientVerify,", "\tHeaderRealIP, HeaderSSLProtocol, HeaderSSLReused,\n\tHeaderClientVerify,",
		"TestForged|TestTrustedOnlyHeadersFromClients|TestClientAddressAndCertHeadersFromClientsRemoved|TestForwardedAndTLSHeaders"},
	{"proxy: forged X-Ssl-Session-Reused not stripped", "proxy/hygiene.go",
		"\tHeaderRealIP, HeaderSSLProtocol, HeaderSSLCipher, HeaderSSLReused,\n\tHeaderClientVerify,", "\tHeaderRealIP, HeaderSSLProtocol, HeaderSSLCipher,\n\tHeaderClientVerify,",
		"TestForged|TestTrustedOnlyHeadersFromClients|TestClientAddressAndCertHeadersFromClientsRemoved|TestForwardedAndTLSHeaders"},
	{"proxy: forged X-Ssl-Client-Verify not stripped", "proxy/hygiene.go",
		"HeaderSSLReused,\n\tHeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,", "HeaderSSLReused,\n\tHeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,",
		"TestForged|TestTrustedOnlyHeadersFromClients|TestClientAddressAndCertHeadersFromClientsRemoved|TestForwardedAndTLSHeaders"},
	{"proxy: forged X-Ssl-Client-S-Dn not stripped", "proxy/hygiene.go",
		"HeaderSSLReused,\n\tHeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,", "HeaderSSLReused,\n\tHeaderClientVerify, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,",
		"TestForged|TestTrustedOnlyHeadersFromClients|TestClientAddressAndCertHeadersFromClientsRemoved|TestForwardedAndTLSHeaders"},
	{"proxy: forged X-Ssl-Client-Serial not stripped", "proxy/hygiene.go",
		"HeaderSSLReused,\n\tHeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientSerial, HeaderClientCert,\n\tHeaderForwarded,", "HeaderSSLReused,\n\tHeaderClientVerify, HeaderClientSDN, HeaderClientIDN, HeaderClientCert,\n\tHeaderForwarded,",
		"TestForged|TestTrustedOnlyHeadersFromClients|TestClientAddressAndCertHeadersFromClientsRemoved|TestForwardedAndTLSHeaders"},
	{"proxy: a request trailer named as a header gmproxy sets passed on", "proxy/hygiene.go",
		"rt.allowTrailers && !isSetHeaderName(k) && validTrailer(k)", "rt.allowTrailers && validTrailer(k)",
		"TestRequestTrailers|TestForged"},
	{"proxy: a request trailer that may not be a trailer passed on", "proxy/hygiene.go",
		"!isSetHeaderName(k) && validTrailer(k) && !rt.reqOps.names(k)", "!isSetHeaderName(k) && !rt.reqOps.names(k)",
		"TestRequestTrailers"},
	{"proxy: a request trailer the route's request_headers edit passed on", "proxy/hygiene.go",
		"validTrailer(k) && !rt.reqOps.names(k)", "validTrailer(k)",
		"TestRequestTrailers|TestForged"},
	{"proxy: a hop-by-hop field passed on as a trailer", "proxy/hygiene.go",
		"if strings.EqualFold(h, k) {\n\t\t\treturn false", "if strings.EqualFold(h, k) && false {\n\t\t\treturn false",
		"TestRequestTrailers|TestResponseTrailersFiltered"},
	{"proxy: an h2c Upgrade tunnelled", "proxy/hygiene.go",
		"if name == \"\" || strings.EqualFold(name, \"h2c\") {", "if name == \"\" {",
		"TestUpgrade|TestH2c|TestProtocol"},
	{"ticket: a secret shorter than 16 bytes taken", "internal/ticket/ticket.go",
		"if len(secret) < 16 {", "if len(secret) < 1 {",
		"."},
	{"ticket: a key file of one repeated byte taken", "internal/ticket/ticket.go",
		"if repeatedByte(c) {", "if false && repeatedByte(c) {",
		"."},
	{"ticket: a ticket opened under an older key not reported stale (never renewed)", "internal/ticket/ticket.go",
		"return out, true, i != 0", "return out, true, false",
		"."},
	{"ticket: a ticket shorter than its overhead opened", "internal/ticket/ticket.go",
		"if len(ticket) < Overhead {", "if len(ticket) < 16 {",
		"."},
	{"frontdoor: a first flight of other records than handshake ones sniffed", "frontdoor/sniff.go",
		"if h[0] != recordTypeHandshake || (s.kind == KindTLCP", "if false && h[0] != recordTypeHandshake || (s.kind == KindTLCP",
		"TestSniff|TestMalformedHelloGetsAlert|TestServerHandshakeBytes|TestHandshakeBytesPerHelloBound"},
	{"frontdoor: empty or oversize records of a hello taken", "frontdoor/sniff.go",
		"if n == 0 || n > maxRecordPayload {", "if false {",
		"TestSniff|TestMalformedHelloGetsAlert|TestServerHandshakeBytes|TestHandshakeBytesPerHelloBound"},
	{"frontdoor: a first message other than a ClientHello sniffed", "frontdoor/sniff.go",
		"if hdr[0] != typeClientHello {", "if false {",
		"TestSniff|TestMalformedHelloGetsAlert|TestServerHandshakeBytes|TestHandshakeBytesPerHelloBound"},

	{"proxy: one client address may take the whole bound on buffered bodies", "proxy/reverseproxy.go",
		"\tif others > 0 && held+int64(n) > b.perClient || !b.total.take(n) {", "\tif others > 0 && false || !b.total.take(n) {",
		"TestBufferedUploadsBoundedPerClient"},
	{"proxy: a client's share of buffered bodies never given back", "proxy/reverseproxy.go",
		"\tif held := s.m[k] - int64(n); held > 0 {", "\tif held := s.m[k]; held > 0 {",
		"TestBufferedUploadsBoundedPerClient"},
	{"frontdoor: site names lower-cased with Unicode's rules (the Kelvin sign is k)", "frontdoor/site.go",
		"return strings.TrimSuffix(asciifold.LowerString(n), \".\")", "return strings.TrimSuffix(strings.ToLower(asciifold.LowerString(n)), \".\")",
		"TestNormalizeNameASCIIOnly"},
	{"proxy: one buffered body capped at the client's share (a request_buffer over 4 MiB never whole)", "proxy/reverseproxy.go",
		"\tif others > 0 && held+int64(n) > b.perClient || !b.total.take(n) {", "\tif others >= 0 && held+int64(n) > b.perClient || !b.total.take(n) {",
		"TestBodyBudgetOneLargeBody"},
	{"proxy: a route header matcher on Host accepted (it never matches)", "proxy/headermatch.go",
		"\tcase k == \"Host\":\n\t\treturn ErrHostHeaderMatch", "\tcase k == \"Host\" && false:\n\t\treturn ErrHostHeaderMatch",
		"TestRouteHeaderMatchOnHost"},
	{"supervisor: the last reload's time is the latest of the workers' (a restarted worker's start)", "cmd/gmproxy/supervisor.go",
		"\t\tdelete(fams, \"gmproxy_config_last_reload_success_timestamp_seconds\")\n", "",
		"TestWorkersRefusedReloadInMetrics"},
	{"proxy: HTTP/2 streams copy response bodies through the 64 KiB buffer (a stalled stream holds twice as much)", "proxy/reverseproxy.go",
		"copyBody(&rs.w, body, fi, size, r.ProtoMajor == 2)", "copyBody(&rs.w, body, fi, size, false)",
		"^TestH2ResponseBodyBuffer$"},
	{"supervisor: giving up during a reload waits for the reload (a hung worker holds the stop up to 2 min)", "cmd/gmproxy/supervisor.go",
		"s.abandonReloads()\n\t\t\t\t\t<-done\n\t\t\t\t\terr = errReloadAbandoned\n\t\t\t\t\tbreak wait", "",
		"^TestGiveUpDuringReloadAbandonsIt$"},
	{"frontdoor: a verified TLS client certificate the proxy cannot read counted as client authentication (headers say NONE)", "frontdoor/tls.go",
		"st.ClientAuth = len(st.PeerCertificates) > 0 && len(cs.VerifiedChains) > 0", "st.ClientAuth = len(cs.PeerCertificates) > 0 && len(cs.VerifiedChains) > 0",
		"^TestTLSPeerCertificatesKeepTheLeaf$"},
	{"proxy: strip_prefix drops the client's escaping when the prefix or the slash after it was escaped", "proxy/reverseproxy.go",
		"if m, ok := escapedPrefixLen(esc, gone); ok {", "if m, ok := escapedPrefixLen(esc, gone); ok && m == gone {",
		"^TestStripPrefixKeepsEscapes$"},
	{"keyoffload: a decryption the engine refused (queue full, closed) taken for a bad ciphertext (TLCP goes on, blames the client)", "keyoffload/engine.go",
		"if (errors.Is(err, ErrBusy) || errors.Is(err, ErrClosed)) && !errors.Is(err, smkey.ErrKeyUnavailable) {", "if false {",
		"^TestDecryptRefusedIsKeyUnavailable$"},
	{"tlcp: the server's own failed SM2 key agreement sent as handshake_failure", "tlcp/key_agreement.go",
		"return nil, wrapErr(AlertInternalError, \"SM2 key agreement\"", "return nil, wrapErr(AlertHandshakeFailure, \"SM2 key agreement\"",
		"^TestECDHEKeyAgreementUnavailable$"},
	{"keyserver: a message it does not sign answered failed, not not_handshake", "keyserver/server.go",
		"case errors.Is(err, errNotHandshake):", "case errors.Is(err, errNotHandshake) && false:",
		"^TestSignsHandshakeMessagesOnly$"},
	{"proxy: a route's upgrades: [] read as the default [websocket] (tunnels the operator turned off)", "proxy/handler.go",
		"if rt.upgrades == nil {", "if len(rt.upgrades) == 0 {",
		"^TestUpgradesEmptyListTunnelsNothing$"},
	{"tls13sm: a ChangeCipherSpec of another value than 1 dropped", "tls13sm/conn.go",
		"|| n != 1 || payload[0] != 1 ||", "|| n != 1 ||",
		"^TestChangeCipherSpecContents$"},
	{"tls13sm: a ChangeCipherSpec longer than one byte dropped", "tls13sm/conn.go",
		"|| n != 1 || payload[0] != 1 ||", "|| n < 1 || payload[0] != 1 ||",
		"^TestChangeCipherSpecContents$"},
	{"tls13sm client: a second ChangeCipherSpec from the server dropped", "tls13sm/conn.go",
		"payload[0] != 1 || c.ccsSeen && c.isClient ||", "payload[0] != 1 ||",
		"^TestChangeCipherSpecContents$"},
	{"proxy: a TCP stream's dial to its target not cut by Close (runs to its connect timeout)", "proxy/tcpstream.go",
		"ctx, cancel := context.WithTimeout(p.cut, s.dialTimeout)", "ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout)",
		"^TestTCPStreamDialCutByClose$"},
	{"proxy: a TCP stream's dial cut by Close counted as the target's failure", "proxy/tcpstream.go",
		"if p.cut.Err() != nil {\n\t\t\tbreak // Close: not the target's failure\n\t\t}", "",
		"^TestTCPStreamDialCutByClose$"},
	{"proxy: a route's client_ip not checked (every address allowed)", "proxy/handler.go",
		"if !clientIn(rt.clientNets, a) {", "if !clientIn(rt.clientNets, a) && false {",
		"^TestRouteClientIP$"},
	{"proxy: client_ip reads X-Forwarded-For from any peer, not only trusted proxies", "proxy/handler.go",
		"if fields := r.Header[HeaderForwardedFor]; len(fields) > 0 && p.trusted(peer) {", "if fields := r.Header[HeaderForwardedFor]; len(fields) > 0 {",
		"^TestRouteClientIP$"},
	{"proxy: the real client is the left-most X-Forwarded-For address (the client's own writing)", "proxy/handler.go",
		"\t\treal = cand\n\t\tif !p.trusted(cand) {\n\t\t\tbreak\n\t\t}", "\t\treal = cand",
		"^TestRouteClientIP$"},
	{"daemon: a route's client_ip not passed to the proxy", "internal/daemon/proxycfg.go",
		"\t\tClientIP:        r.ClientIP,\n", "",
		"^TestRouteClientIP$"},
	{"proxy: a route's rate_limit never refuses (the allowance not checked)", "proxy/ratelimit.go",
		"if wait := tat - now - l.tolerance; wait > 0 {", "if wait := tat - now - l.tolerance; wait > 1<<62 {",
		"^TestRateLimiterAllowance$|^TestRouteRateLimit$"},
	{"proxy: rate_limit's burst ignored (one request per interval only)", "proxy/ratelimit.go",
		"tolerance: int64(burst) * int64(c.Interval),", "tolerance: 0,",
		"^TestRateLimiterAllowance$|^TestRouteRateLimit$"},
	{"proxy: rate_limit counts every IPv6 address alone, not by /64", "proxy/ratelimit.go",
		"key := frontdoor.ClientKeyOf(a)", "key, _ := a, frontdoor.ClientKeyOf",
		"^TestRouteRateLimit$"},
	{"proxy: rate_limit's refusal without Retry-After", "proxy/ratelimit.go",
		"\"Retry-After\", strconv.FormatInt(int64(secs), 10),", "\"\", strconv.FormatInt(int64(secs), 10),",
		"^TestRouteRateLimit$"},
	{"daemon: a route's rate_limit not passed to the proxy", "internal/daemon/proxycfg.go",
		"\t\tRateLimit:       rateLimitConfig(r.RateLimit),\n", "",
		"^TestRouteClientIP$"},
	{"conf: rate_limit without a rate accepted", "conf/validate.go",
		"if rl.Rate <= 0 {", "if rl.Rate < 0 {",
		"^TestBadConfigs$"},
	{"proxy: a gRPC Trailers-Only response flushed early (its grpc-status lost behind an empty DATA frame)", "proxy/reverseproxy.go",
		"if fi < 0 && res.ContentLength != 0 || len(announced) > 0 {", "if fi < 0 || len(announced) > 0 {",
		"^TestGRPCTrailersOnly$"},
	{"proxy: a transport's Close of an attempt's body does not cut its read of the client (an HTTP/2 handler hangs in the response body's Close; a target's reset answered 408 after body_timeout)", "proxy/reverseproxy.go",
		"\t\tb.cut = true\n\t\tif b.dl.stall != nil {\n\t\t\tb.dl.stall.stop()\n\t\t}\n\t\tif b.rd != nil {\n\t\t\tb.rd.SetReadDeadline(time.Now())\n\t\t}\n", "\t\tb.cut = true\n",
		"^TestAttemptBodyClose$|^TestH2TargetResetClientBodyOpen$|^TestH2RefusedResponseClientBodyOpen$"},
	{"proxy: net/http's transports read the client's body itself (their Close of an exchange ends no read)", "proxy/reverseproxy.go",
		"\t\treq.Body = attempt\n", "\t\treq.Body = body\n",
		"^TestGRPCEarlyAnswer$|^TestH2TargetResetClientBodyOpen$|^TestH2RefusedResponseClientBodyOpen$"},
	{"proxy: an attempt's Close cuts another attempt's read of the client", "proxy/reverseproxy.go",
		"if b.reader == a && !b.done {", "if b.reader != nil && !b.done {",
		"^TestAttemptBodyClose$"},
	{"proxy: a closed attempt goes on reading the client's body", "proxy/reverseproxy.go",
		"\t\tif a.closed {\n\t\t\tb.mu.Unlock()\n\t\t\treturn 0, errAttemptClosed\n\t\t}\n\t\tb.reader = a", "\t\tif false {\n\t\t\tb.mu.Unlock()\n\t\t\treturn 0, errAttemptClosed\n\t\t}\n\t\tb.reader = a",
		"^TestAttemptBodyClose$"},
	{"proxy: a closed attempt goes on reading a body request_buffer read whole", "proxy/reverseproxy.go",
		"\t\tif a.closed {\n\t\t\tb.mu.Unlock()\n\t\t\treturn 0, errAttemptClosed\n\t\t}\n\t\tif off", "\t\tif false {\n\t\t\tb.mu.Unlock()\n\t\t\treturn 0, errAttemptClosed\n\t\t}\n\t\tif off",
		"^TestAttemptBodyClosePre$"},
	{"proxy: a body whose read is in progress counts as untouched (retried on another target while the first reads on)", "proxy/reverseproxy.go",
		"if b.reader != nil || b.cut {", "if b.cut {",
		"^TestAttemptBodyClose$"},
	{"proxy: a body whose read an attempt's Close cut counts as untouched", "proxy/reverseproxy.go",
		"if b.reader != nil || b.cut {", "if b.reader != nil {",
		"^TestAttemptBodyClose$"},
	{"proxy: a read an attempt's Close cut counted as the client's stall or broken body", "proxy/reverseproxy.go",
		"case isTimeout(err) && (b.ended() || a != nil && a.isClosed()):", "case isTimeout(err) && b.ended():",
		"^TestAttemptBodyClose$"},
	{"proxy: send_timeout over HTTP/2 a deadline armed ahead (resets quiet streams)", "proxy/timeouts.go",
		"\t\tsd.stall = newOpStall(d, func() { ww.SetWriteDeadline(aLongTimeAgo) })\n\t\treturn\n", "",
		"^TestSendTimeoutIdleStream$|^TestSendTimeoutSlowUpload$"},
	{"proxy: body_timeout over HTTP/2 a deadline armed ahead (a slow target taken for the client's stall)", "proxy/timeouts.go",
		"\t\tb.stall = newOpStall(d, func() { rd.SetReadDeadline(aLongTimeAgo) })\n\t\treturn b\n", "",
		"^TestH2BodyTimeoutTargetSlow$"},
	{"proxy: an HTTP/2 operation that waited its timeout never cut", "proxy/timeouts.go",
		"\t\tif took >= s.d {\n\t\t\ts.stopped = true", "\t\tif took < 0 {\n\t\t\ts.stopped = true",
		"^TestH2SendTimeoutNoWindow$|^TestH2BodyTimeoutClientStalls$"},
	{"proxy: a client_ip or trusted_proxies range written IPv4-mapped matches no IPv4 client", "proxy/proxy.go",
		"if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {", "if a := pfx.Addr(); a.Is4In6() && pfx.Bits() > 128 {",
		"^TestRouteClientIPMapped$"},
	{"proxy: a zoned client address (fe80::1%eth0) matches no client_ip or trusted_proxies range", "proxy/proxyproto.go",
		"a = a.Unmap().WithZone(\"\")", "a = a.Unmap()",
		"^TestRouteClientIPZone$"},
	{"conf: a rate written back (check -dump) in a unit whose count does not read back", "conf/decode.go",
		"n >= 1 && n <= maxRate && u.per/n == time.Duration(r) {", "n >= 1 {",
		"^TestRateRoundTrip$"},
	{"proxy: an HTTP/2 target may send 4 MiB ahead on a stream the client does not read (Go's default window)", "proxy/httptransport.go",
		"\t\tHTTP2:                  &http.HTTP2Config{MaxReceiveBufferPerStream: h2UpstreamStreamWindow},\n", "",
		"^TestH2UpstreamStreamWindowBounded$"},
	{"proxy: a NAT64 client (64:ff9b::a.b.c.d) not matched by client_ip as the IPv4 client it embeds", "proxy/handler.go",
		"return nat && inPrefixes(nets, v4)", "return false && nat && inPrefixes(nets, v4)",
		"^TestRouteClientIPNAT64$"},
	{"proxy: the access log's grpc_status misses a trailer the response did not announce", "proxy/accesslog.go",
		"if v := h[http.TrailerPrefix+\"Grpc-Status\"]; len(v) > 0 {", "if v := h[\"Grpc-Status:\"]; len(v) > 0 {",
		"^TestAccessLogGRPCStatus$"},
	{"proxy: the access log's grpc_status never filled", "proxy/handler.go",
		"p.accessLog.logRequest(&ev, r, rs.ci, grpcStatusOf(rs.w.Header()), rs.reqID)", "p.accessLog.logRequest(&ev, r, rs.ci, \"\", rs.reqID)",
		"^TestAccessLogGRPCStatus$"},
	{"proxy: a stream site's client_ip not checked", "proxy/tcpstream.go",
		"\tif !s.admits(clientIP) {", "\tif !s.admits(clientIP) && false {",
		"^TestTCPStreamClientIP$"},
	{"daemon: a stream site's client_ip not passed to the proxy", "internal/daemon/proxycfg.go",
		"\t\t\t\tClientIP: st.ClientIP}", "}",
		"^TestStreamSiteClientIP$"},
	{"conf: a stream site's client_ip not checked", "conf/validate.go",
		"\tv.prefixes(p+\".client_ip\", st.ClientIP)\n", "",
		"^TestBadConfigs$"},
	{"rateshare: a key's own slot never found (every request counted afresh)", "internal/rateshare/rateshare.go",
		"\t\tif tag == k.tag {\n", "\t\tif false && tag == k.tag {\n",
		"^TestAllowGCRA$"},
	{"rateshare: a new key takes the first slot, not the one with the earliest time", "internal/rateshare/rateshare.go",
		"if victim < 0 || at < victimTat {", "if victim < 0 || at < victimTat && false {",
		"^TestFullBucketForgetsEarliest$|^TestPassedSlotTaken$"},
	{"rateshare: a bucket counted without its lock", "internal/rateshare/rateshare.go",
		"\tif !v.acquire(lk) {\n\t\treturn Busy, 0\n\t}\n", "",
		"^TestBusyBucket$"},
	{"rateshare: a bucket's lock never released", "internal/rateshare/rateshare.go",
		"\tdefer lk.Store(0)\n", "",
		"^TestBusyBucket$|^TestAllowGCRA$"},
	{"rateshare: a dead worker's locks not released", "internal/rateshare/rateshare.go",
		"t.lock(b).CompareAndSwap(owner, 0)", "t.lock(b).CompareAndSwap(owner+1, 0)",
		"^TestBusyBucket$"},
	{"rateshare: a dead worker's clearing releases every worker's locks", "internal/rateshare/rateshare.go",
		"t.lock(b).CompareAndSwap(owner, 0)", "t.lock(b).Store(owner &^ owner)",
		"^TestBusyBucket$"},
	{"rateshare: the burst's tolerance ignored", "internal/rateshare/rateshare.go",
		"if w := tat - now - tolerance; w > 0 {", "if w := tat - now; w > 0 {",
		"^TestAllowGCRA$"},
	{"rateshare: keys not keyed with the table's seed", "internal/rateshare/rateshare.go",
		"\tcopy(in[:16], v.t.seed[:])\n", "",
		"^TestKeySeeded$"},
	{"proxy: rate_limit counted in this process alone beside the workers' shared table", "proxy/ratelimit.go",
		"\tif l.shared != nil {\n", "\tif false && l.shared != nil {\n",
		"^TestRouteRateLimitShared$"},
	{"proxy: a reload starts every route's rate counts afresh", "proxy/ratelimit.go",
		"\tl := p.prevRates[id]\n", "\tl := (*rateLimiter)(nil)\n",
		"^TestRouteRateLimitKeptOverReload$"},
	{"proxy: a reload that changed a route's rate keeps its counts", "proxy/ratelimit.go",
		"\tid := scope + \"\\x00\" + strconv.FormatInt(int64(c.Interval), 10) + \"/\" + strconv.Itoa(c.Burst)\n", "\tid := scope\n",
		"^TestRouteRateLimitKeptOverReload$"},
	{"gmproxy run: a worker's proxy not given the shared rate table", "cmd/gmproxy/run.go",
		"\t\tr.env.SharedRates = r.wk.rates\n", "\t\t_ = r.wk.rates\n",
		"^TestWorkersRateLimit$"},
	{"gmproxy run: the workers not handed the rate table", "cmd/gmproxy/supervisor.go",
		"\tif s.rates != nil {\n\t\tcmd.ExtraFiles", "\tif false && s.rates != nil {\n\t\tcmd.ExtraFiles",
		"^TestWorkersRateLimit$"},
	{"gmproxy run: the rate_limit buckets a dead worker held not released", "cmd/gmproxy/supervisor.go",
		"\t\ts.ratesTable.ClearWorker(p.index)\n", "",
		"^TestDeadWorkerCountsClearedAtDeath$"},
	{"daemon: the proxy not given the worker's shared rate table", "internal/daemon/build.go",
		"\tpc.SharedRates = env.SharedRates\n", "",
		"./cmd/gmproxy:^TestWorkersRateLimit$"},
	{"proxy: an HTTP/2 body over its content-length logged as a client gone (499), not a malformed request", "proxy/reverseproxy.go",
		"if berr != nil && overDeclaredLength(berr) {", "if false && berr != nil && overDeclaredLength(berr) {",
		"^TestH2BodyOverDeclaredLength$"},
	{"proxy: a client body's own error after an attempt's cut taken for the cut", "proxy/reverseproxy.go",
		"case isTimeout(err) && (b.ended() || a != nil && a.isClosed()):", "case b.ended() || a != nil && a.isClosed():",
		"^TestAttemptBodyClose$"},
	{"proxy: a route's read timeout ignored by the HTTP/1.1 client", "proxy/h1client.go",
		"\t\tif readTimeout != 0 {\n\t\t\trd.d = readTimeout\n", "\t\tif false {\n\t\t\trd.d = readTimeout\n",
		"^TestRouteReadTimeout$"},
	{"proxy: a route's read timeout not passed to the HTTP/1.1 client", "proxy/reverseproxy.go",
		"h1.roundTripHead(outreq, rs.passOn, rt.readTimeout, rt.headerTimeout)", "h1.roundTripHead(outreq, rs.passOn, 0, rt.headerTimeout)",
		"^TestRouteReadTimeout$"},
	{"proxy: a route's read timeout ignored on net/http transports' bodies", "proxy/reverseproxy.go",
		"\tif rt.readTimeout != 0 {\n\t\treadTimeout = rt.readTimeout", "\tif false {\n\t\treadTimeout = rt.readTimeout",
		"^TestRouteReadTimeout$"},
	{"proxy: a route's body timeout ignored", "proxy/timeouts.go",
		"\tif route != 0 {\n\t\td = route", "\tif false {\n\t\td = route",
		"^TestRouteBodyTimeout$"},
	{"daemon: a route's timeout of 0 taken as the upstream's, not as no limit", "internal/daemon/proxycfg.go",
		"\treturn offIfZero(*d)\n", "\treturn *d\n",
		"^TestRouteTimeoutsMapped$"},
	{"h1server: a body the handler left unread drained before the response goes out (a client still sending waits up to idle_timeout)", "internal/h1server/body.go",
		"\t\treturn true, false\n\t}\n\treturn false, false\n}", "\t\treturn true, false\n\t}\n\treturn true, b.drainLocked()\n}",
		"^TestUnreadBodyStillSent$"},
	{"h1server: a declared rest past the drain not announced as a close", "internal/h1server/body.go",
		"\tcase b.left > maxDrainBytes:\n", "\tcase false:\n",
		"^TestUnreadBody$"},
	{"gmproxy run: a worker dying during a stop keeps its shared counts and rate_limit locks", "cmd/gmproxy/supervisor.go",
		"\tif s.procs[p.index] != p {\n\t\treturn true\n\t}\n\t// What it held", "\tif s.stopping || s.procs[p.index] != p {\n\t\treturn true\n\t}\n\t// What it held",
		"^TestDeadWorkerCountsClearedAtDeath$"},
	{"h1server: a closing response's unread body drained (up to idle_timeout) instead of a bounded linger", "internal/h1server/conn.go",
		"\tcase drain && w.closeAfter:\n", "\tcase false:\n",
		"^TestUnreadBodyClosing$"},
	{"metrics: requests a route's rate_limit answered not counted", "metrics/metrics.go",
		"\tif ev.RateLimited {\n", "\tif false {\n",
		"^TestRateLimitedCounted$"},
	{"metrics: a request no target was asked observed as an upstream response time of 0", "metrics/metrics.go",
		"if ev.Upstream != \"\" && ev.Target != \"\" {", "if ev.Upstream != \"\" {",
		"^TestRateLimitedCounted$"},
	{"metrics: a removed route's rate_limited_total series kept", "metrics/retain.go",
		"m.requests, m.requestDuration, m.rateLimited)", "m.requests, m.requestDuration)",
		"^TestRateLimitedCounted$"},
	{"proxy: a rate-limited request not marked in its RequestEvent", "proxy/ratelimit.go",
		"\trs.rateLimited = true\n", "",
		"^TestRouteRateLimit$"},
	{"proxy: a route's response_header ignored by the HTTP/1.1 client", "proxy/h1client.go",
		"if headerTimeout != 0 {\n\t\thd = max(headerTimeout, 0) // the route's", "if false {\n\t\thd = max(headerTimeout, 0) // the route's",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: a route's header deadline left on the pooled connection", "proxy/h1client.go",
		"pc.hdrArmed, pc.otherArmed = 0, true", "pc.hdrArmed, pc.otherArmed = 0, false",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: a route's response_header ignored on net/http's transports", "proxy/reverseproxy.go",
		"hd = max(rt.headerTimeout, 0) // the route's", "hd = u.headerTimeout",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: net/http's transports keep a header timeout of their own (a route's longer one cut)", "proxy/upstreams.go",
		"\tu.transport.ResponseHeaderTimeout = 0\n", "\n",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: a response_header wait over does not cancel the exchange", "proxy/headerwatch.go",
		"w.cancel(&headerTimeoutError{w.d})", "_ = w.d",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: a response_header wait never started", "proxy/headerwatch.go",
		"WroteRequest: func(i httptrace.WroteRequestInfo) { w.start(i.Err) },", "",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: a response_header wait counted from a request's first write, not its last", "proxy/headerwatch.go",
		"\tif w.timer != nil {\n\t\tw.timer.Stop()\n\t}\n\tw.writes++", "\tif w.timer != nil {\n\t\treturn\n\t}\n\tw.writes++",
		"TestResponseHeaderTimeoutPerWrite"},
	{"proxy: an exchange the response_header wait ended not taken for a timeout", "proxy/reverseproxy.go",
		"if hw != nil && hw.stop() {", "if hw != nil && hw.stop() && false {",
		"TestRouteResponseHeaderTimeout"},
	{"proxy: compress: the identity variant of a compressed response without Vary", "proxy/reverseproxy.go",
		"if varies {\n\t\t\taddVary(dst)", "if false {\n\t\t\taddVary(dst)",
		"^TestCompress$"},
	{"proxy: compress: the target's head passed on as it came under a gzip body", "proxy/reverseproxy.go",
		"h == nil || varies || encoded304 || !rs.w.writeFields(", "h == nil || encoded304 || !rs.w.writeFields(",
		"^TestCompress$"},
	{"proxy: compress: a response the target encoded encoded again", "proxy/compress.go",
		"c != \"\" && !strings.EqualFold(c, \"identity\")", "false && c != \"\" && !strings.EqualFold(c, \"identity\")",
		"^TestCompress$"},
	{"proxy: compress: Cache-Control no-transform ignored", "proxy/compress.go",
		"if hasToken(cc, \"no-transform\")", "if hasToken(cc, \"no-transform-x\")",
		"^TestCompress$"},
	{"proxy: compress: gzip;q=0 taken for gzip", "proxy/compress.go",
		"return ok // an explicit gzip decides", "return true",
		"^TestAcceptsGzip$"},
	{"proxy: compress: a streamed response held in gzip's buffer", "proxy/compress.go",
		"if b.flushEach {\n\t\t\t\tb.zw.Flush()", "if false {\n\t\t\t\tb.zw.Flush()",
		"^TestCompressStream$"},
	{"proxy: compress: a compressed response's place never given back", "proxy/compress.go",
		"\t\tbodyBufPool.Put(b.in)\n\t\treleaseCompressPlace(b.conn)", "\t\tbodyBufPool.Put(b.in)",
		"^TestCompressBusy$"},
	{"proxy: compress: the identity's strong ETag kept on the encoding", "proxy/compress.go",
		"dst[\"Etag\"] = []string{\"W/\" + et[0]}", "_ = et",
		"^TestCompress$"},
	{"proxy: compress: a later Cache-Control line's no-transform not seen", "proxy/compress.go",
		"\t\treturn res.Header[name]\n", "\t\treturn res.Header[name][:min(len(res.Header[name]), 1)]\n",
		"^TestCompressFieldLines$"},
	{"proxy: compress: a 304 revalidating the encoding sent with the identity's strong ETag", "proxy/reverseproxy.go",
		"if encoded304 {\n\t\t\taddVary(dst)\n\t\t\tweakenETag(dst)", "if encoded304 {\n\t\t\taddVary(dst)\n\t\t\t_ = weakenETag",
		"^TestCompressNotModified$"},
	{"proxy: compress: a strong entity tag in If-None-Match not seen beside the weak one", "proxy/compress.go",
		"return weak && !strong", "return weak",
		"^TestRevalidatesEncoding$"},
	{"proxy: compress: a 206's ranges compressed", "proxy/compress.go",
		"sc == http.StatusPartialContent, ", "",
		"^TestCompress$"},
	{"proxy: files: hidden names served", "proxy/files.go",
		"if !fsrv.hidden && hiddenPath(name) {", "if false && hiddenPath(name) {",
		"^TestFiles$"},
	{"proxy: files: a FIFO opened blocking (the request hangs)", "proxy/files.go",
		"root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)", "root.OpenFile(name, os.O_RDONLY, 0)",
		"^TestFilesSwappedForFIFO$"},
	{"proxy: files: a file not regular once opened served", "proxy/files.go",
		"err != nil || !fi.Mode().IsRegular() {", "err != nil {",
		"^TestFilesSwappedForFIFO$"},
	{"proxy: files: the content type sniffed from the file", "proxy/files.go",
		"\th[\"Content-Type\"] = []string{ct}\n", "\t_ = ct\n",
		"^TestFiles$"},
	{"proxy: files: a directory's path without its / served (its relative links break)", "proxy/files.go",
		"if !dirPath {", "if false {",
		"^TestFiles$"},
	{"proxy: files: a file served at its name and a /", "proxy/files.go",
		"if err == nil && !fi.IsDir() && dirPath {", "if false {",
		"^TestFilesFileWithSlash$"},
	{"proxy: files: strip_prefix not applied", "proxy/files.go",
		"\t\t\tp = p[n:]\n", "\t\t\t_ = n\n",
		"^TestFiles$"},
	{"proxy: files: strip_prefix removed in its own letter case only", "proxy/files.go",
		"if n, ok := rt.pathPrefix(p, rt.strip); ok {", "if n, ok := len(rt.strip), strings.HasPrefix(p, rt.strip); ok {",
		"^TestFilesCaseInsensitiveStrip$"},
	{"proxy: files: the directory of a request left open", "proxy/files.go",
		"\tdefer root.Close()\n\t// Stat before Open", "\t// Stat before Open",
		"^TestFilesRootClosedAfterRequest$"},
	{"proxy: files: /.well-known/ taken for hidden", "proxy/files.go",
		"!(i == 0 && seg == \".well-known\")", "!(i < 0 && seg == \".well-known\")",
		"^TestFilesRootFollowsItsLink$"},
	{"proxy: files: the request path not cleaned", "proxy/files.go",
		"name := strings.TrimPrefix(path.Clean(\"/\"+p), \"/\")", "name := strings.TrimPrefix(\"/\"+p, \"/\")",
		"^TestFiles$|^TestFilesRawTraversal$"},
	{"proxy: compress: one connection takes every place", "proxy/compress.go",
		"if conn != nil && conn.Add(1) > maxCompressingPerConn {", "if conn != nil && conn.Add(1) > maxCompressingPerConn+1000 {",
		"^TestCompressPerConnection$"},
	{"proxy: compress: an event stream holds a writer for its whole life", "proxy/compress.go",
		"if ct == \"text/event-stream\" {", "if ct == \"text/event-stream-x\" {",
		"^TestCompressPerConnection$"},
	{"proxy: compress: HTTP/1.0 clients sent gzip (their caches ignore Vary)", "proxy/reverseproxy.go",
		"r.Method != http.MethodHead && r.ProtoAtLeast(1, 1) && rt.compress.eligible(r, res)", "r.Method != http.MethodHead && rt.compress.eligible(r, res)",
		"^TestCompressNotHTTP10$"},
	{"proxy: a rate_limit zone counted per route", "proxy/ratelimit.go",
		"\t\tscope = \"\\x00zone\\x00\" + c.Zone", "\t\t_ = scope",
		"^TestRouteRateLimitZone$"},
	{"proxy: the routes of a zone given a limiter each", "proxy/ratelimit.go",
		"if l := p.rates[id]; l != nil {", "if l := p.rates[id]; l != nil && false {",
		"^TestRouteRateLimitZone$"},
	{"proxy: a rate_limit zone's counts dropped by a reload", "proxy/ratelimit.go",
		"\tl := p.prevRates[id]\n", "\tl := p.prevRates[id]\n\tif c.Zone != \"\" {\n\t\tl = nil\n\t}\n",
		"^TestRouteRateLimitZoneKeptOverReload$"},
	{"proxy: a zone given two rates accepted", "proxy/ratelimit.go",
		"ok && (z.Interval != c.Interval || z.Burst != c.Burst) {", "ok && false {",
		"^TestRouteRateLimitZone$"},
	{"conf: a zone given two rates accepted", "conf/validate.go",
		"} else if ok && valid && (first.rl.Rate != rl.Rate || first.rl.Burst != rl.Burst) {", "} else if false {",
		"TestBadConfigs"},
	{"conf: a zone's invalid first rate_limit taken as the zone's, its valid routes told they mismatch", "conf/validate.go",
		"} else if first, ok := v.zones[rl.Zone]; !ok && valid {", "} else if first, ok := v.zones[rl.Zone]; !ok {",
		"TestRateLimitZoneInvalidFirst"},
	{"daemon: a files route's precompressed not passed on", "internal/daemon/proxycfg.go",
		"Hidden: f.Hidden, Precompressed: f.Precompressed, ", "Hidden: f.Hidden, ",
		"^TestFilesMapped$"},
	{"daemon: a route's rate_limit zone not passed on", "internal/daemon/proxycfg.go",
		"Burst: r.Burst, Zone: r.Zone}", "Burst: r.Burst}",
		"^TestRateLimitZoneMapped$"},
	{"proxy: files: a precompressed file's identity variant without Vary", "proxy/files.go",
		"\t\t\tvary = true\n", "\n",
		"^TestFilesPrecompressed$"},
	{"proxy: files: a route's Vary losing Accept-Encoding on a precompressed file", "proxy/files.go",
		"\t\taddVary(h)\n\t}\n\tif encoded {", "\t\th[\"Vary\"] = []string{\"Accept-Encoding\"}\n\t}\n\tif encoded {",
		"^TestFilesPrecompressedVaryKept$"},
	{"proxy: files: a .gz sibling sent to clients that do not take gzip", "proxy/files.go",
		"if r.ProtoAtLeast(1, 1) && acceptsGzip(r.Header) {", "if r.ProtoAtLeast(1, 1) {",
		"^TestFilesPrecompressed$"},
	{"proxy: files: a .gz sibling sent without its Content-Encoding", "proxy/files.go",
		"\t\tw.Header()[\"Content-Encoding\"] = []string{\"gzip\"}\n", "\n",
		"^TestFilesPrecompressed$"},
	{"proxy: a site's error page not sent", "proxy/handler.go",
		"page, paged := s.errorPages[code]", "page, paged := s.errorPages[code+1000]",
		"^TestErrorPages$"},
	{"conf: an error page over 64KiB read", "conf/validate.go",
		"case fi.Size() > MaxErrorPage:", "case fi.Size() > MaxErrorPage*1000:",
		"^TestErrorPagesLoaded$"},
	{"conf: an error page for a status that is not an error", "conf/validate.go",
		"case st < 400 || st > 599:", "case st < 0:",
		"TestBadConfigs"},
	{"daemon: a site's error pages not passed on", "internal/daemon/proxycfg.go",
		"ErrorPages: s.Material.ErrorPages, ", "",
		"^TestErrorPagesMapped$"},
	{"conf: a files root holding the configuration (and its keys) accepted", "conf/validate.go",
		"} else if v.dir != \"\" && within(v.dir, v.resolve(f.Root)) {", "} else if false {",
		"TestBadConfigs"},
	{"proxy: files: a .gz sibling sent without its length (Content-Encoding set before ServeContent)", "proxy/files.go",
		"http.ServeContent(gzipFileWriter{&rs.w}, r, name, fi.ModTime(), f)", "rs.w.Header()[\"Content-Encoding\"] = []string{\"gzip\"}\n\t\thttp.ServeContent(&rs.w, r, name, fi.ModTime(), f)",
		"^TestFilesPrecompressedLength$"},
	{"proxy: files: a root gone answered 404 (cached downstream, not logged)", "proxy/files.go",
		"s.errorResponse(rs, r, http.StatusInternalServerError, \"the file could not be read\", \"files route \"+rt.name+\": root: \"+err.Error())", "notFound(err.Error())",
		"^TestFilesRootGone$"},
	{"proxy: files: a .gz older than its file served as its encoding", "proxy/files.go",
		"gfi.Mode().IsRegular() && !gfi.ModTime().Before(fi.ModTime()) {", "gfi.Mode().IsRegular() {",
		"^TestFilesPrecompressed$"},
	{"proxy: compress: a files route's encoded file sent with the identity's head", "proxy/compress.go",
		"takeCompressPlace(w.conn):\n\t\tencodeHeader(h)", "takeCompressPlace(w.conn):\n\t\t_ = encodeHeader",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route's 304 revalidating the encoding sent with the identity's strong ETag", "proxy/compress.go",
		"revalidatesEncoding(w.r, &http.Response{Header: h}):\n\t\tweakenETag(h)", "revalidatesEncoding(w.r, &http.Response{Header: h}):\n\t\t_ = weakenETag",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route's compression place never given back", "proxy/compress.go",
		"\t\tw.zw = nil\n\t\treleaseCompressPlace(w.conn)", "\t\tw.zw = nil",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route's identity variant without Vary", "proxy/files.go",
		"\t\taddVary(h)\n\t\tif acceptsGzip(r.Header) {", "\t\tif acceptsGzip(r.Header) {",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route's ranges compressed", "proxy/compress.go",
		"case code == http.StatusOK && w.zw == nil &&", "case (code == http.StatusOK || code == http.StatusPartialContent) && w.zw == nil &&",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route's HEAD given the encoding's head", "proxy/compress.go",
		"return r.Method == http.MethodGet && r.ProtoAtLeast(1, 1) &&", "return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ProtoAtLeast(1, 1) &&",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route's short files compressed", "proxy/compress.go",
		"r.ProtoAtLeast(1, 1) && size >= z.minLength && z.typeListed(ct)", "r.ProtoAtLeast(1, 1) && z.typeListed(ct)",
		"^TestFilesCompressed$"},
	{"proxy: compress: a files route compresses with no place free", "proxy/compress.go",
		"case code == http.StatusOK && w.zw == nil && takeCompressPlace(w.conn):", "case code == http.StatusOK && w.zw == nil && (takeCompressPlace(w.conn) || true):",
		"^TestFilesCompressBusy$"},
	{"proxy: request_id: a client's own ID taken from a peer that is not a trusted proxy", "proxy/requestid.go",
		"validRequestID(v[0]) && s.p.trusted(clientAddr(r)) {", "validRequestID(v[0]) {",
		"^TestRequestIDFromTrustedProxy$"},
	{"proxy: request_id: a trusted proxy's ID with a quote taken (log lines)", "proxy/requestid.go",
		"c <= ' ' || c >= 0x7f || c == '\"' || c == '\\\\'", "c <= ' ' || c >= 0x7f",
		"^TestRequestIDFromTrustedProxy$"},
	{"proxy: request_id: a trusted proxy's ID of any length taken", "proxy/requestid.go",
		"if v == \"\" || len(v) > maxRequestIDLen {", "if v == \"\" {",
		"^TestRequestIDFromTrustedProxy$"},
	{"proxy: request_id: the target's own ID passed on beside the proxy's", "proxy/reverseproxy.go",
		"if k == rt.reqIDHeader {\n\t\t\tcontinue", "if false {\n\t\t\tcontinue",
		"^TestRequestID$"},
	{"proxy: request_id: the client's IDs sent to the target", "proxy/handler.go",
		"setHeader(h, s.reqIDHeader, rs.reqID, vals[4:5:5])", "_ = vals[4:5:5]",
		"^TestRequestID$"},
	{"proxy: request_id: the proxy's own error answers without the ID", "proxy/handler.go",
		"\tclear(h)\n\tif rs.reqID != \"\" {\n\t\th[s.reqIDHeader] = []string{rs.reqID}", "\tclear(h)\n\tif rs.reqID != \"\" {\n\t\t_ = h",
		"^TestRequestID$"},
	{"proxy: request_id: a failed request's log line without the ID", "proxy/handler.go",
		"args = append(args, \"request_id\", rs.reqID)", "_ = args",
		"^TestRequestID$"},
	{"proxy: request_id: the access log's request_id never filled", "proxy/accesslog.go",
		"\t\tRequestID:        reqID,\n", "\t\tRequestID:        \"\",\n",
		"^TestRequestID$"},
	{"proxy: request_id: a header the proxy sets taken for the ID's", "proxy/requestid.go",
		"|| slices.Contains(reservedForRequestID, k) {", "{",
		"^TestCheckRequestIDHeader$"},
	{"daemon: a site's request_id not passed on", "internal/daemon/proxycfg.go",
		", RequestIDHeader: s.RequestID}", "}",
		"^TestRequestIDMapped$"},
	{"conf: a request_id header the proxy sets accepted", "conf/validate.go",
		"if err := proxy.CheckRequestIDHeader(s.RequestID); err != nil {", "if err := proxy.CheckRequestIDHeader(s.RequestID); false {\n\t\t\t\t_ = err",
		"TestBadConfigs"},
	{"proxy: request_id: a 101 sent with the target's ID", "proxy/streaming.go",
		"hdr[rt.reqIDHeader] = []string{rs.reqID} // the proxy's, not the target's", "_ = rs.reqID",
		"^TestRequestIDOnUpgrades$"},
	{"proxy: request_id: an extended CONNECT's answer sent with the target's ID", "proxy/streaming.go",
		"if k != rt.reqIDHeader { // the proxy's, set in dst, stays", "if true {",
		"^TestRequestIDOnUpgrades$"},
	{"proxy: files: a .gz sibling of the file's size and time given the file's ETag", "proxy/files.go",
		"\t\tetag += \"-gzip\"\n", "\n",
		"^TestFilesPrecompressedETagDistinct$"},
	{"conf: a files root holding a key file the configuration loads accepted", "conf/validate.go",
		"\tv.filesRootSecrets()\n", "\n",
		"^TestFilesRootHoldsSecrets$"},
	{"conf: a files root with hidden: true holding a key under a hidden name accepted", "conf/validate.go",
		"if !fr.f.Hidden && hiddenRel(", "if hiddenRel(",
		"^TestFilesRootHoldsSecrets$"},
	{"proxy: a site's error page not in UTF-8 (GBK) labelled charset=utf-8", "proxy/handler.go",
		"\tif utf8.Valid(page) {\n", "\tif true {\n",
		"^TestErrorPagesCharset$"},
	{"daemon: a files route's charset not passed on", "internal/daemon/proxycfg.go",
		", Charset: f.Charset, ", ", ",
		"^TestFilesMapped$"},
	{"proxy: files: Go's charset=utf-8 sent on text files (a GBK page garbled)", "proxy/files.go",
		"\t\tct = strings.TrimSpace(ct[:i])", "\t\t_ = i",
		"^TestFilesCharset$"},
	{"proxy: files: the route's charset put on a type that is not text", "proxy/files.go",
		"case fsrv.charset != \"\" && textType(ct):", "case fsrv.charset != \"\":",
		"^TestFilesCharset$"},
	{"proxy: files: a charset that would inject parameters accepted", "proxy/files.go",
		"if c.Charset != \"\" && !ValidCharset(c.Charset) {", "if false {",
		"^TestFilesCharset$"},
	{"daemon: an unnamed route known across reloads by its path alone (a removed route's counts to another of that path)", "internal/daemon/proxycfg.go",
		"add(\"host=\", r.Host)", "add(\"host=\", nil)",
		"TestReloadKeepsUnnamedRouteCountsByMatch"},
	{"gmproxy run: a worker reloads alone on POST /reload to its socket", "cmd/gmproxy/run.go",
		"mux.HandleFunc(\"POST /reload\", func(w http.ResponseWriter, _ *http.Request) {", "mux.HandleFunc(\"POST /reload/alone\", func(w http.ResponseWriter, _ *http.Request) {",
		"TestWorkerRefusesLoneReload"},
	{"proxy: files: a fallback never served", "proxy/files.go",
		"if fsrv.fallback != \"\" && errors.Is(err, fs.ErrNotExist) {", "if false {",
		"^TestFilesFallback$"},
	{"proxy: files: a fallback path leading out of the root accepted", "proxy/files.go",
		"case rel == \"\" || path.Clean(rel) != rel ||", "case rel == \"\" ||",
		"^TestFilesFallback$"},
	{"proxy: files: a hidden fallback accepted", "proxy/files.go",
		"\tcase hiddenPath(rel):", "\tcase false:",
		"^TestFilesFallback$"},
	{"conf: a files fallback leading out of the root accepted", "conf/validate.go",
		"if err := proxy.CheckFilesFallback(f.Fallback); err != nil {", "if err := proxy.CheckFilesFallback(f.Fallback); false {\n\t\t\t_ = err",
		"TestBadConfigs"},
	{"daemon: a files route's fallback not passed on", "internal/daemon/proxycfg.go",
		", Fallback: f.Fallback}", "}",
		"^TestFilesMapped$"},
	{"keyserver: decrypt answers any plaintext, not only TLCP pre-master secrets", "keyserver/server.go",
		"if err != nil || !isPreMaster(pt) {", "if err != nil {",
		"^TestDecryptOnlyPreMasterSecrets$"},
	{"keyserver: decrypt answers 48 bytes of any version as a pre-master secret", "keyserver/server.go",
		"return len(pt) == 48 && pt[0] == 1 && pt[1] == 1", "return len(pt) == 48",
		"^TestDecryptOnlyPreMasterSecrets$"},
	{"keyserver: a refused plaintext answered unlike a ciphertext that does not decrypt", "keyserver/server.go",
		"\t\t\tclear(pt)\n\t\t\treturn nil, errNotPreMaster", "\t\t\tclear(pt)\n\t\t\tif err != nil {\n\t\t\t\treturn nil, err\n\t\t\t}\n\t\t\treturn nil, errNotPreMaster",
		"^TestDecryptOnlyPreMasterSecrets$"},
	{"keyserver: a connection takes its timeouts when its goroutine starts, not when it is accepted", "keyserver/server.go",
		"\t\t\ts.serveConn(c, to, func() { s.identified(addr) })", "\t\t\ts.cmu.Lock()\n\t\t\tto.handshake, to.idle = orDefault(s.HandshakeTimeout, DefaultHandshakeTimeout), orDefault(s.IdleTimeout, DefaultIdleTimeout)\n\t\t\ts.cmu.Unlock()\n\t\t\ts.serveConn(c, to, func() { s.identified(addr) })",
		"^TestServerLimitsTakenAtAccept$"},
	{"keyserver: the idle timeout taken when the connection's goroutine starts, not when it is accepted", "keyserver/server.go",
		"\t\t\ts.serveConn(c, to, func() { s.identified(addr) })", "\t\t\ts.cmu.Lock()\n\t\t\tto.idle = orDefault(s.IdleTimeout, DefaultIdleTimeout)\n\t\t\ts.cmu.Unlock()\n\t\t\ts.serveConn(c, to, func() { s.identified(addr) })",
		"^TestServerLimitsTakenAtAccept$"},
	{"keyserver config: a client subject that can match no certificate accepted", "conf/keyservers.go",
		"if prob := subjectProblem(c.Subject); prob != \"\" {", "if prob := subjectProblem(c.Subject); false {",
		"^TestKeyServerFile$"},
	{"keyserver config: an escaped separator in a client subject taken as a separator", "conf/keyservers.go",
		"\t\t\ti++ // the escaped character\n", "",
		"^TestSubjectProblemAcceptsCertificateSubjects$"},
	{"keyserver: a flood of pings answered as fast as it is sent", "keyserver/server.go",
		"if d := pings.wait(s.clock()); d > 0 {", "if d := pings.wait(s.clock()); false {",
		"^TestPingsPaced$"},
	{"keyserver: a connection's paced pings never earn their tokens back (health checks wait ever longer)", "keyserver/server.go",
		"p.tokens = min(pingBurst, p.tokens+now.Sub(p.last).Seconds()*pingRate)", "p.tokens = min(pingBurst, p.tokens)",
		"^TestPingsPaced$"},
	{"keyserver: a connection greeted before the reload that removed its client left open", "keyserver/policy.go",
		"\tif s.removed {\n", "\tif false {\n",
		"^TestClientRemovedWhileGreetedClosed$"},
	{"keyserver: one key served under two names, the later replacing the earlier's roles", "keyserver/policy.go",
		"if prev := cp.keys[id]; prev != nil {", "if prev := cp.keys[id]; prev != nil && false {",
		"^TestSameKeyTwiceRefused$"},
	{"proxy: a route's path_regex not matched", "proxy/handler.go",
		"if rt.regex != nil && !rt.regex.MatchString(p) {", "if false {",
		"^TestPathRegex$"},
	{"proxy: path_regex matched in letter case on a case_insensitive_paths site", "proxy/path.go",
		"\tif fold {\n\t\texpr = \"(?i)\" + expr", "\tif false {\n\t\texpr = \"(?i)\" + expr",
		"^TestPathRegex$"},
	{"proxy: a path_regex of any length compiled", "proxy/path.go",
		"case len(expr) > MaxPathRegexLen:", "case false:",
		"^TestPathRegexRefused$"},
	{"proxy: path_regex beside path_prefix or path accepted", "proxy/handler.go",
		" || rc.PathRegex != \"\" && (rt.prefix != \"\" || rt.exact != \"\") {", " {",
		"^TestPathRegexRefused$"},
	{"conf: a path_regex RE2 refuses accepted", "conf/validate.go",
		"} else if _, err := proxy.CompilePathRegex(r.PathRegex, false); err != nil {", "} else if _, err := proxy.CompilePathRegex(r.PathRegex, false); false {\n\t\t\t_ = err",
		"TestBadConfigs"},
	{"conf: a route with only a path_regex or client_ip taken for a catch-all", "conf/validate.go",
		"len(r.ClientIP) == 0 && r.PathRegex == \"\"", "true",
		"TestBadConfigs"},
	{"daemon: a route's path_regex not passed on", "internal/daemon/proxycfg.go",
		"\t\tPathRegex:       r.PathRegex,\n", "",
		"^TestPathRegexMapped$"},
	{"daemon: an unnamed path_regex route known across reloads as the catch-all", "internal/daemon/proxycfg.go",
		"PathPrefix: r.PathPrefix, PathRegex: r.PathRegex})}", "PathPrefix: r.PathPrefix})}",
		"^TestPathRegexMapped$"},
	{"proxy: basic_auth: a route's credentials never asked for", "proxy/handler.go",
		"case rt.auth != nil && !s.authorized(rs, r, rt):", "case false && rt.auth != nil && !s.authorized(rs, r, rt):",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: a wrong password accepted", "proxy/basicauth.go",
		"\tif err != nil {\n\t\treturn false\n\t}\n\ta.passed.Put", "\t_ = err\n\ta.passed.Put",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: a password remembered for the user, not for itself", "proxy/basicauth.go",
		"sha256.Sum256([]byte(user + \"\\x00\" + pass + \"\\x00\" + string(hash)))", "sha256.Sum256([]byte(user + \"\\x00\" + string(hash)))",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: a password that passed checked again with bcrypt each time", "proxy/basicauth.go",
		"\ta.passed.Put(key, struct{}{})\n", "\n",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: a client over its failures still checked", "proxy/basicauth.go",
		"if wait, over := a.failures.exhausted(client); over {", "if wait, over := a.failures.exhausted(client); false && over {",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: failures never counted", "proxy/basicauth.go",
		"a.failures.allow(client) // one failure spent", "_ = client",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: a 401 without the challenge", "proxy/basicauth.go",
		"s.errorResponseWith(rs, r, http.StatusUnauthorized, \"Www-Authenticate\", a.challenge, \"authentication required\", \"no credentials", "s.errorResponseWith(rs, r, http.StatusUnauthorized, \"X-Nothing\", a.challenge, \"authentication required\", \"no credentials",
		"^TestBasicAuth$"},
	{"proxy: basic_auth: a hash that is not bcrypt's taken", "proxy/basicauth.go",
		"(hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') || hash[3] != '$':", "false:",
		"^TestBasicAuthRefused$"},
	{"proxy: basic_auth: a realm that breaks the challenge taken", "proxy/basicauth.go",
		"if strings.ContainsAny(realm, \"\\\"\\\\\") || ", "if ",
		"^TestBasicAuthRefused$"},
	{"daemon: a route's basic_auth not passed on", "internal/daemon/proxycfg.go",
		"rc.BasicAuth = &proxy.BasicAuthConfig{Realm: a.Realm, Users: a.Users, FailuresPerMinute: a.FailuresPerMinute}", "_ = a",
		"^TestBasicAuthMapped$"},
	{"conf: a users file line that is not bcrypt taken", "conf/validate.go",
		"if err := proxy.CheckBasicAuthUser(user, []byte(hash)); err != nil {", "if err := proxy.CheckBasicAuthUser(user, []byte(hash)); false {\n\t\t\t\t_ = err",
		"TestBadConfigs"},
	{"keyserver: sign signs any message (with the default ID)", "keyserver/server.go",
		"opts, err := handshakeSignOpts(r.payload)", "opts, err := handshakeSignOpts(r.payload)\n\t\tif err != nil {\n\t\t\topts, err = tlcpSignOpts, nil\n\t\t}",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: a TLS 1.3 CertificateVerify signed with the default ID, not RFC 8998's", "keyserver/signed.go",
		"return tls13SignOpts, nil", "return tlcpSignOpts, nil",
		"^(TestOperations|TestHandshakesWithRemoteKeys)$"},
	{"keyserver: a TLS 1.3 CertificateVerify of any hash length signed", "keyserver/signed.go",
		"if len(msg) != pad+len(tls13ServerContext)+32 {", "if len(msg) < pad+len(tls13ServerContext) {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: a TLS 1.3 CertificateVerify's padding not checked", "keyserver/signed.go",
		"if b != 0x20 {", "if false && b != 0x20 {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: a TLS 1.3 CertificateVerify's context string not checked", "keyserver/signed.go",
		"return string(msg[pad:pad+len(tls13ServerContext)]) == tls13ServerContext", "return len(msg[pad:pad+len(tls13ServerContext)]) > 0",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECDHE parameters followed by more bytes signed", "keyserver/signed.go",
		"if len(msg) != randomsLen+4+pointLen {", "if len(msg) < randomsLen+4+pointLen {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECDHE parameters of another curve or point length signed", "keyserver/signed.go",
		"if !bytes.Equal(msg[randomsLen:randomsLen+4], []byte{3, 0, tlcpCurveSM2, pointLen}) {", "if false && !bytes.Equal(msg[randomsLen:randomsLen+4], []byte{3, 0, tlcpCurveSM2, pointLen}) {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECDHE parameters with a point off the curve signed", "keyserver/signed.go",
		"return err == nil\n}", "return err == nil || len(msg) > 0\n}",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECC parameters whose length is not the certificate's signed", "keyserver/signed.go",
		"if n != len(der) {", "if false && n != len(der) {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECC parameters with no certificate signed", "keyserver/signed.go",
		"cert, err := smx509.ParseCertificate(der)\n\tif err != nil {\n\t\treturn false\n\t}", "cert, err := smx509.ParseCertificate(der)\n\tif err != nil {\n\t\treturn len(der) > 0\n\t}",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: a message to sign shorter than TLCP's randoms and length read past its end (a panic)", "keyserver/signed.go",
		"if len(msg) <= randomsLen+3 {", "if len(msg) < randomsLen {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECC parameters with a certificate of another key type signed", "keyserver/signed.go",
		"if !ok || pub.Curve != sm2.P256() {", "if !ok && pub.Curve != sm2.P256() {",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: TLCP ECC parameters with a signing-only certificate signed", "keyserver/signed.go",
		"return cert.KeyUsage == 0 || cert.KeyUsage&encUsage != 0", "return cert.KeyUsage&encUsage == 0 || true",
		"^TestSignsHandshakeMessagesOnly$"},
	{"keyserver: a digest sent to the key server to sign", "keyserver/remotekey.go",
		"\t\treturn nil, errDigestSign\n", "\t\to = tls13SignOpts\n",
		"^TestOperations$"},
	{"daemon: the signing key's start-up probe asks for a signature the key server refuses", "keyserver/remotekey.go",
		"msg = append(append(msg, 3, 0, tlcpCurveSM2, 65), eph.PublicKey().Bytes()...)", "msg = append(append(msg, 3, 0, 23, 65), eph.PublicKey().Bytes()...)",
		"./internal/daemon:^TestRemoteSigningKeyProbeSigns$"},
	{"proxy: the server's resets of streams the client broke not counted (MadeYouReset)", "proxy/h2reset.go",
		"g.out.onRST = g.serverReset", "_ = g.serverReset",
		"TestHTTP2ResetFloods"},
	{"proxy: a GOAWAY for a reset flood seen during a server write never sent", "proxy/h2reset.go",
		"if g.pending.Load() {\n\t\tg.goAway()\n\t}\n\treturn n, err", "return n, err",
		"TestResetGuardGoAwayWhileWriting"},
	{"proxy: the reset guard passes on the start of a frame that a server write ends in", "proxy/h2reset.go",
		"end := g.out.scan(p)\n", "g.out.scan(p)\n\tend := len(p)\n",
		"TestResetGuardHoldsFrameStarts"},
	{"proxy: a body from the HTTP/1.1 client's connection read without the read timeout", "proxy/h1client.go",
		"\t\trd.d = pc.cl.readTimeout\n", "\t\trd.d = 0\n",
		"TestUpstreamReadTimeout"},
	{"proxy: the read timeout's deadline not moved while a slow body is read", "proxy/h1client.go",
		"if dl, ok := b.rd.due(); ok {", "if dl, ok := b.rd.due(); ok && false {",
		"TestUpstreamReadTimeout"},
	{"proxy: http.Transport's response bodies read without the read timeout", "proxy/reverseproxy.go",
		"if _, own := body.(*h1Body); !own && readTimeout > 0", "if _, own := body.(*h1Body); false && !own && readTimeout > 0",
		"TestUpstreamReadTimeout"},
	{"proxy: an HTTP/1.1 Upgrade tunnel without the idle timeout", "proxy/streaming.go",
		"in, out := pipe(client, backConn, rt.up.tunnelIdle,", "in, out := pipe(client, backConn, 0,",
		"TestTunnelIdleTimeout"},
	{"proxy: an extended CONNECT tunnel without the idle timeout", "proxy/streaming.go",
		"pipe(streamSide{r.Body, &rs.w}, backConn, rt.up.tunnelIdle,", "pipe(streamSide{r.Body, &rs.w}, backConn, 0,",
		"TestWebSocketOverH2ExtendedConnect"},
	{"keyserver: a client's connections not bounded by its max_connections", "keyserver/server.go",
		"if !held.addConn(c) {", "if !held.addConn(c) && false {",
		"TestClientConnectionBound"},
	{"conf: a key server client's max_connections not passed on", "conf/keyservers.go",
		"MaxInFlight: c.MaxInFlight, MaxConns: c.MaxConnections}}", "MaxInFlight: c.MaxInFlight}}",
		"TestKeyServerFile"},
	{"daemon: timeouts.read 0 taken as the default instead of no limit", "internal/daemon/proxycfg.go",
		"ReadTimeout:             offIfZero(u.Timeouts.Read),", "ReadTimeout:             u.Timeouts.Read,",
		"TestZeroMeansOffOrUnlimited"},
	{"daemon: timeouts.write 0 taken as the default instead of no limit", "internal/daemon/proxycfg.go",
		"WriteTimeout:            offIfZero(u.Timeouts.Write),", "WriteTimeout:            u.Timeouts.Write,",
		"TestZeroMeansOffOrUnlimited"},
	{"daemon: HTTP/2 served without the stream-reset guard (rapid reset)", "internal/daemon/serve.go",
		"set.h2.ServeConn(proxy.GuardHTTP2(c, &set.proxyLim, l.log), ", "set.h2.ServeConn(c, ",
		"TestListenerLimits"},
	{"daemon: a listener's body and send timeouts replaced by the first listener's", "internal/daemon/ctx.go",
		"return proxy.ConnContextLimits(ctx, c, &s.proxyLim)", "return proxy.ConnContext(ctx, c)",
		"TestListenerLimits"},
	{"proxy: a stream's connect timeout ignored for a named upstream", "proxy/tcpstream.go",
		"\t\ts.dialTimeout = sc.ConnectTimeout\n", "\t\ts.dialTimeout = s.up.dialTimeout\n",
		"TestTCPStreamConnectTimeout"},
	{"proxy: a second connection pool beside the one that caps connections per target", "proxy/upstreams.go",
		"if uc.Transport.MaxConnsPerTarget <= 0 {", "if true {",
		"TestMaxConnsPerTargetOverAllRequests"},
	{"proxy: read_timeout counted from the handler's start, not the request's", "proxy/timeouts.go",
		"start, ok := h1server.RequestStart(r.Context())", "start, ok := h1server.RequestStart(r.Context()); ok = false",
		"TestReadTimeoutCountsFromTheHead"},
	{"proxy: a request's first body or send deadline not set", "proxy/timeouts.go",
		"if o.last != 0 && n-o.last < int64(o.d/8) {", "if n-o.last < int64(o.d/8) {",
		"TestOpDeadlineFirstArming"},
	{"proxy: a kept send deadline further away than the timeout allows left in place", "proxy/timeouts.go",
		"if dl := k.WriteDeadline(); !dl.IsZero() && dl.Sub(rs.start) <= d+d/8 {", "if dl := k.WriteDeadline(); !dl.IsZero() {",
		"TestSendDeadlineKept"},
	{"h1server: a kept write deadline about to pass left for the next handler", "internal/h1server/conn.go",
		"if !c.wdl.IsZero() && time.Until(c.wdl) < minKeptWrite {", "if false && !c.wdl.IsZero() && time.Until(c.wdl) < minKeptWrite {",
		"TestHandlerWriteDeadlineKept"},
	{"h1server: a handler's write deadline cleared after its response (send_timeout's kept deadline gone)", "internal/h1server/conn.go",
		"\tif s.WriteTimeout > 0 {\n\t\t// The server's own bound", "\tif s != nil {\n\t\t// The server's own bound",
		"TestHandlerWriteDeadlineKept"},
	{"proxy: a short upstream body read as complete", "proxy/h1client.go",
		"case err == io.EOF:\n\t\treturn n, io.ErrUnexpectedEOF", "case err == io.EOF:\n\t\treturn n, io.EOF",
		"TestH1ClientBodies"},

	// ---- h1server ----
	{"h1server: Content-Length with Transfer-Encoding keeps the connection", "internal/h1server/conn.go",
		"if c.scan.ambiguous() {", "if false && c.scan.ambiguous() {",
		"TestContentLengthAndTransferEncoding"},
	{"h1server: missing Host accepted", "internal/h1server/conn.go",
		"if req.ProtoMinor >= 1 && req.Method != http.MethodConnect {", "if false && req.ProtoMinor >= 1 && req.Method != http.MethodConnect {",
		"TestBadRequests"},
	{"h1server: malformed Host accepted", "internal/h1server/conn.go",
		"} else if !validHost(req.Host, c.scan.hostValue(), req.URL.Host == \"\") {", "} else if false && !validHost(req.Host, c.scan.hostValue(), req.URL.Host == \"\") {",
		"TestBadRequests"},
	{"h1server: invalid field name accepted", "internal/h1server/conn.go",
		"if !httpguts.ValidHeaderFieldName(k) {\n\t\t\treturn nil, errFieldName", "if false && !httpguts.ValidHeaderFieldName(k) {\n\t\t\treturn nil, errFieldName",
		"TestBadRequests"},
	{"h1server: header size not limited", "internal/h1server/conn.go",
		"c.r.remain = s.maxHeaderBytes() + 4096 - int64(c.br.Buffered())", "c.r.remain = noLimit",
		"TestBadRequests"},
	{"h1server: unsupported Transfer-Encoding answered 400, not 501", "internal/h1server/conn.go",
		"if c.scan.te && isUnsupportedTE(err) {", "if false && c.scan.te && isUnsupportedTE(err) {",
		"TestBadRequests"},
	{"h1server: Transfer-Encoding in an HTTP/1.0 request ignored (its body read as the next request)", "internal/h1server/conn.go",
		"if req.ProtoMinor == 0 && c.scan.te {", "if false && req.ProtoMinor == 0 && c.scan.te {",
		"TestBadRequests"},
	{"h1server: a trailer field that may not be a trailer written", "internal/h1server/response.go",
		" || !httpguts.ValidTrailerHeader(name) {", " {",
		"TestChunkedRequestAndResponse"},
	{"h1server: HTTP/2.0 request line served as HTTP/1", "internal/h1server/conn.go",
		"if req.ProtoMajor != 1 {", "if false && req.ProtoMajor != 1 {",
		"TestBadRequests"},

	{"h1server: a partial head after an idle wait runs under the idle timeout", "internal/h1server/conn.go",
		"if !c.headBuffered() {", "if false && !c.headBuffered() {",
		"TestTimeoutsClose"},

	{"h1server: the client-gone hook never runs", "internal/h1server/watch.go",
		"\t\tc.scope.clientGone()\n", "\n",
		"TestOnClientGone$"},
	{"h1server: a client-gone hook outlives its handler", "internal/h1server/watch.go",
		"\tc.scope.endHandler()\n", "\n",
		"TestOnClientGoneStopsAndEnds"},

	// ---- h1head (its refusals send a head to net/http's readers) ----
	{"h1head: a reused header map keeps an earlier request's fields", "internal/h1head/head.go",
		"\t\t\tclear(r.h) // nothing of an earlier request may stay\n", "",
		"TestRequestReusing"},
	{"h1head: Transfer-Encoding parsed as a plain head", "internal/h1head/head.go",
		"if te, _ := fs.count(text, \"Transfer-Encoding\"); te > 0 {", "if te, _ := fs.count(text, \"Transfer-Encoding\"); te > 1 {",
		"TestRequest|TestResponse"},
	{"h1head: two Content-Length fields parsed as a plain head", "internal/h1head/head.go",
		"case cn > 1:\n\t\treturn 0, false", "case cn > 2:\n\t\treturn 0, false",
		"TestRequest|TestResponse"},
	{"h1head: control character in a field value", "internal/h1head/head.go",
		"if c < ' ' && c != '\\t' || c == 0x7f {\n\t\t\treturn f, false", "if false && c < ' ' && c != '\\t' || c == 0x7f {\n\t\t\treturn f, false",
		"TestRequest|TestResponse"},
	{"h1head: folded or space-prefixed field name", "internal/h1head/head.go",
		"if colon <= 0 || !isToken(line[:colon]) {", "if colon <= 0 {",
		"TestRequest|TestResponse"},
	{"h1head: request with a body parsed as bodiless", "internal/h1head/request.go",
		"if cl, ok := fs.contentLength(head); !ok || cl > 0 {", "if cl, ok := fs.contentLength(head); !ok && cl > 0 {",
		"TestRequest"},
	{"h1head: two Host fields parsed as a plain head", "internal/h1head/request.go",
		"if len(h[\"Host\"]) > 1 {", "if len(h[\"Host\"]) > 2 {",
		"TestRequest"},
	{"h1head: response delimited by close parsed with a length", "internal/h1head/response.go",
		"case cl < 0:\n\t\treturn nil, 0, false", "case cl < -1:\n\t\treturn nil, 0, false",
		"TestResponse"},

	// ---- upstream and key server connections ----
	{"daemon: a TLCP upstream's certificate not verified", "internal/daemon/dial.go",
		"InsecureSkipVerify:        t.InsecureSkipVerify,", "InsecureSkipVerify:        true,",
		"TestUpstreamCertificateVerified"},
	{"daemon: a TLS 1.3-SM upstream's certificate not verified", "internal/daemon/dial.go",
		"InsecureSkipVerify: t.InsecureSkipVerify,", "InsecureSkipVerify: true,",
		"TestUpstreamCertificateVerified"},
	{"gmproxy keyserver: a reload does not apply the TLS client CAs to new connections", "cmd/gmproxy/keyserver.go",
		"tlsCfg.Store(keyServerTLS(&cfg.Material))\n\t}", "}",
		"TestKeyServerReloadsClientCA"},
	{"gmproxy keyserver: clients without a certificate accepted", "cmd/gmproxy/keyserver.go",
		"ClientAuth:   tls.RequireAndVerifyClientCert,", "ClientAuth:   tls.VerifyClientCertIfGiven,",
		"TestKeyServerCommand$"},

	{"proxy: a TLS upstream's certificate not verified", "proxy/httptransport.go",
		"cfg.InsecureSkipVerify = u.InsecureSkipVerify", "cfg.InsecureSkipVerify = true",
		"TestBackendProtocols"},
	{"daemon: gmproxy does not verify its key server's certificate", "internal/daemon/keyservers.go",
		"tc := &tls.Config{RootCAs: m.RootCAs, ServerName: e.ServerName, MinVersion: tls.VersionTLS13}", "tc := &tls.Config{RootCAs: m.RootCAs, ServerName: e.ServerName, MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}",
		"TestRemoteKeyServerVerified"},

	// ---- site and listener settings reaching the servers ----
	{"daemon: client_auth require maps to a TLCP server that only verifies given certificates", "internal/daemon/engines.go",
		"cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tlcp.VerifyClientCertIfGiven, tlcp.RequireAndVerifyClientCert)", "cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tlcp.VerifyClientCertIfGiven, tlcp.VerifyClientCertIfGiven)",
		"TestClientAuthModes"},
	{"daemon: client_auth require maps to a TLS 1.3-SM server that only verifies given certificates", "internal/daemon/engines.go",
		"cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tls13sm.VerifyClientCertIfGiven, tls13sm.RequireAndVerifyClientCert)", "cfg.ClientAuth = clientAuthType(b.site.ClientAuth.Mode, tls13sm.VerifyClientCertIfGiven, tls13sm.VerifyClientCertIfGiven)",
		"TestClientAuthModes"},
	{"daemon: client_auth require maps to a TLS server that only verifies given certificates", "internal/daemon/build.go",
		"tc.ClientAuth = tls.RequireAndVerifyClientCert", "tc.ClientAuth = tls.VerifyClientCertIfGiven",
		"TestClientAuthModes"},
	{"daemon: client_auth request maps to a TLS server that does not verify", "internal/daemon/build.go",
		"case conf.ClientAuthRequest:\n\t\t\ttc.ClientAuth = tls.VerifyClientCertIfGiven", "case conf.ClientAuthRequest:\n\t\t\ttc.ClientAuth = tls.RequestClientCert",
		"TestClientAuthModes"},
	{"daemon: a site's TLS accepts versions below 1.2 by default", "internal/daemon/build.go",
		"tc.MinVersion = tls.VersionTLS12", "tc.MinVersion = tls.VersionTLS10",
		"TestTLSBelow12Refused"},
	{"daemon: max_header_bytes not applied to HTTP/1.1", "internal/daemon/serve.go",
		"ReuseHeader:       true, // see Generation.Handler\n\t\tMaxHeaderBytes:    lim.MaxHeaderBytes,", "ReuseHeader:       true, // see Generation.Handler\n\t\tMaxHeaderBytes:    0,",
		"TestReloadAppliesHTTPLimits"},
	{"daemon: max_header_bytes not applied to HTTP/2", "internal/daemon/serve.go",
		"Handler:           http.HandlerFunc(l.serveHTTP),\n\t\tMaxHeaderBytes:    lim.MaxHeaderBytes,", "Handler:           http.HandlerFunc(l.serveHTTP),\n\t\tMaxHeaderBytes:    0,",
		"TestReloadAppliesHTTPLimits"},
	{"daemon: max_concurrent_streams not applied to HTTP/2", "internal/daemon/serve.go",
		"s.h2 = &http2.Server{MaxConcurrentStreams: lim.MaxConcurrentStreams,", "s.h2 = &http2.Server{MaxConcurrentStreams: 0,",
		"TestReloadAppliesHTTPLimits"},

	// ---- admin control endpoints ----
	{"metrics: the admin bearer token not checked", "metrics/control.go",
		"if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), o.Token) != 1 {", "if false && (!ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), o.Token) != 1) {",
		"TestControlGuard"},
	{"metrics: a rebound Host accepted by the admin endpoint", "metrics/control.go",
		"if !unix && !controlHost(r.Host, o.HostName) {", "if false && !unix && !controlHost(r.Host, o.HostName) {",
		"TestControlGuard"},
	{"metrics: a browser's request (Origin) accepted by the admin endpoint", "metrics/control.go",
		"if _, ok := r.Header[\"Origin\"]; ok {", "if _, ok := r.Header[\"Origin\"]; false && ok {",
		"TestControlGuard"},

	// ---- session tickets ----
	{"ticket: a ticket sealed for one protocol opens for another", "internal/ticket/ticket.go",
		"return k.ad[p][:]", "return k.ad[0][:]",
		"TestProtocolLabel"},

	// ---- session-ID cache ----
	{"sessioncache: an expired session still resumes", "internal/sessioncache/sessioncache.go",
		"if s.expires != 0 && c.now().UnixNano() >= s.expires {", "if false && s.expires != 0 && c.now().UnixNano() >= s.expires {",
		"TestLifetime"},
	{"sessioncache: a freed state's master secret left in the arena", "internal/sessioncache/sessioncache.go",
		"c.chunks[ch] = [ChunkSize]byte{}", "_ = c.chunks[ch]",
		"TestFreedChunksZeroed"},
	{"sessioncache: a state over MaxState stored", "internal/sessioncache/sessioncache.go",
		"if !ok || len(state) > MaxState {", "if !ok {",
		"TestLimits"},

	// ---- conf and its mapping onto the runtime ----
	{"daemon: a proxy built but not served (a refused reload) the one the next build inherits health from", "internal/daemon/build.go",
		"\treturn px, nil\n}", "\tenv.mu.Lock()\n\tenv.proxy = px\n\tenv.mu.Unlock()\n\treturn px, nil\n}",
		"TestRefusedReloadKeepsTargetHealth"},
	{"daemon: a prepared generation's proxy the one the next build takes rate_limit counts from", "internal/daemon/build.go",
		"\treturn px, nil\n}", "\tenv.mu.Lock()\n\tenv.proxy = px\n\tenv.mu.Unlock()\n\treturn px, nil\n}",
		"TestReloadAfterPrepareKeepsRateCounts"},
	{"proxy: an unprintable character written raw to the access log", "proxy/accesslog.go",
		"(r != utf8.RuneError || size > 1) && unicode.IsPrint(r) {", "(r != utf8.RuneError || size > 1) && unicode.IsPrint(r) || size > 1 {",
		"TestAccessLogEscapesUnprintable"},
	{"daemon: a reload leaves a kept socket's defer_accept as it was", "internal/daemon/daemon.go",
		"\t\t\tln = l.ln.Listener\n", "\t\t\t_ = l\n",
		"TestReloadAppliesDeferAccept"},
	{"rawsock: defer_accept set as 0 (off)", "internal/rawsock/deferaccept.go",
		"secs := int((d + time.Second - 1) / time.Second)", "secs := 0 * int((d+time.Second-1)/time.Second)",
		"TestDeferAccept"},
	{"conf: max_fails 0 (off) mapped to 1", "internal/daemon/proxycfg.go",
		"uc.HealthCheck.Passive.MaxFails = -1 // conf: 0 disables", "uc.HealthCheck.Passive.MaxFails = 1 // conf: 0 disables",
		"TestZeroMeansOffOrUnlimited"},
	{"conf: keepalive.max_idle 0 (off) mapped to the default pool", "internal/daemon/proxycfg.go",
		"uc.Transport.MaxIdleConns = -1 // conf: 0 disables keep-alive", "uc.Transport.MaxIdleConns = 0 // conf: 0 disables keep-alive",
		"TestZeroMeansOffOrUnlimited"},
	{"conf: max_handshakes 0 (unlimited) mapped to the default", "internal/daemon/build.go",
		"maxHandshakes = 1 << 30", "maxHandshakes = 0",
		"TestZeroMeansOffOrUnlimited"},
	{"proxy: Close after a reset flood does not wait for the pending GOAWAY", "proxy/h2reset.go",
		"if g.pending.Load() && !g.wentOut.Load() {", "if false && g.pending.Load() && !g.wentOut.Load() {",
		"TestResetGuardCloseWaitsForGoAway"},
	{"sessionstore: a fleet key the store cannot replace keeps encrypting", "internal/sessionstore/fleetkeys.go",
		"if _, ok := s.byEpoch[ep-1]; ok {", "if true {",
		"TestFleetKeysKeepRotatingPastJunk"},
	{"shmstore: the workers' session table mapped lazily", "internal/sessionstore/shmstore/shm_linux.go",
		"\t\tpopulate(mem)\n", "\t\t_ = populate\n",
		"TestMapPopulates"},
	{"shmstore: a kernel without MADV_POPULATE_WRITE leaves the table lazy", "internal/sessionstore/shmstore/shm_linux.go",
		"\t\tsum += mem[i]\n", "\t\t_ = i\n",
		"TestTouchPopulates"},
	{"shmstore: the table mapped without asking for huge pages", "internal/sessionstore/shmstore/shm_linux.go",
		"_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)", "_ = unix.MADV_HUGEPAGE",
		"TestMapAsksForHugePages"},
	{"shmstore: shmem_enabled never read as huge pages", "internal/sessionstore/shmstore/shm_linux.go",
		"return slices.Contains(hugePageModes, strings.TrimSuffix(mode, \"]\"))", "return !slices.Contains(hugePageModes, \"x\") && mode != \"\"",
		"TestHugePagesFrom"},
	{"gmproxy run: an unset workers is one process on Linux", "cmd/gmproxy/worker.go",
		"if cfg.Workers == \"\" && unsetWorkersIsOne {", "if cfg.Workers == \"\" {",
		"TestWorkersByDefault"},
	{"gmproxy run: workers killed at SIGTERM instead of drained", "cmd/gmproxy/supervisor.go",
		"\ts.mu.Unlock()\n\ts.signalAll(syscall.SIGTERM)\n\t// A worker that has not exited", "\ts.mu.Unlock()\n\ts.signalAll(syscall.SIGKILL)\n\t// A worker that has not exited",
		"TestWorkersShutdown"},
	{"gmproxy run: a shutdown that cut requests exits 0 in worker mode", "cmd/gmproxy/supervisor.go",
		"s.log.Error(\"shutdown\", \"err\", err)\n\t\treturn 1", "s.log.Error(\"shutdown\", \"err\", err)\n\t\treturn 0",
		"TestWorkersShutdown"},
	{"gmproxy run: a reload reaches only the first worker", "cmd/gmproxy/supervisor.go",
		"for _, p := range workers {\n\t\twg.Add(1)", "for _, p := range workers[:1] {\n\t\twg.Add(1)",
		"TestWorkersReloadUnderTraffic"},
	{"gmproxy run: a worker started again after a crash reads the file a reload refused", "cmd/gmproxy/worker.go",
		"if snap := os.Getenv(envWorkerConfig); snap != \"\" && os.Getenv(envWorker) != \"\" {", "if snap := os.Getenv(envWorkerConfig); false && snap != \"\" {",
		"TestWorkerRestartAfterRefusedReload"},
	{"gmproxy run: a hung worker never killed at shutdown", "cmd/gmproxy/supervisor.go",
		"killing it\", \"worker\", p.index, \"pid\", p.cmd.Process.Pid)\n\t\t\t\tp.cmd.Process.Kill()\n", "killing it\", \"worker\", p.index, \"pid\", p.cmd.Process.Pid)\n\t\t\t\t_ = p\n",
		"TestWorkersShutdownKillsHungWorker"},
	{"gmproxy run: a reload made by the workers that could while another refused it", "cmd/gmproxy/supervisor.go",
		"errs := s.step(workers, \"/reload/prepare\"); len(errs) > 0 {", "errs := s.step(workers, \"/reload/prepare\"); len(errs) > len(workers) {",
		"TestWorkersReloadAllOrNone"},
	{"proxy: the request body never marked done at the handler's end (the Transport's writer arms the body timeout on a finished h2 stream)", "proxy/reverseproxy.go",
		"\tb.mu.Lock()\n\tb.done = true\n", "\tb.mu.Lock()\n",
		"TestH2BodyReadAfterHandler|TestReqBodyAfterHandlerDone"},
	{"proxy: a request body read after its handler returned goes on", "proxy/reverseproxy.go",
		"\tif b.done {\n\t\tb.mu.Unlock()\n\t\treturn 0, errHandlerDone", "\tif false {\n\t\tb.mu.Unlock()\n\t\treturn 0, errHandlerDone",
		"TestH2BodyReadAfterHandler|TestReqBodyAfterHandlerDone"},
	{"proxy: a STREAM_CLOSED reset of a stream the server had ended counts as the client's", "proxy/h2reset.go",
		"\t\tif g.endedLately(stream) {\n\t\t\treturn\n\t\t}\n", "",
		"TestHTTP2InFlightDataAfterEarlyResponse"},
	{"proxy: a GOAWAY may go between a HEADERS frame and its CONTINUATION", "proxy/h2reset.go",
		"if off += n; s.skip == 0 && !s.inBlock {", "if off += n; s.skip == 0 {",
		"TestResetGuardGoAwayNotInsideHeaderBlock"},
	{"proxy: a body read deadline left on a pooled upstream connection when no header timeout is set", "proxy/h1client.go",
		"case pc.otherArmed || pc.hdrArmed != 0:", "case false:",
		"TestReadTimeoutNotLeftOnPooledConn"},
	{"daemon: a second Prepare stages while the pending one still holds its sockets", "internal/daemon/daemon.go",
		"\td.dropPending() // first: it may hold the sockets of new addresses\n", "",
		"TestPrepareTwice"},
	{"daemon: a Reload leaves a generation prepared before it to be committed", "internal/daemon/daemon.go",
		"\td.dropPending()\n\tst, err := d.stage(gen)\n\tif err != nil {\n\t\treturn err", "\tst, err := d.stage(gen)\n\tif err != nil {\n\t\treturn err",
		"TestCommitAfterReload"},
	{"gmproxy run: a worker takes a stop request that reaches it twice (from systemd or the terminal, and from its supervisor) for a second one", "cmd/gmproxy/run.go",
		"\t\tsigs = workerSignals(sigs, r.log)\n", "",
		"TestWorkersStopWholeGroup"},
	{"gmproxy run: a second stop request to the supervisor does not reach the workers as one", "cmd/gmproxy/supervisor.go",
		"\t\ts.signalAll(forceSignal)", "\t\ts.signalAll(syscall.SIGTERM)",
		"TestWorkersShutdown"},
	{"gmproxy run: a worker reloads alone on a SIGHUP sent to it", "cmd/gmproxy/worker.go",
		"a worker reloads when its supervisor asks\")\n\t\t\t\t\tcontinue", "a worker reloads when its supervisor asks\")",
		"TestWorkerSignals"},
	{"gmproxy run: a worker started again that never gets ready is left running", "cmd/gmproxy/supervisor.go",
		"\"err\", err)\n\t\t\t\tp.cmd.Process.Kill()", "\"err\", err)",
		"TestRestartedWorkerHungAtStart"},
	{"gmproxy run: a reload changes the workers' copy while a worker started again is still reading it", "cmd/gmproxy/supervisor.go",
		"\t\tif !ready {\n\t\t\tif err := s.waitReady(s.reloadCtx, p); err != nil {", "\t\tif !ready && false {\n\t\t\tif err := s.waitReady(s.reloadCtx, p); err != nil {",
		"TestReloadDuringWorkerStart"},
	{"gmproxy run: a dead worker reported ready until its replacement starts", "cmd/gmproxy/supervisor.go",
		"\t\tp.ready = false // GET /workers and /readyz until its replacement runs\n", "",
		"TestDeadWorkerNotReady"},
	{"gmproxy run: a worker dead before a clean shutdown (its restart pending) makes it exit 1", "cmd/gmproxy/supervisor.go",
		"\t\tcase <-p.exited:\n\t\t\ts.log.Warn(\"worker not running at shutdown", "\t\tcase <-make(chan struct{}):\n\t\t\ts.log.Warn(\"worker not running at shutdown",
		"TestStopAfterWorkerDied"},
	{"gmproxy run: SIGTERM during a slow reload step waits for the step's timeout", "cmd/gmproxy/supervisor.go",
		"\"signal\", fmt.Sprint(sig))\n\t\t\t\t\ts.abandonReloads()\n", "\"signal\", fmt.Sprint(sig))\n\t\t\t\t\t_ = s.abandonReloads\n",
		"TestStopDuringReload"},
	{"gmproxy run: commits cut by a shutdown taken for refusals (workers signalled, 2 s waited per worker)", "cmd/gmproxy/supervisor.go",
		"if len(errs) > 0 && s.reloadCtx.Err() != nil {", "if false {",
		"TestStopDuringReload"},
	{"gmproxy run: a reload asked during another is dropped", "cmd/gmproxy/supervisor.go",
		"\t\tanswerReloads(s.log, asked, err)\n\t\tasked = next\n", "\t\tanswerReloads(s.log, asked, err)\n\t\tanswerReloads(s.log, next, err)\n\t\tasked = nil\n",
		"TestReloadDuringReload"},
	{"gmproxy run: a worker that refused to commit what the others switched to keeps running", "cmd/gmproxy/supervisor.go",
		"\t\te.p.cmd.Process.Signal(syscall.SIGTERM)\n", "",
		"TestReloadCommitOutcome"},
	{"gmproxy run: a reload made in part reported as refused with the running configuration kept", "cmd/gmproxy/run_wiring.go",
		"\t\t\tcase errors.As(err, &split):", "\t\t\tcase errors.As(err, &split) && false:",
		"TestControlReloadOutcome"},
	{"proxy: a tunnel's idle time counted from the read before a slow write, not from its end", "proxy/streaming.go",
		"\t\t\tif w > 0 {\n\t\t\t\t// A write to a slow reader", "\t\t\tif false {\n\t\t\t\t// A write to a slow reader",
		"TestPipeIdleCountsFromWriteEnd"},
	{"proxy: an extended CONNECT tunnel cut for idleness keeps its handler until send_timeout", "proxy/streaming.go",
		"\t\twd.SetWriteDeadline(time.Now())\n", "\t\t_ = wd\n",
		"TestExtendedConnectIdleEndsBlockedWrite"},
	{"proxy: an extended CONNECT tunnel its target ended in order is reset", "proxy/streaming.go",
		"if ab, ok := a.(aborter); ok && aborted {", "if ab, ok := a.(aborter); ok {",
		"TestExtendedConnectTargetEnds"},
	{"gmproxy run: a worker that died between prepare and commit fails a reload every live worker made", "cmd/gmproxy/supervisor.go",
		"if s.diedDuring(e.p) {", "if false {",
		"TestReloadCommitOutcome"},
	{"gmproxy run: a live worker's refused commit not reported", "cmd/gmproxy/supervisor.go",
		"refused = append(refused, e)\n\t}\n\ts.grace.Store", "_ = e\n\t}\n\ts.grace.Store",
		"TestReloadCommitOutcome"},
	{"daemon: Abort leaves a prepared reload's listeners open", "internal/daemon/daemon.go",
		"\td.mu.Unlock()\n\tif st != nil {\n\t\tst.drop()\n\t}", "\td.mu.Unlock()\n\t_ = st",
		"TestPrepareCommitAbort"},
	{"gmproxy run: a running worker that no longer answers never replaced", "cmd/gmproxy/supervisor.go",
		"\tgo s.watch(stopWatch)\n", "\t_ = s.watch\n",
		"TestWorkersHungWorkerReplaced"},
	{"gmproxy run: a dead worker's counts dropped from the merged counters", "cmd/gmproxy/supervisor_metrics.go",
		"c.retired = mergeIndex(mergeFamilies([]map[string]*dto.MetricFamily{c.retired, fams}))", "_ = fams",
		"TestMergedCountersNeverDecrease"},
	{"gmproxy run: a worker's missed scrape drops its counts from the merged counters", "cmd/gmproxy/supervisor_metrics.go",
		"out = append(out, c.last[p])", "out = append(out, nil)",
		"TestMergedCountersNeverDecrease"},
	{"gmproxy run: SIGUSR1 not forwarded to the workers", "cmd/gmproxy/supervisor.go",
		"\tcase reopenSignal:\n\t\ts.reopenLogs()", "\tcase reopenSignal:\n\t\t_ = reopenSignal",
		"TestWorkersAccessLog"},
	{"clientshare: a client's limit summed over this worker's count only", "internal/clientshare/clientshare.go",
		"for w := 0; w < t.workers; w++ {\n\t\t\tc := t.counter(s, w).Load()", "for w := v.w; w <= v.w; w++ {\n\t\t\tc := t.counter(s, w).Load()",
		"TestLimitsAcrossWorkers|TestConcurrent"},
	{"clientshare: a dead worker's counts not cleared", "internal/clientshare/clientshare.go",
		"\t\tt.counter(s, w).Store(0)\n", "\t\t_ = t.counter(s, w)\n",
		"TestClearWorker"},
	{"clientshare: a slot whose counts fell to zero never taken over", "internal/clientshare/clientshare.go",
		"if free < 0 && (got == 0 || t.idle(s)) {", "if free < 0 && got == 0 {",
		"TestNoRoom"},
	{"clientshare: a finished handshake not given back", "internal/clientshare/clientshare.go",
		"\tif handshake {\n\t\td += hs\n\t}", "\tif handshake && false {\n\t\td += hs\n\t}",
		"TestLimitsAcrossWorkers"},
	{"frontdoor: the workers' shared client table not consulted", "frontdoor/limits.go",
		"if sh := cfg.SharedClients; sh != nil {", "if sh := cfg.SharedClients; false && sh != nil {",
		"TestServerPerClientShared"},
	{"gmproxy run: workers not given the shared client table", "cmd/gmproxy/run.go",
		"\t\tr.env.SharedClients = r.wk.clients\n", "\t\t_ = r.wk.clients\n",
		"TestWorkersPerClientLimit"},
	{"conf: an admin address given by a host name taken as loopback", "conf/validate.go",
		"return host == \"localhost\" || strings.HasSuffix(host, \".localhost\")", "return true",
		"TestBadConfigs"},
	{"conf: negative keepalive.max_idle accepted", "conf/validate.go",
		"if u.Keepalive.MaxIdle < 0 {", "if u.Keepalive.MaxIdle < -1 {",
		"."},
}

func main() {
	verbose := flag.Bool("v", false, "print the test output of every mutant")
	only := flag.String("only", "", "run only the mutants whose name matches this regular expression")
	jobs := flag.Int("j", 3, "mutants tested at once, each in its own copy of the module (3 on 2 cores: a build leaves a core idle while it links and a test waits)")
	check := flag.Bool("check", false, "only check that every search text is found exactly once")
	alone := flag.Bool("alone", false, "build every mutant alone, none in a schema (schema.go)")
	null := flag.Bool("null", false, "check the schema build itself: every mutant of a schema put in unchanged (its new text its old), which must survive")
	flag.Parse()
	if err := run(*verbose, *only, max(*jobs, 1), *check, !*alone, *null); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		var s survivedError
		if errors.As(err, &s) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

// survivedError is run's error when mutants survived (exit status 1;
// other errors: 2).
type survivedError string

func (e survivedError) Error() string { return string(e) }

func run(verbose bool, only string, jobs int, checkOnly, useSchema, null bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	re, err := regexp.Compile(only)
	if err != nil {
		return err
	}
	var list []mutant
	for _, m := range mutants {
		if re.MatchString(m.name) {
			if null {
				m.new = m.old
			}
			list = append(list, m)
		}
	}
	// A stale list is an error before anything runs.
	for _, m := range list {
		b, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			return fmt.Errorf("%s: %v", m.name, err)
		}
		if n := bytes.Count(b, []byte(m.old)); n != 1 {
			return fmt.Errorf("%s: search text found %d times in %s (want exactly once): update the mutant list\n\t%q", m.name, n, m.file, m.old)
		}
	}
	if checkOnly {
		fmt.Printf("%d search texts found once each\n", len(list))
		return nil
	}

	// One copy of the module per job, where its tests run and a mutant
	// is applied (for a test that reads the file), and one where every
	// test binary is built, never changed: a mutant reaches the build as
	// an overlay (go test -overlay). The build cache keys a package on
	// its directory, so with one build directory the packages a mutant
	// does not change are compiled once for all the jobs, where a build
	// in each job's copy compiled the module again in each (10 to 20 s
	// the first test binary of a package in a copy).
	jobs = min(jobs, max(len(list), 1))
	scratches := make([]string, jobs+1)
	for i := range scratches {
		dir, err := scratchDir()
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		defer os.RemoveAll(dir + "-overlay") // try's
		if err := copyModule(root, dir); err != nil {
			return err
		}
		scratches[i] = dir
	}
	buildDir, scratches := scratches[0], scratches[1:]
	env := testEnv(os.Environ())

	// The schema build (schema.go): one test binary per package for
	// all the mutants that can share it; the baselines run there.
	var sb *schemaBuild
	if useSchema {
		sb, err = newSchemaBuild(buildDir, list)
		if err != nil {
			return err
		}
		defer os.RemoveAll(sb.dir)
		fmt.Printf("%d of %d mutants in a schema build\n", len(sb.s.ids), len(list))
	}

	// Baseline: the selected tests of each package pass unmutated.
	filters := map[string][]string{}
	for _, m := range list {
		filters[pkgOf(m)] = append(filters[pkgOf(m)], runOf(m))
	}
	pkgs := make([]string, 0, len(filters))
	for p := range filters {
		pkgs = append(pkgs, p)
	}
	// The packages with the most selected tests first: their baselines
	// are the longest.
	sort.Slice(pkgs, func(i, j int) bool {
		if len(filters[pkgs[i]]) != len(filters[pkgs[j]]) {
			return len(filters[pkgs[i]]) > len(filters[pkgs[j]])
		}
		return pkgs[i] < pkgs[j]
	})

	// The baselines and then the mutants, in one queue: the jobs that
	// are done with the short baselines test mutants while the longest
	// run (they waited for them, idle, for a minute). A mutant of the
	// schema build waits for its package's binary, built by the
	// package's baseline; a job takes the first task it can run. A
	// failed baseline stops the queue, and the run fails on it whatever
	// the mutants gave.
	type task struct {
		pkg string // a baseline: pkg's selected tests, unmutated
		id  int    // or a mutant: list[id-1]
	}
	var (
		mu                     sync.Mutex // what follows and stdout
		ready                  = sync.NewCond(&mu)
		built                  = map[string]bool{} // schema binaries built (or failed)
		pending                []task
		caught                 int
		survived, timing, errs []string
		aloneOnly, caughtNames []string
		berrs                  []string
		wg                     sync.WaitGroup
	)
	for _, p := range pkgs {
		pending = append(pending, task{pkg: p})
	}
	for i := range list {
		pending = append(pending, task{id: i + 1})
	}
	// take is the next task a job can run, false when none is left.
	take := func() (task, bool) {
		mu.Lock()
		defer mu.Unlock()
		for {
			if len(berrs) > 0 || len(pending) == 0 {
				return task{}, false
			}
			for i, tk := range pending {
				if tk.id != 0 && sb != nil && sb.s.ids[tk.id] && !built[pkgOf(list[tk.id-1])] {
					continue
				}
				pending = append(pending[:i], pending[i+1:]...)
				return tk, true
			}
			ready.Wait()
		}
	}
	for _, dir := range scratches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bin := filepath.Join(dir, ".mutants-bin")
			for {
				tk, ok := take()
				if !ok {
					return
				}
				if tk.id == 0 {
					start := time.Now()
					var (
						out    string
						failed bool
						err    error
					)
					if sb != nil {
						out, err = sb.build(tk.pkg)
						if err != nil {
							// The file and line the compiler names
							// are the mutant's (schema.go keeps them).
							err = fmt.Errorf("%v: a mutant in the schema build does not compile (every mutant must)", err)
						}
						mu.Lock()
						built[tk.pkg] = true
						ready.Broadcast()
						mu.Unlock()
						if err == nil {
							out, failed, err = runTests(dir, env, sb.bin(tk.pkg), tk.pkg, strings.Join(filters[tk.pkg], "|"))
						}
					} else {
						out, failed, err = testPackage(buildDir, dir, "", env, bin, tk.pkg, strings.Join(filters[tk.pkg], "|"))
					}
					mu.Lock()
					switch {
					case err != nil:
						berrs = append(berrs, fmt.Sprintf("baseline %s: %v\n%s", tk.pkg, err, out))
					case failed:
						berrs = append(berrs, fmt.Sprintf("baseline %s: the selected tests fail without a mutant:\n%s", tk.pkg, out))
					default:
						fmt.Printf("baseline ok  %-34s %5.1fs\n", tk.pkg, time.Since(start).Seconds())
					}
					ready.Broadcast()
					mu.Unlock()
					continue
				}
				m := list[tk.id-1]
				var (
					r   result
					err error
				)
				if sb != nil && sb.s.ids[tk.id] {
					if sb.failed(pkgOf(m)) {
						continue // its baseline's error fails the run
					}
					n := reruns
					if null {
						n = 0 // it is meant to survive
					}
					menv := append(env[:len(env):len(env)], fmt.Sprintf("%s=%d", envMutant, tk.id))
					r, err = runMutant(m, dir, menv, sb.bin(pkgOf(m)), n)
					// An unchanged copy that fails is run again: the
					// schema fails it every time, a test that depends
					// on timing (on a loaded machine) only sometimes.
					for k := 0; null && err == nil && r.failed && k < reruns; k++ {
						var out string
						out, r.failed, err = runTests(dir, menv, sb.bin(pkgOf(m)), pkgOf(m), runOf(m))
						r.out += out
						if !r.failed {
							mu.Lock()
							timing = append(timing, fmt.Sprintf("%s (unchanged copy failed, then passed)", m.name))
							mu.Unlock()
						}
					}
					if err == nil && !r.failed && !null {
						// Built alone before it is called a
						// survivor (schema.go).
						var ra result
						ra, err = try(m, buildDir, dir, env, bin)
						if err == nil && ra.failed {
							mu.Lock()
							aloneOnly = append(aloneOnly, m.name)
							mu.Unlock()
						}
						ra.took += r.took
						r = ra
					}
				} else if !null {
					r, err = try(m, buildDir, dir, env, bin)
				} else {
					continue // an unchanged file built alone is the baseline
				}
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case r.failed:
					caught++
					caughtNames = append(caughtNames, m.name)
					if r.rerun > 0 {
						timing = append(timing, fmt.Sprintf("%s (run %d of %d)", m.name, r.rerun+1, reruns+1))
					}
				default:
					survived = append(survived, m.name)
				}
				if err == nil {
					state := "SURVIVED"
					if r.failed {
						state = "caught  "
					}
					fmt.Printf("%s %-70s %5.1fs\n", state, m.name, r.took.Seconds())
					if verbose {
						fmt.Println(indent(r.out))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(berrs) > 0 {
		return errors.New(strings.Join(berrs, "\n"))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	if null {
		// Each copy, unchanged, must behave as the function: a test
		// that fails on one fails for the schema, not for a mutant.
		if caught > 0 {
			return fmt.Errorf("%d unchanged copies failed their tests %d times (the schema build changes what they test): %s", caught, reruns+1, strings.Join(caughtNames, "; "))
		}
		fmt.Printf("%d unchanged copies passed their tests\n", len(survived))
		if len(timing) > 0 {
			fmt.Printf("tests that depend on timing (make them deterministic): %s\n", strings.Join(timing, "; "))
		}
		return nil
	}
	fmt.Printf("caught %d of %d\n", caught, len(list))
	if len(timing) > 0 {
		fmt.Printf("caught only on a rerun (the test depends on timing; make it deterministic): %s\n", strings.Join(timing, "; "))
	}
	if len(aloneOnly) > 0 {
		fmt.Printf("caught only when built alone (a test that drops %s, or reads the file): %s\n", envMutant, strings.Join(aloneOnly, "; "))
	}
	if len(survived) > 0 {
		// Returned, not os.Exit here: the deferred removals of the
		// scratch copies must run.
		return survivedError(fmt.Sprintf("%d survived: %s", len(survived), strings.Join(survived, "; ")))
	}
	return nil
}

// testEnv is the tests' environment, made from environ: without a
// GMPROXY_MUTANT (set for a mutant's run only: a caller's, exported to
// reproduce one, would switch its mutant on in the baselines), and with
// the tests' waits shortened unless environ sets them (the tests run
// alone here: each caught mutant of a test that waits for what the
// mutant stops would cost its whole wait; internal/testwait).
func testEnv(environ []string) []string {
	env := make([]string, 0, len(environ)+1)
	wait := false
	for _, e := range environ {
		k, v, _ := strings.Cut(e, "=")
		switch k {
		case envMutant:
			continue
		case "GMPROXY_TEST_WAIT":
			wait = wait || v != ""
		}
		env = append(env, e)
	}
	if !wait {
		env = append(env, "GMPROXY_TEST_WAIT="+testWait)
	}
	return env
}

// scratchDir makes a scratch directory, named by its real path. The go
// command runs in it under that path (getwd resolves symbolic links), and
// takes an -overlay's file names as written: under a TMPDIR reached through
// a link (macOS's /var/folders is /private/var/folders), buildDir's name
// in the overlay matched none of the files built, every mutant was built
// unmutated and survived.
func scratchDir() (string, error) {
	dir, err := os.MkdirTemp("", "gmproxy-mutants-")
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return real, nil
}

// result is what testing one mutant found.
type result struct {
	failed bool // its tests failed: caught
	rerun  int  // reruns it took to fail
	out    string
	took   time.Duration
}

// try applies m to the module copy in dir and, as an overlay, to the
// build of its tests in buildDir, runs them in dir and puts the file
// back.
func try(m mutant, buildDir, dir string, env []string, bin string) (result, error) {
	path := filepath.Join(dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return result{}, err
	}
	mutated := bytes.Replace(orig, []byte(m.old), []byte(m.new), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return result{}, err
	}
	// The overlay: buildDir's file read from the mutated one (of the
	// same name: the compiler reports its errors under it), beside the
	// copy, not in it, where a test that walks the module would find it.
	ov := dir + "-overlay"
	src := filepath.Join(ov, filepath.Base(m.file))
	overlay := filepath.Join(ov, "overlay.json")
	if err := os.MkdirAll(ov, 0o755); err != nil {
		return result{}, err
	}
	if err := os.WriteFile(src, mutated, 0o644); err != nil {
		return result{}, err
	}
	j, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(buildDir, m.file): src}})
	if err != nil {
		return result{}, err
	}
	if err := os.WriteFile(overlay, j, 0o644); err != nil {
		return result{}, err
	}
	r, err := testMutant(m, buildDir, dir, overlay, env, bin)
	if werr := os.WriteFile(path, orig, 0o644); werr != nil && err == nil {
		err = werr
	}
	return r, err
}

// testMutant builds and runs m's tests, m applied to dir and in overlay.
func testMutant(m mutant, buildDir, dir, overlay string, env []string, bin string) (result, error) {
	start := time.Now()
	out, err := buildTests(buildDir, overlay, env, bin, pkgOf(m))
	if err != nil {
		return result{}, fmt.Errorf("%s: %v (a mutant must compile)\n%s", m.name, err, out)
	}
	r, err := runMutant(m, dir, env, bin, reruns)
	r.took = time.Since(start)
	return r, err
}

// runMutant runs m's tests with the test binary bin, built with m.
func runMutant(m mutant, dir string, env []string, bin string, reruns int) (result, error) {
	start := time.Now()
	out, failed, err := runTests(dir, env, bin, pkgOf(m), runOf(m))
	if err != nil {
		return result{}, fmt.Errorf("%s: %v\n%s", m.name, err, out)
	}
	// A survivor is run again (reruns times, the same binary): a test
	// that catches it only sometimes depends on timing. It counts as
	// caught, but is named at the end so that the test is made
	// deterministic; CI is not failed by a scheduling accident.
	rerun := 0
	for !failed && rerun < reruns {
		rerun++
		var rout string
		rout, failed, err = runTests(dir, env, bin, pkgOf(m), runOf(m))
		if err != nil {
			return result{}, fmt.Errorf("%s: rerun: %v\n%s", m.name, err, rout)
		}
		out += rout
	}
	return result{failed: failed, rerun: rerun, out: out, took: time.Since(start)}, nil
}

// pkgOf is the package directory whose tests catch m: its file's ("./tlcp")
// unless its run filter names another ("./internal/daemon:TestFleet").
func pkgOf(m mutant) string {
	if pkg, _, ok := strings.Cut(m.run, ":"); ok && strings.HasPrefix(pkg, "./") {
		return pkg
	}
	return "./" + filepath.ToSlash(filepath.Dir(m.file))
}

// runOf is m's -test.run filter (without a package).
func runOf(m mutant) string {
	if pkg, run, ok := strings.Cut(m.run, ":"); ok && strings.HasPrefix(pkg, "./") {
		return run
	}
	return m.run
}

// testPackage builds the test binary of pkg in buildDir, with overlay
// (a go test -overlay file) if not empty, (an error when it does not
// compile) and runs the tests matching run in the package's directory of
// dir, stopping at the first failure; failed reports whether any test
// failed (or the binary crashed or timed out).
func testPackage(buildDir, dir, overlay string, env []string, bin, pkg, run string) (out string, failed bool, err error) {
	if out, err := buildTests(buildDir, overlay, env, bin, pkg); err != nil {
		return out, false, err
	}
	return runTests(dir, env, bin, pkg, run)
}

// buildTests builds the test binary bin of pkg in buildDir, with overlay
// (a go test -overlay file) if not empty; out is the go command's output
// when it fails.
func buildTests(buildDir, overlay string, env []string, bin, pkg string) (out string, err error) {
	// -vet=off: a mutant must compile, and vet found nothing of use in
	// one (the README's go vet covers the code as it is); vet was about
	// a quarter of each build.
	// -ldflags=-w: no DWARF, a fifth of each link.
	// -gcflags=-N -l: the package under test (only it: its dependencies
	// keep the cached, optimised builds, the crypto among them) compiled
	// without optimisation or inlining, a quarter less compile time. The
	// baseline is built the same way, so a test that needs the
	// optimiser (an allocation count) fails there, not as a false catch.
	args := []string{"test", "-c", "-vet=off", "-ldflags=-w", "-gcflags=-N -l", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	build := exec.Command("go", append(args, pkg)...)
	// GOGC=off (bounded by GOMEMLIMIT) for the go command, the compiler
	// and the linker only: the builds are most of the step's CPU (a
	// proxy mutant: about 6 CPU-seconds of build, 1.5 of tests), and a
	// quarter of a build was garbage collection. Peak memory per build
	// goes from about 370 to 490 MB. The tests run with the default GC.
	build.Dir, build.Env = buildDir, append(env[:len(env):len(env)], "GOGC=off", "GOMEMLIMIT=1GiB")
	if b, err := build.CombinedOutput(); err != nil {
		return string(b), fmt.Errorf("go test -c %s: %v", pkg, err)
	}
	return "", nil
}

// runTests runs the tests matching run of the test binary bin, built for
// pkg, in the package's directory.
func runTests(dir string, env []string, bin, pkg, run string) (out string, failed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), perMutant+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", run, "-test.count", "1", "-test.failfast",
		"-test.timeout", perMutant.String())
	cmd.Dir, cmd.Env = filepath.Join(dir, pkg), env
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		if bytes.Contains(b, []byte("testing: warning: no tests to run")) {
			return string(b), false, errors.New("no test matches " + run)
		}
		return string(b), false, nil
	case errors.As(err, &ee):
		return string(b), true, nil
	default:
		return string(b), false, err
	}
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go.mod not found (%v): run from the module", err)
	}
	return filepath.Dir(gomod), nil
}

// copyModule copies the files git knows in root (tracked, and untracked
// ones it does not ignore) to dst.
func copyModule(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) { // deleted in the work tree
				continue
			}
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := copyFile(src, filepath.Join(dst, f), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}
