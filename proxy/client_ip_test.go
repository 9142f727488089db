package proxy

import (
	"net/http/httptest"
	"testing"
)

// TestRouteClientIP: a route's ClientIP (nginx's allow) lets in only
// clients whose address is in its list, ahead of a route that answers 403
// for the same paths. The address is X-Real-IP's: the peer's own, where a
// client's X-Forwarded-For counts for nothing, or, behind a trusted proxy,
// the right-most X-Forwarded-For address that is not a trusted proxy's.
func TestRouteClientIP(t *testing.T) {
	rec := newRawRecorder(t)
	routes := []RouteConfig{
		{Name: "office", PathPrefix: "/admin/", ClientIP: []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"}, Upstream: "u"},
		{Name: "deny", PathPrefix: "/admin/", Respond: &RespondConfig{Status: 403, Body: "no"}},
		{Name: "local", PathPrefix: "/local/", ClientIP: []string{"127.0.0.0/8"}, Upstream: "u"},
		{Name: "deny-local", PathPrefix: "/local/", Respond: &RespondConfig{Status: 403, Body: "no"}},
		{Upstream: "u"},
	}
	get := func(path, xff string) string {
		r := "GET " + path + " HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n"
		if xff != "" {
			r += "X-Forwarded-For: " + xff + "\r\n"
		}
		return r + "\r\n"
	}

	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", rec.addr)}, Sites: oneSite(routes...)}
	f := newFront(t, cfg, frontOpts{})
	// The peer is 127.0.0.1, trusted by no one.
	wantNotForwarded(t, f.addr, rec, get("/admin/x", ""), "403")
	wantNotForwarded(t, f.addr, rec, get("/admin/x", "10.1.2.3"), "403") // forged
	wantNotForwarded(t, f.addr, rec, get("/admin/x", "192.0.2.7, 10.1.2.3"), "403")
	wantForwarded(t, f.addr, rec, get("/local/x", ""), "GET /local/x ")
	wantForwarded(t, f.addr, rec, get("/other", ""), "GET /other ")

	// Behind a trusted proxy (the peer), its X-Forwarded-For names the client.
	cfg.TrustedProxies = []string{"127.0.0.1", "198.51.100.0/24"}
	f = newFront(t, cfg, frontOpts{})
	wantForwarded(t, f.addr, rec, get("/admin/x", "10.1.2.3"), "GET /admin/x ")
	wantForwarded(t, f.addr, rec, get("/admin/x", "203.0.113.5, 192.0.2.7, 198.51.100.9"), "GET /admin/x ")
	wantForwarded(t, f.addr, rec, get("/admin/x", "2001:db8::5"), "GET /admin/x ")
	// The right-most address not a trusted proxy's is the client, not
	// one further left that the client wrote itself.
	wantNotForwarded(t, f.addr, rec, get("/admin/x", "10.1.2.3, 203.0.113.5"), "403")
	wantNotForwarded(t, f.addr, rec, get("/admin/x", "10.1.2.3, unknown"), "403")
	// No X-Forwarded-For: the trusted peer itself is the client.
	wantNotForwarded(t, f.addr, rec, get("/admin/x", ""), "403")
	wantForwarded(t, f.addr, rec, get("/local/x", ""), "GET /local/x ")
	wantNotForwarded(t, f.addr, rec, get("/local/x", "10.1.2.3"), "403")
}

// TestRouteClientIPInvalid: New refuses an address it cannot read.
func TestRouteClientIPInvalid(t *testing.T) {
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", "127.0.0.1:1")},
		Sites: oneSite(RouteConfig{ClientIP: []string{"10.0.0.0/33"}, Upstream: "u"})}
	if p, err := New(cfg, nil, testLogger(t)); err == nil {
		p.Close()
		t.Fatal("client_ip 10.0.0.0/33 accepted")
	}
}

// serveFrom serves a GET of /x from peer on p and returns its status.
func serveFrom(p *Proxy, peer string) int {
	r := httptest.NewRequest("GET", "http://example.test/x", nil)
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w.Code
}

// TestRouteClientIPMapped: client_ip entries written as IPv4-mapped IPv6
// (::ffff:203.0.113.0/120, as a dual-stack socket shows IPv4 peers) match
// the IPv4 clients they name, whichever way the peer's address is
// written. Matched against the unmapped client they matched no one: as
// a deny list (client_ip ahead of a 403) they let the named clients in.
func TestRouteClientIPMapped(t *testing.T) {
	wantFromDenyList(t, []string{"::ffff:203.0.113.0/120", "::ffff:198.51.100.9"}, map[string]int{
		"203.0.113.7:1000":          403,
		"[::ffff:203.0.113.7]:1000": 403,
		"198.51.100.9:1000":         403,
		"198.51.100.10:1000":        200,
		"[2001:db8::1]:1000":        200,
	})
}

// TestRouteClientIPZone: a link-local client's zone, which its interface
// gives, not the operator, does not keep it out of a client_ip list that
// names its address (netip.Prefix.Contains is false for any zoned
// address): as a deny list the list let such clients in.
func TestRouteClientIPZone(t *testing.T) {
	wantFromDenyList(t, []string{"fe80::/10"}, map[string]int{
		"[fe80::1%eth0]:1000": 403,
		"[fe80::1]:1000":      403,
		"[2001:db8::1]:1000":  200,
	})
}

// TestRouteClientIPNAT64: a client behind a NAT64 / SIIT-DC translator
// (64:ff9b::/96) matches client_ip as the IPv4 address it embeds, as the
// per-client limits count it: an IPv4 deny list (client_ip ahead of a 403
// route) must not let it in, nor an IPv4 allow list keep it out.
func TestRouteClientIPNAT64(t *testing.T) {
	wantFromDenyList(t, []string{"203.0.113.0/24"}, map[string]int{
		"[64:ff9b::203.0.113.7]:1000":  403,
		"[64:ff9b::198.51.100.7]:1000": 200,
		"[2001:db8::cb00:7107]:1000":   200, // the same last 32 bits, no translator
	})
}

// wantFromDenyList serves a GET from each peer of want through a site
// whose first route answers 403 to client_ip nets (a deny list) and whose
// second answers 200, and fails where the status differs.
func wantFromDenyList(t *testing.T, nets []string, want map[string]int) {
	t.Helper()
	p, err := New(Config{Sites: oneSite(
		RouteConfig{Name: "deny", ClientIP: nets, Respond: &RespondConfig{Status: 403, Body: "no"}},
		RouteConfig{Name: "ok", Respond: &RespondConfig{Status: 200, Body: "ok"}},
	)}, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for peer, code := range want {
		if got := serveFrom(p, peer); got != code {
			t.Errorf("client %s: %d, want %d", peer, got, code)
		}
	}
}

// TestForwardedForWithPort: a trusted balancer that writes the client's
// port into X-Forwarded-For ("203.0.113.9:51234", "[2001:db8::9]:443",
// as Azure Application Gateway does; nginx's realip reads them), or an
// IPv6 address in brackets, names the client by its address. Read as no address, the client became the
// balancer itself: an internal client_ip list let every client of the
// balancer in, and one client's failures and rate counted for all.
func TestForwardedForWithPort(t *testing.T) {
	p, err := New(Config{TrustedProxies: []string{"10.0.0.0/8"}, Sites: oneSite(
		RouteConfig{Name: "internal", ClientIP: []string{"10.0.0.0/8"}, Respond: &RespondConfig{Status: 200, Body: "in"}},
		RouteConfig{Name: "deny", Respond: &RespondConfig{Status: 403, Body: "no"}},
	)}, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for xff, want := range map[string]int{
		"203.0.113.9:51234":             403,
		"[2001:db8::9]:443":             403,
		"[2001:db8::9]":                 403,
		"[203.0.113.9]":                 200, // no IPv4 address in brackets: the balancer's
		"10.1.2.3, 203.0.113.9:51234":   403,
		"203.0.113.9:51234, 10.0.0.7:1": 403, // a trusted hop with its port, then the client
		"10.1.2.3:51234":                200,
		"203.0.113.9, 10.1.2.3:80":      403,
	} {
		r := httptest.NewRequest("GET", "http://example.test/x", nil)
		r.RemoteAddr = "10.0.0.1:1000"
		r.Header.Set("X-Forwarded-For", xff)
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("X-Forwarded-For %q from a trusted balancer: %d, want %d", xff, w.Code, want)
		}
	}
}
