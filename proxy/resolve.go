package proxy

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// A target given by host name is expanded into one target per address
// the name resolves to, as nginx's server with resolve and a Kubernetes
// headless service are used: dialled by name, every connection went to
// the first address Go's dialer got (the others served nothing), and one
// address that stopped answering took the whole name out.
const (
	// MaxAddrsPerName bounds the targets one name expands into: each has
	// its own health state, pool and metrics series.
	MaxAddrsPerName = 64
	// lookupTimeout bounds one resolution of a target's name.
	lookupTimeout = 5 * time.Second
)

// LookupFunc resolves a host name into its addresses (net.Resolver's
// LookupNetIP with network "ip").
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

func defaultLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// dialTo carries, in a dial's context, the address of the target to
// connect to when the address dialled is the target's name (byName).
type dialTo struct{}

// DialAddr returns the address a dial of addr must connect to: addr,
// unless the proxy dials a target given by name, when the encryption
// layers see the name (SNI, certificate check, session cache) and the
// connection goes to the target's resolved address. Dialers plugged in
// with UpstreamConfig.DialTLSContext connect to DialAddr(ctx, addr).
func DialAddr(ctx context.Context, addr string) string {
	if a, ok := ctx.Value(dialTo{}).(string); ok {
		return a
	}
	return addr
}

// byName makes dial of a resolved target's address dial its name, with
// the address in the context for the connection (DialAddr). Only the
// upstreams with targets given by name have it.
func byName(names map[string]string, dial DialFunc) DialFunc {
	if dial == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if name, ok := names[addr]; ok {
			ctx = context.WithValue(ctx, dialTo{}, addr)
			addr = name
		}
		return dial(ctx, network, addr)
	}
}

// resolveTarget returns the addresses (as host:port) that the target
// address hostport, a name, resolves to: unique, at most MaxAddrsPerName,
// in the resolver's order. It returns nil and false when hostport is an
// IP address (which is dialled as it is).
func resolveTarget(ctx context.Context, lookup LookupFunc, hostport string) (addrs []string, isName bool, err error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, false, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	ips, err := lookup(ctx, host)
	if err != nil {
		return nil, true, err
	}
	seen := make(map[netip.Addr]bool, len(ips))
	for _, ip := range ips {
		ip = ip.Unmap()
		if !ip.IsValid() || seen[ip] {
			continue
		}
		seen[ip] = true
		addrs = append(addrs, net.JoinHostPort(ip.String(), port))
		if len(addrs) == MaxAddrsPerName {
			break
		}
	}
	if len(addrs) == 0 {
		return nil, true, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, true, nil
}
