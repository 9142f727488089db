package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// dropBackend reads the whole request, then closes the connection without
// answering: the request was sent, so it must not be retried blindly.
func dropBackend(t *testing.T, hits *atomic.Int64) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func countingBackend(t *testing.T, name string, hits *atomic.Int64) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, name+":"+string(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func doReq(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// dropThenLive is a front whose upstream (passive health off) has a target
// that drops each connection after reading the request, then a live one;
// dropped and hits count the requests each saw.
func dropThenLive(t *testing.T, retryIdempotent bool) (f *front, dropped, hits *atomic.Int64) {
	dropped, hits = new(atomic.Int64), new(atomic.Int64)
	drop, live := dropBackend(t, dropped), countingBackend(t, "live", hits)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addrOf(drop)}, {Address: addrOf(live)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}}},
		Sites: oneSite(RouteConfig{Upstream: "u", RetryIdempotent: retryIdempotent}),
	}
	return newFront(t, cfg, frontOpts{}), dropped, hits
}

func TestRetryRules(t *testing.T) {
	noPassive := HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}
	t.Run("connect failure is retried, even POST", func(t *testing.T) {
		var hits atomic.Int64
		live := countingBackend(t, "live", &hits)
		obs := newEventObserver()
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: deadAddr(t)}, {Address: addrOf(live)}}, HealthCheck: noPassive}},
			Sites:     oneSite(RouteConfig{Upstream: "u"}),
		}
		f := newFront(t, cfg, frontOpts{obs: obs})
		c := testClient(t)
		for range 2 {
			code, body := doReq(t, c, "POST", f.url+"/", "payload")
			if code != 200 || body != "live:payload" {
				t.Fatalf("POST: %d %q", code, body)
			}
		}
		if obs.retryCount() != 1 {
			t.Errorf("retries reported %d, want 1 (one of the two requests hit the dead target first)", obs.retryCount())
		}
	})
	t.Run("POST not retried after it was sent", func(t *testing.T) {
		// Without a body only the method stops a retry (an untouched body
		// allows one); the route retries idempotent requests.
		for _, method := range []string{"POST", "PATCH"} {
			for _, reqBody := range []string{"", "pay me once"} {
				f, dropped, hits := dropThenLive(t, true)
				code, body := doReq(t, testClient(t), method, f.url+"/", reqBody)
				if code != http.StatusBadGateway {
					t.Fatalf("%s with body %q: %d %q, want 502", method, reqBody, code, body)
				}
				if dropped.Load() != 1 || hits.Load() != 0 {
					t.Fatalf("%s with body %q: dropping backend saw %d, live %d; want 1 and 0", method, reqBody, dropped.Load(), hits.Load())
				}
			}
		}
	})
	t.Run("GET not retried after sent unless the route allows", func(t *testing.T) {
		for _, allow := range []bool{false, true} {
			f, dropped, _ := dropThenLive(t, allow)
			code, body := doReq(t, testClient(t), "GET", f.url+"/", "")
			want := http.StatusBadGateway
			if allow {
				want = 200
			}
			if code != want {
				t.Fatalf("retry_idempotent=%v: %d %q, want %d", allow, code, body, want)
			}
			// net/http may itself resend an idempotent request once on a
			// connection that died; the proxy adds no resend of its own.
			if d := dropped.Load(); d < 1 || d > 2 {
				t.Fatalf("dropping backend saw %d requests", d)
			}
		}
	})
	t.Run("tries are bounded", func(t *testing.T) {
		var targets []TargetConfig
		for range 6 {
			targets = append(targets, TargetConfig{Address: deadAddr(t)})
		}
		obs := newEventObserver()
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Targets: targets, HealthCheck: noPassive, Retries: RetryConfig{Tries: 3}}},
			Sites:     oneSite(RouteConfig{Upstream: "u"}),
		}
		f := newFront(t, cfg, frontOpts{obs: obs})
		if code, _ := doReq(t, testClient(t), "GET", f.url+"/", ""); code != 502 {
			t.Fatalf("status %d", code)
		}
		if obs.retryCount() != 2 {
			t.Fatalf("%d retries, want 2 (3 tries)", obs.retryCount())
		}
		// The retry time budget also ends retrying.
		obs2 := newEventObserver()
		cfg.Upstreams[0].Retries = RetryConfig{Tries: 8, Duration: time.Nanosecond}
		f2 := newFront(t, cfg, frontOpts{obs: obs2})
		if code, _ := doReq(t, testClient(t), "GET", f2.url+"/", ""); code != 502 {
			t.Fatalf("status %d", code)
		}
		if obs2.retryCount() != 0 {
			t.Fatalf("%d retries after the retry duration was spent", obs2.retryCount())
		}
	})
	t.Run("no retry counted without a target left", func(t *testing.T) {
		// A lone target (the most common upstream) that fails leaves
		// nothing to retry on: the retries metric counted one anyway.
		obs := newEventObserver()
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: deadAddr(t)}}, Retries: RetryConfig{Tries: 3}}},
			Sites:     oneSite(RouteConfig{Upstream: "u"}),
		}
		f := newFront(t, cfg, frontOpts{obs: obs})
		if code, _ := doReq(t, testClient(t), "GET", f.url+"/", ""); code != 502 {
			t.Fatalf("status %d", code)
		}
		if n := obs.retryCount(); n != 0 {
			t.Fatalf("%d retries reported, none made (one target)", n)
		}
	})
}

func TestErrorStatuses(t *testing.T) {
	t.Run("502 then 502", func(t *testing.T) {
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("u", deadAddr(t), deadAddr(t))},
			Sites:     oneSite(RouteConfig{Upstream: "u"}),
		}
		var logs syncBuffer
		f := newFront(t, cfg, frontOpts{logger: slog.New(slog.NewTextHandler(&logs, nil))})
		c := testClient(t)
		code, body := doReq(t, c, "GET", f.url+"/", "")
		if code != 502 || body != "502 Bad Gateway: no upstream target answered\n" {
			t.Fatalf("first: %d %q, want 502", code, body)
		}
		// The client sees a short body; the log says why.
		if l := logs.String(); !strings.Contains(l, "status=502") || !strings.Contains(l, "no target of upstream u answered") || !strings.Contains(l, "connection refused") {
			t.Errorf("log does not explain the 502:\n%s", l)
		}
		// Both targets failed once: passive checks (max_fails 1) took them
		// out, but with none available they are tried anyway (soonestBack).
		code, body = doReq(t, c, "GET", f.url+"/", "")
		if code != 502 || body != "502 Bad Gateway: no upstream target answered\n" {
			t.Fatalf("second: %d %q, want 502 (the passively down targets tried)", code, body)
		}
	})
	t.Run("504 on response header timeout", func(t *testing.T) {
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(slow.Close)
		t.Cleanup(func() { close(release) })
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addrOf(slow)}},
				Transport: TransportConfig{ResponseHeaderTimeout: 50 * time.Millisecond}}},
			Sites: oneSite(RouteConfig{Upstream: "u"}),
		}
		f := newFront(t, cfg, frontOpts{})
		code, body := doReq(t, testClient(t), "GET", f.url+"/", "")
		if code != 504 || body != "504 Gateway Timeout: upstream timed out\n" {
			t.Fatalf("%d %q, want 504", code, body)
		}
	})
	t.Run("413 over the route's body limit", func(t *testing.T) {
		var hits atomic.Int64
		live := countingBackend(t, "live", &hits)
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("u", addrOf(live))},
			Sites:     oneSite(RouteConfig{Upstream: "u", MaxBodyBytes: 10}),
		}
		var logs syncBuffer
		f := newFront(t, cfg, frontOpts{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		c := testClient(t)
		if code, _ := doReq(t, c, "POST", f.url+"/", "0123456789abc"); code != 413 {
			t.Fatalf("content-length over limit: %d", code)
		}
		// Chunked (unknown length) body over the limit.
		req, _ := http.NewRequest("POST", f.url+"/", io.MultiReader(strings.NewReader("0123456789"), strings.NewReader("abcdef")))
		req.ContentLength = -1
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 413 {
			t.Fatalf("chunked over limit: %d", res.StatusCode)
		}
		if code, body := doReq(t, c, "POST", f.url+"/", "small"); code != 200 || body != "live:small" {
			t.Fatalf("small body: %d %q", code, body)
		}
		// The log names the limit by its configuration key (max_body), so
		// that an operator can find the setting it reports.
		l := logs.String()
		if n := strings.Count(l, "status=413"); n != 2 {
			t.Fatalf("%d 413 log lines, want 2:\n%s", n, l)
		}
		if strings.Count(l, "route's max_body\"") != 2 {
			t.Errorf("413 log lines do not name the route's max_body:\n%s", l)
		}
	})
}

// TestBufferedBodyRetriedAfterSent: a body request_buffer holds whole goes
// again, whole, to the next target when the first took it and dropped the
// connection, for a request the policy retries (an idempotent PUT, or a
// POST with retry_non_idempotent), as nginx resends a buffered body; a
// body that streamed (over request_buffer) cannot be, and a POST without
// retry_non_idempotent is not.
func TestBufferedBodyRetriedAfterSent(t *testing.T) {
	// small goes through h1Client, large through net/http's Transport
	// (over maxH1Body), buffered when request_buffer is raised.
	small, large := strings.Repeat("p", 10<<10), strings.Repeat("q", 2*maxH1Body)
	for _, tc := range []struct {
		method, body string
		buffer       int
		all          bool
		retried      bool
	}{
		{"PUT", small, 0, false, true},
		{"POST", small, 0, true, true},
		{"POST", small, 0, false, false},
		{"PUT", large, 4 * maxH1Body, false, true},
		{"PUT", large, 0, false, false}, // over request_buffer: streamed
	} {
		dropped, hits := new(atomic.Int64), new(atomic.Int64)
		drop, live := dropBackend(t, dropped), countingBackend(t, "live", hits)
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addrOf(drop)}, {Address: addrOf(live)}},
				Retries:     RetryConfig{NonIdempotent: tc.all},
				HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}}},
			Sites: oneSite(RouteConfig{Upstream: "u", RetryIdempotent: true}),
		}
		cfg.Limits.RequestBuffer = tc.buffer
		f := newFront(t, cfg, frontOpts{})
		code, got := doReq(t, testClient(t), tc.method, f.url+"/", tc.body)
		if dropped.Load() != 1 {
			t.Fatalf("%s of %d bytes (retry_non_idempotent %v): the dropping target saw %d requests, want 1", tc.method, len(tc.body), tc.all, dropped.Load())
		}
		if tc.retried && (code != 200 || got != "live:"+tc.body || hits.Load() != 1) {
			t.Errorf("%s of %d bytes (retry_non_idempotent %v): %d, %d bytes, live target saw %d; want 200 and the whole body from the live target", tc.method, len(tc.body), tc.all, code, len(got), hits.Load())
		}
		if !tc.retried && (code != http.StatusBadGateway || hits.Load() != 0) {
			t.Errorf("%s of %d bytes (retry_non_idempotent %v): %d, live target saw %d; want 502 and no retry", tc.method, len(tc.body), tc.all, code, hits.Load())
		}
	}
}
