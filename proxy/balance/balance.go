// Package balance names the policies with which the proxy picks a target
// in an upstream, and the bounds of its weights, retries and passive
// health counts. The proxy package implements them; conf validates
// upstreams against these names and bounds. It imports nothing so that conf
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

// MaxTries bounds the attempts of a request or stream (retries.tries),
// the first included: each may wait a connect, handshake and response
// timeout.
const MaxTries = 8

// MaxFails bounds the failures a target may count within the failure
// window (passive max_fails): each target keeps the time of each.
const MaxFails = 1000
