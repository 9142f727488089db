package tls13sm

import (
	"bytes"
	"testing"
)

// The fast encoders must produce exactly what the cryptobyte ones do.
func TestFastMarshalMatches(t *testing.T) {
	shs := []*serverHelloMsg{
		{vers: 0x0303, random: bytes.Repeat([]byte{7}, 32), sessionID: make([]byte, 32), cipherSuite: TLS_SM4_GCM_SM3,
			supportedVersion: VersionTLS13, serverShare: keyShare{CurveSM2, bytes.Repeat([]byte{4}, 65)}, hasSelectedIdent: true, selectedIdentity: 3},
		{vers: 0x0303, random: helloRetryRequestRandom[:], cipherSuite: TLS_SM4_CCM_SM3, supportedVersion: VersionTLS13,
			selectedGroup: CurveSM2, cookie: []byte{1, 2, 3}},
	}
	for _, m := range shs {
		c := *m
		want, _ := c.marshal()
		if got := m.marshalFast(); !bytes.Equal(got, want) {
			t.Fatalf("ServerHello:\n%x\n%x", got, want)
		}
	}
	for _, alpn := range []string{"", "h2", "http/1.1"} {
		m := encryptedExtensionsMsg{alpnProtocol: alpn}
		c := m
		want, _ := c.marshal()
		if got := m.marshalFast(); !bytes.Equal(got, want) {
			t.Fatalf("EE %q:\n%x\n%x", alpn, got, want)
		}
	}
	fin := finishedMsg{verifyData: bytes.Repeat([]byte{9}, 32)}
	fc := fin
	if w, _ := fc.marshal(); !bytes.Equal(fin.marshalFast(), w) {
		t.Fatal("Finished")
	}
	nst := newSessionTicketMsg{lifetime: 7200, ageAdd: 0xdeadbeef, nonce: []byte{0}, label: bytes.Repeat([]byte{1}, 134)}
	nc := nst
	if w, _ := nc.marshal(); !bytes.Equal(nst.marshalFast(), w) {
		t.Fatal("NewSessionTicket")
	}
	cv := certificateVerifyMsg{sigAlg: SM2SigSM3, signature: bytes.Repeat([]byte{3}, 71)}
	cc := cv
	if w, _ := cc.marshal(); !bytes.Equal(cv.marshalFast(), w) {
		t.Fatal("CertificateVerify")
	}
	for _, chain := range [][][]byte{nil, {bytes.Repeat([]byte{5}, 300)}, {bytes.Repeat([]byte{5}, 70000), {6}}} {
		cm := certificateMsg{certificates: chain}
		got, err := cm.marshalFast()
		cc := certificateMsg{certificates: chain}
		want, _ := cc.marshal()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Certificate of %d: %v", len(chain), err)
		}
		var back certificateMsg
		if len(chain) > 0 && (!back.unmarshal(got) || len(back.certificates) != len(chain)) {
			t.Fatal("Certificate does not parse back")
		}
	}
	for _, id := range []clientIdentity{{}, {presented: true, notAfter: 1<<35 + 3}, {presented: true, verified: true, notAfter: 7}} {
		ss := sessionState{suite: TLS_SM4_GCM_SM3, createdAt: 1<<40 + 5, lifetime: 7200, ageAdd: 9, client: id, alpn: "h2"}
		ss.secret[0], ss.client.leafHash[31] = 1, 2
		w, _ := ss.marshal()
		if !bytes.Equal(ss.marshalFast(nil), w) {
			t.Fatal("session state")
		}
	}
}

// appendFast appends after what b holds, reuses b's room, and keeps only
// the message in m.raw.
func TestAppendFastReusesBuffer(t *testing.T) {
	buf := make([]byte, 3, 1024)
	copy(buf, "pre")
	fin := finishedMsg{verifyData: bytes.Repeat([]byte{9}, 32)}
	want := (&finishedMsg{verifyData: fin.verifyData}).marshalFast()
	out := fin.appendFast(buf)
	if string(out[:3]) != "pre" || !bytes.Equal(out[3:], want) || !bytes.Equal(fin.raw, want) || &out[0] != &buf[0] {
		t.Fatalf("appendFast: %x (raw %x)", out, fin.raw)
	}
	cm := certificateMsg{certificates: [][]byte{bytes.Repeat([]byte{5}, 300)}}
	out, err := cm.appendFast(buf[:0])
	if err != nil || !bytes.Equal(out, cm.raw) || &out[0] != &buf[0] {
		t.Fatalf("Certificate appendFast: %v", err)
	}
	if n := testing.AllocsPerRun(10, func() {
		m := certificateVerifyMsg{sigAlg: SM2SigSM3, signature: fin.verifyData}
		buf = m.appendFast(buf[:0])
	}); n != 0 {
		t.Fatalf("appendFast with room allocates %v times", n)
	}
}
