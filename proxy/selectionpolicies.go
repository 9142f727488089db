package proxy

import (
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/gmproxy/gmproxy/proxy/balance"
)

// selectionPolicy picks one available target among candidates that are
// not in tried, or returns nil.
type selectionPolicy interface {
	selectTarget(u *Upstream, candidates []*Target, r *http.Request, clientIP string, tried []*Target) *Target
}

func newSelectionPolicy(uc *UpstreamConfig) (selectionPolicy, error) {
	switch uc.Balance {
	case "", balance.RoundRobin:
		return roundRobin{}, nil
	case balance.LeastConn:
		return leastConn{}, nil
	case balance.IPHash:
		return ipHash{}, nil
	case balance.Hash:
		if uc.HashHeader == "" && uc.HashCookie == "" {
			return nil, fmt.Errorf("balance hash needs hash_header or hash_cookie")
		}
		return keyHash{header: http.CanonicalHeaderKey(uc.HashHeader), cookie: uc.HashCookie}, nil
	}
	return nil, fmt.Errorf("unknown balance %q (want one of %s)", uc.Balance, strings.Join(balance.Names(), ", "))
}

// roundRobin is nginx's smooth weighted round robin: every pick adds each
// candidate's weight to its current weight, takes the largest and
// subtracts the total from it. Weights 5,1,1 give a a b a c a a, not
// a a a a a b c.
type roundRobin struct{}

func (roundRobin) selectTarget(u *Upstream, cands []*Target, _ *http.Request, _ string, tried []*Target) *Target {
	u.rrMu.Lock()
	defer u.rrMu.Unlock()
	var best *Target
	total := 0
	for _, t := range cands {
		if excluded(t, tried) || !t.available() {
			continue
		}
		t.cw += t.Weight
		total += t.Weight
		if best == nil || t.cw > best.cw {
			best = t
		}
	}
	if best != nil {
		best.cw -= total
	}
	return best
}

// leastConn picks the target with the fewest in-flight requests relative
// to its weight; ties rotate.
type leastConn struct{}

func (leastConn) selectTarget(u *Upstream, cands []*Target, _ *http.Request, _ string, tried []*Target) *Target {
	var best *Target
	var bestN int64
	n := len(cands)
	if n == 0 {
		return nil
	}
	// The modulo is taken in uint64: converted first, the count goes
	// negative (after 2^31 picks where int has 32 bits) and so would the
	// index.
	start := int(u.seq.Add(1) % uint64(n))
	for i := 0; i < n; i++ {
		t := cands[(start+i)%n]
		if excluded(t, tried) || !t.available() {
			continue
		}
		c := t.inflight.Load()
		// compare c/t.Weight < bestN/best.Weight without division
		if best == nil || c*int64(best.Weight) < bestN*int64(t.Weight) {
			best, bestN = t, c
		}
	}
	return best
}

// ipHash is a consistent hash of the client address.
type ipHash struct{}

func (ipHash) selectTarget(u *Upstream, cands []*Target, _ *http.Request, clientIP string, tried []*Target) *Target {
	return rendezvous(cands, hashString(clientIP), tried)
}

// keyHash is a consistent hash of a header or cookie; requests without
// the key fall back to round robin.
type keyHash struct {
	header, cookie string
}

func (p keyHash) selectTarget(u *Upstream, cands []*Target, r *http.Request, clientIP string, tried []*Target) *Target {
	key := ""
	if r == nil {
		return roundRobin{}.selectTarget(u, cands, r, clientIP, tried)
	}
	if p.header != "" {
		if v := r.Header[p.header]; len(v) > 0 {
			key = v[0]
		}
	}
	if key == "" && p.cookie != "" {
		if c, err := r.Cookie(p.cookie); err == nil {
			key = c.Value
		}
	}
	if key == "" {
		return roundRobin{}.selectTarget(u, cands, r, clientIP, tried)
	}
	return rendezvous(cands, hashString(key), tried)
}

// rendezvous is weighted highest-random-weight hashing: each target scores
// -weight/ln(h(key,target)) and the highest available wins, so removing a
// target only moves the keys it owned.
func rendezvous(cands []*Target, key uint64, tried []*Target) *Target {
	var best *Target
	bestScore := math.Inf(-1)
	for _, t := range cands {
		if excluded(t, tried) || !t.available() {
			continue
		}
		h := mix64(key ^ t.hashSeed)
		f := (float64(h>>11) + 0.5) / (1 << 53) // in (0,1)
		s := -float64(t.Weight) / math.Log(f)
		if s > bestScore {
			best, bestScore = t, s
		}
	}
	return best
}

// hashString is FNV-1a without allocation.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h)
}
