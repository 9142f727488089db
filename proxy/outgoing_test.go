package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// The request sent upstream is built beside the inbound one (issue 14,
// item 5): the inbound request stays as the client sent it, for retries,
// the access log and anything else that looks at it afterwards.

// headerRecorder is a backend that records the header of every request it
// gets and answers 200.
type headerRecorder struct {
	mu   sync.Mutex
	seen []http.Header
	host []string
}

func (h *headerRecorder) record(r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.host = append(h.host, r.Host)
	h.mu.Unlock()
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.record(r)
	io.Copy(io.Discard, r.Body)
	io.WriteString(w, "ok")
}

func (h *headerRecorder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

func (h *headerRecorder) last(t *testing.T) (http.Header, string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		t.Fatal("the backend got no request")
	}
	return h.seen[len(h.seen)-1], h.host[len(h.host)-1]
}

// inboundSnapshot is what a handler sees of the inbound request.
type inboundSnapshot struct {
	method, host, url, requestURI, proto string
	header, trailer                      http.Header
	body                                 io.ReadCloser
	contentLength                        int64
	close                                bool
}

func snapshot(r *http.Request) inboundSnapshot {
	return inboundSnapshot{
		method: r.Method, host: r.Host, url: r.URL.String(), requestURI: r.RequestURI, proto: r.Proto,
		header: r.Header.Clone(), trailer: r.Trailer.Clone(), body: r.Body, contentLength: r.ContentLength, close: r.Close,
	}
}

// TestInboundRequestKeptAsSent: after the proxy handled a request, the
// inbound request (method, Host, URL, header, body, trailer, Close) is
// exactly as the client sent it, on every way a request is built (without
// body on a connection with handshake state, with a body, over h2, with
// each host_header mode), while the backend gets the edited copy: hop-by-
// hop fields gone, forwarded and TLS headers set, forged copies stripped,
// the route's edits applied.
func TestInboundRequestKeptAsSent(t *testing.T) {
	rec := &headerRecorder{}
	be := httptest.NewServer(rec)
	t.Cleanup(be.Close)
	cert := testClientCert(t)
	st := frontdoor.ConnState{Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3",
		SNI: "example.test", ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert}}

	for _, tc := range []struct {
		name       string
		method     string
		body       string
		h2         bool
		state      bool
		hostHeader string
		wantHost   string
	}{
		{name: "GET with handshake state", method: "GET", state: true, wantHost: "example.test"},
		{name: "GET without state", method: "GET", wantHost: "example.test"},
		{name: "POST with body", method: "POST", body: "payload", state: true, wantHost: "example.test"},
		{name: "h2 GET", method: "GET", h2: true, state: true, wantHost: "example.test"},
		{name: "fixed Host", method: "GET", state: true, hostHeader: "backend.internal", wantHost: "backend.internal"},
		{name: "upstream Host", method: "GET", state: true, hostHeader: "{upstream}", wantHost: addrOf(be)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				TrustedProxies: []string{"192.0.2.0/24"},
				Upstreams:      []UpstreamConfig{upstream("u", addrOf(be))},
				Sites: []SiteConfig{{
					Name: "s", ServerNames: []string{"example.test"}, TLSInfoHeaders: true, ClientCertHeaders: true,
					Routes: []RouteConfig{{
						Upstream: "u", StripPrefix: "/api", HostHeader: tc.hostHeader,
						RequestHeaders: HeaderOps{
							Set:    map[string]string{"User-Agent": "gmproxy-test"},
							Add:    map[string]string{"X-Tag": "route"},
							Remove: []string{"Referer"},
						},
					}},
				}},
			}
			p, err := New(cfg, NopObserver{}, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })

			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r := httptest.NewRequest(tc.method, "http://example.test/api/items?id=7", body)
			r.RemoteAddr = "192.0.2.7:40000" // a trusted proxy: its X-Forwarded-* are extended
			if tc.h2 {
				r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
			}
			if tc.state {
				r = r.WithContext(WithConnState(r.Context(), st))
			}
			r.Header = http.Header{
				"User-Agent":          {"client/1"},
				"Referer":             {"https://referrer.test/"},
				"X-Tag":               {"client"},
				"Connection":          {"keep-alive, X-Hop"},
				"X-Hop":               {"1"},
				"Keep-Alive":          {"timeout=5"},
				"Te":                  {"trailers"},
				"X-Forwarded-For":     {"203.0.113.9"},
				"X-Forwarded-Host":    {"front.test"},
				"X-Real-Ip":           {"6.6.6.6"},
				"X-Ssl-Client-S-Dn":   {"CN=forged"},
				"X_Ssl_Client_Verify": {"SUCCESS"},
			}
			before := snapshot(r)

			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}

			if got := snapshot(r); !reflect.DeepEqual(got, before) {
				t.Errorf("inbound request changed by the proxy:\n got  %+v\n sent %+v", got, before)
			}

			out, host := rec.last(t)
			if host != tc.wantHost {
				t.Errorf("backend Host %q, want %q", host, tc.wantHost)
			}
			for k, want := range map[string]string{
				"User-Agent": "gmproxy-test", "X-Forwarded-For": "203.0.113.9, 192.0.2.7", "X-Real-Ip": "203.0.113.9",
				"X-Forwarded-Host": "front.test", "Te": "trailers",
			} {
				if got := strings.Join(out[k], ","); got != want {
					t.Errorf("backend %s = %q, want %q", k, got, want)
				}
			}
			if got := out["X-Tag"]; !reflect.DeepEqual(got, []string{"client", "route"}) {
				t.Errorf("backend X-Tag = %q, want the client's then the route's", got)
			}
			for _, k := range []string{"Referer", "Connection", "X-Hop", "Keep-Alive"} {
				if v, ok := out[k]; ok {
					t.Errorf("backend got %s: %q", k, v)
				}
			}
			for k, v := range out {
				if strings.Contains(k, "_") {
					t.Errorf("backend got %s: %q", k, v)
				}
			}
			wantVerify, wantDN := "", ""
			if tc.state {
				wantVerify, wantDN = "SUCCESS", cert.Subject.String()
			}
			if got := out.Get("X-Ssl-Client-Verify"); got != wantVerify {
				t.Errorf("backend X-Ssl-Client-Verify %q, want %q", got, wantVerify)
			}
			if got := out.Get("X-Ssl-Client-S-Dn"); got != wantDN {
				t.Errorf("backend X-Ssl-Client-S-Dn %q, want %q", got, wantDN)
			}
		})
	}
}

// TestAccessLogShowsClientRequest: the access log shows the Host, URI,
// User-Agent and Referer the client sent, not what the route sent
// upstream (a rewritten Host, a stripped prefix, a replaced User-Agent, a
// removed Referer).
func TestAccessLogShowsClientRequest(t *testing.T) {
	rec := &headerRecorder{}
	be := httptest.NewServer(rec)
	t.Cleanup(be.Close)
	dir := t.TempDir()
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", addrOf(be))},
		Sites: oneSite(RouteConfig{
			Upstream: "u", StripPrefix: "/api", HostHeader: "backend.internal",
			RequestHeaders: HeaderOps{Set: map[string]string{"User-Agent": "gmproxy-test"}, Remove: []string{"Referer"}},
		}),
		AccessLog: AccessLogConfig{Format: "template", Template: "{host}|{method}|{uri}|{user_agent}|{referer}|{status}"},
	}
	for _, withState := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("access-%v.log", withState))
		cfg.AccessLog.Path = path
		var o frontOpts
		if withState {
			o.state = &frontdoor.ConnState{Site: "s", Protocol: frontdoor.ProtoTLCP, SNI: "example.test"}
		}
		f := newFront(t, cfg, o)
		req, _ := http.NewRequest("GET", f.url+"/api/items?id=7", nil)
		req.Host = "example.test"
		req.Header.Set("User-Agent", "client/1")
		req.Header.Set("Referer", "https://referrer.test/")
		res, err := testClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		f.p.AccessLog().Flush()

		out, host := rec.last(t)
		if host != "backend.internal" || out.Get("User-Agent") != "gmproxy-test" || out.Get("Referer") != "" {
			t.Fatalf("backend got Host %q, header %v", host, out)
		}
		data, _ := os.ReadFile(path)
		want := "example.test|GET|/api/items?id=7|client/1|https://referrer.test/|200"
		if got := strings.TrimSpace(string(data)); got != want {
			t.Errorf("state %v: access log %q, want %q", withState, got, want)
		}
	}
}

// dropAfterHeader is a target that reads one request header, records it,
// and closes the connection without answering.
func dropAfterHeader(t *testing.T, rec *headerRecorder) string {
	return connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			rec.record(r)
		}
	})
}

// TestRetrySendsSameRequest: when the first target took the request and
// failed, the retry on the next target sends exactly the header of the
// first attempt: X-Forwarded-For extended once, not once per attempt;
// hop-by-hop fields and forged headers stripped, not missing values that
// were stripped from the first attempt's copy; the route's added value
// once.
func TestRetrySendsSameRequest(t *testing.T) {
	dropped, live := &headerRecorder{}, &headerRecorder{}
	liveSrv := httptest.NewServer(live)
	t.Cleanup(liveSrv.Close)
	cfg := Config{
		TrustedProxies: []string{"127.0.0.0/8"},
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: dropAfterHeader(t, dropped)}, {Address: addrOf(liveSrv)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}}},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, TLSInfoHeaders: true, Routes: []RouteConfig{{
			Upstream: "u", RetryIdempotent: true,
			RequestHeaders: HeaderOps{Add: map[string]string{"X-Tag": "route"}, Set: map[string]string{"X-Env": "prod"}},
		}}}},
	}
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		req, _ := http.NewRequestWithContext(context.Background(), "GET", f.url+"/x", nil)
		req.Host = "example.test"
		req.Header = http.Header{
			"X-Forwarded-For":   {"203.0.113.9"},
			"X-Forwarded-Proto": {"https"},
			"X-Tag":             {"client"},
			"X-Real-Ip":         {"6.6.6.6"},
			"X-Ssl-Protocol":    {"forged"},
			"Connection":        {"X-Hop"},
			"X-Hop":             {"1"},
		}
		if h2 {
			delete(req.Header, "Connection") // not allowed in h2
			delete(req.Header, "X-Hop")
		}
		nDropped, nLive := dropped.count(), live.count()
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("h2 %v: status %d", h2, res.StatusCode)
		}
		if dropped.count() != nDropped+1 || live.count() != nLive+1 {
			t.Fatalf("h2 %v: dropping target got %d requests, live %d; want 1 each", h2, dropped.count()-nDropped, live.count()-nLive)
		}
		first, _ := dropped.last(t)
		retry, _ := live.last(t)
		if !reflect.DeepEqual(first, retry) {
			t.Errorf("h2 %v: the retry sent another header:\n first %v\n retry %v", h2, first, retry)
		}
		for k, want := range map[string]string{"X-Forwarded-For": "203.0.113.9, 127.0.0.1", "X-Tag": "client,route", "X-Env": "prod", "X-Real-Ip": "203.0.113.9"} {
			if got := strings.Join(retry[k], ","); got != want {
				t.Errorf("h2 %v: retry %s = %q, want %q", h2, k, got, want)
			}
		}
		if v, ok := retry["X-Hop"]; ok {
			t.Errorf("h2 %v: retry carried X-Hop %q", h2, v)
		}
		if got := retry.Get("X-Ssl-Protocol"); got == "forged" {
			t.Errorf("h2 %v: retry carried the forged X-Ssl-Protocol", h2)
		}
	}
}
