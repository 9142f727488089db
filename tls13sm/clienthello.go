package tls13sm

import (
	"errors"
	"slices"
)

// ClientHelloSummary is what a protocol sniffer needs from a ClientHello.
type ClientHelloSummary struct {
	// RecordVersion is the version of the first record header (0 when the
	// input was a bare handshake message).
	RecordVersion uint16
	// LegacyVersion is ClientHello.legacy_version (0x0303, or 0x0101 for TLCP).
	LegacyVersion uint16
	// Versions is supported_versions (empty when absent).
	Versions        []uint16
	CipherSuites    []uint16
	ServerName      string
	ALPN            []string
	SupportedGroups []uint16
	KeyShareGroups  []uint16
	SignatureAlgs   []uint16
	SessionIDLen    int
	HasPSK          bool
	HasEarlyData    bool
}

// OffersTLS13 reports whether supported_versions lists TLS 1.3. (GmSSL also
// lists 0x0101 there; that is not TLCP — see protocol-notes §9.3.)
func (s *ClientHelloSummary) OffersTLS13() bool { return slices.Contains(s.Versions, VersionTLS13) }

// OffersSMSuite reports whether an RFC 8998 suite is offered.
func (s *ClientHelloSummary) OffersSMSuite() bool {
	return slices.Contains(s.CipherSuites, TLS_SM4_GCM_SM3) || slices.Contains(s.CipherSuites, TLS_SM4_CCM_SM3)
}

// IsTLS13SM reports whether this hello should go to a TLS 1.3-SM server:
// TLS 1.3 offered and an SM suite among the suites.
func (s *ClientHelloSummary) IsTLS13SM() bool { return s.OffersTLS13() && s.OffersSMSuite() }

var errNotClientHello = errors.New("tls13sm: not a ClientHello")

// ParseClientHello parses a ClientHello given either as TLS handshake
// records (the first bytes of a connection: record headers are stripped and
// fragments re-assembled) or as a bare handshake message. It never panics
// and reads at most 64 KiB of message.
func ParseClientHello(data []byte) (*ClientHelloSummary, error) {
	sum := &ClientHelloSummary{}
	msg := data
	if len(data) >= recordHeaderLen && data[0] == recordTypeHandshake && data[1] != 0 {
		// Records: re-assemble the handshake message.
		sum.RecordVersion = uint16(data[1])<<8 | uint16(data[2])
		var buf []byte
		rest := data
		for len(rest) >= recordHeaderLen {
			if rest[0] != recordTypeHandshake {
				break
			}
			n := int(rest[3])<<8 | int(rest[4])
			if n > maxCiphertext || len(rest) < recordHeaderLen+n {
				return nil, errors.New("tls13sm: truncated ClientHello record")
			}
			buf = append(buf, rest[recordHeaderLen:recordHeaderLen+n]...)
			rest = rest[recordHeaderLen+n:]
			if len(buf) >= 4 && len(buf) >= 4+(int(buf[1])<<16|int(buf[2])<<8|int(buf[3])) {
				break
			}
		}
		msg = buf
	}
	if len(msg) < 4 || msg[0] != typeClientHello {
		return nil, errNotClientHello
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if n > maxHandshakeMsg || len(msg) < 4+n {
		return nil, errors.New("tls13sm: truncated ClientHello")
	}
	var h clientHelloMsg
	if !h.unmarshal(msg[:4+n]) {
		return nil, errors.New("tls13sm: malformed ClientHello")
	}
	sum.LegacyVersion = h.vers
	sum.Versions = h.supportedVersions
	sum.CipherSuites = h.cipherSuites
	sum.ServerName = h.serverName
	sum.ALPN = h.alpnProtocols
	sum.SupportedGroups = h.supportedGroups
	for _, ks := range h.keyShares {
		sum.KeyShareGroups = append(sum.KeyShareGroups, ks.group)
	}
	sum.SignatureAlgs = h.signatureAlgorithms
	sum.SessionIDLen = len(h.sessionID)
	sum.HasPSK = len(h.pskIdentities) > 0
	sum.HasEarlyData = h.earlyData
	return sum, nil
}

// IsSMClientHello reports whether hello (records or a bare message) is a
// TLS 1.3 ClientHello offering an RFC 8998 suite.
func IsSMClientHello(hello []byte) bool {
	s, err := ParseClientHello(hello)
	return err == nil && s.IsTLS13SM()
}
