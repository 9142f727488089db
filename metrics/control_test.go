package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestControlGuard: POST /reload refuses what a browser page could send
// (an Origin header; a Host naming an attacker's domain re-pointed at the
// loopback address) and, with a token, requests without it.
func TestControlGuard(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int64
	reload := func(context.Context) error { reloads.Add(1); return nil }
	plain := httptest.NewServer(m.AdminMux(AdminOptions{Reload: reload}))
	defer plain.Close()
	withToken := httptest.NewServer(m.AdminMux(AdminOptions{Reload: reload, Control: ControlOptions{Token: func() []byte { return []byte("s3cret-token-0123456789") }}}))
	defer withToken.Close()
	named := httptest.NewServer(m.AdminMux(AdminOptions{Reload: reload, Control: ControlOptions{HostName: "admin.internal"}}))
	defer named.Close()

	for _, tc := range []struct {
		name string
		srv  *httptest.Server
		hdr  []string // name, value pairs; "Host" sets the Host
		want int
	}{
		{"loopback IP", plain, nil, 200},
		{"localhost", plain, []string{"Host", "localhost:9100"}, 200},
		{"IPv6 literal", plain, []string{"Host", "[::1]:9100"}, 200},
		{"foreign Origin", plain, []string{"Origin", "http://evil.example"}, 403},
		{"null Origin", plain, []string{"Origin", "null"}, 403},
		{"same-host Origin", plain, []string{"Origin", plain.URL}, 403},
		{"rebound name", plain, []string{"Host", "evil.example:9100"}, 403},
		{"rebound name without port", plain, []string{"Host", "evil.example"}, 403},
		{"configured name", named, []string{"Host", "admin.internal:9100"}, 200},
		{"other name on a named listener", named, []string{"Host", "evil.example:9100"}, 403},
		{"token missing", withToken, nil, 401},
		{"token wrong", withToken, []string{"Authorization", "Bearer s3cret-token-0123456788"}, 401},
		{"token as basic", withToken, []string{"Authorization", "Basic s3cret-token-0123456789"}, 401},
		{"token right", withToken, []string{"Authorization", "Bearer s3cret-token-0123456789"}, 200},
		// RFC 9110 §11.1: the scheme is case-insensitive.
		{"token right, scheme in lower case", withToken, []string{"Authorization", "bearer s3cret-token-0123456789"}, 200},
		{"token right, scheme in upper case", withToken, []string{"Authorization", "BEARER s3cret-token-0123456789"}, 200},
		{"token as scheme", withToken, []string{"Authorization", "s3cret-token-0123456789"}, 401},
		{"token after another scheme", withToken, []string{"Authorization", "Bearerx s3cret-token-0123456789"}, 401},
		{"token right, foreign Origin", withToken, []string{"Authorization", "Bearer s3cret-token-0123456789", "Origin", "http://evil.example"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reloads.Load()
			req, _ := http.NewRequest("POST", tc.srv.URL+"/reload", strings.NewReader("x"))
			req.Header.Set("Content-Type", "text/plain")
			doWithHeaders(t, req, tc.hdr, tc.want)
			if did := reloads.Load() - before; (did == 1) != (tc.want == 200) {
				t.Errorf("%d reloads, want them only when allowed", did)
			}
		})
	}
}

// TestDebugGuard: /debug/pprof/ answers go tool pprof, curl and an
// operator's own browser, but not a page of another site: neither through
// a name the page's owner re-pointed at the listener (DNS rebinding, which
// would let it read the profiles), nor by a request its browser marks as
// coming from another site (an <img> starting a ten-minute trace).
func TestDebugGuard(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(m.AdminMux(AdminOptions{Pprof: true}))
	defer plain.Close()
	named := httptest.NewServer(m.AdminMux(AdminOptions{Pprof: true, Control: ControlOptions{HostName: "admin.internal"}}))
	defer named.Close()
	for _, tc := range []struct {
		name string
		srv  *httptest.Server
		hdr  []string // name, value pairs; "Host" sets the Host
		want int
	}{
		{"loopback IP", plain, nil, 200},
		{"localhost", plain, []string{"Host", "localhost:9100"}, 200},
		{"operator's browser, typed", plain, []string{"Host", "localhost:9100", "Sec-Fetch-Site", "none"}, 200},
		{"operator's browser, link on the index", plain, []string{"Sec-Fetch-Site", "same-origin"}, 200},
		{"configured name", named, []string{"Host", "admin.internal:9100"}, 200},
		{"rebound name", plain, []string{"Host", "evil.example:9100"}, 403},
		{"other name on a named listener", named, []string{"Host", "evil.example"}, 403},
		{"another site's page", plain, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"a sibling site's page", plain, []string{"Sec-Fetch-Site", "same-site"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tc.srv.URL+"/debug/pprof/cmdline", nil)
			body := doWithHeaders(t, req, tc.hdr, tc.want)
			if leaked := strings.Contains(string(body), "metrics.test"); leaked != (tc.want == 200) {
				t.Errorf("command line in the answer: %v, want it only when allowed (%q)", leaked, body)
			}
		})
	}
}

// doWithHeaders sends req with hdr's name, value pairs set ("Host" as its
// host), fails t unless the status is want, and returns the body.
func doWithHeaders(t *testing.T, req *http.Request, hdr []string, want int) []byte {
	t.Helper()
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		t.Errorf("status %d (%q), want %d", res.StatusCode, body, want)
	}
	return body
}
