// Package wire holds the cryptobyte encodings TLCP (GB/T 38636) and TLS
// 1.3 (RFC 8446) share: the handshake message framing and the hello
// extensions of RFC 6066 server_name and RFC 7301 ALPN.
package wire

import "golang.org/x/crypto/cryptobyte"

// Handshake message framing, the same in TLS 1.2, TLCP (GB/T 38636 §6.4.5)
// and TLS 1.3 (RFC 8446 §4): msg_type<u8> || length<u24> || body.

// MarshalHandshake builds type || u24 length || body.
func MarshalHandshake(typ uint8, body cryptobyte.BuilderContinuation) ([]byte, error) {
	b := cryptobyte.NewBuilder(make([]byte, 0, 256))
	b.AddUint8(typ)
	b.AddUint24LengthPrefixed(body)
	return b.Bytes()
}

// ReadHandshake checks that data is exactly one handshake message of type
// typ and returns its body.
func ReadHandshake(data []byte, typ uint8) (body cryptobyte.String, ok bool) {
	s := cryptobyte.String(data)
	var t uint8
	if !s.ReadUint8(&t) || t != typ || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() {
		return nil, false
	}
	return body, true
}

// Hello extensions whose encodings TLCP shares with TLS.
const (
	ExtensionServerName uint16 = 0  // RFC 6066 §3
	ExtensionALPN       uint16 = 16 // RFC 7301 §3.1
)

// AddServerNameExtension adds a server_name extension (type, length, body)
// whose server_name_list holds one host_name (RFC 6066 §3).
func AddServerNameExtension(b *cryptobyte.Builder, host string) {
	b.AddUint16(ExtensionServerName)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint8(0) // host_name
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(host)) })
		})
	})
}

// AddALPNExtension adds an application_layer_protocol_negotiation extension
// (type, length, body) listing protocols (RFC 7301 §3.1): a client's offer,
// or with one protocol the server's selection.
func AddALPNExtension(b *cryptobyte.Builder, protocols ...string) {
	b.AddUint16(ExtensionALPN)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, p := range protocols {
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
			}
		})
	})
}

// ReadServerName reads the server_name_list of a server_name extension body
// (RFC 6066 §3) from ext: a non-empty list of non-empty names. It returns
// the first host_name (name type 0), "" when there is none, and how many
// host_names the list holds, so the caller can apply its own rule for
// several. ok is false on malformed input.
func ReadServerName(ext *cryptobyte.String) (host string, hostNames int, ok bool) {
	var list cryptobyte.String
	if !ext.ReadUint16LengthPrefixed(&list) || list.Empty() {
		return "", 0, false
	}
	for !list.Empty() {
		var nameType uint8
		var name cryptobyte.String
		if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&name) || len(name) == 0 {
			return "", 0, false
		}
		if nameType != 0 {
			continue
		}
		if hostNames == 0 {
			host = string(name)
		}
		hostNames++
	}
	return host, hostNames, true
}

// ReadALPNList reads the protocol_name_list of a client's ALPN extension
// body (RFC 7301 §3.1) from ext: a non-empty list of non-empty names.
func ReadALPNList(ext *cryptobyte.String) ([]string, bool) {
	var list cryptobyte.String
	if !ext.ReadUint16LengthPrefixed(&list) || list.Empty() {
		return nil, false
	}
	var protocols []string
	for !list.Empty() {
		var p cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&p) || len(p) == 0 {
			return nil, false
		}
		protocols = append(protocols, ALPNName(p))
	}
	return protocols, true
}

// ALPNName returns the protocol name p as a string: the common names
// ("h2", "http/1.1") without an allocation.
func ALPNName(p []byte) string {
	switch string(p) {
	case "h2":
		return "h2"
	case "http/1.1":
		return "http/1.1"
	}
	return string(p)
}

// ReadALPNSelected reads a server's ALPN extension body from ext: a
// protocol_name_list of exactly one non-empty name (RFC 7301 §3.1).
func ReadALPNSelected(ext *cryptobyte.String) (string, bool) {
	var list, p cryptobyte.String
	if !ext.ReadUint16LengthPrefixed(&list) || !list.ReadUint8LengthPrefixed(&p) || len(p) == 0 || !list.Empty() {
		return "", false
	}
	return ALPNName(p), true
}
