// Package dialable says which IP addresses name a host to connect to:
// the upstream dialers refuse the others, and the configuration refuses
// them as targets. It also says which name a TLS dial of an address
// verifies, for the upstreams' dialers and the key servers' alike.
package dialable

import (
	"net"
	"net/netip"
)

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

// ServerName is the name a TLS dial of the address addr (host:port, or a
// host) sends (SNI) and verifies the certificate against: serverName, or
// else addr's host. An IPv6 address's zone (fe80::1%eth0, RFC 6874) names
// the local interface to reach it by, not the peer: the certificate holds
// the address without it (an IP SAN has no zone), and a name with a % is
// no DNS name either, so verifying against it always failed.
func ServerName(serverName, addr string) string {
	if serverName != "" {
		return serverName
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() != "" {
		return a.WithZone("").String()
	}
	return host
}
