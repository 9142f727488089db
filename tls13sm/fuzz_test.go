package tls13sm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/transcript"
)

// Every parser of network input has a fuzz target. Seeds: f.Add values
// built here, the recorded ClientHellos and files in testdata/fuzz/FuzzXxx.
// A message that parses must survive re-marshalling and re-parsing.

type parser interface {
	unmarshal([]byte) bool
}

type marshaler interface {
	parser
	marshal() ([]byte, error)
}

func seedMessages() map[string][][]byte {
	ch := &clientHelloMsg{vers: 0x0303, random: make([]byte, 32), sessionID: make([]byte, 32),
		cipherSuites: []uint16{TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3}, compressionMethods: []uint8{0}, serverName: "localhost",
		supportedGroups: []uint16{CurveSM2, X25519}, signatureAlgorithms: []uint16{SM2SigSM3}, alpnProtocols: []string{"h2"},
		supportedVersions: []uint16{VersionTLS13}, keyShares: []keyShare{{CurveSM2, make([]byte, 65)}}, earlyData: true,
		pskModes: []uint8{1}, pskIdentities: []pskIdentity{{[]byte("ticket"), 7}}, pskBinders: [][]byte{make([]byte, 32)}}
	sh := &serverHelloMsg{vers: 0x0303, random: make([]byte, 32), cipherSuite: TLS_SM4_GCM_SM3, supportedVersion: VersionTLS13,
		serverShare: keyShare{CurveSM2, make([]byte, 65)}, hasSelectedIdent: true}
	hrr := &serverHelloMsg{vers: 0x0303, random: helloRetryRequestRandom[:], cipherSuite: TLS_SM4_GCM_SM3, supportedVersion: VersionTLS13,
		selectedGroup: CurveSM2, cookie: []byte{1}}
	m := func(x marshaler) []byte { b, _ := x.marshal(); return b }
	ss := &sessionState{suite: TLS_SM4_GCM_SM3, createdAt: 1, lifetime: 7200, alpn: "h2",
		client: clientIdentity{presented: true, verified: true, notAfter: 1 << 33}}
	ssb, _ := ss.marshal()
	return map[string][][]byte{
		"ClientHello":         {m(ch)},
		"ServerHello":         {m(sh), m(hrr)},
		"EncryptedExtensions": {m(&encryptedExtensionsMsg{alpnProtocol: "h2"})},
		"CertificateRequest":  {m(&certificateRequestMsg{signatureAlgorithms: []uint16{SM2SigSM3}, certificateAuths: [][]byte{{0x30, 0}}})},
		"Certificate":         {m(&certificateMsg{certificates: [][]byte{{1, 2, 3}}})},
		"CertificateVerify":   {m(&certificateVerifyMsg{sigAlg: SM2SigSM3, signature: []byte{0x30, 0}})},
		"Finished":            {m(&finishedMsg{verifyData: make([]byte, 32)})},
		"NewSessionTicket":    {m(&newSessionTicketMsg{lifetime: 7200, ageAdd: 1, nonce: []byte{0}, label: []byte("t")})},
		"KeyUpdate":           {m(&keyUpdateMsg{updateRequested: true})},
		"SessionState":        {ssb},
	}
}

func recordedHellos(f *testing.F) {
	dir, err := transcript.Dir()
	if err != nil {
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "clienthello-*.jsonl"))
	for _, p := range files {
		tf, err := transcript.Load(p)
		if err != nil {
			continue
		}
		for _, c := range tf.Conns {
			f.Add(c.C2S)
		}
	}
}

func fuzzMessage(f *testing.F, name string, mk func() marshaler) {
	for _, s := range seedMessages()[name] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := mk()
		if !m.unmarshal(data) {
			return
		}
		clearRaw(m)
		out, err := m.marshal()
		if err != nil {
			return // e.g. a field too long for its vector after parsing an unusual form
		}
		m2 := mk()
		if !m2.unmarshal(out) {
			t.Fatalf("re-marshalled %T does not parse: %x", m, out)
		}
		// Marshalling is canonical: the re-parsed message marshals the same.
		clearRaw(m2)
		if out2, err := m2.marshal(); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("%T does not round-trip: %x then %x (%v)", m, out, out2, err)
		}
	})
}

func clearRaw(m marshaler) {
	switch v := m.(type) {
	case *clientHelloMsg:
		v.raw = nil
	case *serverHelloMsg:
		v.raw = nil
	case *encryptedExtensionsMsg:
		v.raw = nil
	case *certificateRequestMsg:
		v.raw = nil
	case *certificateMsg:
		v.raw = nil
	case *certificateVerifyMsg:
		v.raw = nil
	case *finishedMsg:
		v.raw = nil
	case *newSessionTicketMsg:
		v.raw = nil
	case *keyUpdateMsg:
		v.raw = nil
	}
}

func FuzzClientHello(f *testing.F) {
	recordedHellos(f)
	fuzzMessage(f, "ClientHello", func() marshaler { return new(clientHelloMsg) })
}
func FuzzServerHello(f *testing.F) {
	fuzzMessage(f, "ServerHello", func() marshaler { return new(serverHelloMsg) })
}
func FuzzEncryptedExtensions(f *testing.F) {
	fuzzMessage(f, "EncryptedExtensions", func() marshaler { return new(encryptedExtensionsMsg) })
}
func FuzzCertificateRequest(f *testing.F) {
	fuzzMessage(f, "CertificateRequest", func() marshaler { return new(certificateRequestMsg) })
}
func FuzzCertificate(f *testing.F) {
	fuzzMessage(f, "Certificate", func() marshaler { return new(certificateMsg) })
}
func FuzzCertificateVerify(f *testing.F) {
	fuzzMessage(f, "CertificateVerify", func() marshaler { return new(certificateVerifyMsg) })
}
func FuzzFinished(f *testing.F) {
	fuzzMessage(f, "Finished", func() marshaler { return new(finishedMsg) })
}
func FuzzNewSessionTicket(f *testing.F) {
	fuzzMessage(f, "NewSessionTicket", func() marshaler { return new(newSessionTicketMsg) })
}
func FuzzKeyUpdate(f *testing.F) {
	fuzzMessage(f, "KeyUpdate", func() marshaler { return new(keyUpdateMsg) })
}

func FuzzSessionState(f *testing.F) {
	for _, s := range seedMessages()["SessionState"] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s sessionState
		if !s.unmarshal(data) {
			return
		}
		out, err := s.marshal()
		if err != nil {
			t.Fatal(err)
		}
		var s2 sessionState
		if !s2.unmarshal(out) || s2 != s {
			t.Fatal("session state round trip")
		}
	})
}

// FuzzParseClientHello covers the exported sniffer helper (records or bare message).
func FuzzParseClientHello(f *testing.F) {
	recordedHellos(f)
	for _, s := range seedMessages()["ClientHello"] {
		f.Add(s)
		f.Add(rawRecord(recordTypeHandshake, s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sum, err := ParseClientHello(data)
		if err == nil && sum == nil {
			t.Fatal("nil summary without error")
		}
		_ = IsSMClientHello(data)
	})
}

// pipeConn feeds fixed input to a Conn and keeps its last write.
type pipeConn struct {
	net.Conn
	in   []byte
	last []byte
}

func (p *pipeConn) Read(b []byte) (int, error) {
	if len(p.in) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.in)
	p.in = p.in[n:]
	return n, nil
}
func (p *pipeConn) Write(b []byte) (int, error) {
	p.last = append(p.last[:0], b...)
	return len(b), nil
}
func (p *pipeConn) Close() error                     { return nil }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }
func (p *pipeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// FuzzServerInput feeds arbitrary bytes to a server handshake: it must
// fail cleanly (no panic, no hang) on anything but a real client.
func FuzzServerInput(f *testing.F) {
	recordedHellos(f)
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte{20, 3, 3, 0, 1, 1, 21, 3, 3, 0, 2, 2, 40})
	srvCfg, _ := testConfigs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		pc := &pipeConn{in: data}
		err := Server(pc, srvCfg).Handshake()
		checkFuzzedHandshake(t, err, pc.last)
	})
}

// checkFuzzedHandshake asserts how a handshake on fuzzed input ended: it
// failed, either because the input ran out or with an alert; an alert this
// side sent in plaintext is the last thing it wrote.
func checkFuzzedHandshake(t *testing.T, err error, last []byte) {
	t.Helper()
	var ae *AlertError
	switch {
	case err == nil:
		t.Fatal("handshake succeeded on fuzzed input")
	case errors.As(err, &ae):
		if !ae.Remote && len(last) > 0 && last[0] == recordTypeAlert {
			if len(last) != recordHeaderLen+2 || Alert(last[6]) != ae.Alert {
				t.Fatalf("handshake failed with %v but the last record written is %x", ae.Alert, last)
			}
		}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
	default:
		t.Fatalf("handshake failed without an alert: %v", err)
	}
}

// TestFuzzCorpus checks that testdata/fuzz holds the generated seed files
// (kept in the repository); GMPROXY_WRITE_FUZZ_CORPUS=1 regenerates them.
func TestFuzzCorpus(t *testing.T) {
	out := testpeer.Files{}
	defer out.Sync(t, "GMPROXY_WRITE_FUZZ_CORPUS")
	write := func(target string, i int, b []byte) {
		out[filepath.Join("testdata", "fuzz", target, fmt.Sprintf("seed%d", i))] = fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
	}
	for name, seeds := range seedMessages() {
		for i, s := range seeds {
			write("Fuzz"+name, i, s)
		}
	}
	dir, err := transcript.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "clienthello-*.jsonl"))
	for i, p := range files {
		tf, err := transcript.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tf.Conns {
			write("FuzzParseClientHello", i, c.C2S)
			write("FuzzServerInput", i, c.C2S)
			write("FuzzClientHello", 10+i, stripRecords(t, c.C2S))
		}
	}
}
