// Package upstreamproto names the protocols that the proxy speaks to an
// upstream's targets. The proxy package implements them; conf validates
// upstreams' protocol against these names. It imports nothing so that conf
// can use it without pulling in the proxy.
package upstreamproto

// The upstream protocols.
const (
	HTTP    = "http"    // HTTP/1.1 in clear (the default)
	H2C     = "h2c"     // HTTP/2 in clear, with prior knowledge
	H2      = "h2"      // HTTP/2 over TLS (crypto/tls, ALPN h2 or http/1.1)
	TLS     = "tls"     // HTTP/1.1 over TLS (crypto/tls), HTTP/2 when ALPN picks it
	TLCP    = "tlcp"    // HTTP/1.1 over TLCP
	TLS13SM = "tls13sm" // HTTP/1.1 over TLS 1.3 with the RFC 8998 SM suites
)

// Names returns every protocol.
func Names() []string { return []string{HTTP, H2C, H2, TLS, TLCP, TLS13SM} }

// Encrypted reports whether protocol p runs over TLS, TLCP or TLS 1.3-SM
// (and so takes TLS settings).
func Encrypted(p string) bool { return p != HTTP && p != H2C && p != "" }
