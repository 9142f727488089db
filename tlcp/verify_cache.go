package tlcp

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/validity"
)

// Client-chain verification cache.
//
// A mutual-auth server sees the same client certificate lists again and
// again, and building and checking their chains (one SM2 verification per
// CA signature, per certificate of the pair) costs more than the rest of the
// server's handshake work apart from its own private-key operation. A
// successful verification is therefore remembered under the SM3 of the
// exact certificate list (DER, in order) and the role of the second
// certificate, together with the root pool it was verified against and the
// time window in which every certificate of the verified chains is valid.
//
// A hit needs the same DER list, the same Config.ClientCAs pool (by
// identity: like crypto/tls, a Config and its pools must not be modified
// once in use), and the current time inside the window; entries also expire
// after chainCacheTTL and the cache is bounded. Only successes are cached.
// The CertificateVerify signature, which proves possession of the key in
// this handshake, is always verified; key-usage checks and
// VerifyPeerCertificate also run on every handshake.

const (
	chainCacheSize = 1024
	chainCacheTTL  = 10 * time.Minute
)

type chainCacheKey [sm3.Size]byte

type verifiedChainEntry struct {
	roots *smx509.CertPool
	// chains verified for the signing certificate.
	chains [][]*smx509.Certificate
	// every certificate of chains[0] and of the encryption certificate's
	// first chain is valid in [notBefore, notAfter].
	notBefore, notAfter time.Time
}

var verifiedChainCache = lru.New[chainCacheKey, verifiedChainEntry](chainCacheSize, chainCacheTTL)

func clientChainKey(raw [][]byte, hasEnc bool) chainCacheKey {
	h := sm3.New()
	var n [4]byte
	role := byte(0)
	if hasEnc {
		role = 1
	}
	h.Write([]byte{'c', 'l', 'i', 'e', 'n', 't', role})
	for _, r := range raw {
		binary.BigEndian.PutUint32(n[:], uint32(len(r)))
		h.Write(n[:])
		h.Write(r)
	}
	var k chainCacheKey
	h.Sum(k[:0])
	return k
}

// verifyClientChains verifies the client's signing certificate (certs[0],
// the others as intermediates) and, when enc is set (certs[1]), the
// encryption certificate (certs[2:] as intermediates) against roots at now
// for client authentication. It returns the signing certificate's chains.
// encFailed tells which certificate err is about.
func verifyClientChains(raw [][]byte, certs []*smx509.Certificate, enc *smx509.Certificate, roots *smx509.CertPool, now time.Time) (chains [][]*smx509.Certificate, encFailed bool, err error) {
	return verifyClientChainsKeyed(clientChainKey(raw, enc != nil), certs, enc, roots, now)
}

// verifyClientChainsKeyed is verifyClientChains with the chain's cache key
// already computed (clientChainKey of the raw certificates).
func verifyClientChainsKeyed(key chainCacheKey, certs []*smx509.Certificate, enc *smx509.Certificate, roots *smx509.CertPool, now time.Time) (chains [][]*smx509.Certificate, encFailed bool, err error) {
	if e, ok := verifiedChainCache.Get(key); ok && e.roots == roots && !now.Before(e.notBefore) && !now.After(e.notAfter) {
		return copyChains(e.chains), false, nil
	}
	sign := certs[0]
	chains, err = verifyChain(sign, certs[1:], roots, "", now, smx509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, false, err
	}
	if len(chains) == 0 {
		return nil, false, errors.New("no chain")
	}
	nb, na := validity.Of(chains[0])
	if enc != nil {
		encChains, err := verifyChain(enc, certs[2:], roots, "", now, smx509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, true, err
		}
		if len(encChains) == 0 {
			return nil, true, errors.New("no chain")
		}
		nb, na = validity.Narrow(encChains[0], nb, na)
	}
	verifiedChainCache.Put(key, verifiedChainEntry{roots: roots, chains: copyChains(chains), notBefore: nb, notAfter: na})
	return chains, false, nil
}

// copyChains copies the slices (not the certificates, which are never
// modified) so a caller may not change a cached entry.
func copyChains(chains [][]*smx509.Certificate) [][]*smx509.Certificate {
	out := make([][]*smx509.Certificate, len(chains))
	for i, ch := range chains {
		out[i] = append([]*smx509.Certificate(nil), ch...)
	}
	return out
}
