package wire

import (
	"net/netip"
	"strings"
)

// SNIHostName returns what a client sends as server_name's host_name for
// the name it connects to (RFC 6066 §3): "" for an IP address literal,
// bracketed or not, an IPv6 zone included ("Literal IPv4 and IPv6
// addresses are not permitted"), and a DNS name without its trailing
// dots ("The hostname is represented ... without a trailing dot").
func SNIHostName(name string) string {
	if name == "" || name[0] == '[' {
		return ""
	}
	name = strings.TrimRight(name, ".")
	if _, err := netip.ParseAddr(name); err == nil {
		return ""
	}
	return name
}
