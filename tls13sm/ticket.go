package tls13sm

import (
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/lru"
)

// sessionState is what a ticket carries (sealed with internal/ticket). It is
// kept small — about 90 bytes, 134 sealed — whatever the client sent: a
// client certificate chain is never stored in it, only the SM3 hash of the
// client's leaf, with the verified chain kept in a bounded server-side cache
// (GmSSL's tls13_client crashes on tickets above ~450 bytes).
type sessionState struct {
	suite      uint16
	createdAt  uint64 // Unix seconds
	lifetime   uint32 // seconds
	ageAdd     uint32
	secret     [hashSize]byte // the resumption PSK
	clientAuth bool           // a client certificate was presented (and verified per policy)
	leafHash   [hashSize]byte // SM3 of the client leaf, when clientAuth
	alpn       string
}

const sessionStateVersion = 1

func (s *sessionState) marshal() ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint8(sessionStateVersion)
	b.AddUint16(s.suite)
	b.AddUint64(s.createdAt)
	b.AddUint32(s.lifetime)
	b.AddUint32(s.ageAdd)
	b.AddBytes(s.secret[:])
	if s.clientAuth {
		b.AddUint8(1)
		b.AddBytes(s.leafHash[:])
	} else {
		b.AddUint8(0)
	}
	if len(s.alpn) > 255 {
		s.alpn = ""
	}
	addU8Bytes(&b, []byte(s.alpn))
	return b.Bytes()
}

func (s *sessionState) unmarshal(data []byte) bool {
	*s = sessionState{}
	in := cryptobyte.String(data)
	var v, flag uint8
	var alpn []byte
	if !in.ReadUint8(&v) || v != sessionStateVersion || !in.ReadUint16(&s.suite) || !in.ReadUint64(&s.createdAt) ||
		!in.ReadUint32(&s.lifetime) || !in.ReadUint32(&s.ageAdd) || !in.CopyBytes(s.secret[:]) || !in.ReadUint8(&flag) {
		return false
	}
	switch flag {
	case 0:
	case 1:
		s.clientAuth = true
		if !in.CopyBytes(s.leafHash[:]) {
			return false
		}
	default:
		return false
	}
	if !in.ReadUint8LengthPrefixed((*cryptobyte.String)(&alpn)) || !in.Empty() {
		return false
	}
	s.alpn = string(alpn)
	return cipherSuiteByID(s.suite) != nil
}

// peerChains is the server-side cache of verified client chains, keyed by
// the SM3 hash of the client leaf that tickets carry. On a miss (another
// instance issued the ticket, or eviction) the resumed connection still
// counts as client-authenticated but reports no certificates.
type peerChains struct {
	certs  []*smx509.Certificate
	chains [][]*smx509.Certificate
}

var clientChainCache = lru.New[[hashSize]byte, peerChains](4096, maxTicketLifetime)

func leafHash(der []byte) [hashSize]byte { return sm3.Sum(der) }

func unixTime(t time.Time) uint64 {
	if t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}
