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
