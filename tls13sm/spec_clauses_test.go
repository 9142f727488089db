package tls13sm

// Hostile protocol review (rev-d): misbehaving-client tests that FAIL on
// the current code, each for a real defect. Every test drives a real
// Server over loopback TCP with raw records and looks at the server's
// first reply record: a plaintext ServerHello / HelloRetryRequest (the
// server went on) or an alert (and which one).

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// zzReply is the server's first reply record, classified.
type zzReply struct {
	typ   uint8  // record type (21 alert, 22 handshake)
	alert Alert  // when typ == 21
	hrr   bool   // a HelloRetryRequest (typ 22)
	body  []byte // record body
}

func (r zzReply) String() string {
	switch {
	case r.typ == recordTypeAlert:
		return fmt.Sprintf("alert %q (%d)", r.alert, uint8(r.alert))
	case r.typ == recordTypeHandshake && r.hrr:
		return "HelloRetryRequest"
	case r.typ == recordTypeHandshake && len(r.body) > 0 && r.body[0] == typeServerHello:
		return "ServerHello (handshake goes on)"
	case r.typ == 0:
		return "nothing (connection closed or timed out)"
	}
	return fmt.Sprintf("record type %d", r.typ)
}

// zzReadRecord reads one record from b.
func zzReadRecord(t *testing.T, b io.Reader) (zzReply, bool) {
	t.Helper()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		return zzReply{}, false
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(b, body); err != nil {
		return zzReply{}, false
	}
	r := zzReply{typ: hdr[0], body: body}
	if r.typ == recordTypeAlert && len(body) == 2 {
		r.alert = Alert(body[1])
	}
	if r.typ == recordTypeHandshake && len(body) >= 4+2+32 && body[0] == typeServerHello {
		r.hrr = string(body[6:38]) == string(helloRetryRequestRandom[:])
	}
	return r, true
}

// zzServer starts a Server on one end of a loopback pair and returns the
// other end (deadline 10 s) and a channel with the server's handshake error.
// zzRetried starts a server with cfg, sends it the ClientHello ch1 and
// checks that it asks for another with a HelloRetryRequest (the set-up of
// the tests of the second ClientHello and of what may come before it).
func zzRetried(t *testing.T, cfg *Config, ch1 []byte) io.ReadWriter {
	t.Helper()
	b, _ := zzServer(t, cfg)
	if _, err := b.Write(zzRecord(recordTypeHandshake, ch1)); err != nil {
		t.Fatal(err)
	}
	if r, ok := zzReadRecord(t, b); !ok || !r.hrr {
		t.Fatalf("first reply %v; want a HelloRetryRequest (test setup)", r)
	}
	return b
}

func zzServer(t *testing.T, cfg *Config) (io.ReadWriter, <-chan error) {
	t.Helper()
	a, b := tcpPair(t)
	dl := time.Now().Add(testwait.Bound(10 * time.Second))
	a.SetDeadline(dl)
	b.SetDeadline(dl)
	done := make(chan error, 1)
	go func() {
		s := Server(a, cfg)
		err := s.Handshake()
		a.Close()
		done <- err
	}()
	t.Cleanup(func() { b.Close(); <-done })
	return b, done
}

// zzFirstReply writes the raw records and returns the server's first
// reply record, CCS records skipped.
func zzFirstReply(t *testing.T, cfg *Config, writes ...[]byte) zzReply {
	t.Helper()
	b, _ := zzServer(t, cfg)
	for _, w := range writes {
		if _, err := b.Write(w); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	for range 4 {
		r, ok := zzReadRecord(t, b)
		if !ok {
			return zzReply{}
		}
		if r.typ != recordTypeChangeCipherSpec {
			return r
		}
	}
	return zzReply{}
}

// zzHello builds an honest client's first ClientHello (curveSM2 share,
// no session ID), lets edit change it, and marshals it.
func zzHello(t *testing.T, edit func(h *clientHelloMsg)) []byte {
	t.Helper()
	_, cliCfg := testConfigs(t)
	cliCfg.ClientSessionCache = nil
	cliCfg.DisableMiddleboxCompat = true
	hs := &clientHandshakeState{c: &Conn{config: cliCfg}, config: cliCfg}
	if err := hs.makeClientHello(); err != nil {
		t.Fatal(err)
	}
	h := hs.hello
	if edit != nil {
		edit(h)
	}
	h.raw = nil
	raw, err := h.marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// zzRecord frames a handshake message, TLS 1.0 record version as on a
// first ClientHello.
func zzRecord(typ uint8, body []byte) []byte {
	return append([]byte{typ, 3, 1, byte(len(body) >> 8), byte(len(body))}, body...)
}

var zzCCS = []byte{recordTypeChangeCipherSpec, 3, 3, 0, 1, 1}

// TestMandatoryExtensionsChecked — RFC 8446 §9.2 (Mandatory-to-Implement
// Extensions): a TLS 1.3 ClientHello
//   - with pre_shared_key MUST also contain psk_key_exchange_modes,
//   - without pre_shared_key MUST contain signature_algorithms and
//     supported_groups,
//   - with supported_groups MUST contain key_share, and vice versa;
//
// "Servers receiving a ClientHello which does not conform to these
// requirements MUST abort the handshake with a missing_extension alert."
// (§4.2.9 repeats it for psk_key_exchange_modes.)
//
// The server never enforces this: clientHelloMsg records hasKeyShareExt,
// hasGroups and hasSigAlgs but nothing reads them, and a pre_shared_key
// without psk_key_exchange_modes is silently ignored (pskMode 0xff). So a
// non-conforming client is answered with a ServerHello / HelloRetryRequest
// (a full handshake, or a retry it should never get) or with the wrong
// alert (illegal_parameter, handshake_failure), which hides the client's
// real fault from it and from the logs (alert metrics). A pre_shared_key
// without psk_key_exchange_modes in particular is a broken or probing
// client that the server must refuse, not serve with a full handshake.
func TestMandatoryExtensionsChecked(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	for _, tc := range []struct {
		name string
		edit func(h *clientHelloMsg)
	}{
		{"pre_shared_key-without-psk_key_exchange_modes", func(h *clientHelloMsg) {
			h.pskModes = nil
			h.pskIdentities = []pskIdentity{{label: make([]byte, 48), obfuscatedTicketAge: 1}}
			h.pskBinders = [][]byte{make([]byte, hashSize)}
		}},
		{"supported_groups-without-key_share", func(h *clientHelloMsg) {
			h.keyShares = nil // no key_share extension at all (not an empty list)
		}},
		{"key_share-without-supported_groups", func(h *clientHelloMsg) {
			h.supportedGroups = nil
		}},
		{"no-signature_algorithms-no-psk", func(h *clientHelloMsg) {
			h.signatureAlgorithms = nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := zzFirstReply(t, srvCfg, zzRecord(recordTypeHandshake, zzHello(t, tc.edit)))
			if r.typ != recordTypeAlert || r.alert != AlertMissingExtension {
				t.Fatalf("server answered a ClientHello violating RFC 8446 §9.2 (%s) with %v; want a fatal missing_extension alert", tc.name, r)
			}
		})
	}
}

// TestChangeCipherSpecOutsideItsWindow — RFC 8446 §5.1: "Handshake
// messages MUST NOT be interleaved with other record types. That is, if
// a handshake message is split over two or more records, there MUST NOT
// be any other records between them." And §5: the compatibility
// change_cipher_spec may be dropped only "at any time after the first
// ClientHello message has been sent or received and before the peer's
// Finished"; any other is unexpected_message.
//
// readRecord drops a CCS without looking at c.core.Hand (tlcp's readRecord
// refuses a CCS while a handshake message is incomplete, and so does
// crypto/tls: "Handshake messages are not allowed to fragment across the
// CCS"), and the server also drops a CCS that arrives before any
// ClientHello (crypto/tls: unexpected_message, no version negotiated
// yet). A peer can thus splice a CCS into the middle of
// its ClientHello, or open the connection with one, and the server goes on
// with the handshake instead of failing with unexpected_message.
func TestChangeCipherSpecOutsideItsWindow(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	hello := zzHello(t, nil)
	t.Run("inside-a-fragmented-ClientHello", func(t *testing.T) {
		half := len(hello) / 2
		r := zzFirstReply(t, srvCfg,
			zzRecord(recordTypeHandshake, hello[:half]), zzCCS, zzRecord(recordTypeHandshake, hello[half:]))
		if r.typ != recordTypeAlert || r.alert != AlertUnexpectedMessage {
			t.Fatalf("ClientHello split over two records with a ChangeCipherSpec between them: server answered %v; want unexpected_message (RFC 8446 §5.1)", r)
		}
	})
	t.Run("before-the-ClientHello", func(t *testing.T) {
		r := zzFirstReply(t, srvCfg, zzCCS, zzRecord(recordTypeHandshake, hello))
		if r.typ != recordTypeAlert || r.alert != AlertUnexpectedMessage {
			t.Fatalf("ChangeCipherSpec before any ClientHello: server answered %v; want unexpected_message (RFC 8446 §5)", r)
		}
	})
}

// TestSecondClientHelloMustMatchFirst — RFC 8446 §4.1.2: after a
// HelloRetryRequest "the client MUST send the same ClientHello without
// modification, except" for key_share, early_data, cookie,
// pre_shared_key and padding. crypto/tls (illegalClientHelloChange),
// BoGo and OpenSSL abort with illegal_parameter when anything else
// changes.
//
// doHelloRetryRequest only compares the session ID, server_name,
// supported_versions (contains 1.3) and that the chosen suite is still
// offered; the random, the cipher suite list, ALPN, supported_groups and
// signature_algorithms may all change. GetConfigForClient ran on the first
// ClientHello, but ALPN, the certificate (GetCertificate) and the
// signature scheme are then chosen from the second: a client can show one
// hello to the callbacks that select the configuration and have another
// negotiated. Later: a pre_shared_key the first hello lacked (§4.1.2
// updates one "if present") and a cookie the HelloRetryRequest never sent
// were accepted.
func TestSecondClientHelloMustMatchFirst(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	srvCfg.NextProtos = []string{"h2", "http/1.1"}
	sm2Share := func(t *testing.T) []byte {
		k, err := gmecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k.PublicKey().Bytes()
	}
	// The first hello offers curveSM2 and X25519 but shares X25519 only:
	// the server (preferring curveSM2) answers with a HelloRetryRequest.
	var first *clientHelloMsg
	ch1 := zzHello(t, func(h *clientHelloMsg) {
		h.alpnProtocols = []string{"http/1.1"}
		h.supportedGroups = []uint16{CurveSM2, X25519}
		h.keyShares = []keyShare{{group: X25519, data: make([]byte, 32)}}
		h.keyShares[0].data[0] = 9
		h.pskModes = []uint8{pskModeDHE} // may resume, but offers no ticket
		first = h
	})
	for _, tc := range []struct {
		name string
		edit func(h *clientHelloMsg)
	}{
		{"random", func(h *clientHelloMsg) { h.random = make([]byte, 32); h.random[0] = 0x5a }},
		// §4.1.2: pre_shared_key is updated "if present" in the first; one
		// the first lacked is added (and the server resumed from it, or
		// went on with a full handshake).
		{"adds-pre_shared_key", func(h *clientHelloMsg) {
			h.pskIdentities = []pskIdentity{{label: make([]byte, 48), obfuscatedTicketAge: 1}}
			h.pskBinders = [][]byte{make([]byte, hashSize)}
		}},
		// §4.1.2, §4.2.2: a cookie only "if one was provided in the
		// HelloRetryRequest", and this server's never carries one.
		{"cookie", func(h *clientHelloMsg) { h.cookie = []byte("not from this server") }},
		{"alpn", func(h *clientHelloMsg) { h.alpnProtocols = []string{"h2"} }},
		{"cipher-suites", func(h *clientHelloMsg) { h.cipherSuites = append(h.cipherSuites, 0x00ff) }},
		{"server-name", func(h *clientHelloMsg) { h.serverName = "other.example" }},
		// §4.1.2: early_data is never in a second ClientHello.
		{"early-data", func(h *clientHelloMsg) { h.earlyData = true }},
		// §4.1.2: the one share of the group the HelloRetryRequest asked for.
		{"two-key-shares", func(h *clientHelloMsg) {
			h.keyShares = append(h.keyShares, keyShare{group: X25519, data: first.keyShares[0].data})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := zzRetried(t, srvCfg, ch1)
			h2 := *first
			h2.random = append([]byte(nil), first.random...)
			h2.keyShares = []keyShare{{group: CurveSM2, data: sm2Share(t)}}
			tc.edit(&h2)
			h2.raw = nil
			ch2, err := h2.marshal()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Write(rawRecord(recordTypeHandshake, ch2)); err != nil {
				t.Fatal(err)
			}
			r, _ := zzReadRecord(t, b)
			if r.typ != recordTypeAlert || r.alert != AlertIllegalParameter {
				t.Fatalf("second ClientHello with a changed %s: server answered %v; want illegal_parameter (RFC 8446 §4.1.2)", tc.name, r)
			}
		})
	}
}

// TestPreSharedKeyNotLastAlert — RFC 8446 §4.2.11: pre_shared_key "MUST
// be the last extension in the ClientHello ... Servers MUST check that it
// is the last extension and otherwise fail the handshake with an
// "illegal_parameter" alert."
//
// clientHelloMsg.parseExtension turns an extension after pre_shared_key
// into a parse failure, so readClientHello answers decode_error
// ("malformed ClientHello"): the server refuses, but with the wrong alert,
// which tells the peer (and the logs, metrics by alert) that its hello was
// garbled rather than that it broke the PSK placement rule.
func TestPreSharedKeyNotLastAlert(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	hello := zzHello(t, func(h *clientHelloMsg) {
		h.pskModes = []uint8{pskModeDHE}
		h.pskIdentities = []pskIdentity{{label: make([]byte, 48), obfuscatedTicketAge: 1}}
		h.pskBinders = [][]byte{make([]byte, hashSize)}
	})
	r := zzFirstReply(t, srvCfg, zzRecord(recordTypeHandshake, extensionAfterPSK(t, hello)))
	if r.typ != recordTypeAlert || r.alert != AlertIllegalParameter {
		t.Fatalf("ClientHello with an extension after pre_shared_key: server answered %v; want illegal_parameter (RFC 8446 §4.2.11)", r)
	}
}

// extensionAfterPSK appends an empty extension of an unassigned type to a
// marshalled ClientHello that ends with pre_shared_key, and fixes the
// lengths of the extensions block and of the message.
func extensionAfterPSK(t *testing.T, hello []byte) []byte {
	t.Helper()
	hello = append(hello, 0x7a, 0x7a, 0, 0)
	n := len(hello) - 4
	hello[1], hello[2], hello[3] = byte(n>>16), byte(n>>8), byte(n)
	p := 4 + 2 + 32
	p += 1 + int(hello[p])                                        // legacy_session_id
	p += 2 + int(binary.BigEndian.Uint16(hello[p:]))              // cipher_suites
	p += 1 + int(hello[p])                                        // legacy_compression_methods
	binary.BigEndian.PutUint16(hello[p:], uint16(len(hello)-p-2)) // extensions
	var m clientHelloMsg
	if m.unmarshal(hello) || !m.pskNotLast {
		t.Fatal("test setup: the hello with an extension after pre_shared_key parses")
	}
	return hello
}

// TestPreSharedKeyNotLastInSecondClientHello: §4.2.11's rule (an
// extension after pre_shared_key is illegal_parameter) holds for the
// ClientHello that answers a HelloRetryRequest too, which may carry a PSK
// (§4.1.2 lets it update pre_shared_key). doHelloRetryRequest answered
// such a hello decode_error ("malformed second ClientHello").
func TestPreSharedKeyNotLastInSecondClientHello(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	psk := func(h *clientHelloMsg) {
		h.pskModes = []uint8{pskModeDHE}
		h.pskIdentities = []pskIdentity{{label: make([]byte, 48), obfuscatedTicketAge: 1}}
		h.pskBinders = [][]byte{make([]byte, hashSize)}
	}
	// The first hello shares X25519 only: the server, preferring curveSM2,
	// answers with a HelloRetryRequest.
	var first *clientHelloMsg
	ch1 := zzHello(t, func(h *clientHelloMsg) {
		h.supportedGroups = []uint16{CurveSM2, X25519}
		h.keyShares = []keyShare{{group: X25519, data: make([]byte, 32)}}
		h.keyShares[0].data[0] = 9
		psk(h)
		first = h
	})
	b := zzRetried(t, srvCfg, ch1)
	k, err := gmecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h2 := *first
	h2.keyShares = []keyShare{{group: CurveSM2, data: k.PublicKey().Bytes()}}
	h2.raw = nil
	ch2, err := h2.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(rawRecord(recordTypeHandshake, extensionAfterPSK(t, ch2))); err != nil {
		t.Fatal(err)
	}
	r, _ := zzReadRecord(t, b)
	if r.typ != recordTypeAlert || r.alert != AlertIllegalParameter {
		t.Fatalf("second ClientHello with an extension after pre_shared_key: server answered %v; want illegal_parameter (RFC 8446 §4.2.11)", r)
	}
}

// TestForbiddenExtensionInEncryptedExtensions — RFC 8446 §4.3.1: "The
// client MUST check EncryptedExtensions for the presence of any forbidden
// extensions and if any are found MUST abort the handshake with an
// "illegal_parameter" alert" (and §4.2: an extension an implementation
// recognizes in a message it is not specified for gets illegal_parameter).
// key_share, pre_shared_key and supported_versions belong to ServerHello
// only.
//
// encryptedExtensionsMsg.unmarshal lumps every extension but ALPN,
// early_data, server_name and supported_groups into unknownExtensions,
// and readServerParameters answers unsupported_extension — the alert for
// an extension the client never offered, which these were (the client did
// send key_share, pre_shared_key and supported_versions). The misbehaving
// server thus learns the wrong reason. The server rewrites its
// EncryptedExtensions before hashing, so both transcripts agree.
func TestForbiddenExtensionInEncryptedExtensions(t *testing.T) {
	for _, ext := range []struct {
		name string
		typ  uint16
	}{{"key_share", extKeyShare}, {"supported_versions", extSupportedVersions}, {"pre_shared_key", extPreSharedKey}} {
		t.Run(ext.name, func(t *testing.T) {
			runMisbehaving(t, misCase{
				name: "server-encrypted-extensions-with-" + ext.name, server: true, beforeHash: true,
				msgs: onType(typeEncryptedExtensions, eeWith(ext.typ)), alert: AlertIllegalParameter,
			})
		})
	}
}

// TestUnsolicitedServerNameAckRefused — RFC 8446 §4.2: "Implementations
// MUST NOT send extension responses if the remote endpoint did not send
// the corresponding extension requests ... Upon receiving such an
// extension, an endpoint MUST abort the handshake with an
// "unsupported_extension" alert." (RFC 6066 §3: the server's empty
// server_name is an acknowledgement of the client's.)
//
// encryptedExtensionsMsg.unmarshal accepts a server_name acknowledgement
// unconditionally ("acknowledgements / informational, allowed"), so a
// client that sent no SNI (an IP address or no ServerName) lets a server
// claim it used a name the client never gave. Here the client has no
// ServerName (InsecureSkipVerify), and the server's EncryptedExtensions
// carry server_name (rewritten before hashing: transcripts agree).
func TestUnsolicitedServerNameAckRefused(t *testing.T) {
	scfg, ccfg := testConfigs(t)
	ccfg.ServerName, ccfg.InsecureSkipVerify = "", true
	scfg.testHandshakeOut, scfg.testRewriteBeforeHash = onType(typeEncryptedExtensions, eeWith(extServerName)), true
	a, b := tcpPair(t)
	dl := time.Now().Add(testwait.Bound(10 * time.Second))
	a.SetDeadline(dl)
	b.SetDeadline(dl)
	srv, cli := Server(a, scfg), Client(b, ccfg)
	herr, merr, done := testpeer.RunMisbehaving(t, cli, srv, nil, 4, false)
	if done {
		return
	}
	testpeer.WantAlerts(t, herr, merr, AlertUnsupportedExtension, false)
}

// TestHelloWithoutSM2SignaturesRefused: a full handshake needs the client
// to accept sm2sig_sm3, the only scheme the server's certificate can sign
// with (RFC 8998 §3.2; §4.2.3: no common scheme is handshake_failure).
func TestHelloWithoutSM2SignaturesRefused(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	hello := zzHello(t, func(h *clientHelloMsg) { h.signatureAlgorithms = []uint16{0x0403} })
	reply := rawExchange(t, srvCfg, [][]byte{zzRecord(recordTypeHandshake, hello)})
	if string(reply) != string([]byte{21, 3, 3, 0, 2, 2, byte(AlertHandshakeFailure)}) {
		t.Fatalf("server reply %x, want a handshake_failure alert", reply[:min(len(reply), 16)])
	}
}

// earlyDataRetried returns a ClientHello with early_data whose only key
// share is X25519, which the server answers with a HelloRetryRequest for
// SM2, and a maker of the second ClientHello: the same with an SM2 share
// and without early_data (RFC 8446 §4.1.2).
func earlyDataRetried(t *testing.T) (ch1 []byte, secondHello func(*testing.T) []byte) {
	var first *clientHelloMsg
	ch1 = zzHello(t, func(h *clientHelloMsg) {
		h.supportedGroups = []uint16{CurveSM2, X25519}
		h.keyShares = []keyShare{{group: X25519, data: make([]byte, 32)}}
		h.keyShares[0].data[0] = 9
		h.earlyData = true
		first = h
	})
	return ch1, func(t *testing.T) []byte {
		k, err := gmecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		h2 := *first
		h2.earlyData = false
		h2.keyShares = []keyShare{{group: CurveSM2, data: k.PublicKey().Bytes()}}
		h2.raw = nil
		ch2, err := h2.marshal()
		if err != nil {
			t.Fatal(err)
		}
		return ch2
	}
}

// TestShortRecordAfterHelloRetryIsNotEarlyData: after a
// HelloRetryRequest answering a ClientHello with early_data, the server
// skips the client's 0-RTT records (§4.2.10), which are protected: at
// least a content type and a 16-byte tag. A shorter application_data
// record (empty, say) cannot be one; it was skipped anyway, without
// counting against maxUselessRecords, so a client could send them without
// end. It is unexpected_message, as application data before the
// handshake is.
func TestShortRecordAfterHelloRetryIsNotEarlyData(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	ch1, secondHello := earlyDataRetried(t)
	for _, n := range []int{0, aeadOver} {
		t.Run(fmt.Sprintf("%d-bytes", n), func(t *testing.T) {
			b := zzRetried(t, srvCfg, ch1)
			// A 0-RTT-sized record is skipped; then the short one.
			early := rawRecord(recordTypeApplicationData, make([]byte, aeadOver+1))
			short := rawRecord(recordTypeApplicationData, make([]byte, n))
			ch2 := secondHello(t)
			if _, err := b.Write(append(append(early, short...), rawRecord(recordTypeHandshake, ch2)...)); err != nil {
				t.Fatal(err)
			}
			r, _ := zzReadRecord(t, b)
			if r.typ != recordTypeAlert || r.alert != AlertUnexpectedMessage {
				t.Fatalf("%d-byte application_data record before the second ClientHello: server answered %v; want unexpected_message", n, r)
			}
		})
	}
}

// TestServerNameBounded: a server_name longer than a DNS host name can be
// (255 bytes, RFC 1035 §2.3.4) is refused with unrecognized_name, as the
// TLCP server and OpenSSL's refuse it (RFC 6066 §3 allows it), rather
// than kept, up to the extension's 64 KiB, for the connection's life
// (ConnectionState.ServerName, the front door's copy).
func TestServerNameBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), false},
		{strings.Repeat("a", 60000), false},
	} {
		srvCfg, cliCfg := testConfigs(t)
		cliCfg.ServerName, cliCfg.InsecureSkipVerify = tc.name, true
		ss, _, serr, cerr := runPair(t, srvCfg, cliCfg)
		if tc.ok {
			if serr != nil || cerr != nil || ss.ServerName != tc.name {
				t.Errorf("server_name of %d bytes: server %v, client %v, name of %d bytes; want it served", len(tc.name), serr, cerr, len(ss.ServerName))
			}
			continue
		}
		var ae *AlertError
		if !errors.As(serr, &ae) || ae.Alert != AlertUnrecognizedName || ae.Remote {
			t.Errorf("server_name of %d bytes: server error %v, want unrecognized_name sent", len(tc.name), serr)
		}
		if !errors.As(cerr, &ae) || ae.Alert != AlertUnrecognizedName || !ae.Remote {
			t.Errorf("server_name of %d bytes: client error %v, want unrecognized_name received", len(tc.name), cerr)
		}
	}
}

// TestClientHelloLegacyVersionSSL3Refused — RFC 8446 Appendix D.5: "Any
// endpoint receiving a Hello message with ClientHello.legacy_version ...
// set to 0x0300 MUST abort the handshake with a "protocol_version"
// alert" (and none may be sent with 0x0300 or less), whatever
// supported_versions says. 0x0303 (and, from older stacks, 0x0301 and
// 0x0302) stays accepted.
func TestClientHelloLegacyVersionSSL3Refused(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	for _, tc := range []struct {
		vers uint16
		ok   bool
	}{{0x0303, true}, {0x0301, true}, {0x0300, false}, {0x0002, false}} {
		t.Run(fmt.Sprintf("%#04x", tc.vers), func(t *testing.T) {
			hello := zzHello(t, func(h *clientHelloMsg) { h.vers = tc.vers })
			r := zzFirstReply(t, srvCfg, zzRecord(recordTypeHandshake, hello))
			if tc.ok {
				if r.typ != recordTypeHandshake {
					t.Fatalf("legacy_version %#04x: server answered %v; want a ServerHello", tc.vers, r)
				}
				return
			}
			if r.typ != recordTypeAlert || r.alert != AlertProtocolVersion {
				t.Fatalf("legacy_version %#04x: server answered %v; want protocol_version (RFC 8446 §D.5)", tc.vers, r)
			}
		})
	}
}

// TestFullSizeEarlyDataSkippedAfterHelloRetry: after a HelloRetryRequest
// the server skips the client's 0-RTT records (RFC 8446 §4.2.10), which are
// protected records: up to 2^14 + 256 bytes (§5.2), more than a plaintext
// record may carry. A full 0-RTT record (16 KiB of data, its content type
// and the tag) is skipped like a short one, and the second ClientHello is
// answered; a record over the ciphertext limit is still record_overflow.
func TestFullSizeEarlyDataSkippedAfterHelloRetry(t *testing.T) {
	srvCfg, _ := testConfigs(t)
	ch1, secondHello := earlyDataRetried(t)
	for _, tc := range []struct {
		n  int
		ok bool
	}{{maxPlaintext + 1 + aeadOver, true}, {maxCiphertext, true}, {maxCiphertext + 1, false}} {
		t.Run(fmt.Sprintf("%d-bytes", tc.n), func(t *testing.T) {
			b := zzRetried(t, srvCfg, ch1)
			ch2 := secondHello(t)
			early := rawRecord(recordTypeApplicationData, make([]byte, tc.n))
			if _, err := b.Write(append(early, rawRecord(recordTypeHandshake, ch2)...)); err != nil {
				t.Fatal(err)
			}
			r, _ := zzReadRecord(t, b)
			if tc.ok {
				if r.typ != recordTypeHandshake || r.hrr {
					t.Fatalf("0-RTT record of %d bytes before the second ClientHello: server answered %v; want a ServerHello (RFC 8446 §4.2.10)", tc.n, r)
				}
				return
			}
			if r.typ != recordTypeAlert || r.alert != AlertRecordOverflow {
				t.Fatalf("record of %d bytes: server answered %v; want record_overflow (RFC 8446 §5.2)", tc.n, r)
			}
		})
	}
}
