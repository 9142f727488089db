package frontdoor

import (
	"context"
	"net"
	"strings"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/asciifold"
)

// Established is what a protocol handshaker returns: the encrypted
// connection and the protocol half of its state (Family, Protocol, Cipher,
// Resumed, ALPN, ClientAuth, PeerCertificates; the server fills in the rest).
type Established struct {
	Conn  net.Conn
	State ConnState
	// Stats, if set, reports plaintext bytes and records moved so far;
	// otherwise a Conn with a Stats() record.Stats method (tlcp, tls13sm)
	// reports its own, and for others the server counts bytes itself
	// (records unknown).
	Stats func() (rx, tx, rxRecords, txRecords uint64)
}

// Handshaker runs one protocol's server handshake on conn, whose first bytes
// (the sniffed ClientHello) are replayed to it. ctx carries the handshake
// deadline. Errors may be wrapped in a *ReasonError to give a bounded reason.
type Handshaker interface {
	Handshake(ctx context.Context, conn net.Conn, hello *ClientHello) (*Established, error)
}

// HandshakerFunc adapts a function to Handshaker.
type HandshakerFunc func(ctx context.Context, conn net.Conn, hello *ClientHello) (*Established, error)

// Handshake implements Handshaker.
func (f HandshakerFunc) Handshake(ctx context.Context, conn net.Conn, hello *ClientHello) (*Established, error) {
	return f(ctx, conn, hello)
}

// Site is one virtual host: the names it answers to and a handshaker per
// protocol it has credentials for (nil when it has none).
type Site struct {
	Name string
	// ServerNames are exact host names or wildcards "*.example.cn" (one label).
	ServerNames []string
	// TLCP answers TLCP hellos (record version 01 01).
	TLCP Handshaker
	// TLCPInTLS answers a TLS-record hello carrying TLCP suites in TLCP (the
	// 360-browser pattern, tlcp Config.AllowTLSRecordHello); used only when
	// the listener's policy is TLCPInTLSAnswer.
	TLCPInTLS Handshaker
	// TLS13SM answers TLS 1.3 hellos offering RFC 8998 suites.
	TLS13SM Handshaker
	// TLS13SMStrict sends to TLS13SM only hellos that also offer sm2sig_sm3
	// and curveSM2; other hellos go to TLS.
	TLS13SMStrict bool
	// TLS answers every other TLS hello (crypto/tls, RSA/ECDSA certificates).
	TLS Handshaker
	// ClientAuthPolicy names the site's client authentication (its mode
	// and CAs; "" without one): connections carry the value their
	// handshake met (ConnState.ClientAuthPolicy), so that what serves
	// them after a reload can tell whether the site still asks the same.
	ClientAuthPolicy string
	// VerifyClient, when set, is the site's own check of a client
	// certificate its handshakes take without verifying it (client_auth
	// optional_no_ca: the protocol packages ask for one and check only the
	// client's CertificateVerify, its proof of the key). The server calls
	// it after every handshake, full or resumed (a resumed one carries the
	// session's certificates), that has a certificate, with the
	// connection's family and PeerCertificates: it returns "" when they
	// verify (ConnState.ClientAuth), else why not
	// (ConnState.ClientVerifyError).
	VerifyClient func(family string, certs []*smx509.Certificate) string
}

// Sites selects a site by SNI: exact names first, then one-label wildcards,
// then the default site.
type Sites struct {
	exact    map[string]*Site
	wildcard map[string]*Site // key: suffix after "*."
	def      *Site
	all      []*Site
}

// NewSites indexes sites. def is used when SNI is absent or matches nothing;
// nil means the first site.
func NewSites(sites []*Site, def *Site) *Sites {
	s := &Sites{exact: map[string]*Site{}, wildcard: map[string]*Site{}, def: def, all: sites}
	for _, site := range sites {
		for _, n := range site.ServerNames {
			n = NormalizeName(n)
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				if _, dup := s.wildcard[rest]; !dup {
					s.wildcard[rest] = site
				}
				continue
			}
			if _, dup := s.exact[n]; !dup {
				s.exact[n] = site
			}
		}
	}
	if s.def == nil && len(sites) > 0 {
		s.def = sites[0]
	}
	return s
}

// All returns the sites in configuration order.
func (s *Sites) All() []*Site { return s.all }

// Lookup returns the site for a server name ("" for none); nil only when
// there are no sites.
func (s *Sites) Lookup(sni string) *Site {
	if s == nil {
		return nil
	}
	if sni != "" {
		n := NormalizeName(sni)
		if site, ok := s.exact[n]; ok {
			return site
		}
		if i := strings.IndexByte(n, '.'); i > 0 {
			if site, ok := s.wildcard[n[i+1:]]; ok {
				return site
			}
		}
	}
	return s.def
}

// NormalizeName is a host name as sites are matched by it (SNI here, the
// Host header in the proxy): ASCII letters lower-cased (not Unicode: the
// Kelvin sign would become "k", so "\u212aey.example" would reach the
// site of key.example), without a final dot (a fully qualified
// "localhost." names localhost).
func NormalizeName(n string) string {
	return strings.TrimSuffix(asciifold.LowerString(n), ".")
}
