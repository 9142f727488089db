package tlcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/emmansun/gmsm/ecdh"
)

func TestMessageRoundTrips(t *testing.T) {
	r32 := bytes.Repeat([]byte{7}, 32)
	cases := []struct {
		m, empty handshakeMessage
	}{
		{&clientHelloMsg{vers: VersionTLCP, random: r32, sessionID: []byte{}, cipherSuites: []uint16{0xe053, 0xe013}, compressionMethods: []byte{0}}, &clientHelloMsg{}},
		{&clientHelloMsg{vers: VersionTLCP, random: r32, sessionID: r32, cipherSuites: []uint16{0xe011}, compressionMethods: []byte{0}, hasExtensions: true, serverName: "example.com", alpnProtocols: []string{"h2", "http/1.1"}, ticketSupported: true, sessionTicket: []byte("ticket")}, &clientHelloMsg{}},
		{&serverHelloMsg{vers: VersionTLCP, random: r32, sessionID: []byte{}, cipherSuite: 0xe053}, &serverHelloMsg{}},
		{&serverHelloMsg{vers: VersionTLCP, random: r32, sessionID: r32, cipherSuite: 0xe013, serverNameAck: true, alpnProtocol: "h2", ticketSupported: true}, &serverHelloMsg{}},
		{&certificateMsg{certificates: [][]byte{{1, 2, 3}, {4, 5}}}, &certificateMsg{}},
		{&serverKeyExchangeMsg{key: []byte{0, 2, 9, 9}}, &serverKeyExchangeMsg{}},
		{&certificateRequestMsg{certificateTypes: []byte{1, 64}, certificateAuthorities: [][]byte{{0x30, 0}, {0x30, 1, 2}}}, &certificateRequestMsg{}},
		{&serverHelloDoneMsg{}, &serverHelloDoneMsg{}},
		{&clientKeyExchangeMsg{ciphertext: []byte{0, 3, 1, 2, 3}}, &clientKeyExchangeMsg{}},
		{&certificateVerifyMsg{signature: []byte{0x30, 1, 2}}, &certificateVerifyMsg{}},
		{&finishedMsg{verifyData: bytes.Repeat([]byte{1}, 12)}, &finishedMsg{}},
		{&newSessionTicketMsg{lifetimeHint: 7200, ticket: []byte("sealed")}, &newSessionTicketMsg{}},
	}
	for _, tc := range cases {
		b, err := tc.m.marshal()
		if err != nil {
			t.Fatalf("%T: %v", tc.m, err)
		}
		if !tc.empty.unmarshal(b) {
			t.Fatalf("%T: unmarshal failed", tc.m)
		}
		if !reflect.DeepEqual(tc.m, tc.empty) {
			t.Fatalf("%T: round trip\n got %+v\nwant %+v", tc.m, tc.empty, tc.m)
		}
		// Every strict prefix must be rejected (no panics, no acceptance).
		for i := 0; i < len(b); i++ {
			if _, isDone := tc.m.(*serverHelloDoneMsg); isDone && i == len(b) {
				continue
			}
			if tc.empty.unmarshal(b[:i]) {
				if _, ok := tc.m.(*clientHelloMsg); ok {
					continue // a hello without its extensions block is valid
				}
				if _, ok := tc.m.(*serverHelloMsg); ok {
					continue
				}
				t.Fatalf("%T: prefix of %d bytes accepted", tc.m, i)
			}
		}
	}
}

func TestSessionStateRoundTrip(t *testing.T) {
	s := &sessionState{vers: VersionTLCP, cipherSuite: ECC_SM4_GCM_SM3, createdAt: 12345, master: make([]byte, 48), certs: [][]byte{{1}, {2, 3}}, serverName: "a.example", serverCert: bytes.Repeat([]byte{9}, 32)}
	rand.Read(s.master)
	b, err := s.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var s2 sessionState
	if !s2.unmarshal(b) || !reflect.DeepEqual(s, &s2) {
		t.Fatalf("round trip: %+v", s2)
	}
	if s2.unmarshal(b[:len(b)-1]) {
		t.Fatal("truncated state accepted")
	}
}

func TestCipherSuiteNames(t *testing.T) {
	cases := map[string]uint16{
		"ECC-SM2-SM4-CBC-SM3": ECC_SM4_CBC_SM3, "ecc-sm2-with-sm4-sm3": ECC_SM4_CBC_SM3, "ECC_SM4_CBC_SM3": ECC_SM4_CBC_SM3,
		"TLS_ECC_SM4_CBC_SM3": ECC_SM4_CBC_SM3, "ECC-SM2-SM4-GCM-SM3": ECC_SM4_GCM_SM3, "TLS_ECC_SM4_GCM_SM3": ECC_SM4_GCM_SM3,
		"ECDHE-SM2-SM4-CBC-SM3": ECDHE_SM4_CBC_SM3, "ECDHE-SM2-WITH-SM4-SM3": ECDHE_SM4_CBC_SM3, "tls_ecdhe_sm4_gcm_sm3": ECDHE_SM4_GCM_SM3,
		"ECDHE-SM2-SM4-GCM-SM3": ECDHE_SM4_GCM_SM3, "0xE053": ECC_SM4_GCM_SM3,
	}
	for name, want := range cases {
		got, err := ParseCipherSuite(name)
		if err != nil || got != want {
			t.Errorf("ParseCipherSuite(%q) = %x, %v; want %x", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "AES128-SHA", "ECC-SM2-SM4-CCM-SM3", "0x002f"} {
		if _, err := ParseCipherSuite(bad); err == nil {
			t.Errorf("ParseCipherSuite(%q) accepted", bad)
		}
	}
	if CipherSuiteName(ECC_SM4_GCM_SM3) != "ECC-SM2-SM4-GCM-SM3" || CipherSuiteName(ECDHE_SM4_CBC_SM3) != "ECDHE-SM2-SM4-CBC-SM3" {
		t.Error("names")
	}
}

// ---- fuzz targets (seeds: f.Add plus testdata/fuzz/FuzzXxx) ----

func fuzzMessage(f *testing.F, newMsg func() handshakeMessage, seeds ...handshakeMessage) {
	for _, s := range seeds {
		if b, err := s.marshal(); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMsg()
		if !m.unmarshal(data) {
			return
		}
		b, err := m.marshal()
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		m2 := newMsg()
		if !m2.unmarshal(b) {
			t.Fatal("re-marshaled message does not parse")
		}
	})
}

func FuzzClientHello(f *testing.F) {
	addTranscriptSeeds(f, typeClientHello)
	fuzzMessage(f, func() handshakeMessage { return &clientHelloMsg{} },
		&clientHelloMsg{vers: VersionTLCP, random: make([]byte, 32), cipherSuites: []uint16{0xe053}, compressionMethods: []byte{0}, hasExtensions: true, serverName: "x", alpnProtocols: []string{"h2"}, ticketSupported: true})
}

func FuzzServerHello(f *testing.F) {
	addTranscriptSeeds(f, typeServerHello)
	fuzzMessage(f, func() handshakeMessage { return &serverHelloMsg{} },
		&serverHelloMsg{vers: VersionTLCP, random: make([]byte, 32), cipherSuite: 0xe053, alpnProtocol: "h2", ticketSupported: true})
}

func FuzzCertificate(f *testing.F) {
	addTranscriptSeeds(f, typeCertificate)
	fuzzMessage(f, func() handshakeMessage { return &certificateMsg{} }, &certificateMsg{certificates: [][]byte{{1}, {2}}})
}

func FuzzCertificateRequest(f *testing.F) {
	addTranscriptSeeds(f, typeCertificateRequest)
	fuzzMessage(f, func() handshakeMessage { return &certificateRequestMsg{} }, &certificateRequestMsg{certificateTypes: []byte{1, 64}, certificateAuthorities: [][]byte{{0x30, 0}}})
}

func FuzzKeyExchange(f *testing.F) {
	addTranscriptSeeds(f, typeServerKeyExchange)
	addTranscriptSeeds(f, typeClientKeyExchange)
	f.Fuzz(func(t *testing.T, data []byte) {
		var ske serverKeyExchangeMsg
		if ske.unmarshal(data) {
			// The client-side parsers of both suite kinds must not panic.
			p := loadPKI(t)
			for _, id := range []uint16{ECC_SM4_CBC_SM3, ECDHE_SM4_CBC_SM3} {
				ka := &clientKeyAgreement{suite: cipherSuiteByID(id), serverSign: p.server.Leaf, serverEnc: p.server.EncLeaf}
				ka.processServerKeyExchange(ske.key, make([]byte, 32), make([]byte, 32))
			}
		}
		var cke clientKeyExchangeMsg
		if cke.unmarshal(data) {
			parseECDHEParams(cke.ciphertext)
			// Both server paths must fail cleanly (ECC continues with a
			// random pre-master).
			p := loadPKI(t)
			eph, _ := ecdh.P256().GenerateKey(rand.Reader)
			for _, id := range []uint16{ECC_SM4_CBC_SM3, ECDHE_SM4_CBC_SM3} {
				ka := &serverKeyAgreement{suite: cipherSuiteByID(id), cert: &p.server, ephemeral: eph}
				pm, err := ka.processClientKeyExchange(context.Background(), rand.Reader, cke.ciphertext, p.client.EncLeaf)
				if id == ECC_SM4_CBC_SM3 && err == nil && len(pm) != 48 {
					t.Fatalf("pre-master of %d bytes", len(pm))
				}
			}
		}
		var cv certificateVerifyMsg
		cv.unmarshal(data)
		var shd serverHelloDoneMsg
		shd.unmarshal(data)
		var fin finishedMsg
		fin.unmarshal(data)
		var nst newSessionTicketMsg
		nst.unmarshal(data)
		var s sessionState
		s.unmarshal(data)
	})
}

// FuzzRecord feeds arbitrary bytes to the record layer under each suite's
// keys and to a fresh server connection.
func FuzzRecord(f *testing.F) {
	f.Add([]byte{23, 1, 1, 0, 64})
	f.Add(append([]byte{23, 1, 1, 0, 64}, make([]byte, 64)...))
	f.Add(append([]byte{23, 1, 1, 0, 24}, make([]byte, 24)...))
	f.Add([]byte{22, 1, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte{21, 1, 1, 0, 2, 2, 40})
	addTranscriptRecords(f)
	keys := bytes.Repeat([]byte{0x42}, 64)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < recordHeaderLen {
			return
		}
		for _, s := range cipherSuites {
			rc, err := newRecordCipher(s, keys[:32], keys[32:48], keys[48:48+s.ivLen])
			if err != nil {
				t.Fatal(err)
			}
			hc := &halfConn{cipher: rc}
			rec := append([]byte(nil), data...)
			n := int(rec[3])<<8 | int(rec[4])
			if n > len(rec)-recordHeaderLen {
				n = len(rec) - recordHeaderLen
			}
			rec = rec[:recordHeaderLen+n]
			hc.decrypt(rec)
		}
		// Sealed then opened records round-trip.
		rc, _ := newRecordCipher(cipherSuiteByID(ECC_SM4_CBC_SM3), keys[:32], keys[32:48], keys[48:64])
		w, r := &halfConn{cipher: rc}, &halfConn{cipher: rc}
		out, _, err := w.appendRecords(nil, recordTypeApplicationData, data, maxPlaintext, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for len(out) > 0 {
			n := int(out[3])<<8 | int(out[4])
			pt, err := r.decrypt(out[:recordHeaderLen+n])
			if err != nil {
				t.Fatalf("own record rejected: %v", err)
			}
			got = append(got, pt...)
			out = out[recordHeaderLen+n:]
		}
		if !bytes.Equal(got, data) {
			t.Fatal("CBC round trip mismatch")
		}
	})
}

// addTranscriptSeeds adds the recorded plaintext handshake messages of type typ.
func addTranscriptSeeds(f *testing.F, typ uint8) {
	files, _ := filepath.Glob(filepath.Join("testdata", "handshake", "*.bin"))
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err == nil && len(b) > 0 && b[0] == typ {
			f.Add(b)
		}
	}
}

func addTranscriptRecords(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "records", "*.bin"))
	for _, fn := range files {
		if b, err := os.ReadFile(fn); err == nil {
			f.Add(b)
		}
	}
}

// FuzzServerConn feeds arbitrary client bytes to a server connection: the
// whole record and handshake path must fail cleanly (no panic, no hang).
func FuzzServerConn(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "records", "*.bin"))
	for _, fn := range files {
		if b, err := os.ReadFile(fn); err == nil && len(b) > 5 && b[0] == 22 && b[5] == typeClientHello {
			f.Add(b)
		}
	}
	f.Add([]byte{22, 3, 3, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := loadPKI(t)
		cfg := p.serverConfig()
		cfg.AllowTLSRecordHello = true
		cfg.ClientAuth = RequestClientCert
		rc := &lastWriteConn{replayConn: replayConn{in: append([]byte(nil), data...)}}
		err := Server(rc, cfg).Handshake()
		if err == nil {
			t.Fatal("handshake succeeded on fuzzed input")
		}
		checkFuzzedHandshake(t, err, rc)
	})
}

// FuzzMessageEncoding: the handshake messages with one encoding
// (everything but the hellos, whose extensions may come in any order)
// parse only when their bytes are exactly what marshal writes for what
// was read: no trailing or missing byte, no length that disagrees, is
// taken; and a message cut short, or longer by a byte, does not parse.
func FuzzMessageEncoding(f *testing.F) {
	for _, typ := range []uint8{typeCertificate, typeServerKeyExchange, typeCertificateRequest, typeServerHelloDone,
		typeClientKeyExchange, typeCertificateVerify, typeFinished, typeNewSessionTicket} {
		addTranscriptSeeds(f, typ)
	}
	f.Add([]byte{typeNewSessionTicket, 0, 0, 6, 0, 0, 0x1c, 0x20, 0, 0})
	f.Add([]byte{typeCertificateVerify, 0, 0, 3, 0, 1, 0x30})
	kinds := []func() handshakeMessage{
		func() handshakeMessage { return &certificateMsg{} },
		func() handshakeMessage { return &serverKeyExchangeMsg{} },
		func() handshakeMessage { return &certificateRequestMsg{} },
		func() handshakeMessage { return &serverHelloDoneMsg{} },
		func() handshakeMessage { return &clientKeyExchangeMsg{} },
		func() handshakeMessage { return &certificateVerifyMsg{} },
		func() handshakeMessage { return &finishedMsg{} },
		func() handshakeMessage { return &newSessionTicketMsg{} },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMsg := range kinds {
			m := newMsg()
			if !m.unmarshal(data) {
				continue
			}
			b, err := m.marshal()
			if err != nil {
				t.Fatalf("%T: re-marshal: %v", m, err)
			}
			if !bytes.Equal(b, data) {
				t.Fatalf("%T: %x parsed, marshals as %x", m, data, b)
			}
			m2 := newMsg()
			if !m2.unmarshal(b) || !reflect.DeepEqual(m, m2) {
				t.Fatalf("%T: %+v does not round trip: %+v", m, m, m2)
			}
			if newMsg().unmarshal(data[:len(data)-1]) {
				t.Fatalf("%T: %x parsed without its last byte", m, data)
			}
			if newMsg().unmarshal(append(bytes.Clone(data), 0)) {
				t.Fatalf("%T: %x parsed with a byte more", m, data)
			}
		}
	})
}
