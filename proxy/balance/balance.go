// Package balance names the policies with which the proxy picks a target
// in an upstream. The proxy package implements them; conf validates
// upstreams' balance against these names. It imports nothing so that conf
// can use it without pulling in the proxy.
package balance

// The balancing policies.
const (
	RoundRobin = "round_robin" // smooth weighted round robin (the default)
	LeastConn  = "least_conn"  // fewest requests in flight, weighted
	IPHash     = "ip_hash"     // consistent hash of the client address
	Hash       = "hash"        // consistent hash of a request header or cookie
)

// Names returns every policy.
func Names() []string { return []string{RoundRobin, LeastConn, IPHash, Hash} }

// MaxWeight bounds a target's weight: least_conn compares requests in
// flight times weights, which must not overflow (weights count relative
// to each other; nginx's stay in the hundreds).
const MaxWeight = 1 << 20
