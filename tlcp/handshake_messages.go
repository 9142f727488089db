package tlcp

import (
	"errors"

	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/wire"
)

// Handshake messages of GB/T 38636-2020 §6.4 (TLS 1.2 layouts without the
// signature-algorithm fields). marshal returns the whole message with its
// 4-byte header; unmarshal takes the same and reports false on any malformed
// input (the caller answers decode_error).

type handshakeMessage interface {
	marshal() ([]byte, error)
	unmarshal([]byte) bool
}

// marshalMsg builds type || u24 length || body.
func marshalMsg(typ uint8, body func(b *cryptobyte.Builder)) ([]byte, error) {
	return wire.MarshalHandshake(typ, body)
}

// readMsg checks the header and returns the body.
func readMsg(data []byte, typ uint8) (cryptobyte.String, bool) {
	return wire.ReadHandshake(data, typ)
}

// extSet detects duplicate extensions without allocating for the usual
// handful; past 64 distinct types a hello is rejected.
type extSet struct {
	n     int
	types [64]uint16
}

func (s *extSet) add(t uint16) bool {
	for _, x := range s.types[:s.n] {
		if x == t {
			return false
		}
	}
	if s.n == len(s.types) {
		return false
	}
	s.types[s.n] = t
	s.n++
	return true
}

type clientHelloMsg struct {
	vers               uint16
	random             []byte
	sessionID          []byte
	cipherSuites       []uint16
	compressionMethods []uint8
	// hasExtensions is false when the hello carries no extensions block.
	hasExtensions bool
	serverName    string
	alpnProtocols []string
	// ticketSupported: the session_ticket extension is present; sessionTicket
	// is its (possibly empty) content.
	ticketSupported bool
	sessionTicket   []byte
	// unknownExtensions counts extensions that were ignored.
	unknownExtensions int
}

func (m *clientHelloMsg) marshal() ([]byte, error) {
	return marshalMsg(typeClientHello, func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.sessionID) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, s := range m.cipherSuites {
				b.AddUint16(s)
			}
		})
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.compressionMethods) })
		if !m.hasExtensions {
			return
		}
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.serverName != "" {
				wire.AddServerNameExtension(b, m.serverName)
			}
			if len(m.alpnProtocols) > 0 {
				wire.AddALPNExtension(b, m.alpnProtocols...)
			}
			if m.ticketSupported {
				b.AddUint16(extensionSessionTicket)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.sessionTicket) })
			}
		})
	})
}

func (m *clientHelloMsg) unmarshal(data []byte) bool {
	buf := m.cipherSuites[:0]
	*m = clientHelloMsg{}
	s, ok := readMsg(data, typeClientHello)
	if !ok {
		return false
	}
	var sid, suites, comp cryptobyte.String
	if !s.ReadUint16(&m.vers) || !s.ReadBytes(&m.random, 32) ||
		!s.ReadUint8LengthPrefixed(&sid) || len(sid) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || len(suites)%2 != 0 || len(suites) == 0 ||
		!s.ReadUint8LengthPrefixed(&comp) || len(comp) == 0 {
		return false
	}
	m.sessionID = []byte(sid)
	// The caller may lend the array of m.cipherSuites for reuse.
	m.cipherSuites = buf
	if len(suites)/2 > cap(buf) {
		m.cipherSuites = make([]uint16, 0, len(suites)/2)
	}
	for !suites.Empty() {
		var id uint16
		suites.ReadUint16(&id)
		m.cipherSuites = append(m.cipherSuites, id)
	}
	m.compressionMethods = []byte(comp)
	if s.Empty() {
		return true
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return false
	}
	m.hasExtensions = true
	var seen extSet
	for !exts.Empty() {
		var typ uint16
		var ext cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&ext) {
			return false
		}
		if !seen.add(typ) {
			return false // RFC 5246 §7.4.1.4: no duplicate extension types
		}
		switch typ {
		case extensionServerName:
			// The first host_name counts; later ones are ignored.
			var ok bool
			if m.serverName, _, ok = wire.ReadServerName(&ext); !ok {
				return false
			}
		case extensionALPN:
			var ok bool
			if m.alpnProtocols, ok = wire.ReadALPNList(&ext); !ok {
				return false
			}
		case extensionSessionTicket:
			m.ticketSupported = true
			m.sessionTicket = []byte(ext)
			ext = nil
		default:
			m.unknownExtensions++
			ext = nil
		}
		if !ext.Empty() {
			return false
		}
	}
	return true
}

type serverHelloMsg struct {
	vers              uint16
	random            []byte
	sessionID         []byte
	cipherSuite       uint16
	compressionMethod uint8
	// Extensions, each sent only when the client offered it.
	serverNameAck   bool
	alpnProtocol    string
	ticketSupported bool
}

func (m *serverHelloMsg) marshal() ([]byte, error) {
	return m.appendTo(make([]byte, 0, 4+2+32+1+32+3+2+4+7+len(m.alpnProtocol)+4))
}

// appendTo appends the marshaled message to b (built by hand: it is in
// every handshake, resumed ones included, and needs no allocation when b
// has room).
func (m *serverHelloMsg) appendTo(b []byte) ([]byte, error) {
	if len(m.random) != 32 || len(m.sessionID) > 32 || len(m.alpnProtocol) > 255 {
		return nil, errors.New("tlcp: invalid ServerHello")
	}
	start := len(b)
	b = append(b, typeServerHello, 0, 0, 0)
	b = append(b, byte(m.vers>>8), byte(m.vers))
	b = append(b, m.random...)
	b = append(b, byte(len(m.sessionID)))
	b = append(b, m.sessionID...)
	b = append(b, byte(m.cipherSuite>>8), byte(m.cipherSuite), m.compressionMethod)
	if m.serverNameAck || m.alpnProtocol != "" || m.ticketSupported {
		// No extensions block otherwise (GmSSL 2.x clients break on any).
		extStart := len(b)
		b = append(b, 0, 0)
		if m.serverNameAck {
			b = append(b, byte(extensionServerName>>8), byte(extensionServerName), 0, 0)
		}
		if p := m.alpnProtocol; p != "" {
			n := len(p)
			b = append(b, byte(extensionALPN>>8), byte(extensionALPN), byte((n+3)>>8), byte(n+3), byte((n+1)>>8), byte(n+1), byte(n))
			b = append(b, p...)
		}
		if m.ticketSupported {
			b = append(b, byte(extensionSessionTicket>>8), byte(extensionSessionTicket), 0, 0)
		}
		n := len(b) - extStart - 2
		b[extStart], b[extStart+1] = byte(n>>8), byte(n)
	}
	n := len(b) - start - 4
	b[start+1], b[start+2], b[start+3] = byte(n>>16), byte(n>>8), byte(n)
	return b, nil
}

func (m *serverHelloMsg) unmarshal(data []byte) bool {
	*m = serverHelloMsg{}
	s, ok := readMsg(data, typeServerHello)
	if !ok {
		return false
	}
	var sid cryptobyte.String
	if !s.ReadUint16(&m.vers) || !s.ReadBytes(&m.random, 32) ||
		!s.ReadUint8LengthPrefixed(&sid) || len(sid) > 32 ||
		!s.ReadUint16(&m.cipherSuite) || !s.ReadUint8(&m.compressionMethod) {
		return false
	}
	m.sessionID = []byte(sid)
	if s.Empty() {
		return true
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return false
	}
	var seen extSet
	for !exts.Empty() {
		var typ uint16
		var ext cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&ext) || !seen.add(typ) {
			return false
		}
		switch typ {
		case extensionServerName:
			m.serverNameAck = true
		case extensionALPN:
			var ok bool
			if m.alpnProtocol, ok = wire.ReadALPNSelected(&ext); !ok {
				return false
			}
		case extensionSessionTicket:
			m.ticketSupported = true
		default:
			// GmSSL echoes trusted_ca_keys/status_request; ignore the rest.
			ext = nil
		}
		if !ext.Empty() {
			return false
		}
	}
	return true
}

// certificateMsg is the Certificate message: certificate_list<u24> of
// ASN.1Cert<u24>; server order sign, enc, chain (GB/T 38636 §6.4.5.3).
type certificateMsg struct {
	certificates [][]byte
}

func (m *certificateMsg) marshal() ([]byte, error) {
	return marshalMsg(typeCertificate, func(b *cryptobyte.Builder) {
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, c := range m.certificates {
				b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
			}
		})
	})
}

func (m *certificateMsg) unmarshal(data []byte) bool {
	*m = certificateMsg{}
	s, ok := readMsg(data, typeCertificate)
	if !ok {
		return false
	}
	var list cryptobyte.String
	if !s.ReadUint24LengthPrefixed(&list) || !s.Empty() {
		return false
	}
	for !list.Empty() {
		var c cryptobyte.String
		if !list.ReadUint24LengthPrefixed(&c) || len(c) == 0 {
			return false
		}
		if len(m.certificates) >= maxCertChain {
			return false
		}
		m.certificates = append(m.certificates, []byte(c))
	}
	return true
}

// serverKeyExchangeMsg carries the raw body; key_agreement.go interprets it.
type serverKeyExchangeMsg struct {
	key []byte
}

func (m *serverKeyExchangeMsg) marshal() ([]byte, error) {
	return marshalMsg(typeServerKeyExchange, func(b *cryptobyte.Builder) { b.AddBytes(m.key) })
}

func (m *serverKeyExchangeMsg) unmarshal(data []byte) bool {
	s, ok := readMsg(data, typeServerKeyExchange)
	if !ok || len(s) < 2 {
		return false
	}
	m.key = []byte(s)
	return true
}

// certificateRequestMsg: certificate_types<u8>, certificate_authorities<u16>
// of DistinguishedName<u16>; no signature algorithms (GB/T 38636 §6.4.5.5).
type certificateRequestMsg struct {
	certificateTypes       []byte
	certificateAuthorities [][]byte
}

func (m *certificateRequestMsg) marshal() ([]byte, error) {
	return marshalMsg(typeCertificateRequest, func(b *cryptobyte.Builder) {
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.certificateTypes) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, ca := range m.certificateAuthorities {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(ca) })
			}
		})
	})
}

func (m *certificateRequestMsg) unmarshal(data []byte) bool {
	*m = certificateRequestMsg{}
	s, ok := readMsg(data, typeCertificateRequest)
	if !ok {
		return false
	}
	var types, cas cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&types) || len(types) == 0 || !s.ReadUint16LengthPrefixed(&cas) || !s.Empty() {
		return false
	}
	m.certificateTypes = []byte(types)
	for !cas.Empty() {
		var dn cryptobyte.String
		if !cas.ReadUint16LengthPrefixed(&dn) || len(dn) == 0 {
			return false
		}
		m.certificateAuthorities = append(m.certificateAuthorities, []byte(dn))
	}
	return true
}

type serverHelloDoneMsg struct{}

func (m *serverHelloDoneMsg) marshal() ([]byte, error) {
	return []byte{typeServerHelloDone, 0, 0, 0}, nil
}

func (m *serverHelloDoneMsg) unmarshal(data []byte) bool {
	_, ok := readMsg(data, typeServerHelloDone)
	return ok && len(data) == 4
}

// clientKeyExchangeMsg carries the raw body; key_agreement.go interprets it.
type clientKeyExchangeMsg struct {
	ciphertext []byte
}

func (m *clientKeyExchangeMsg) marshal() ([]byte, error) {
	return marshalMsg(typeClientKeyExchange, func(b *cryptobyte.Builder) { b.AddBytes(m.ciphertext) })
}

func (m *clientKeyExchangeMsg) unmarshal(data []byte) bool {
	s, ok := readMsg(data, typeClientKeyExchange)
	if !ok || len(s) == 0 {
		return false
	}
	m.ciphertext = []byte(s)
	return true
}

// certificateVerifyMsg: signature<u16> only (TLS 1.1 style).
type certificateVerifyMsg struct {
	signature []byte
}

func (m *certificateVerifyMsg) marshal() ([]byte, error) {
	return marshalMsg(typeCertificateVerify, func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.signature) })
	})
}

func (m *certificateVerifyMsg) unmarshal(data []byte) bool {
	s, ok := readMsg(data, typeCertificateVerify)
	if !ok {
		return false
	}
	var sig cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&sig) || len(sig) == 0 || !s.Empty() {
		return false
	}
	m.signature = []byte(sig)
	return true
}

type finishedMsg struct {
	verifyData []byte
}

func (m *finishedMsg) marshal() ([]byte, error) {
	n := len(m.verifyData)
	return append([]byte{typeFinished, byte(n >> 16), byte(n >> 8), byte(n)}, m.verifyData...), nil
}

func (m *finishedMsg) unmarshal(data []byte) bool {
	s, ok := readMsg(data, typeFinished)
	if !ok || len(s) != finishedVerifyLen {
		return false
	}
	m.verifyData = []byte(s)
	return true
}

// newSessionTicketMsg (RFC 5077 §3.3), sent by Tongsuo NTLS servers.
type newSessionTicketMsg struct {
	lifetimeHint uint32
	ticket       []byte
}

func (m *newSessionTicketMsg) marshal() ([]byte, error) {
	return marshalMsg(typeNewSessionTicket, func(b *cryptobyte.Builder) {
		b.AddUint32(m.lifetimeHint)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(m.ticket) })
	})
}

func (m *newSessionTicketMsg) unmarshal(data []byte) bool {
	s, ok := readMsg(data, typeNewSessionTicket)
	if !ok {
		return false
	}
	var t cryptobyte.String
	if !s.ReadUint32(&m.lifetimeHint) || !s.ReadUint16LengthPrefixed(&t) || !s.Empty() {
		return false
	}
	m.ticket = []byte(t)
	return true
}
