// Package authority checks the authority of an HTTP request (a Host
// field, an absolute-form target's authority, an HTTP/2 :authority) for
// what gmproxy takes: one host a site could have, and a port.
package authority

import (
	"net/netip"
	"strings"
)

// Valid reports whether h (a Host field, an absolute-form
// target's authority or an h2 :authority) names a host as a site could:
// a DNS name or IPv4 address (letters, digits, '-', '.', '_'; no empty
// label, a final dot allowed) or an IPv6
// literal in brackets, then optionally ':' and a port of at most five
// digits (RFC 9110 §7.2, RFC 3986 §3.2.2-3.2.3). http.ValidHostHeader lets
// through what a reg-name may hold and more: "a.example:1:1" (routed as
// "a.example:1", read as "a.example" by backends that cut at the first
// colon), "a.example,b.example" (a list to backends that split
// X-Forwarded-Host), quotes and angle brackets. Such a request is a 400
// (RFC 9112 §3.2).
func Valid(h string) bool {
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		if _, err := netip.ParseAddr(h[1:end]); err != nil || !strings.Contains(h[1:end], ":") {
			return false
		}
		host, port = "", h[end+1:]
		if port != "" {
			if port[0] != ':' {
				return false
			}
			port = port[1:]
		}
	} else {
		if i := strings.IndexByte(h, ':'); i >= 0 {
			host, port = h[:i], h[i+1:]
		}
		if host == "" {
			return false
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return false
			}
		}
		// No empty label (RFC 1035 §3.1), but for the root's after a
		// final dot: "a.example.." or "a..example" is no site's name,
		// yet a backend that trims or merges the dots reads it as one,
		// past the checks that compare it with the sites' names.
		if host[0] == '.' || strings.Contains(host, "..") {
			return false
		}
	}
	if len(port) > 5 {
		return false
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return false
		}
	}
	return true
}
