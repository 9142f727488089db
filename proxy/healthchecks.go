package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// Health checking has two halves, as in Caddy's healthchecks.go:
//
//   - passive: Upstream.fail records transport failures (and configured bad
//     statuses) seen by real requests; MaxFails of them within FailWindow
//     take the target out for Cooldown (upstreams.go);
//   - active: a goroutine per upstream probes all its targets at once,
//     every interval, over the upstream's transport (so TLCP backends
//     are probed over TLCP), in a pool of their own beside a cap on
//     connections per target;
//     Fall consecutive failures mark it down, Rise successes mark it up,
//     and one success that started after a passive trip ends that
//     cool-down early.
//
// Every change of a target's combined state is logged and reported through
// Observer.UpstreamHealth.

// maxProbesAtOnce bounds the active probes of one upstream in progress at
// once.
const maxProbesAtOnce = 16

func (u *Upstream) startActiveChecks() {
	if u.active.Path == "" {
		return
	}
	a := &u.active
	a.Interval = durOr(a.Interval, 10*time.Second)
	a.Timeout = durOr(a.Timeout, 5*time.Second)
	a.Rise = intOr(a.Rise, 2)
	a.Fall = intOr(a.Fall, 3)
	u.healthWG.Add(1)
	go u.activeLoop()
}

func (u *Upstream) activeLoop() {
	defer u.healthWG.Done()
	// With max_conns_per_target the probes have a pool of their own,
	// outside the cap (as nginx's and Caddy's checks open their own
	// connections): in the requests' pool a probe of a target whose
	// connections all serve long requests waited for one until it timed
	// out, and the target's own traffic marked it down.
	tr := u.transport
	if tr.MaxConnsPerHost > 0 {
		tr = tr.Clone()
		tr.MaxConnsPerHost = 0
		defer tr.CloseIdleConnections()
	}
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	tick := time.NewTicker(u.active.Interval)
	defer tick.Stop()
	sem := make(chan struct{}, maxProbesAtOnce)
	var wg sync.WaitGroup
	for {
		// The targets are probed at once (at most maxProbesAtOnce): one
		// that does not answer holds its probe for the timeout, not the
		// round, so another target's failure is seen an interval after
		// it, not a timeout per silent target later. A round ends with
		// its last probe: a target has one probe at a time.
		for _, t := range u.Targets() {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				u.probe(client, t)
			})
		}
		wg.Wait()
		select {
		case <-u.stopProbes:
			return
		case <-tick.C:
		}
	}
}

// probe runs one active check of t and updates its state.
func (u *Upstream) probe(client *http.Client, t *Target) {
	started := time.Now()
	err := u.checkOnce(client, t)
	if err == nil {
		u.passedProbe(t, started)
		t.failRun = 0
		t.okRun++
		if t.activeDn.Load() && t.okRun >= u.active.Rise {
			t.activeDn.Store(false)
			u.reportState(t, fmt.Sprintf("active: %d successful probe(s)", t.okRun))
		}
		return
	}
	select {
	case <-u.stopProbes:
		// Cut by a reload that retired u (or by its close): no verdict
		// on the target, whose retired generation may still steer
		// traffic to it on the state last seen.
		return
	default:
	}
	t.okRun = 0
	t.failRun++
	u.logger.Debug("health probe failed", "target", t.label, "error", err)
	if !t.activeDn.Load() && t.failRun >= u.active.Fall {
		t.activeDn.Store(true)
		u.reportState(t, fmt.Sprintf("active: %d failed probe(s), last: %v", t.failRun, err))
	}
}

func (u *Upstream) checkOnce(client *http.Client, t *Target) error {
	ctx, cancel := context.WithTimeout(context.Background(), u.active.Timeout)
	defer cancel()
	go func() {
		select {
		case <-u.stopProbes:
			cancel()
		case <-ctx.Done():
		}
	}()
	grpc := u.active.Type == ActiveGRPC
	var req *http.Request
	var err error
	if grpc {
		req, err = grpcHealthRequest(ctx, u.scheme+"://"+t.Addr, u.active.Service)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.scheme+"://"+t.Addr+u.active.Path, nil)
	}
	if err != nil {
		return err
	}
	if u.active.Host != "" {
		req.Host = u.active.Host
	} else {
		req.Host = t.Name // a resolved target's name, not its address
	}
	req.Header.Set("User-Agent", "gmproxy-health/1")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	if grpc {
		return grpcHealthAnswer(res)
	}
	// A probe is whole: a body that stalls past the timeout or is cut
	// short fails it, as it would fail a client (the first 64 KiB are read).
	_, berr := io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if berr != nil {
		return fmt.Errorf("body: %w", berr)
	}
	if want := u.active.ExpectStatus; want != 0 {
		if res.StatusCode != want {
			return fmt.Errorf("status %d, want %d", res.StatusCode, want)
		}
	} else if res.StatusCode < 200 || res.StatusCode >= 400 {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

// inheritHealth copies the health state of prev's targets to u's targets
// with the same address (a reload keeps what the checks learnt). Passive
// failure counts are kept only when the failure window has the same size.
// The in-flight counter is shared, not copied: requests and streams the
// old generation still serves keep counting against the target.
func (u *Upstream) inheritHealth(prev *Upstream) {
	if prev == nil {
		return
	}
	old := make(map[string]*Target, len(prev.Targets()))
	for _, t := range prev.Targets() {
		old[t.Addr] = t
	}
	seen := make(map[string]int, len(u.Targets()))
	for _, t := range u.Targets() {
		seen[t.Addr]++
	}
	for _, t := range u.Targets() {
		o := old[t.Addr]
		if o == nil {
			continue
		}
		if seen[t.Addr] == 1 {
			// An address listed twice keeps a counter per entry.
			t.inflight = o.inflight
		}
		t.downUntil.Store(o.downUntil.Load())
		if left := time.Duration(t.downUntil.Load() - monoclock.Now()); t.downUntil.Load() != 0 && left > 0 {
			// The previous generation's report of its end stops with it.
			u.reportCoolDownEnd(t, left)
		}
		if u.active.Path != "" && prev.active.Path != "" {
			t.activeDn.Store(o.activeDn.Load())
		}
		t.reported.Store(t.activeDn.Load() || t.downUntil.Load() > monoclock.Now())
		o.failMu.Lock()
		if len(o.fails) == len(t.fails) {
			copy(t.fails, o.fails)
			t.failN = o.failN
		}
		o.failMu.Unlock()
	}
}
