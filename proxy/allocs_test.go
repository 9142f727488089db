package proxy

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// nopResponseWriter keeps one header map across iterations.
type nopResponseWriter struct{ h http.Header }

func (w *nopResponseWriter) Header() http.Header         { return w.h }
func (w *nopResponseWriter) WriteHeader(int)             {}
func (w *nopResponseWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestOwnPathAllocs pins the proxy's own per-request work at zero heap
// allocations: request state, route matching, hop-by-hop removal,
// forwarded/TLS/client-certificate headers (incl. forged copies being
// stripped), the route's header edits, upstream selection with every
// balancing policy, response header copying, the observer report and
// access-log formatting (combined and json) into the reused buffer. What
// is left per request is net/http's own work (reading and writing
// requests, the transport). Counting allocations does not depend on timing.
func TestOwnPathAllocs(t *testing.T) {
	cert := testClientCert(t)
	st := frontdoor.ConnState{
		Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3",
		Resumed: true, SNI: "example.test", ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert},
		HandshakeDuration: 3 * time.Millisecond,
	}
	ctx := WithConnState(context.Background(), st)

	for _, balance := range []string{"round_robin", "least_conn", "ip_hash", "hash"} {
		for _, format := range []string{"combined", "json"} {
			t.Run(balance+"/"+format, func(t *testing.T) {
				up := upstream("u", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
				up.Balance, up.HashHeader = balance, "X-User"
				cfg := Config{
					TrustedProxies: []string{"10.0.0.0/8"},
					Upstreams:      []UpstreamConfig{up},
					Sites: []SiteConfig{{
						Name: "s", ServerNames: []string{"example.test"},
						TLSInfoHeaders: true, ClientCertHeaders: true, ClientCertPEM: true,
						Routes: []RouteConfig{
							{PathPrefix: "/other", Respond: &RespondConfig{Body: "no"}},
							{
								Hosts: []string{"*.test"}, PathPrefix: "/api/", Headers: []HeaderMatch{{Name: "x-user"}},
								Upstream: "u", StripPrefix: "/api",
								RequestHeaders:  HeaderOps{Set: map[string]string{"x-env": "prod"}, Add: map[string]string{"x-tag": "a"}, Remove: []string{"cookie"}},
								ResponseHeaders: HeaderOps{Set: map[string]string{"x-frame-options": "DENY"}, Remove: []string{"server"}},
							},
						},
					}},
				}
				p, err := New(cfg, NopObserver{}, testLogger(t))
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				al, err := NewAccessLogWriter(io.Discard, AccessLogConfig{Format: format})
				if err != nil {
					t.Fatal(err)
				}
				defer al.Close()
				p.accessLog = al
				s := p.sites[0]

				r, _ := http.NewRequestWithContext(ctx, "GET", "http://example.test/api/v1/items?id=7", nil)
				r.RemoteAddr = "192.0.2.10:40000"
				r.RequestURI = "/api/v1/items?id=7"
				r.Body = http.NoBody
				in := http.Header{}
				in["User-Agent"] = []string{"bench/1"}
				in["Accept"] = []string{"*/*"}
				in["X-User"] = []string{"alice"}
				in["Cookie"] = []string{"a=b"}
				in["Connection"] = []string{"keep-alive, X-Hop"}
				in["X-Hop"] = []string{"1"}
				in["X-Forwarded-For"] = []string{"6.6.6.6"} // forged: client not trusted
				in["X-Ssl-Client-S-Dn"] = []string{"CN=admin"}
				in["X-Real-Ip"] = []string{"6.6.6.6"}
				res := &http.Response{StatusCode: 200, Header: http.Header{
					"Content-Type": {"text/plain"}, "Content-Length": {"5"}, "Server": {"b"}, "Keep-Alive": {"timeout=5"},
				}}
				resIn := res.Header.Clone()
				w := &nopResponseWriter{h: http.Header{}}
				r.Header = http.Header{}

				var check func(out http.Header)
				run := func() {
					clear(r.Header)
					for k, v := range in {
						r.Header[k] = v
					}
					clear(res.Header)
					for k, v := range resIn {
						res.Header[k] = v
					}
					clear(w.h)

					rs := getReqState(w)
					rs.start = time.Now()
					rs.site = s
					rs.ci = connInfoFrom(r.Context())
					rt := s.match(r, reqHost(r, rs.ci), r.URL.Path)
					if rt == nil || rt.up == nil {
						panic("route did not match")
					}
					rs.route = rt
					clientIP, _ := s.prepareRequest(rs, r, rt)
					tgt := rt.up.pick(r, clientIP, rs.tried[:0])
					if tgt == nil {
						panic("no target")
					}
					rs.target = tgt
					rs.url.Host = tgt.Addr
					copyResponseHeader(rs.w.Header(), res, rt, res.Header["Connection"])
					rs.w.WriteHeader(res.StatusCode)
					s.report(rs, r)
					if check != nil {
						check(rs.outHdr)
					}
					putReqState(rs)
				}
				check = func(h http.Header) {
					// What the backend and the client see; the inbound
					// request stays as the client sent it.
					if !reflect.DeepEqual(r.Header, in) {
						t.Errorf("inbound header edited: %v, sent %v", r.Header, in)
					}
					for k, want := range map[string]string{
						"X-Forwarded-For": "192.0.2.10", "X-Real-Ip": "192.0.2.10", "X-Forwarded-Proto": "https",
						"X-Forwarded-Host": "example.test", "X-Ssl-Protocol": "NTLSv1.1", "X-Ssl-Session-Reused": "r",
						"X-Ssl-Client-Verify": "SUCCESS", "X-Ssl-Client-S-Dn": cert.Subject.String(), "X-Env": "prod", "X-Tag": "a",
					} {
						if got := h.Get(k); got != want {
							t.Errorf("%s = %q, want %q", k, got, want)
						}
					}
					for _, k := range []string{"Cookie", "Connection", "X-Hop"} {
						if _, ok := h[k]; ok {
							t.Errorf("%s still present", k)
						}
					}
					if got := w.h.Get("X-Frame-Options"); got != "DENY" || w.h.Get("Server") != "" || w.h.Get("Keep-Alive") != "" {
						t.Errorf("response header %v", w.h)
					}
				}
				run()
				check = nil
				if testing.CoverMode() != "" || testpeer.RaceEnabled {
					return // -cover and -race add allocations of their own
				}
				if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
					t.Errorf("proxy's own per-request path: %v allocations, want 0", allocs)
				}
				// A fixed response (health probes) through the whole
				// handler: no backend, so no allocation at all.
				probe, _ := http.NewRequestWithContext(ctx, "GET", "http://example.test/other", nil)
				probe.RemoteAddr, probe.RequestURI = "192.0.2.10:40000", "/other"
				serveProbe := func() {
					clear(w.h)
					s.ServeHTTP(w, probe)
				}
				serveProbe()
				if got := w.h.Get("Content-Type"); got != "text/plain; charset=utf-8" {
					t.Errorf("fixed response Content-Type %q", got)
				}
				if allocs := testing.AllocsPerRun(200, serveProbe); allocs != 0 {
					t.Errorf("fixed response: %v allocations, want 0", allocs)
				}
			})
		}
	}
}

func TestStripPrefix(t *testing.T) {
	for _, c := range []struct{ path, prefix, want string }{
		{"/api/v1", "/api", "/v1"},
		{"/api//v1", "/api", "/v1"},
		{"/apiv1", "/api", "/v1"},
		{"/api", "/api", "/"},
		{"/api/", "/api", "/"},
		{"/api/", "/api/", "/"},
		{"/api/x", "/api/", "/x"},
	} {
		if got := stripPrefix(c.path, len(c.prefix)); got != c.want {
			t.Errorf("stripPrefix(%q, %q) = %q, want %q", c.path, c.prefix, got, c.want)
		}
		// The old formula, which this must match.
		if old := "/" + strings.TrimLeft(c.path[len(c.prefix):], "/"); old != c.want {
			t.Errorf("table row %v disagrees with the old formula %q", c, old)
		}
	}
}

func TestRemoveHopByHopConnectionOptions(t *testing.T) {
	h := http.Header{
		"Connection": {"keep-alive, X-HOP, x-other , bad token"},
		"Keep-Alive": {"1"}, "X-Hop": {"1"}, "X-Other": {"1"}, "X-Keep": {"1"}, "bad token": {"1"}, "Te": {"trailers"},
	}
	removeHopByHop(h)
	if len(h) != 1 || h.Get("X-Keep") != "1" {
		t.Errorf("left %v, want only X-Keep", h)
	}
}
