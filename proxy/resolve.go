package proxy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gmproxy/gmproxy/internal/dialable"
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
	// DefaultResolveInterval is the default of
	// UpstreamConfig.ResolveInterval.
	DefaultResolveInterval = 30 * time.Second
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
func (u *Upstream) byName(dial DialFunc) DialFunc {
	if dial == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ts := u.set.Load()
		if err, ok := ts.refused[addr]; ok {
			return nil, &dialError{err}
		}
		if name, ok := ts.nameOf(addr); ok {
			ctx = context.WithValue(ctx, dialTo{}, addr)
			addr = name
		}
		return dial(ctx, network, addr)
	}
}

// targetSet is the targets of an upstream at one time.
type targetSet struct {
	all      []*Target // primaries first, then backups
	nPrimary int
	// names maps the addresses of targets resolved from a name to the
	// name (host:port); nil when there are none.
	names map[string]string
	// removed maps likewise the addresses of the set this one replaced
	// that it left out: a request that picked one just before may dial
	// it after (once a connection slot frees), still by name. Only the
	// last refresh's are kept, which bounds them.
	removed map[string]string
	// refused holds the targets given by a name that answered only
	// addresses that are no target's (dialable.Unusable), with that error:
	// dialled by name, the system resolver would give the dialer the
	// same addresses, and a connect to 0.0.0.0 reaches this host. Their
	// dials fail until the name resolves to usable addresses.
	refused map[string]error
}

// nameOf returns the name addr was resolved from, if it was.
func (ts *targetSet) nameOf(addr string) (string, bool) {
	if name, ok := ts.names[addr]; ok {
		return name, true
	}
	name, ok := ts.removed[addr]
	return name, ok
}

// resolve makes the upstream's targets of its specs, resolving the
// names among them. The targets of prev (the set in force) that remain
// are kept as they are (health, in-flight count, round robin weight); a
// name that fails to resolve keeps its addresses in prev, or, without
// prev, is dialled by name.
func (u *Upstream) resolve(ctx context.Context, prev *targetSet) *targetSet {
	kept := map[string][]*Target{} // label → prev's targets
	if prev != nil {
		for _, t := range prev.all {
			kept[t.label] = append(kept[t.label], t)
		}
	}
	target := func(addr string, tc TargetConfig) *Target {
		label := addr
		if addr != tc.Address {
			label = tc.Address + "/" + addr
		}
		if q := kept[label]; len(q) > 0 {
			kept[label] = q[1:]
			return q[0]
		}
		if addr != tc.Address {
			if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().IsLinkLocalUnicast() {
				// Cloud metadata services answer there
				// (169.254.169.254): a target, as the name says, but
				// worth a word when it appears.
				u.logger.Warn("upstream target name resolved to a link-local address", "target", tc.Address, "address", addr)
			}
		}
		h := fnv.New64a()
		h.Write([]byte(addr))
		t := &Target{Addr: addr, Name: tc.Address, label: label, Weight: intOr(tc.Weight, 1), Backup: tc.Backup, up: u, hashSeed: mix64(h.Sum64()), inflight: new(atomic.Int64)}
		if u.passive.MaxFails > 0 {
			t.fails = make([]int64, u.passive.MaxFails)
		}
		return t
	}
	ts := &targetSet{}
	var backups []*Target
	seen := map[string]bool{}
	answers := u.lookupAll(ctx)
	for i, tc := range u.specs {
		if !answers[i].isName {
			// Before any name's: a name listed first took a listed
			// address for itself, which was then two targets, the
			// listed one dialled by the name.
			seen[tc.Address] = true
		}
	}
	for i, tc := range u.specs {
		addrs, isName, err := answers[i].addrs, answers[i].isName, answers[i].err
		switch {
		case !isName:
			addrs = []string{tc.Address}
		case err == nil && prev == nil:
			u.logger.Info("upstream target name resolved", "target", tc.Address, "addresses", addrs)
		case err != nil && prev != nil:
			u.logger.Warn("upstream target name not resolved: its addresses are kept", "target", tc.Address, "error", err)
			if ro, ok := u.obs.(UpstreamResolveObserver); ok {
				ro.UpstreamResolveFailed(u.name)
			}
			addrs = nil
			for _, t := range prev.all {
				if t.Name == tc.Address {
					addrs = append(addrs, t.Addr)
				}
			}
			// Kept dialled by name (unresolved at start): refused as
			// long as its answers are no target's, or were.
			if e, ok := prev.refused[tc.Address]; (ok || isUnusableAnswer(err)) && slices.Contains(addrs, tc.Address) {
				if !ok {
					e = err
				}
				ts.refuse(tc.Address, e)
			}
		case err != nil:
			if isUnusableAnswer(err) {
				u.logger.Warn("upstream target name resolved to no usable address: not dialled until it does", "target", tc.Address, "error", err)
				ts.refuse(tc.Address, err)
			} else {
				u.logger.Warn("upstream target name not resolved: dialled by name", "target", tc.Address, "error", err)
			}
			if ro, ok := u.obs.(UpstreamResolveObserver); ok {
				ro.UpstreamResolveFailed(u.name)
			}
			addrs = []string{tc.Address}
		}
		for _, a := range addrs {
			if a != tc.Address {
				if seen[a] {
					continue // two names of one address, or a name of a listed one: one target
				}
				if ts.names == nil {
					ts.names = make(map[string]string)
				}
				ts.names[a] = tc.Address
			}
			seen[a] = true
			t := target(a, tc)
			if tc.Backup {
				backups = append(backups, t)
			} else {
				ts.all = append(ts.all, t)
			}
		}
	}
	ts.nPrimary = len(ts.all)
	ts.all = append(ts.all, backups...)
	return ts
}

// refuse makes the dials of the target given by name fail with err.
func (ts *targetSet) refuse(name string, err error) {
	if ts.refused == nil {
		ts.refused = make(map[string]error)
	}
	ts.refused[name] = err
}

// unusableAnswer is resolveTarget's error for a name whose answer held
// only addresses that are no target's (dialable.Unusable).
type unusableAnswer struct{ *net.DNSError }

func isUnusableAnswer(err error) bool {
	var ua unusableAnswer
	return errors.As(err, &ua)
}

// hasNames reports whether a target of targets is given by a host name,
// not an IP address.
func hasNames(targets []TargetConfig) bool {
	for _, tc := range targets {
		host, _, err := net.SplitHostPort(tc.Address)
		if _, perr := netip.ParseAddr(host); err == nil && perr != nil {
			return true
		}
	}
	return false
}

// lookupAnswer is resolveTarget's answer for one target.
type lookupAnswer struct {
	addrs  []string
	isName bool
	err    error
}

// lookupAll resolves the targets of u at once, a lookup for each name
// (each bounded by lookupTimeout): one after another, a resolver that
// does not answer held a start or reload for lookupTimeout per name.
func (u *Upstream) lookupAll(ctx context.Context) []lookupAnswer {
	answers := make([]lookupAnswer, len(u.specs))
	var wg sync.WaitGroup
	for i, tc := range u.specs {
		a := &answers[i]
		if !u.named {
			a.addrs, a.isName, a.err = resolveTarget(ctx, u.lookup, tc.Address, u.logger)
			continue
		}
		wg.Go(func() { a.addrs, a.isName, a.err = resolveTarget(ctx, u.lookup, tc.Address, u.logger) })
	}
	wg.Wait()
	return answers
}

// startRefresh resolves the names of u's targets again every
// resolveEvery, until u is closed or retired.
func (u *Upstream) startRefresh() {
	if !u.named || u.resolveEvery <= 0 {
		return
	}
	u.healthWG.Add(1)
	go func() {
		defer u.healthWG.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-u.stopProbes
			cancel()
		}()
		tick := time.NewTicker(u.resolveEvery)
		defer tick.Stop()
		for {
			select {
			case <-u.stopProbes:
				return
			case <-tick.C:
			}
			u.refresh(ctx)
		}
	}()
}

// refresh resolves the names of u's targets again and puts the new set
// in force when it differs: the requests in flight to a removed address
// end as they would have, and the targets that remain keep their state
// and pooled connections.
func (u *Upstream) refresh(ctx context.Context) {
	u.drainIdle()
	prev := u.set.Load()
	ts := u.resolve(ctx, prev)
	if ctx.Err() != nil || sameTargets(prev, ts) && len(prev.refused) == len(ts.refused) {
		return
	}
	if ts.nPrimary == 0 {
		// Only the backups' names resolved to anything: cannot happen
		// (a failed name keeps its addresses), but a set without
		// primaries would leave pick without candidates.
		return
	}
	for _, t := range prev.all {
		if t.Addr != t.Name && !slices.Contains(ts.all, t) {
			if ts.removed == nil {
				ts.removed = make(map[string]string)
			}
			ts.removed[t.Addr] = t.Name
		}
	}
	u.reportMu.Lock()
	u.set.Store(ts)
	now := make(map[*Target]bool, len(ts.all))
	var added []string
	for _, t := range ts.all {
		now[t] = true
		if !slices.Contains(prev.all, t) {
			added = append(added, t.Addr)
			if !u.quiet.Load() {
				u.obs.UpstreamHealth(u.name, t.label, !t.reported.Load())
			}
		}
	}
	var removed []string
	var gone []*Target
	for _, t := range prev.all {
		if !now[t] {
			t.gone.Store(true)
			gone = append(gone, t)
			removed = append(removed, t.Addr)
			if ro, ok := u.obs.(UpstreamResolveObserver); ok && !u.quiet.Load() {
				ro.UpstreamTargetRemoved(u.name, t.label)
			}
		}
	}
	u.reportMu.Unlock()
	u.logger.Info("upstream target names resolved to other addresses", "added", added, "removed", removed)
	if len(gone) > 0 {
		u.dropIdle(gone)
	}
}

// maxDraining bounds Upstream.draining: targets removed with requests
// in flight that never end (tunnels, a shared counter a reload keeps
// busy) are given up on first, their connections left to the idle
// timeout.
const maxDraining = 4 * MaxAddrsPerName

// drainingTarget is a removed target whose pooled connections are
// closed again once it has had nothing in flight at a refresh.
type drainingTarget struct {
	t *Target
	// idleSeen: the target had nothing in flight at the last refresh
	// already; it is dropped after a second one, since a request's
	// count ends a moment before its connection is back in the pool.
	idleSeen bool
}

// dropIdle closes the pooled connections to the targets a refresh
// removed: no request picks them any more, but an idle connection stayed
// open until the idle timeout (holding a slot on a backend being taken
// out) and a request that picked the address just before reused it. The
// requests in flight on them finish: the HTTP/1.1 client closes their
// connections as they end (h1Client.gone); the Transports, which can
// only close all their idle connections (HTTP/1.1 and HTTP/2 alike, the
// other targets' too, which cost a new connection each), do so again at
// the refreshes after those requests end (drainIdle).
func (u *Upstream) dropIdle(gone []*Target) {
	for _, t := range gone {
		if u.h1 != nil {
			u.h1.closeIdleTo(t.Addr)
		}
		if t.inflight.Load() > 0 {
			u.draining = append(u.draining, drainingTarget{t: t})
		}
	}
	if n := len(u.draining) - maxDraining; n > 0 {
		u.draining = slices.Delete(u.draining, 0, n)
	}
	u.transport.CloseIdleConnections()
	u.upgrades.CloseIdleConnections()
}

// drainIdle closes the Transports' idle connections once a target in
// draining has nothing in flight, and again at the next refresh.
func (u *Upstream) drainIdle() {
	closeIdle := false
	kept := u.draining[:0]
	for _, d := range u.draining {
		if d.t.inflight.Load() == 0 {
			closeIdle = true
			if d.idleSeen {
				continue
			}
			d.idleSeen = true
		}
		kept = append(kept, d)
	}
	clear(u.draining[len(kept):])
	u.draining = kept
	if closeIdle {
		u.transport.CloseIdleConnections()
		u.upgrades.CloseIdleConnections()
	}
}

// removedAddr reports whether the last refresh removed the target of
// address addr (h1Client.gone).
func (u *Upstream) removedAddr(addr string) bool {
	_, ok := u.set.Load().removed[addr]
	return ok
}

// sameTargets reports whether a and b hold the same targets, in any
// order: resolvers answer the addresses of a name in an order that
// changes from one lookup to the next (DNS round robin, CoreDNS's
// loadbalance), which is no change to put in force and log.
func sameTargets(a, b *targetSet) bool {
	if len(a.all) != len(b.all) || a.nPrimary != b.nPrimary {
		return false
	}
	for _, t := range b.all {
		if !slices.Contains(a.all, t) {
			return false
		}
	}
	return true
}

// resolveTarget returns the addresses (as host:port) that the target
// address hostport, a name, resolves to: unique, at most MaxAddrsPerName,
// in the resolver's order, without those that name no host to connect to
// (dialable.Unusable, logged to log). It returns nil and false when hostport
// is an IP address (which is dialled as it is).
func resolveTarget(ctx context.Context, lookup LookupFunc, hostport string, log *slog.Logger) (addrs []string, isName bool, err error) {
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
	var unusable []netip.Addr
	for _, ip := range ips {
		ip = ip.Unmap()
		if !ip.IsValid() || seen[ip] {
			continue
		}
		seen[ip] = true
		if dialable.Unusable(ip) {
			unusable = append(unusable, ip)
			continue
		}
		addrs = append(addrs, net.JoinHostPort(ip.String(), port))
		if len(addrs) == MaxAddrsPerName {
			break
		}
	}
	if len(unusable) > 0 {
		log.Warn("upstream target name resolved to addresses that are no target's: left out", "target", hostport, "addresses", unusable)
	}
	if len(addrs) == 0 {
		if len(unusable) > 0 {
			return nil, true, unusableAnswer{&net.DNSError{Err: fmt.Sprintf("only addresses that are no target's %v", unusable), Name: host, IsNotFound: true}}
		}
		return nil, true, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, true, nil
}

// RefuseUnusable is the ControlContext of the upstream dialers: it
// refuses a connect to an address dialable.Unusable names. The proxy drops
// such answers from its own lookups, but a target name whose lookup
// failed at start is dialled by name, through the system resolver, whose
// later answer 0.0.0.0 (a DNS filter's for a blocked name) a connect on
// Linux takes to this host, where the proxy's own listeners are (a
// request loop when the port is theirs).
func RefuseUnusable(_ context.Context, network, address string, _ syscall.RawConn) error {
	if ap, err := netip.ParseAddrPort(address); err == nil && dialable.Unusable(ap.Addr()) {
		return fmt.Errorf("refusing to connect to %s: an address that names no host to connect to (0.0.0.0, ::, multicast, broadcast)", address)
	}
	return nil
}
