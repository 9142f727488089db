package tls13sm

import "slices"

// Append-based encoders for the messages a server sends on every handshake
// (cryptobyte's builders allocate per length prefix). Each reserves the
// 4-byte handshake header and patches the uint24 length at the end.

func beginMessage(b []byte, typ uint8) ([]byte, int) {
	start := len(b)
	return append(b, typ, 0, 0, 0), start
}

func endMessage(b []byte, start int) []byte {
	n := len(b) - start - 4
	b[start+1], b[start+2], b[start+3] = byte(n>>16), byte(n>>8), byte(n)
	return b
}

func appendU16(b []byte, v uint16) []byte { return append(b, byte(v>>8), byte(v)) }

func appendU32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// reserveU16 appends a 2-byte length placeholder; patchU16 fills it with
// the number of bytes appended since.
func reserveU16(b []byte) ([]byte, int) { return append(b, 0, 0), len(b) }

func patchU16(b []byte, at int) []byte {
	n := len(b) - at - 2
	b[at], b[at+1] = byte(n>>8), byte(n)
	return b
}

func (m *serverHelloMsg) marshalFast() []byte { return m.appendFast(nil) }

// appendFast appends the message to b (b's spare capacity is reused, as
// with every appendFast) and returns it, also kept in m.raw.
func (m *serverHelloMsg) appendFast(b []byte) []byte {
	b = slices.Grow(b, 4+2+32+1+len(m.sessionID)+3+2+6+8+len(m.serverShare.data)+6+6+len(m.cookie))
	b, start := beginMessage(b, typeServerHello)
	b = appendU16(b, m.vers)
	b = append(b, m.random...)
	b = append(b, byte(len(m.sessionID)))
	b = append(b, m.sessionID...)
	b = appendU16(b, m.cipherSuite)
	b = append(b, m.compression)
	b, ext := reserveU16(b)
	if m.supportedVersion != 0 {
		b = appendU16(b, extSupportedVersions)
		b = appendU16(b, 2)
		b = appendU16(b, m.supportedVersion)
	}
	if m.serverShare.group != 0 {
		b = appendU16(b, extKeyShare)
		b = appendU16(b, uint16(4+len(m.serverShare.data)))
		b = appendU16(b, m.serverShare.group)
		b = appendU16(b, uint16(len(m.serverShare.data)))
		b = append(b, m.serverShare.data...)
	}
	if m.selectedGroup != 0 {
		b = appendU16(b, extKeyShare)
		b = appendU16(b, 2)
		b = appendU16(b, m.selectedGroup)
	}
	if len(m.cookie) > 0 {
		b = appendU16(b, extCookie)
		b = appendU16(b, uint16(2+len(m.cookie)))
		b = appendU16(b, uint16(len(m.cookie)))
		b = append(b, m.cookie...)
	}
	if m.hasSelectedIdent {
		b = appendU16(b, extPreSharedKey)
		b = appendU16(b, 2)
		b = appendU16(b, m.selectedIdentity)
	}
	b = patchU16(b, ext)
	b = endMessage(b, start)
	m.raw = b[start:]
	return b
}

func (m *encryptedExtensionsMsg) marshalFast() []byte { return m.appendFast(nil) }

func (m *encryptedExtensionsMsg) appendFast(b []byte) []byte {
	b = slices.Grow(b, 4+2+8+len(m.alpnProtocol))
	b, start := beginMessage(b, typeEncryptedExtensions)
	b, ext := reserveU16(b)
	if m.alpnProtocol != "" {
		p := len(m.alpnProtocol)
		b = appendU16(b, extALPN)
		b = appendU16(b, uint16(2+1+p))
		b = appendU16(b, uint16(1+p))
		b = append(b, byte(p))
		b = append(b, m.alpnProtocol...)
	}
	b = patchU16(b, ext)
	b = endMessage(b, start)
	m.raw = b[start:]
	return b
}

func (m *finishedMsg) marshalFast() []byte { return m.appendFast(nil) }

func (m *finishedMsg) appendFast(b []byte) []byte {
	b = slices.Grow(b, 4+len(m.verifyData))
	b, start := beginMessage(b, typeFinished)
	b = append(b, m.verifyData...)
	b = endMessage(b, start)
	m.raw = b[start:]
	return b
}

func (m *newSessionTicketMsg) marshalFast() []byte { return m.appendFast(nil) }

func (m *newSessionTicketMsg) appendFast(b []byte) []byte {
	b = slices.Grow(b, 4+4+4+1+len(m.nonce)+2+len(m.label)+2)
	b, start := beginMessage(b, typeNewSessionTicket)
	b = appendU32(b, m.lifetime)
	b = appendU32(b, m.ageAdd)
	b = append(b, byte(len(m.nonce)))
	b = append(b, m.nonce...)
	b = appendU16(b, uint16(len(m.label)))
	b = append(b, m.label...)
	b = appendU16(b, 0)
	b = endMessage(b, start)
	m.raw = b[start:]
	return b
}

func (m *certificateVerifyMsg) marshalFast() []byte { return m.appendFast(nil) }

func (m *certificateVerifyMsg) appendFast(b []byte) []byte {
	b = slices.Grow(b, 4+2+2+len(m.signature))
	b, start := beginMessage(b, typeCertificateVerify)
	b = appendU16(b, m.sigAlg)
	b = appendU16(b, uint16(len(m.signature)))
	b = append(b, m.signature...)
	b = endMessage(b, start)
	m.raw = b[start:]
	return b
}

// marshalFast encodes a Certificate with an empty request context and no
// per-certificate extensions (what the server sends) in one allocation. It
// falls back to marshal for anything else or for oversize chains.
func (m *certificateMsg) marshalFast() ([]byte, error) { return m.appendFast(nil) }

func (m *certificateMsg) appendFast(b []byte) ([]byte, error) {
	n := 4 + 1 + len(m.context) + 3
	for _, c := range m.certificates {
		n += 3 + len(c) + 2
	}
	if len(m.context) != 0 || n-4 >= 1<<24 {
		raw, err := m.marshal()
		return append(b, raw...), err
	}
	b = slices.Grow(b, n)
	b, start := beginMessage(b, typeCertificate)
	b = append(b, 0) // certificate_request_context
	l := n - 4 - 1 - 3
	b = append(b, byte(l>>16), byte(l>>8), byte(l))
	for _, c := range m.certificates {
		b = append(b, byte(len(c)>>16), byte(len(c)>>8), byte(len(c)))
		b = append(b, c...)
		b = append(b, 0, 0) // no extensions
	}
	b = endMessage(b, start)
	m.raw = b[start:]
	return b, nil
}

// marshalFast encodes the session state (same layout as marshal).
func (s *sessionState) marshalFast(b []byte) []byte {
	b = append(b, sessionStateVersion)
	b = appendU16(b, s.suite)
	b = appendU32(b, uint32(s.createdAt>>32))
	b = appendU32(b, uint32(s.createdAt))
	b = appendU32(b, uint32(s.authAt>>32))
	b = appendU32(b, uint32(s.authAt))
	b = appendU32(b, s.lifetime)
	b = appendU32(b, s.ageAdd)
	b = append(b, s.secret[:]...)
	b = append(b, s.site[:]...)
	b = append(b, s.clientFlag())
	if s.client.presented {
		b = append(b, s.client.leafHash[:]...)
		b = appendU32(b, uint32(s.client.notAfter>>32))
		b = appendU32(b, uint32(s.client.notAfter))
		b = append(b, s.client.auth[:]...)
	}
	alpn := s.ticketALPN()
	b = append(b, byte(len(alpn)))
	return append(b, alpn...)
}
