// Package family names the protocol families that gmproxy's listeners
// accept. Package frontdoor serves them; the configuration
// (listeners' protocols) and the metrics "protocol" label use these names.
// It imports nothing so that conf can validate against it without pulling
// in the protocol stacks.
package family

// The protocol families.
const (
	TLCP    = "tlcp"    // TLCP / NTLS 1.1, GB/T 38636-2020
	TLS13SM = "tls13sm" // TLS 1.3 with the RFC 8998 SM suites
	TLS     = "tls"     // ordinary TLS through crypto/tls
)

// Names returns every family, in the order a listener lists them by default.
func Names() []string { return []string{TLCP, TLS13SM, TLS} }

// What a listener does with a TLS-record ClientHello that offers TLCP
// suites but nothing its site can answer in TLS (the 360-browser pattern):
// the values of listeners' tlcp_suites_in_tls_hello (frontdoor's
// TLCPInTLSPolicy).
const (
	TLCPInTLSReject = "reject" // handshake_failure, so that the browser retries in TLCP
	TLCPInTLSAnswer = TLCP     // answer the hello in TLCP
)

// TLCPInTLSPolicies returns every tlcp_suites_in_tls_hello value.
func TLCPInTLSPolicies() []string { return []string{TLCPInTLSReject, TLCPInTLSAnswer} }
