package frontdoor

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gmproxy/gmproxy/internal/clientshare"
)

// peerHeader is implemented by connections whose client address arrives in
// the stream itself (*proxy.ProxyConn: a PROXY protocol header). The server
// reads it, under the handshake deadline, before applying per-client limits.
type peerHeader interface {
	// ReadPeerHeader reads the header (once) and returns its error.
	ReadPeerHeader() error
}

// ClientKey is the address per-client limits count by: the IPv4 address, or
// the /64 prefix of an IPv6 address (one subscriber usually holds a whole
// /64), except that an address of the NAT64 well-known prefix
// 64:ff9b::/96 (RFC 6052, an IPv6-only edge behind a NAT64 or SIIT-DC
// translator) counts as the IPv4 client it embeds, not as one /64 of all
// of them. ok is false for addresses that are not IP (pipes, Unix
// sockets).
func ClientKey(a net.Addr) (key netip.Addr, ok bool) {
	ip, ok := ipOf(a)
	if !ok {
		return netip.Addr{}, false
	}
	return ClientKeyOf(ip), true
}

// ipOf is the IP address of a, false for addresses that are not IP.
func ipOf(a net.Addr) (netip.Addr, bool) {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return netip.Addr{}, false
	}
	return ap.Addr(), ap.Addr().IsValid()
}

// ClientKeyOf is ClientKey of a valid IP address.
func ClientKeyOf(ip netip.Addr) netip.Addr {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		if v4, ok := NAT64Client(ip); ok {
			return v4
		}
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return ip
}

// NAT64Client returns the IPv4 client an address of the NAT64 well-known
// prefix embeds (RFC 6052 §2.2: its last 32 bits); false for any other,
// and for one that embeds a non-global IPv4 address (private, shared,
// loopback...), which that prefix never carries (RFC 6052 §3.1: a
// translator drops it): read as 10.0.0.1, such a forged source would
// pass a client_ip allow route of the internal network.
func NAT64Client(ip netip.Addr) (netip.Addr, bool) {
	if !nat64WellKnown.Contains(ip.WithZone("")) {
		return netip.Addr{}, false
	}
	b := ip.As16()
	v4 := netip.AddrFrom4([4]byte(b[12:]))
	if !v4.IsGlobalUnicast() || v4.IsPrivate() || sharedAddressSpace.Contains(v4) {
		return netip.Addr{}, false
	}
	return v4, true
}

var (
	// nat64WellKnown is RFC 6052's well-known prefix, 64:ff9b::/96.
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	// sharedAddressSpace is carrier-grade NAT's (RFC 6598), not global.
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
)

// client is one client address's share of a listener: counted in this
// process's table, or in the workers' shared one (shared, in slot).
type client struct {
	key               netip.Addr
	handshakes, conns int
	shared            *clientshare.View
	slot              int
}

// clientTable counts the handshakes and connections of each client address
// while per-client limits are on. Entries are removed when both counts reach
// zero, so the table holds at most one entry per open connection.
type clientTable struct {
	mu sync.Mutex
	m  map[netip.Addr]*client
}

// admit counts a new connection (and its handshake) from addr, or returns
// the refusal reason when the client is at one of cfg's limits. It returns
// nil without limits, for addresses that are not IP and for a trusted
// proxy's (cfg.TrustedProxies).
func (t *clientTable) admit(cfg *ListenerConfig, addr net.Addr) (*client, string) {
	if cfg.MaxHandshakesPerClient <= 0 && cfg.MaxConnsPerClient <= 0 {
		return nil, ""
	}
	ip, ok := ipOf(addr)
	if !ok || cfg.trustedProxy(ip) {
		return nil, ""
	}
	key := ClientKeyOf(ip)
	if sh := cfg.SharedClients; sh != nil {
		switch slot, v := sh.Admit(cfg.Name, key, cfg.MaxConnsPerClient, cfg.MaxHandshakesPerClient); v {
		case clientshare.Admitted:
			return &client{shared: sh, slot: slot}, ""
		case clientshare.TooManyConns:
			return nil, RefuseMaxConnectionsPerClient
		case clientshare.TooManyHandshakes:
			return nil, RefuseMaxHandshakesPerClient
		}
		// No room in the shared table: counted here alone.
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[key]
	switch {
	case c == nil:
		if t.m == nil {
			t.m = map[netip.Addr]*client{}
		}
		c = &client{key: key}
		t.m[key] = c
	case cfg.MaxConnsPerClient > 0 && c.conns >= cfg.MaxConnsPerClient:
		return nil, RefuseMaxConnectionsPerClient
	case cfg.MaxHandshakesPerClient > 0 && c.handshakes >= cfg.MaxHandshakesPerClient:
		return nil, RefuseMaxHandshakesPerClient
	}
	c.handshakes++
	c.conns++
	return c, ""
}

// release gives back c's handshake and/or connection (nil c: nothing).
func (t *clientTable) release(c *client, handshake, conn bool) {
	if c == nil {
		return
	}
	if c.shared != nil {
		c.shared.Release(c.slot, handshake, conn)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if handshake {
		c.handshakes--
	}
	if conn {
		c.conns--
	}
	if c.handshakes == 0 && c.conns == 0 {
		delete(t.m, c.key)
	}
}

// len returns the number of clients counted.
func (t *clientTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// byteBudget charges the buffers of one pending handshake against the
// listener's bound on bytes held by pending handshakes.
type byteBudget struct {
	used *atomic.Int64
	max  int64
	held int64
}

// take charges n more bytes; false (nothing charged) when that would cross
// the bound. A nil budget takes everything.
func (b *byteBudget) take(n int) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.used.Add(int64(n)) > b.max {
		b.used.Add(-int64(n))
		return false
	}
	b.held += int64(n)
	return true
}

// release gives back everything taken.
func (b *byteBudget) release() {
	if b == nil {
		return
	}
	b.used.Add(-b.held)
	b.held = 0
}
