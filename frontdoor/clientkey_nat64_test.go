package frontdoor

import (
	"net"
	"net/netip"
	"testing"
)

// TestNAT64ClientsCountedByTheirIPv4Address: behind a NAT64 or SIIT-DC
// translator (RFC 6052 well-known prefix 64:ff9b::/96) an IPv6-only edge
// sees IPv4 clients as 64:ff9b::a.b.c.d; counted by /64 they would all be
// one client, and one of them at max_handshakes_per_client would refuse
// every other. Each counts as its IPv4 address; other IPv6 addresses
// still count by /64.
func TestNAT64ClientsCountedByTheirIPv4Address(t *testing.T) {
	attacker := &net.TCPAddr{IP: net.ParseIP("64:ff9b::192.0.2.7"), Port: 40000}
	victim := &net.TCPAddr{IP: net.ParseIP("64:ff9b::198.51.100.9"), Port: 40001}
	if k, _ := ClientKey(attacker); k != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("ClientKey(64:ff9b::192.0.2.7) = %s, want 192.0.2.7", k)
	}
	if k, _ := ClientKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6")}); k != netip.MustParseAddr("2001:db8:1:2::") {
		t.Errorf("ClientKey(2001:db8:1:2:3:4:5:6) = %s, want its /64", k)
	}
	cfg := &ListenerConfig{MaxHandshakesPerClient: 4}
	var tab clientTable
	for i := range 4 {
		if _, why := tab.admit(cfg, attacker); why != "" {
			t.Fatalf("handshake %d of 192.0.2.7 refused: %s", i, why)
		}
	}
	if _, why := tab.admit(cfg, attacker); why == "" {
		t.Errorf("a fifth handshake of 192.0.2.7 (via NAT64) admitted with max_handshakes_per_client 4")
	}
	if _, why := tab.admit(cfg, victim); why != "" {
		t.Errorf("another IPv4 client behind NAT64 refused (%s) because 192.0.2.7 holds max_handshakes_per_client handshakes", why)
	}
}

// TestNAT64NonGlobalNotMapped: the well-known prefix never embeds a
// non-global IPv4 address (RFC 6052 §3.1); such an address is not read as
// that IPv4 client (a forged 64:ff9b::10.0.0.1 would pass an allow route
// of 10.0.0.0/8) but counted by its /64 as other IPv6 addresses are.
func TestNAT64NonGlobalNotMapped(t *testing.T) {
	for _, s := range []string{"64:ff9b::10.0.0.1", "64:ff9b::192.168.1.1", "64:ff9b::127.0.0.1", "64:ff9b::100.64.0.1", "64:ff9b::169.254.1.1", "64:ff9b::0.0.0.0"} {
		if v4, ok := NAT64Client(netip.MustParseAddr(s)); ok {
			t.Errorf("NAT64Client(%s) = %s, want no IPv4 client", s, v4)
		}
		if k, _ := ClientKey(&net.TCPAddr{IP: net.ParseIP(s)}); k != netip.MustParseAddr("64:ff9b::") {
			t.Errorf("ClientKey(%s) = %s, want its /64", s, k)
		}
	}
	if v4, ok := NAT64Client(netip.MustParseAddr("64:ff9b::203.0.113.5")); !ok || v4 != netip.MustParseAddr("203.0.113.5") {
		t.Errorf("NAT64Client(64:ff9b::203.0.113.5) = %s, %v", v4, ok)
	}
}
