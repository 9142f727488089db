package proxy

import (
	"net/netip"
	"sync"
)

// ClientRequests counts the requests in progress of each client address
// (frontdoor.ClientKey: the IPv4 address or the IPv6 /64), for
// LimitsConfig.MaxRequestsPerClient. One table serves a listener across
// reloads, so that requests begun under the previous configuration still
// count. The zero value is ready to use.
type ClientRequests struct {
	shards [clientRequestShards]clientRequestShard
}

const clientRequestShards = 16

type clientRequestShard struct {
	mu sync.Mutex
	m  map[[16]byte]int32
	_  [40]byte // one shard per cache line
}

// shard returns the shard of the address b (netip.Addr.As16).
func (t *ClientRequests) shard(b *[16]byte) *clientRequestShard {
	return &t.shards[shardOf(b)]
}

// shardOf is the shard index of the address b (netip.Addr.As16).
func shardOf(b *[16]byte) int {
	var h byte
	for _, x := range b {
		h = h*31 + x
	}
	return int(h % clientRequestShards)
}

// acquire counts one more request of key, or returns false (nothing
// counted) when key already has max in progress.
func (t *ClientRequests) acquire(key netip.Addr, max int) bool {
	b := key.As16()
	s := t.shard(&b)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.m[b]
	if int(n) >= max {
		return false
	}
	if s.m == nil {
		s.m = map[[16]byte]int32{}
	}
	s.m[b] = n + 1
	return true
}

// release ends one request of key counted by acquire.
func (t *ClientRequests) release(key netip.Addr) {
	b := key.As16()
	s := t.shard(&b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.m[b]; n > 1 {
		s.m[b] = n - 1
	} else {
		delete(s.m, b)
	}
}

// InProgress returns the requests key has in progress.
func (t *ClientRequests) InProgress(key netip.Addr) int {
	b := key.As16()
	s := t.shard(&b)
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.m[b])
}
