package tls13sm

import (
	"bytes"
	"slices"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/asciifold"
	"github.com/gmproxy/gmproxy/internal/lru"
)

// What a ticket is bound to. One ticket key set is commonly shared by all
// the sites of a server (and by several servers), so a ticket must carry
// what it was issued for and be refused elsewhere: the server identity
// (siteBinding) and, for a session with a client certificate, the
// client-auth settings it was checked under (clientAuthBinding). Both are
// SM3 truncated to bindingSize bytes, which keeps tickets within
// maxTicketSize; they are inside the sealed state, so a client can neither
// read nor change them.

// bindingSize is the length of the site and client-auth bindings.
const bindingSize = 16

// Domain-separation labels of the bindings.
const (
	siteBindingLabel       = "gmproxy tls13sm ticket site\x00"
	clientAuthBindingLabel = "gmproxy tls13sm ticket client auth\x00"
	fingerprintLabel       = "gmproxy tls13sm client CAs\x00"
)

// maxBoundName is the longest server name hashed from a stack buffer
// (a DNS name has at most 253 characters); longer ones are hashed in full
// through a heap digest.
const maxBoundName = 255

// siteBinding is the server identity a ticket belongs to: the server name
// of the ClientHello, lower-cased without a final dot (host names compare
// without regard to case, RFC 4343), and the config's certificate (the
// first of Certificates; see Config.Certificates). It is the same for a
// full handshake that issues a ticket and for the resumption that offers
// it, which picks no certificate.
//
// A resumption that also issues a ticket needs it twice: it is computed
// once per handshake.
func (hs *serverHandshakeState) siteBinding() [bindingSize]byte {
	if !hs.siteKnown {
		hs.site, hs.siteKnown = hs.computeSiteBinding(), true
	}
	return hs.site
}

func (hs *serverHandshakeState) computeSiteBinding() (b [bindingSize]byte) {
	name := hs.hello.serverName
	if n := len(name); n > 0 && name[n-1] == '.' {
		name = name[:n-1]
	}
	cert := hs.config.certificateHash()
	var sum [hashSize]byte
	if len(name) <= maxBoundName {
		var buf [len(siteBindingLabel) + hashSize + maxBoundName]byte
		n := copy(buf[:], siteBindingLabel)
		n += copy(buf[n:], cert[:])
		for i := 0; i < len(name); i++ {
			buf[n] = asciifold.Lower(name[i])
			n++
		}
		sum = sm3.Sum(buf[:n])
	} else {
		h := sm3.New()
		h.Write([]byte(siteBindingLabel))
		h.Write(cert[:])
		lower := []byte(name)
		for i, c := range lower {
			lower[i] = asciifold.Lower(c) // not bytes.ToLower: Unicode folds "K" (Kelvin) to "k"
		}
		h.Write(lower)
		h.Sum(sum[:0])
	}
	copy(b[:], sum[:])
	return b
}

// certHashes caches SM3 of server leaf certificates by the address of
// their DER (certificates are not modified once configured).
var certHashes = lru.New[*byte, [hashSize]byte](256, 0)

// certificateHash is SM3 of the leaf of the config's first certificate
// (zero without one).
func (c *Config) certificateHash() [hashSize]byte {
	if len(c.Certificates) == 0 || len(c.Certificates[0].Certificate) == 0 || len(c.Certificates[0].Certificate[0]) == 0 {
		return [hashSize]byte{}
	}
	der := c.Certificates[0].Certificate[0]
	h, ok := certHashes.Get(&der[0])
	if !ok {
		h = sm3.Sum(der)
		certHashes.Put(&der[0], h)
	}
	return h
}

// clientAuthBinding identifies the client-auth settings a client
// certificate is checked under: ClientAuth and the contents of ClientCAs
// (ClientCAsFingerprint, or the CA subject names without it). A reload that
// removes a CA or changes the policy changes it, and tickets carrying a
// client certificate checked under the old settings are refused unless the
// chain verifies again (reverifyClient).
func (c *Config) clientAuthBinding() (b [bindingSize]byte) {
	fp := c.ClientCAsFingerprint
	if len(fp) == 0 {
		fp = subjectsFingerprint(c.ClientCAs)
	}
	var sum [hashSize]byte
	if len(fp) <= 2*hashSize {
		var buf [len(clientAuthBindingLabel) + 1 + 2*hashSize]byte
		n := copy(buf[:], clientAuthBindingLabel)
		buf[n] = byte(c.ClientAuth)
		n++
		n += copy(buf[n:], fp)
		sum = sm3.Sum(buf[:n])
	} else {
		h := sm3.New()
		h.Write([]byte(clientAuthBindingLabel))
		h.Write([]byte{byte(c.ClientAuth)})
		h.Write(fp)
		h.Sum(sum[:0])
	}
	copy(b[:], sum[:])
	return b
}

// CertificatesFingerprint returns a digest of certs (SM3 over their DER,
// in any order) for Config.ClientCAsFingerprint.
func CertificatesFingerprint(certs []*smx509.Certificate) []byte {
	sums := make([][hashSize]byte, 0, len(certs))
	for _, c := range certs {
		if c != nil {
			sums = append(sums, sm3.Sum(c.Raw))
		}
	}
	return fingerprintOf(sums)
}

// subjectsFingerprint is the fallback fingerprint of a pool: its subject
// names (a pool does not expose its certificates).
func subjectsFingerprint(pool *smx509.CertPool) []byte {
	if pool == nil {
		return nil
	}
	subjects := pool.Subjects() //nolint:staticcheck // the names are all a pool shows
	sums := make([][hashSize]byte, 0, len(subjects))
	for _, s := range subjects {
		sums = append(sums, sm3.Sum(s))
	}
	return fingerprintOf(sums)
}

// fingerprintOf hashes a set of digests, sorted so the order of the
// certificates does not matter.
func fingerprintOf(sums [][hashSize]byte) []byte {
	slices.SortFunc(sums, func(a, b [hashSize]byte) int { return bytes.Compare(a[:], b[:]) })
	h := sm3.New()
	h.Write([]byte(fingerprintLabel))
	for _, s := range sums {
		h.Write(s[:])
	}
	return h.Sum(nil)
}

// rawCerts is the DER of certs.
func rawCerts(certs []*smx509.Certificate) [][]byte {
	raw := make([][]byte, len(certs))
	for i, c := range certs {
		raw[i] = c.Raw
	}
	return raw
}

// resumedClient returns what this process still has of a resumed
// session's client chain (cached false when nothing), and whether the
// session's client certificate still stands under the current client-auth
// settings. When those differ from the ones it was checked under (a reload
// changed ClientAuth or ClientCAs), the chain, if this process still has
// it, is verified again against today's ClientCAs, as TLCP does for every
// resumption (the VerifyPeerCertificate hook runs on it either way); on success id carries the current binding (the next ticket is
// bound to it). Without the chain (another instance issued the ticket, a
// restart, an eviction) the session cannot be vouched for: ok is false and
// the client makes a full handshake.
func (hs *serverHandshakeState) resumedClient(id *clientIdentity) (pc peerChains, cached, ok bool) {
	if !id.presented {
		return peerChains{}, false, true
	}
	pc, cached = clientChainCache.Get(id.leafHash)
	cfg := hs.config
	cur := cfg.clientAuthBinding()
	if id.auth == cur {
		if cfg.VerifyPeerCertificate == nil || !id.verified {
			return pc, cached, true
		}
		// The hook's policy may refuse today what it passed when the
		// ticket was issued (a revocation list gone stale since): it
		// runs on every resumption, as after TLCP's and crypto/tls's.
		if !cached || cfg.VerifyPeerCertificate(rawCerts(pc.certs), pc.chains) != nil {
			return peerChains{}, false, false
		}
		return pc, cached, true
	}
	verify := cfg.ClientAuth == VerifyClientCertIfGiven || cfg.ClientAuth == RequireAndVerifyClientCert
	if !cached || !id.verified || !verify || cfg.ClientCAs == nil || len(pc.certs) == 0 {
		return peerChains{}, false, false
	}
	certs, chains, _, err := verifyChain(cfg, rawCerts(pc.certs), false, true)
	if err != nil || len(chains) == 0 {
		return peerChains{}, false, false
	}
	id.auth = cur
	pc = peerChains{certs: certs, chains: chains}
	clientChainCache.Put(id.leafHash, pc)
	return pc, true, true
}
