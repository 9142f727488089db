package dialable

import (
	"net/netip"
	"testing"
)

func TestUnusable(t *testing.T) {
	for addr, want := range map[string]bool{
		"0.0.0.0": true, "::": true, "::ffff:0.0.0.0": true, "224.0.0.1": true, "ff02::1": true,
		"255.255.255.255": true, "::ffff:255.255.255.255": true,
		"127.0.0.1": false, "::1": false, "10.0.0.1": false, "2001:db8::1": false, "192.0.2.255": false,
	} {
		if got := Unusable(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Unusable(%s) = %v, want %v", addr, got, want)
		}
	}
}
