package daemon

import (
	"net/http"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
)

// routesFromYAML returns the routes of the one site of a configuration
// whose routes are the YAML lines given, as conf loads them (defaults
// filled in: an unnamed route is named route<N> by its place).
func routesFromYAML(t *testing.T, routes string) []conf.Route {
	t.Helper()
	cfg, err := conf.Parse("../../conf/testdata/good/routes.yaml", []byte(`listeners: [{address: 127.0.0.1:0}]
sites:
  - tls: {cert: ../pki/server_ecdsa.crt, key: ../pki/server_ecdsa.key}
    routes:
`+routes+`
upstreams: [{name: app, targets: [127.0.0.1:8080]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Sites[0].Routes
}

// TestReloadKeepsUnnamedRouteCounts: a reload keeps the rate_limit counts
// of a route without a name whose path and rate_limit stay the same, as
// conf.RateLimit says ("name (else what it matches)"), even when a route put before
// it changes its place (and so the route<N> name conf gives it): its
// counts do not go to another route, whose clients it never saw.
func TestReloadKeepsUnnamedRouteCounts(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	mk := func(routes string) *conf.Config {
		cfg := testConfig(t, addr)
		cfg.Sites[0].Routes = routesFromYAML(t, routes)
		return cfg
	}
	const limited = `      - {path: /login, rate_limit: {rate: 1/h}, upstream: app}
      - {path: /api, rate_limit: {rate: 1/h}, upstream: app}
      - {path_prefix: /, upstream: app}`
	d := startDaemon(t, mk(limited))
	c := newH1Conn(t, d.addr, "tls", "")
	if st, _ := c.do(t, "/api", 0); st != http.StatusOK {
		t.Fatalf("first /api: %d", st)
	}
	if st, _ := c.do(t, "/api", 0); st != http.StatusTooManyRequests {
		t.Fatalf("second /api: %d, want 429", st)
	}
	// A route put first: the others move down a place.
	d.reloadWith(t, mk(`      - {path: /healthz, respond: {status: 200}}
`+limited))
	c = newH1Conn(t, d.addr, "tls", "")
	if st, _ := c.do(t, "/login", 0); st != http.StatusOK {
		t.Errorf("first /login after the reload: %d, want 200 (the client never sent one: /api's counts went to /login)", st)
	}
	if st, _ := c.do(t, "/api", 0); st != http.StatusTooManyRequests {
		t.Errorf("/api after the reload: %d, want 429 (its counts kept)", st)
	}
}

// TestReloadAfterPrepareKeepsRateCounts: a generation prepared but not
// served (a worker's Prepare, then a Reload or another Prepare instead of
// its Commit) is not what the next build takes the rate_limit counts
// from: that is the serving one. The prepared generation gave /api
// another rate, so it had fresh counts for it; the build after it, back
// to the serving rate, took those (none for that rate) and let a client
// that had used up its allowance start again.
func TestReloadAfterPrepareKeepsRateCounts(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	mk := func(rate string) *conf.Config {
		cfg := testConfig(t, addr)
		cfg.Sites[0].Routes = routesFromYAML(t, `      - {path: /api, rate_limit: {rate: `+rate+`}, upstream: app}
      - {path_prefix: /, upstream: app}`)
		return cfg
	}
	for _, next := range []struct {
		name string
		do   func(d *testDaemon) error
	}{
		{"Reload", func(d *testDaemon) error { return d.Reload() }},
		{"Prepare", func(d *testDaemon) error {
			if err := d.Prepare(); err != nil {
				return err
			}
			return d.Commit()
		}},
	} {
		t.Run(next.name, func(t *testing.T) {
			d := startDaemon(t, mk("1/h"))
			c := newH1Conn(t, d.addr, "tls", "")
			if st, _ := c.do(t, "/api", 0); st != http.StatusOK {
				t.Fatalf("first /api: %d", st)
			}
			if st, _ := c.do(t, "/api", 0); st != http.StatusTooManyRequests {
				t.Fatalf("second /api: %d, want 429", st)
			}
			d.setConfig(mk("2/h"))
			if err := d.Prepare(); err != nil {
				t.Fatal(err)
			}
			d.setConfig(mk("1/h"))
			if err := next.do(d); err != nil {
				t.Fatal(err)
			}
			c = newH1Conn(t, d.addr, "tls", "")
			if st, _ := c.do(t, "/api", 0); st != http.StatusTooManyRequests {
				t.Errorf("/api after a prepared generation was replaced: %d, want 429 (the serving generation's counts kept)", st)
			}
		})
	}
}

// TestReloadKeepsUnnamedRouteCountsByMatch: two routes without a name on
// one path, told apart by what else they match (here a host), each keep
// their own rate_limit counts over a reload that removes the other: the
// path alone, and its rank among the routes of that path, named the
// removed route's counts to the one left, which then had the counts of
// clients it never saw and forgot its own.
func TestReloadKeepsUnnamedRouteCountsByMatch(t *testing.T) {
	b := newBackend(t)
	addr := b.Listener.Addr().String()
	mk := func(routes string) *conf.Config {
		cfg := testConfig(t, addr)
		cfg.Sites[0].Routes = routesFromYAML(t, routes)
		return cfg
	}
	const api = `      - {path: /api, rate_limit: {rate: 1/h}, upstream: app}
      - {path_prefix: /, upstream: app}`
	d := startDaemon(t, mk(`      - {path: /api, host: [other.example.cn], rate_limit: {rate: 1/h}, upstream: app}
`+api))
	c := newH1Conn(t, d.addr, "tls", "")
	if st, _ := c.do(t, "/api", 0); st != http.StatusOK {
		t.Fatalf("first /api: %d", st)
	}
	if st, _ := c.do(t, "/api", 0); st != http.StatusTooManyRequests {
		t.Fatalf("second /api: %d, want 429", st)
	}
	d.reloadWith(t, mk(api)) // the other host's route removed
	c = newH1Conn(t, d.addr, "tls", "")
	if st, _ := c.do(t, "/api", 0); st != http.StatusTooManyRequests {
		t.Errorf("/api after the reload: %d, want 429 (its counts kept, not the removed route's)", st)
	}
}
