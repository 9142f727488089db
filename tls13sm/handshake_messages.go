package tls13sm

import (
	"slices"

	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/wire"
)

// Handshake message types (RFC 8446 §4).
const (
	typeClientHello         uint8 = 1
	typeServerHello         uint8 = 2
	typeNewSessionTicket    uint8 = 4
	typeEndOfEarlyData      uint8 = 5
	typeEncryptedExtensions uint8 = 8
	typeCertificate         uint8 = 11
	typeCertificateRequest  uint8 = 13
	typeCertificateVerify   uint8 = 15
	typeFinished            uint8 = 20
	typeKeyUpdate           uint8 = 24
	typeMessageHash         uint8 = 254
)

// Extension types (RFC 8446 §4.2).
const (
	extServerName                 = wire.ExtensionServerName
	extSupportedGroups     uint16 = 10
	extSignatureAlgorithms uint16 = 13
	extALPN                       = wire.ExtensionALPN
	extPreSharedKey        uint16 = 41
	extEarlyData           uint16 = 42
	extSupportedVersions   uint16 = 43
	extCookie              uint16 = 44
	extPSKModes            uint16 = 45
	extCertAuthorities     uint16 = 47
	extSigAlgsCert         uint16 = 50
	extKeyShare            uint16 = 51
)

// PSK key exchange modes (§4.2.9).
const (
	pskModePlain uint8 = 0 // psk_ke
	pskModeDHE   uint8 = 1 // psk_dhe_ke
)

// helloRetryRequestRandom is the special ServerHello.random of an HRR (§4.1.3).
var helloRetryRequestRandom = [32]byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11,
	0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E,
	0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// Downgrade sentinels in ServerHello.random (§4.1.3).
const (
	downgradeTLS12 = "DOWNGRD\x01"
	downgradeTLS11 = "DOWNGRD\x00"
)

type keyShare struct {
	group uint16
	data  []byte
}

type pskIdentity struct {
	label               []byte
	obfuscatedTicketAge uint32
}

func addU8Bytes(b *cryptobyte.Builder, v []byte) {
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(v) })
}

func addU16Bytes(b *cryptobyte.Builder, v []byte) {
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(v) })
}

// marshalOnce returns *raw, first building it, when nil, as a handshake
// message of type typ (the 4-byte header, then body).
func marshalOnce(raw *[]byte, typ uint8, body cryptobyte.BuilderContinuation) ([]byte, error) {
	if *raw == nil {
		b, err := wire.MarshalHandshake(typ, body)
		if err != nil {
			return nil, err
		}
		*raw = b
	}
	return *raw, nil
}

// readMsg checks that data is one handshake message of type typ and returns
// its body.
func readMsg(data []byte, typ uint8) (cryptobyte.String, bool) {
	return wire.ReadHandshake(data, typ)
}

// addExtension adds one extension: its type and its body behind a u16
// length (§4.2).
func addExtension(b *cryptobyte.Builder, typ uint16, body cryptobyte.BuilderContinuation) {
	b.AddUint16(typ)
	b.AddUint16LengthPrefixed(body)
}

// addU16Extension adds an extension whose body is one u16 value.
func addU16Extension(b *cryptobyte.Builder, typ, v uint16) {
	b.AddUint16(typ)
	b.AddUint16(2)
	b.AddUint16(v)
}

// addU16List adds a vector of u16 values behind a u16 length.
func addU16List(b *cryptobyte.Builder, vs []uint16) {
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, v := range vs {
			b.AddUint16(v)
		}
	})
}

// readU16List reads a vector of u16 values behind a u16 length.
func readU16List(s *cryptobyte.String, out *[]uint16) bool {
	var l cryptobyte.String
	return s.ReadUint16LengthPrefixed(&l) && appendU16s(l, out)
}

// appendU16s appends the u16 values of l to out; l must hold whole ones.
func appendU16s(l cryptobyte.String, out *[]uint16) bool {
	if len(l)%2 != 0 {
		return false
	}
	for !l.Empty() {
		var v uint16
		l.ReadUint16(&v)
		*out = append(*out, v)
	}
	return true
}

// readExtensions reads an extensions block (§4.2): each type at most once,
// each passed to parse with its body. parse returns false for a malformed
// extension (for one it reads: unless its body is used up exactly).
func readExtensions(exts cryptobyte.String, parse func(typ uint16, body cryptobyte.String) bool) bool {
	var seen extensionSet
	for !exts.Empty() {
		var et uint16
		var ed cryptobyte.String
		if !exts.ReadUint16(&et) || !exts.ReadUint16LengthPrefixed(&ed) || !seen.add(et) || !parse(et, ed) {
			return false
		}
	}
	return true
}

// extensionSet detects duplicate extensions (§4.2: at most one of each
// type) in time linear in their number: a hostile hello may carry some
// 16 000 empty ones, which a scan of the earlier types per extension
// would take n²/2 comparisons (about 0.1 s of CPU per hello) to check.
type extensionSet struct {
	known  uint64   // bit per extension type < 64
	others []uint16 // other types, the first maxScannedExtensions
	many   *codeSet // all types, past maxScannedExtensions others
}

// maxScannedExtensions bounds the extensions of types of 64 and above
// found by a scan; past them a bit per type is kept. Real hellos have a
// dozen.
const maxScannedExtensions = 32

func (e *extensionSet) add(t uint16) bool {
	if t < 64 {
		if e.known&(1<<t) != 0 {
			return false
		}
		e.known |= 1 << t
		return true
	}
	if e.many != nil {
		return e.many.add(t)
	}
	if slices.Contains(e.others, t) {
		return false
	}
	if len(e.others) == maxScannedExtensions {
		e.many = new(codeSet)
		for _, o := range e.others {
			e.many.add(o)
		}
		return e.many.add(t)
	}
	e.others = append(e.others, t)
	return true
}

// codeSet is a set of 16-bit code points (extension types, named groups),
// a bit each (8 KiB).
type codeSet [1 << 16 / 64]uint64

// add adds v and reports whether it was not there yet.
func (s *codeSet) add(v uint16) bool {
	w, b := v/64, uint64(1)<<(v%64)
	had := s[w]&b != 0
	s[w] |= b
	return !had
}

func (s *codeSet) has(v uint16) bool { return s[v/64]&(uint64(1)<<(v%64)) != 0 }

// clientHelloMsg is ClientHello (§4.1.2).
type clientHelloMsg struct {
	raw                 []byte
	vers                uint16
	random              []byte
	sessionID           []byte
	cipherSuites        []uint16
	compressionMethods  []uint8
	serverName          string
	supportedGroups     []uint16
	signatureAlgorithms []uint16
	sigAlgsCert         []uint16
	alpnProtocols       []string
	supportedVersions   []uint16
	cookie              []byte
	keyShares           []keyShare
	hasKeyShareExt      bool
	earlyData           bool
	pskModes            []uint8
	pskIdentities       []pskIdentity
	pskBinders          [][]byte
	hasSupportedVers    bool
	hasSigAlgs          bool
	hasGroups           bool
	pskNotLast          bool // unmarshal failed: an extension after pre_shared_key

	// Backing arrays of the lists above, so that parsing a usual
	// ClientHello allocates nothing for them (longer lists spill to the
	// heap as usual).
	suitesArr  [16]uint16
	groupsArr  [8]uint16
	sigAlgsArr [8]uint16
	versArr    [4]uint16
	sharesArr  [2]keyShare
	pskIDsArr  [1]pskIdentity
	bindersArr [1][]byte
}

func (m *clientHelloMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeClientHello, func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		addU8Bytes(b, m.sessionID)
		addU16List(b, m.cipherSuites)
		addU8Bytes(b, []byte{0})
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.serverName != "" {
				wire.AddServerNameExtension(b, m.serverName)
			}
			if len(m.supportedGroups) > 0 {
				addExtension(b, extSupportedGroups, func(b *cryptobyte.Builder) { addU16List(b, m.supportedGroups) })
			}
			if len(m.signatureAlgorithms) > 0 {
				addExtension(b, extSignatureAlgorithms, func(b *cryptobyte.Builder) { addU16List(b, m.signatureAlgorithms) })
			}
			if len(m.alpnProtocols) > 0 {
				wire.AddALPNExtension(b, m.alpnProtocols...)
			}
			if len(m.supportedVersions) > 0 {
				addExtension(b, extSupportedVersions, func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, v := range m.supportedVersions {
							b.AddUint16(v)
						}
					})
				})
			}
			if len(m.cookie) > 0 {
				addExtension(b, extCookie, func(b *cryptobyte.Builder) { addU16Bytes(b, m.cookie) })
			}
			if m.keyShares != nil {
				addExtension(b, extKeyShare, func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, ks := range m.keyShares {
							b.AddUint16(ks.group)
							addU16Bytes(b, ks.data)
						}
					})
				})
			}
			if m.earlyData {
				addExtension(b, extEarlyData, func(*cryptobyte.Builder) {})
			}
			if len(m.pskModes) > 0 {
				addExtension(b, extPSKModes, func(b *cryptobyte.Builder) { addU8Bytes(b, m.pskModes) })
			}
			if len(m.pskIdentities) > 0 { // must be last (§4.2.11)
				addExtension(b, extPreSharedKey, func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, id := range m.pskIdentities {
							addU16Bytes(b, id.label)
							b.AddUint32(id.obfuscatedTicketAge)
						}
					})
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, bd := range m.pskBinders {
							addU8Bytes(b, bd)
						}
					})
				})
			}
		})
	})
}

// bindersLen is the length of the binders list at the end of a marshalled
// ClientHello with pre_shared_key.
func (m *clientHelloMsg) bindersLen() int {
	n := 2
	for _, b := range m.pskBinders {
		n += 1 + len(b)
	}
	return n
}

// updateBinders patches new binders (same lengths) into m.raw.
func (m *clientHelloMsg) updateBinders(binders [][]byte) {
	off := len(m.raw) - m.bindersLen() + 2
	for i, b := range binders {
		off++
		copy(m.raw[off:], b)
		off += len(b)
		m.pskBinders[i] = b
	}
}

func (m *clientHelloMsg) unmarshal(data []byte) bool {
	*m = clientHelloMsg{raw: data}
	body, ok := readMsg(data, typeClientHello)
	if !ok {
		return false
	}
	if !body.ReadUint16(&m.vers) || !body.ReadBytes(&m.random, 32) ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.sessionID)) || len(m.sessionID) > 32 {
		return false
	}
	m.cipherSuites = m.suitesArr[:0]
	if !readU16List(&body, &m.cipherSuites) || len(m.cipherSuites) == 0 {
		return false
	}
	if !body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.compressionMethods)) || len(m.compressionMethods) == 0 {
		return false
	}
	if body.Empty() {
		return true // no extensions (not TLS 1.3; rejected later)
	}
	var exts cryptobyte.String
	if !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	return readExtensions(exts, m.parseExtension)
}

// parseExtension reads one ClientHello extension (§4.2).
func (m *clientHelloMsg) parseExtension(et uint16, ed cryptobyte.String) bool {
	if m.pskIdentities != nil {
		m.pskNotLast = true
		return false // pre_shared_key must be the last extension (§4.2.11)
	}
	switch et {
	case extServerName:
		var n int
		var ok bool
		if m.serverName, n, ok = wire.ReadServerName(&ed); !ok || n > 1 {
			return false // malformed, or several host names
		}
		for _, c := range []byte(m.serverName) {
			if c == 0 || c > 0x7e {
				return false
			}
		}
	case extSupportedGroups:
		m.hasGroups = true
		m.supportedGroups = m.groupsArr[:0]
		if !readU16List(&ed, &m.supportedGroups) || len(m.supportedGroups) == 0 {
			return false
		}
	case extSignatureAlgorithms:
		m.hasSigAlgs = true
		m.signatureAlgorithms = m.sigAlgsArr[:0]
		if !readU16List(&ed, &m.signatureAlgorithms) || len(m.signatureAlgorithms) == 0 {
			return false
		}
	case extSigAlgsCert:
		if !readU16List(&ed, &m.sigAlgsCert) || len(m.sigAlgsCert) == 0 {
			return false
		}
	case extALPN:
		var ok bool
		if m.alpnProtocols, ok = wire.ReadALPNList(&ed); !ok {
			return false
		}
	case extSupportedVersions:
		m.hasSupportedVers = true
		var list cryptobyte.String
		m.supportedVersions = m.versArr[:0]
		if !ed.ReadUint8LengthPrefixed(&list) || list.Empty() || !appendU16s(list, &m.supportedVersions) {
			return false
		}
	case extCookie:
		if !ed.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.cookie)) || len(m.cookie) == 0 {
			return false
		}
	case extKeyShare:
		m.hasKeyShareExt = true
		var list cryptobyte.String
		if !ed.ReadUint16LengthPrefixed(&list) {
			return false
		}
		m.keyShares = m.sharesArr[:0]
		for !list.Empty() {
			var ks keyShare
			if !list.ReadUint16(&ks.group) || !list.ReadUint16LengthPrefixed((*cryptobyte.String)(&ks.data)) || len(ks.data) == 0 {
				return false
			}
			m.keyShares = append(m.keyShares, ks)
		}
	case extEarlyData:
		m.earlyData = true
	case extPSKModes:
		if !ed.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.pskModes)) || len(m.pskModes) == 0 {
			return false
		}
	case extPreSharedKey:
		var ids, binders cryptobyte.String
		if !ed.ReadUint16LengthPrefixed(&ids) || ids.Empty() {
			return false
		}
		m.pskIdentities = m.pskIDsArr[:0]
		for !ids.Empty() {
			var id pskIdentity
			if !ids.ReadUint16LengthPrefixed((*cryptobyte.String)(&id.label)) || len(id.label) == 0 ||
				!ids.ReadUint32(&id.obfuscatedTicketAge) {
				return false
			}
			m.pskIdentities = append(m.pskIdentities, id)
		}
		if !ed.ReadUint16LengthPrefixed(&binders) || binders.Empty() {
			return false
		}
		m.pskBinders = m.bindersArr[:0]
		for !binders.Empty() {
			var bd cryptobyte.String
			if !binders.ReadUint8LengthPrefixed(&bd) || len(bd) < 32 {
				return false
			}
			m.pskBinders = append(m.pskBinders, bd)
		}
		if len(m.pskBinders) != len(m.pskIdentities) {
			return false
		}
	default:
		return true // ignore unknown extensions (§4.1.2)
	}
	return ed.Empty()
}

// serverHelloMsg is ServerHello or HelloRetryRequest (§4.1.3, §4.1.4).
type serverHelloMsg struct {
	raw               []byte
	vers              uint16
	random            []byte
	sessionID         []byte
	cipherSuite       uint16
	compression       uint8
	supportedVersion  uint16
	serverShare       keyShare // ServerHello
	selectedGroup     uint16   // HelloRetryRequest
	cookie            []byte
	selectedIdentity  uint16
	hasSelectedIdent  bool
	unknownExtensions bool
}

func (m *serverHelloMsg) isHRR() bool { return string(m.random) == string(helloRetryRequestRandom[:]) }

func (m *serverHelloMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeServerHello, func(b *cryptobyte.Builder) {
		b.AddUint16(m.vers)
		b.AddBytes(m.random)
		addU8Bytes(b, m.sessionID)
		b.AddUint16(m.cipherSuite)
		b.AddUint8(m.compression)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.supportedVersion != 0 {
				addU16Extension(b, extSupportedVersions, m.supportedVersion)
			}
			if m.serverShare.group != 0 {
				addExtension(b, extKeyShare, func(b *cryptobyte.Builder) {
					b.AddUint16(m.serverShare.group)
					addU16Bytes(b, m.serverShare.data)
				})
			}
			if m.selectedGroup != 0 {
				addU16Extension(b, extKeyShare, m.selectedGroup)
			}
			if len(m.cookie) > 0 {
				addExtension(b, extCookie, func(b *cryptobyte.Builder) { addU16Bytes(b, m.cookie) })
			}
			if m.hasSelectedIdent {
				addU16Extension(b, extPreSharedKey, m.selectedIdentity)
			}
		})
	})
}

func (m *serverHelloMsg) unmarshal(data []byte) bool {
	*m = serverHelloMsg{raw: data}
	body, ok := readMsg(data, typeServerHello)
	if !ok {
		return false
	}
	if !body.ReadUint16(&m.vers) || !body.ReadBytes(&m.random, 32) ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.sessionID)) || len(m.sessionID) > 32 ||
		!body.ReadUint16(&m.cipherSuite) || !body.ReadUint8(&m.compression) {
		return false
	}
	if body.Empty() {
		return true
	}
	var exts cryptobyte.String
	if !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	return readExtensions(exts, m.parseExtension)
}

// parseExtension reads one ServerHello or HelloRetryRequest extension.
func (m *serverHelloMsg) parseExtension(et uint16, ed cryptobyte.String) bool {
	switch et {
	case extSupportedVersions:
		if !ed.ReadUint16(&m.supportedVersion) {
			return false
		}
	case extKeyShare:
		if m.isHRR() {
			if !ed.ReadUint16(&m.selectedGroup) {
				return false
			}
		} else if !ed.ReadUint16(&m.serverShare.group) ||
			!ed.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.serverShare.data)) || len(m.serverShare.data) == 0 {
			return false
		}
	case extCookie:
		if !ed.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.cookie)) || len(m.cookie) == 0 {
			return false
		}
	case extPreSharedKey:
		m.hasSelectedIdent = true
		if !ed.ReadUint16(&m.selectedIdentity) {
			return false
		}
	default:
		m.unknownExtensions = true
		return true
	}
	return ed.Empty()
}

// encryptedExtensionsMsg is EncryptedExtensions (§4.3.1).
type encryptedExtensionsMsg struct {
	raw               []byte
	alpnProtocol      string
	earlyData         bool
	unknownExtensions bool
	forbidden         bool // an extension §4.2 does not allow in this message
	serverNameAck     bool
}

func (m *encryptedExtensionsMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeEncryptedExtensions, func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if m.alpnProtocol != "" {
				wire.AddALPNExtension(b, m.alpnProtocol)
			}
		})
	})
}

func (m *encryptedExtensionsMsg) unmarshal(data []byte) bool {
	*m = encryptedExtensionsMsg{raw: data}
	body, ok := readMsg(data, typeEncryptedExtensions)
	var exts cryptobyte.String
	if !ok || !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	return readExtensions(exts, func(et uint16, ed cryptobyte.String) bool {
		switch et {
		case extALPN:
			var ok bool
			if m.alpnProtocol, ok = wire.ReadALPNSelected(&ed); !ok {
				return false
			}
		case extEarlyData:
			m.earlyData = true
		case extServerName:
			m.serverNameAck = true
			return true
		case extSupportedGroups:
			return true // informational, allowed
		case extKeyShare, extSupportedVersions, extPreSharedKey, extPSKModes, extCookie, extSignatureAlgorithms:
			m.forbidden = true // §4.2's table: not in EncryptedExtensions
			return true
		default:
			m.unknownExtensions = true
			return true
		}
		return ed.Empty()
	})
}

// certificateRequestMsg is the TLS 1.3 CertificateRequest (§4.3.2).
type certificateRequestMsg struct {
	raw                 []byte
	context             []byte
	signatureAlgorithms []uint16
	sigAlgsCert         []uint16
	certificateAuths    [][]byte
}

func (m *certificateRequestMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeCertificateRequest, func(b *cryptobyte.Builder) {
		addU8Bytes(b, m.context)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			addExtension(b, extSignatureAlgorithms, func(b *cryptobyte.Builder) { addU16List(b, m.signatureAlgorithms) })
			if len(m.certificateAuths) > 0 {
				addExtension(b, extCertAuthorities, func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, ca := range m.certificateAuths {
							addU16Bytes(b, ca)
						}
					})
				})
			}
		})
	})
}

func (m *certificateRequestMsg) unmarshal(data []byte) bool {
	*m = certificateRequestMsg{raw: data}
	body, ok := readMsg(data, typeCertificateRequest)
	var exts cryptobyte.String
	if !ok || !body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.context)) ||
		!body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	return readExtensions(exts, m.parseExtension) &&
		len(m.signatureAlgorithms) > 0 // signature_algorithms is mandatory (§4.3.2)
}

// parseExtension reads one CertificateRequest extension.
func (m *certificateRequestMsg) parseExtension(et uint16, ed cryptobyte.String) bool {
	switch et {
	case extSignatureAlgorithms:
		if !readU16List(&ed, &m.signatureAlgorithms) || len(m.signatureAlgorithms) == 0 {
			return false
		}
	case extSigAlgsCert:
		if !readU16List(&ed, &m.sigAlgsCert) || len(m.sigAlgsCert) == 0 {
			return false
		}
	case extCertAuthorities:
		var list cryptobyte.String
		if !ed.ReadUint16LengthPrefixed(&list) || list.Empty() {
			return false
		}
		for !list.Empty() {
			var ca []byte
			if !list.ReadUint16LengthPrefixed((*cryptobyte.String)(&ca)) || len(ca) == 0 {
				return false
			}
			m.certificateAuths = append(m.certificateAuths, ca)
		}
	default:
		return true
	}
	return ed.Empty()
}

// certificateMsg is the TLS 1.3 Certificate (§4.4.2). Per-entry extensions
// are parsed for framing only.
type certificateMsg struct {
	raw          []byte
	context      []byte
	certificates [][]byte
}

func (m *certificateMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeCertificate, func(b *cryptobyte.Builder) {
		addU8Bytes(b, m.context)
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, c := range m.certificates {
				b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
				b.AddUint16(0)
			}
		})
	})
}

func (m *certificateMsg) unmarshal(data []byte) bool {
	*m = certificateMsg{raw: data}
	body, ok := readMsg(data, typeCertificate)
	var list cryptobyte.String
	if !ok || !body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.context)) ||
		!body.ReadUint24LengthPrefixed(&list) || !body.Empty() {
		return false
	}
	for !list.Empty() {
		var cert []byte
		var exts cryptobyte.String
		if !list.ReadUint24LengthPrefixed((*cryptobyte.String)(&cert)) || len(cert) == 0 ||
			!list.ReadUint16LengthPrefixed(&exts) {
			return false
		}
		m.certificates = append(m.certificates, cert)
	}
	return true
}

// certificateVerifyMsg is CertificateVerify (§4.4.3).
type certificateVerifyMsg struct {
	raw       []byte
	sigAlg    uint16
	signature []byte
}

func (m *certificateVerifyMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeCertificateVerify, func(b *cryptobyte.Builder) {
		b.AddUint16(m.sigAlg)
		addU16Bytes(b, m.signature)
	})
}

func (m *certificateVerifyMsg) unmarshal(data []byte) bool {
	*m = certificateVerifyMsg{raw: data}
	body, ok := readMsg(data, typeCertificateVerify)
	return ok && body.ReadUint16(&m.sigAlg) && body.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.signature)) &&
		len(m.signature) > 0 && body.Empty()
}

// finishedMsg is Finished (§4.4.4).
type finishedMsg struct {
	raw        []byte
	verifyData []byte
}

func (m *finishedMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeFinished, func(b *cryptobyte.Builder) { b.AddBytes(m.verifyData) })
}

func (m *finishedMsg) unmarshal(data []byte) bool {
	*m = finishedMsg{raw: data}
	body, ok := readMsg(data, typeFinished)
	if !ok {
		return false
	}
	m.verifyData = body
	return len(body) == hashSize
}

// newSessionTicketMsg is the TLS 1.3 NewSessionTicket (§4.6.1).
type newSessionTicketMsg struct {
	raw          []byte
	lifetime     uint32
	ageAdd       uint32
	nonce        []byte
	label        []byte
	maxEarlyData uint32
}

func (m *newSessionTicketMsg) marshal() ([]byte, error) {
	return marshalOnce(&m.raw, typeNewSessionTicket, func(b *cryptobyte.Builder) {
		b.AddUint32(m.lifetime)
		b.AddUint32(m.ageAdd)
		addU8Bytes(b, m.nonce)
		addU16Bytes(b, m.label)
		b.AddUint16(0) // no extensions: never early_data
	})
}

func (m *newSessionTicketMsg) unmarshal(data []byte) bool {
	*m = newSessionTicketMsg{raw: data}
	body, ok := readMsg(data, typeNewSessionTicket)
	var exts cryptobyte.String
	if !ok || !body.ReadUint32(&m.lifetime) || !body.ReadUint32(&m.ageAdd) ||
		!body.ReadUint8LengthPrefixed((*cryptobyte.String)(&m.nonce)) ||
		!body.ReadUint16LengthPrefixed((*cryptobyte.String)(&m.label)) || len(m.label) == 0 ||
		!body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return false
	}
	return readExtensions(exts, func(et uint16, ed cryptobyte.String) bool {
		return et != extEarlyData || ed.ReadUint32(&m.maxEarlyData) && ed.Empty()
	})
}

// keyUpdateMsg is KeyUpdate (§4.6.3).
type keyUpdateMsg struct {
	raw             []byte
	updateRequested bool
}

func (m *keyUpdateMsg) marshal() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	v := uint8(0)
	if m.updateRequested {
		v = 1
	}
	m.raw = []byte{typeKeyUpdate, 0, 0, 1, v}
	return m.raw, nil
}

// unmarshal returns false on framing errors; a value other than 0 or 1 is
// reported through ok=false as well (caller sends illegal_parameter when the
// framing is right, see keyUpdateValueOK).
func (m *keyUpdateMsg) unmarshal(data []byte) bool {
	*m = keyUpdateMsg{raw: data}
	if len(data) != 5 || data[0] != typeKeyUpdate || data[1] != 0 || data[2] != 0 || data[3] != 1 {
		return false
	}
	switch data[4] {
	case 0:
	case 1:
		m.updateRequested = true
	default:
		return false
	}
	return true
}
