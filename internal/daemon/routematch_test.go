package daemon

import (
	"net/http"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
)

// TestRouteHeaderMatchesAll: a route's header matchers must all match
// (conf.Route): with {X-A: 1, X-B: 2} a request with X-A: 1 alone, or
// with X-B wrong, is not the route's and falls through to the next.
func TestRouteHeaderMatchesAll(t *testing.T) {
	cfg := &conf.Config{
		Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{
			{Name: "both", PathPrefix: "/", Header: map[string]string{"X-A": "1", "X-B": "2"}, Respond: &conf.Respond{Status: 200}},
			{Name: "rest", PathPrefix: "/", Respond: &conf.Respond{Status: 404}},
		}}},
	}
	url := plainProxy(t, cfg)
	tr := &http.Transport{DisableKeepAlives: true}
	for _, tc := range []struct {
		hdr  map[string]string
		want int
	}{
		{map[string]string{"X-A": "1", "X-B": "2"}, 200},
		{map[string]string{"X-A": "1"}, 404},
		{map[string]string{"X-A": "1", "X-B": "3"}, 404},
		{map[string]string{"X-B": "2"}, 404},
	} {
		req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
		req.Host = "localhost"
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("headers %v: status %d, want %d", tc.hdr, res.StatusCode, tc.want)
		}
	}
}

// TestRouteTLSHeadersPerRoute: tls_info_headers, client_cert_headers and
// client_cert_pem are settings of a route (conf.Route): the proxy gets
// them on that route, not on the site, where every route's upstream
// would receive the client's certificate.
func TestRouteTLSHeadersPerRoute(t *testing.T) {
	cfg := &conf.Config{
		Upstreams: []conf.Upstream{defaultsUpstream("id", "127.0.0.1:1"), defaultsUpstream("app", "127.0.0.1:1")},
		Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{
			{Name: "id", PathPrefix: "/id/", Upstream: "id", TLSInfoHeaders: true, ClientCertHeaders: true, ClientCertPEM: true},
			{Name: "app", PathPrefix: "/", Upstream: "app"},
		}}},
	}
	sc := proxyConfig(cfg).Sites[0]
	if sc.TLSInfoHeaders || sc.ClientCertHeaders || sc.ClientCertPEM {
		t.Errorf("site-wide TLS/certificate headers (info %v, cert %v, pem %v): route app's upstream gets them too",
			sc.TLSInfoHeaders, sc.ClientCertHeaders, sc.ClientCertPEM)
	}
	if r := sc.Routes[0]; !r.TLSInfoHeaders || !r.ClientCertHeaders || !r.ClientCertPEM {
		t.Errorf("route id: info %v, cert %v, pem %v; want all", r.TLSInfoHeaders, r.ClientCertHeaders, r.ClientCertPEM)
	}
	if r := sc.Routes[1]; r.TLSInfoHeaders || r.ClientCertHeaders || r.ClientCertPEM {
		t.Errorf("route app: info %v, cert %v, pem %v; want none", r.TLSInfoHeaders, r.ClientCertHeaders, r.ClientCertPEM)
	}
}

// TestSiteCaseInsensitivePaths: a site's case_insensitive_paths reaches its
// routes: "/ADMIN/" is the route of "/admin/" there, and only there.
func TestSiteCaseInsensitivePaths(t *testing.T) {
	for _, fold := range []bool{true, false} {
		cfg := &conf.Config{
			Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, CaseInsensitivePaths: fold, Routes: []conf.Route{
				{Name: "deny", PathPrefix: "/admin/", Respond: &conf.Respond{Status: 403}},
				{Name: "rest", PathPrefix: "/", Respond: &conf.Respond{Status: 200}},
			}}},
		}
		url := plainProxy(t, cfg)
		req, _ := http.NewRequest(http.MethodGet, url+"/ADMIN/", nil)
		req.Host = "localhost"
		res, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := map[bool]int{true: 403, false: 200}[fold]; res.StatusCode != want {
			t.Errorf("case_insensitive_paths %v: GET /ADMIN/ got %d, want %d", fold, res.StatusCode, want)
		}
	}
}
