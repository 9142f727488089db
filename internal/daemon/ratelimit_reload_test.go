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
// conf.RateLimit says ("name (else path)"), even when a route put before
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
