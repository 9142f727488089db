package tlcp

import (
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// TestVerifiedChainCache checks that a cached client-chain verification is
// only reused for the same DER list, the same root pool and a time inside
// the certificates' validity.
func TestVerifiedChainCache(t *testing.T) {
	p := loadPKI(t)
	raw := [][]byte{p.client.SignCertificate[0], p.client.EncCertificate}
	certs, err := parseCertificates(raw)
	if err != nil {
		t.Fatal(err)
	}
	enc := certs[1]
	now := certs[0].NotBefore.Add(time.Hour)
	key := clientChainKey(raw, true)
	verifiedChainCache.Delete(key)

	chains, encFailed, err := verifyClientChains(raw, certs, enc, p.pool, now)
	if err != nil || encFailed || len(chains) == 0 {
		t.Fatalf("first verification: chains=%d encFailed=%v err=%v", len(chains), encFailed, err)
	}
	if _, ok := verifiedChainCache.Get(key); !ok {
		t.Fatal("successful verification not cached")
	}
	again, _, err := verifyClientChains(raw, certs, enc, p.pool, now)
	if err != nil || len(again) != len(chains) || again[0][0] != chains[0][0] {
		t.Fatalf("cached verification: %v", err)
	}
	again[0][0] = nil // callers get copies
	if e, _ := verifiedChainCache.Get(key); e.chains[0][0] == nil {
		t.Fatal("cached chains share slices with the caller")
	}

	tests := []struct {
		name  string
		roots *smx509.CertPool
		now   time.Time
	}{
		{"other root pool", smx509.NewCertPool(), now},
		{"before validity", p.pool, certs[0].NotBefore.Add(-time.Hour)},
		{"after validity", p.pool, certs[0].NotAfter.Add(time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := verifyClientChains(raw, certs, enc, tc.roots, tc.now); err == nil {
				t.Fatal("verification succeeded from the cache")
			}
		})
	}
	// A different certificate list (sign only) is a different entry.
	if clientChainKey(raw[:1], false) == key || clientChainKey(raw, false) == key {
		t.Fatal("cache key ignores the list or the role of the second certificate")
	}
}
