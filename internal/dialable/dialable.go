// Package dialable says which IP addresses name a host to connect to:
// the upstream dialers refuse the others, and the configuration refuses
// them as targets.
package dialable

import "net/netip"

// Unusable reports whether ip names no host to connect to: 0.0.0.0 or ::
// (what DNS filters and sinkholes answer for a blocked name, and which a
// connect on Linux takes to this host, where the proxy's own listeners
// are), a multicast address or the IPv4 broadcast address. IPv4-mapped
// addresses are taken for their IPv4 address. An operator who means this
// host writes 127.0.0.1.
func Unusable(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
