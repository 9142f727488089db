package frontdoor

import (
	"bytes"
	"errors"
	"slices"

	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/wire"
)

// Record and handshake constants the sniffer needs (RFC 8446 §5.1, GB/T
// 38636-2020 §6.3.3; TLS and TLCP share the numbers).
const (
	recordTypeAlert     = 21
	recordTypeHandshake = 22
	typeClientHello     = 1
	recordHeaderLen     = 5
	maxRecordPayload    = 16384 + 2048

	versionTLCP  = 0x0101
	versionTLS13 = 0x0304

	extServerName        = 0
	extSupportedGroups   = 10
	extSignatureAlgs     = 13
	extALPN              = 16
	extSupportedVersions = 43
)

// Suite IDs the dispatcher looks for in TLS hellos.
const (
	suiteTLSSM4GCMSM3 = 0x00c6 // RFC 8998
	suiteTLSSM4CCMSM3 = 0x00c7 // RFC 8998
	suiteECCSM4CBCSM3 = 0xe013 // GB/T 38636 (360-browser pattern in TLS hellos)
	suiteECCSM4GCMSM3 = 0xe053
	suiteECDHESM4CBC  = 0xe011
	suiteECDHESM4GCM  = 0xe051
)

// ClientHello is what the sniffer learns from a first flight. It is parsed
// only to route the connection; the chosen stack parses the same bytes again.
type ClientHello struct {
	// RecordVersion is the version in the first record header (0x0101 for
	// TLCP, 0x0301/0x0303 for TLS).
	RecordVersion uint16
	// Version is the hello's legacy client_version.
	Version           uint16
	CipherSuites      []uint16
	ServerName        string
	ALPN              []string
	SupportedVersions []uint16
	SupportedGroups   []uint16
	SignatureSchemes  []uint16
}

var (
	errBadHello      = errors.New("malformed ClientHello")
	errBadServerName = errors.New("ClientHello server_name is no host name (over 255 bytes, or a NUL)")
)

// maxServerName bounds a server_name: the bytes of a DNS host name (RFC
// 1035 §2.3.4).
const maxServerName = 255

// parseClientHello parses a ClientHello handshake message body (without the
// 4-byte handshake header), RFC 8446 §4.1.2 / GB/T 38636 §6.4.5.2.1.
// Unknown extensions are skipped; malformed lengths are errors.
func parseClientHello(body []byte) (*ClientHello, error) {
	s := cryptobyte.String(body)
	h := &ClientHello{}
	var random, sessionID, suites, compression cryptobyte.String
	if !s.ReadUint16(&h.Version) || !s.ReadBytes((*[]byte)(&random), 32) ||
		!s.ReadUint8LengthPrefixed(&sessionID) || len(sessionID) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || len(suites)%2 != 0 ||
		!s.ReadUint8LengthPrefixed(&compression) {
		return nil, errBadHello
	}
	for !suites.Empty() {
		var id uint16
		suites.ReadUint16(&id)
		h.CipherSuites = append(h.CipherSuites, id)
	}
	if s.Empty() {
		// No extensions block at all (GmSSL TLCP client).
		return h, nil
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return nil, errBadHello
	}
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return nil, errBadHello
		}
		switch typ {
		case extServerName: // RFC 6066 §3
			var list cryptobyte.String
			if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
				return nil, errBadHello
			}
			for !list.Empty() {
				var nameType uint8
				var name cryptobyte.String
				if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&name) {
					return nil, errBadHello
				}
				if nameType == 0 && h.ServerName == "" {
					// No DNS host name is longer (RFC 1035 §2.3.4) or
					// holds a NUL: refused as OpenSSL refuses it, not
					// kept (up to 64 KiB) for the connection's life.
					if len(name) > maxServerName || bytes.IndexByte(name, 0) >= 0 {
						return nil, errBadServerName
					}
					h.ServerName = string(name)
				}
			}
		case extALPN: // RFC 7301 §3.1
			var list cryptobyte.String
			if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
				return nil, errBadHello
			}
			for !list.Empty() {
				var proto cryptobyte.String
				if !list.ReadUint8LengthPrefixed(&proto) || len(proto) == 0 {
					return nil, errBadHello
				}
				if len(h.ALPN) < 32 {
					h.ALPN = append(h.ALPN, wire.ALPNName(proto))
				}
			}
		case extSupportedGroups, extSignatureAlgs: // RFC 8446 §4.2.7, §4.2.3
			var list cryptobyte.String
			if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || len(list)%2 != 0 {
				return nil, errBadHello
			}
			for !list.Empty() {
				var v uint16
				list.ReadUint16(&v)
				if typ == extSupportedGroups {
					h.SupportedGroups = append(h.SupportedGroups, v)
				} else {
					h.SignatureSchemes = append(h.SignatureSchemes, v)
				}
			}
		case extSupportedVersions: // RFC 8446 §4.2.1
			var list cryptobyte.String
			if !data.ReadUint8LengthPrefixed(&list) || !data.Empty() || len(list)%2 != 0 {
				return nil, errBadHello
			}
			for !list.Empty() {
				var v uint16
				list.ReadUint16(&v)
				h.SupportedVersions = append(h.SupportedVersions, v)
			}
		}
	}
	return h, nil
}

// offers reports whether the hello lists suite id.
func (h *ClientHello) offers(ids ...uint16) bool {
	for _, s := range h.CipherSuites {
		for _, id := range ids {
			if s == id {
				return true
			}
		}
	}
	return false
}

// OffersTLS13SM reports a TLS hello that can be answered with TLS 1.3 and
// an RFC 8998 suite: supported_versions contains 03 04 and the suites contain
// 00 C6 or 00 C7. The presence of 01 01 in supported_versions (GmSSL lists
// it) is deliberately ignored (protocol-notes §10.3 rule 3).
func (h *ClientHello) OffersTLS13SM() bool {
	if !h.offers(suiteTLSSM4GCMSM3, suiteTLSSM4CCMSM3) {
		return false
	}
	for _, v := range h.SupportedVersions {
		if v == versionTLS13 {
			return true
		}
	}
	return false
}

// OffersTLS13SMStrict reports a TLS 1.3-SM hello that also offers
// sm2sig_sm3 (07 08) and curveSM2 (00 29), the complete SM combination
// Tongsuo's enable_sm_tls13_strict requires.
func (h *ClientHello) OffersTLS13SMStrict() bool {
	return h.OffersTLS13SM() && slices.Contains(h.SignatureSchemes, 0x0708) && slices.Contains(h.SupportedGroups, 0x0029)
}

// refusesSM2Signatures reports a hello whose signature_algorithms list
// lacks sm2sig_sm3: its client cannot verify a CertificateVerify by an SM2
// certificate, the only signature RFC 8998 §3.3 pairs with the SM suites,
// so TLS 1.3-SM can answer it only by resuming a session. A hello without
// the extension (PSK only, RFC 8446 §4.2.3) is not one.
func (h *ClientHello) refusesSM2Signatures() bool {
	return len(h.SignatureSchemes) > 0 && !slices.Contains(h.SignatureSchemes, 0x0708)
}

// OffersTLCPSuites reports a hello listing TLCP suites (the 360-browser
// pattern when it arrives in a TLS record).
func (h *ClientHello) OffersTLCPSuites() bool {
	return h.offers(suiteECCSM4CBCSM3, suiteECCSM4GCMSM3, suiteECDHESM4CBC, suiteECDHESM4GCM)
}

// OffersOnlyGMSuites reports that every suite offered is a TLCP or RFC 8998
// suite (or a signalling value), so crypto/tls could not answer it.
func (h *ClientHello) OffersOnlyGMSuites() bool {
	for _, s := range h.CipherSuites {
		switch {
		case s>>8 == 0xe0, s == suiteTLSSM4GCMSM3, s == suiteTLSSM4CCMSM3,
			s == 0x00ff, s == 0x5600, s&0x0f0f == 0x0a0a: // SCSVs and GREASE
			continue
		}
		return false
	}
	return true
}
