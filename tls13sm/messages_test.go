package tls13sm

import (
	"bytes"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/internal/transcript"
)

// RFC 8998 Appendix A (protocol-notes §12.3).
func TestAEADVectors(t *testing.T) {
	key := unhex(t, "0123456789ABCDEFFEDCBA9876543210")
	nonce := unhex(t, "00001234567800000000ABCD")
	aad := unhex(t, "FEEDFACEDEADBEEFFEEDFACEDEADBEEFABADDAD2")
	pt := unhex(t, "AAAAAAAAAAAAAAAABBBBBBBBBBBBBBBBCCCCCCCCCCCCCCCCDDDDDDDDDDDDDDDDEEEEEEEEEEEEEEEEFFFFFFFFFFFFFFFFEEEEEEEEEEEEEEEEAAAAAAAAAAAAAAAA")
	for _, tc := range []struct {
		suite   uint16
		ct, tag string
	}{
		{TLS_SM4_GCM_SM3, "17F399F08C67D5EE19D0DC9969C4BB7D5FD46FD3756489069157B282BB200735D82710CA5C22F0CCFA7CBF93D496AC15A56834CBCF98C397B4024A2691233B8D", "83DE3541E4C2B58177E065A9BF7B62EC"},
		{TLS_SM4_CCM_SM3, "48AF93501FA62ADBCD414CCE6034D895DDA1BF8F132F042098661572E7483094FD12E518CE062C98ACEE28D95DF4416BED31A2F04476C18BB40C84A74B97DC5B", "16842D4FA186F56AB33256971FA110F4"},
	} {
		a, err := cipherSuiteByID(tc.suite).aead(key)
		if err != nil {
			t.Fatal(err)
		}
		want := unhex(t, tc.ct+tc.tag)
		if got := a.Seal(nil, nonce, pt, aad); !bytes.Equal(got, want) {
			t.Fatalf("%s seal = %X", CipherSuiteName(tc.suite), got)
		}
		// In place, as the record layer does it.
		buf := append([]byte(nil), pt...)
		if got := a.Seal(buf[:0], nonce, buf, aad); !bytes.Equal(got, want) {
			t.Fatalf("%s in-place seal = %X", CipherSuiteName(tc.suite), got)
		}
		ct := append([]byte(nil), want...)
		got, err := a.Open(ct[:0], nonce, ct, aad)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("%s open: %v", CipherSuiteName(tc.suite), err)
		}
		want[3] ^= 1
		if _, err := a.Open(nil, nonce, want, aad); err == nil {
			t.Fatalf("%s opened a tampered ciphertext", CipherSuiteName(tc.suite))
		}
	}
}

func TestCipherSuiteNames(t *testing.T) {
	for _, n := range []string{"TLS_SM4_GCM_SM3", "tls_sm4_gcm_sm3", "SM4-GCM-SM3"} {
		if id, err := ParseCipherSuite(n); err != nil || id != TLS_SM4_GCM_SM3 {
			t.Fatalf("%s: %x %v", n, id, err)
		}
	}
	if id, err := ParseCipherSuite("TLS_SM4_CCM_SM3"); err != nil || id != TLS_SM4_CCM_SM3 {
		t.Fatal(id, err)
	}
	if _, err := ParseCipherSuite("TLS_AES_128_GCM_SHA256"); err == nil {
		t.Fatal("parsed a non-SM suite")
	}
	if CipherSuiteName(0x00c7) != "TLS_SM4_CCM_SM3" || CipherSuiteName(0x1301) != "0x1301" {
		t.Fatal("names")
	}
}

// TestParseRecordedClientHellos parses the first flight of every recording.
func TestParseRecordedClientHellos(t *testing.T) {
	dir, err := transcript.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, path := range files {
		name := filepath.Base(path)
		f, err := transcript.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		for id, conn := range f.Conns {
			sum, err := ParseClientHello(conn.C2S)
			if err != nil {
				t.Fatalf("%s conn %d: %v", name, id, err)
			}
			tlcp := strings.HasPrefix(name, "tlcp-") || strings.Contains(name, "ntls") || strings.Contains(name, "gmssl-tlcp")
			isSM := sum.IsTLS13SM()
			switch {
			case tlcp:
				if sum.RecordVersion != 0x0101 || sum.LegacyVersion != 0x0101 || isSM {
					t.Fatalf("%s: TLCP hello summary %+v", name, sum)
				}
			case strings.Contains(name, "openssl30"):
				if isSM || !sum.OffersTLS13() || sum.ServerName != "localhost" || !slices.Contains(sum.KeyShareGroups, X25519) {
					t.Fatalf("%s: %+v", name, sum)
				}
			default:
				if !isSM || !IsSMClientHello(conn.C2S) || !slices.Contains(sum.SupportedGroups, CurveSM2) ||
					!slices.Contains(sum.SignatureAlgs, SM2SigSM3) || !slices.Contains(sum.KeyShareGroups, CurveSM2) {
					t.Fatalf("%s: %+v", name, sum)
				}
				if strings.Contains(name, "gmssl-tls13") && (!slices.Contains(sum.Versions, 0x0101) || sum.ServerName != "localhost") {
					t.Fatalf("%s: GmSSL hello should list 0x0101 and SNI: %+v", name, sum)
				}
			}
			// The full parser accepts every recorded hello as well.
			var h clientHelloMsg
			if !h.unmarshal(stripRecords(t, conn.C2S)) {
				t.Fatalf("%s: clientHelloMsg.unmarshal failed", name)
			}
		}
	}
}

func stripRecords(t *testing.T, b []byte) []byte {
	var out []byte
	for len(b) >= 5 && b[0] == recordTypeHandshake {
		n := int(b[3])<<8 | int(b[4])
		out = append(out, b[5:5+n]...)
		b = b[5+n:]
		if len(out) >= 4 && len(out) >= 4+(int(out[1])<<16|int(out[2])<<8|int(out[3])) {
			break
		}
	}
	n := int(out[1])<<16 | int(out[2])<<8 | int(out[3])
	return out[:4+n]
}

// TestMessageRoundTrip marshals and re-parses every message type.
func TestMessageRoundTrip(t *testing.T) {
	ch := &clientHelloMsg{vers: 0x0303, random: make([]byte, 32), sessionID: make([]byte, 32),
		cipherSuites: []uint16{TLS_SM4_GCM_SM3}, compressionMethods: []uint8{0}, serverName: "example.com",
		supportedGroups: []uint16{CurveSM2}, signatureAlgorithms: []uint16{SM2SigSM3}, alpnProtocols: []string{"h2", "http/1.1"},
		supportedVersions: []uint16{VersionTLS13}, cookie: []byte{1, 2}, keyShares: []keyShare{{CurveSM2, make([]byte, 65)}},
		pskModes: []uint8{1}, pskIdentities: []pskIdentity{{[]byte("ticket"), 7}}, pskBinders: [][]byte{make([]byte, 32)}}
	raw, err := ch.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var ch2 clientHelloMsg
	if !ch2.unmarshal(raw) || ch2.serverName != "example.com" || len(ch2.pskIdentities) != 1 || ch2.bindersLen() != 35 ||
		!slices.Equal(ch2.alpnProtocols, ch.alpnProtocols) || string(ch2.cookie) != "\x01\x02" {
		t.Fatalf("ClientHello round trip: %+v", ch2)
	}
	sh := &serverHelloMsg{vers: 0x0303, random: make([]byte, 32), cipherSuite: TLS_SM4_CCM_SM3, supportedVersion: VersionTLS13,
		serverShare: keyShare{CurveSM2, make([]byte, 65)}, hasSelectedIdent: true}
	raw, _ = sh.marshal()
	var sh2 serverHelloMsg
	if !sh2.unmarshal(raw) || sh2.serverShare.group != CurveSM2 || !sh2.hasSelectedIdent || sh2.cipherSuite != TLS_SM4_CCM_SM3 {
		t.Fatal("ServerHello round trip")
	}
	hrr := &serverHelloMsg{vers: 0x0303, random: helloRetryRequestRandom[:], cipherSuite: TLS_SM4_GCM_SM3, supportedVersion: VersionTLS13, selectedGroup: CurveSM2}
	raw, _ = hrr.marshal()
	if !sh2.unmarshal(raw) || !sh2.isHRR() || sh2.selectedGroup != CurveSM2 {
		t.Fatal("HRR round trip")
	}
	ee := &encryptedExtensionsMsg{alpnProtocol: "h2"}
	raw, _ = ee.marshal()
	var ee2 encryptedExtensionsMsg
	if !ee2.unmarshal(raw) || ee2.alpnProtocol != "h2" {
		t.Fatal("EE round trip")
	}
	cr := &certificateRequestMsg{signatureAlgorithms: []uint16{SM2SigSM3}, certificateAuths: [][]byte{{0x30, 0}}}
	raw, _ = cr.marshal()
	var cr2 certificateRequestMsg
	if !cr2.unmarshal(raw) || len(cr2.certificateAuths) != 1 {
		t.Fatal("CR round trip")
	}
	cm := &certificateMsg{certificates: [][]byte{{1, 2, 3}, {4}}}
	raw, _ = cm.marshal()
	var cm2 certificateMsg
	if !cm2.unmarshal(raw) || len(cm2.certificates) != 2 {
		t.Fatal("Certificate round trip")
	}
	cv := &certificateVerifyMsg{sigAlg: SM2SigSM3, signature: []byte{9, 9}}
	raw, _ = cv.marshal()
	var cv2 certificateVerifyMsg
	if !cv2.unmarshal(raw) || cv2.sigAlg != SM2SigSM3 {
		t.Fatal("CV round trip")
	}
	nst := &newSessionTicketMsg{lifetime: 7200, ageAdd: 5, nonce: []byte{0}, label: []byte("abc")}
	raw, _ = nst.marshal()
	var nst2 newSessionTicketMsg
	if !nst2.unmarshal(raw) || nst2.lifetime != 7200 || string(nst2.label) != "abc" {
		t.Fatal("NST round trip")
	}
	ku := &keyUpdateMsg{updateRequested: true}
	raw, _ = ku.marshal()
	var ku2 keyUpdateMsg
	if !ku2.unmarshal(raw) || !ku2.updateRequested {
		t.Fatal("KeyUpdate round trip")
	}
	if ku2.unmarshal([]byte{typeKeyUpdate, 0, 0, 1, 2}) {
		t.Fatal("KeyUpdate with value 2 accepted")
	}
	// Duplicate extensions are rejected; the same hello without the
	// duplicate parses.
	mk := func(exts string) []byte {
		body := "0303" + strings.Repeat("00", 32) + "00" + "000200c6" + "0100"
		e, _ := hex.DecodeString(exts)
		b, _ := hex.DecodeString(body)
		b = append(b, byte(len(e)>>8), byte(len(e)))
		b = append(b, e...)
		return append([]byte{1, 0, byte(len(b) >> 8), byte(len(b))}, b...)
	}
	if !ch2.unmarshal(mk("002b0003020304")) {
		t.Fatal("minimal hello rejected")
	}
	if ch2.unmarshal(mk("002b0003020304002b0003020304")) {
		t.Fatal("duplicate supported_versions accepted")
	}
	psk := "0029002c" + "0007000101" + "00000000" + "0021" + "20" + strings.Repeat("ab", 32)
	if !ch2.unmarshal(mk("002b0003020304"+psk)) || len(ch2.pskIdentities) != 1 {
		t.Fatal("hello with pre_shared_key last rejected")
	}
	if ch2.unmarshal(mk(psk + "002b0003020304")) {
		t.Fatal("pre_shared_key not last accepted")
	}
}

func TestSessionStateSize(t *testing.T) {
	longest := strings.Repeat("p", maxTicketALPN)
	for _, s := range []sessionState{
		{suite: TLS_SM4_GCM_SM3, createdAt: 1, lifetime: 7200, alpn: "http/1.1"},
		{suite: TLS_SM4_GCM_SM3, createdAt: 1, lifetime: 7200, alpn: "h2", client: clientIdentity{presented: true, leafHash: [32]byte{1}}},
		{suite: TLS_SM4_CCM_SM3, createdAt: 1, lifetime: 7200, alpn: longest,
			client: clientIdentity{presented: true, verified: true, leafHash: [32]byte{2}, notAfter: 1 << 40}},
	} {
		b, err := s.marshal()
		if err != nil {
			t.Fatal(err)
		}
		var s2 sessionState
		if !s2.unmarshal(b) || s2 != s {
			t.Fatalf("session state round trip: %+v", s2)
		}
		if n := len(b) + 44; n > 256 {
			t.Fatalf("sealed ticket of %d bytes", n)
		}
	}
	// A longer ALPN name is not kept (it is informational only).
	s := sessionState{suite: TLS_SM4_GCM_SM3, lifetime: 7200, alpn: longest + "x"}
	b, _ := s.marshal()
	var s2 sessionState
	if !s2.unmarshal(b) || s2.alpn != "" {
		t.Fatalf("long ALPN kept: %q", s2.alpn)
	}
	// Version 1 tickets (before the verified flag) are refused.
	b[0] = 1
	if s2.unmarshal(b) {
		t.Fatal("version 1 session state accepted")
	}
}
