package proxy

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// grpcCallWith is grpcCall with more request fields (name, value pairs)
// and a message that ends the stream.
func grpcCallWith(t *testing.T, fr *http2.Framer, id uint32, addr, path, ctype string, fields ...string) {
	t.Helper()
	f := append([]string{":method", "POST", ":scheme", "http", ":path", path, ":authority", addr,
		"content-type", ctype, "te", "trailers"}, fields...)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h2Block(f...), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(id, true, grpcMsg("hi")); err != nil {
		t.Fatal(err)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestGRPCLocalReplies: a gRPC call (gRPC over HTTP/2, gRPC-Web over
// any version) the proxy fails itself gets a gRPC status, as from Envoy:
// HTTP 200, its Content-Type, and a Trailers-Only response (one HEADERS
// frame that ends the stream) with grpc-status mapped from the HTTP
// status (http-grpc-status-mapping.md) and grpc-message. Before, it got
// the HTTP status and a text page, which gRPC clients report as a
// transport error ("unexpected HTTP status code"), not as why the call
// failed. No target up (502): UNAVAILABLE;
// the upstream's response_header passed: UNAVAILABLE, but
// DEADLINE_EXCEEDED when the call's own grpc-timeout had passed by then;
// a route's 403: PERMISSION_DENIED with its body as the message (a page
// gives the status text); no route: UNIMPLEMENTED. The access log keeps
// the proxy's status and gives the grpc_status sent. Other requests, gRPC
// over HTTP/1.1 and a 421 (which has the client connect again) keep the
// HTTP status, and a route's answer of success is its own.
func TestGRPCLocalReplies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := Config{
		Upstreams: []UpstreamConfig{
			{Name: "down", Targets: []TargetConfig{{Address: closedAddr(t)}}},
			{Name: "late", Targets: []TargetConfig{{Address: lateBackend(t)}}, Protocol: "h2c",
				Transport: TransportConfig{ResponseHeaderTimeout: 200 * time.Millisecond}},
		},
		Sites: oneSite(
			RouteConfig{PathPrefix: "/svc.Admin/", Respond: &RespondConfig{Status: 403, Body: "admin calls are refused\n"}},
			RouteConfig{PathPrefix: "/svc.Page/", Respond: &RespondConfig{Status: 404, Body: "<html>\n<p>gone</p>\n</html>\n"}},
			RouteConfig{PathPrefix: "/svc.Ok/", Respond: &RespondConfig{Body: "ok"}},
			RouteConfig{PathPrefix: "/svc.Down/", Upstream: "down"},
			RouteConfig{PathPrefix: "/svc.Late/", Upstream: "late"},
		),
		AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{uri} {status} {grpc_status}"},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	call := func(path, ctype string, fields ...string) []h2Event {
		t.Helper()
		fr, _ := rawH2(t, f.addr) // h2Events decodes one stream's fields
		grpcCallWith(t, fr, 1, f.addr, path, ctype, fields...)
		return h2Events(t, fr, 1)
	}
	for _, tc := range []struct {
		path, ctype string
		fields      []string
		code, msg   string
	}{
		{"/svc.Down/Call", "application/grpc+proto", nil, "14", "no upstream target answered"},
		{"/svc.Late/Call?d=3s", "application/grpc", nil, "14", "upstream timed out"},
		{"/svc.Late/Call?d=3s", "application/grpc", []string{"grpc-timeout", "300m"}, "4", "upstream timed out"},
		{"/svc.Admin/Call", "application/grpc", nil, "7", "admin calls are refused"},
		{"/svc.Page/Call", "application/grpc", nil, "12", "Not Found"},
		{"/other/Call", "application/grpc", nil, "12", "no route matches"},
		{"/svc.Admin/Web", "application/grpc-web-text+proto", nil, "7", "admin calls are refused"},
	} {
		evs := call(tc.path, tc.ctype, tc.fields...)
		if len(evs) != 1 || evs[0].kind != "headers" || !evs[0].end {
			t.Errorf("%s: the stream got %+v, want one HEADERS frame that ends it", tc.path, evs)
			continue
		}
		h := evs[0].fields
		wantCT := "application/grpc"
		if strings.HasPrefix(tc.ctype, "application/grpc-web-text") {
			wantCT = "application/grpc-web-text"
		}
		if h[":status"] != "200" || h["content-type"] != wantCT || h["grpc-status"] != tc.code || h["grpc-message"] != tc.msg {
			t.Errorf("%s %s: %v, want 200 %s grpc-status %s grpc-message %q", tc.path, tc.fields, h, wantCT, tc.code, tc.msg)
		}
	}
	// Not gRPC: the HTTP status and page.
	for _, ct := range []string{"application/json", "application/grpcx"} {
		if evs := call("/svc.Admin/Call", ct); len(evs) != 2 || evs[0].fields[":status"] != "403" || evs[0].fields["grpc-status"] != "" {
			t.Errorf("%s: %+v, want 403 and a page without grpc-status", ct, evs)
		}
	}

	// A route's answer of success is its own.
	if evs := call("/svc.Ok/Call", "application/grpc"); len(evs) != 2 || evs[0].fields[":status"] != "200" || evs[0].fields["grpc-status"] != "" {
		t.Errorf("respond 200: %+v, want 200 and its body without grpc-status", evs)
	}

	// Over HTTP/1.1: gRPC-Web gets its status, gRPC (no client's) the page.
	f1 := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, tc := range []struct{ ctype, code, status string }{
		{"application/grpc-web+proto", "7", "200 application/grpc-web"},
		{"application/grpc", "", "403 text/plain; charset=utf-8"},
	} {
		status, body, h := get(t, c, f1.url+"/svc.Admin/Call", "Content-Type", tc.ctype)
		if got := strconv.Itoa(status) + " " + h.Get("Content-Type"); got != tc.status || h.Get("Grpc-Status") != tc.code {
			t.Errorf("HTTP/1.1 %s: %s grpc-status %q, want %s grpc-status %q", tc.ctype, got, h.Get("Grpc-Status"), tc.status, tc.code)
		}
		if tc.code != "" && body != "" {
			t.Errorf("HTTP/1.1 %s: body %q, want none (Trailers-Only)", tc.ctype, body)
		}
	}

	// A connection made for a site a reload removed: 421, even to gRPC.
	fm := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2", Site: "removed"}})
	frm, _ := rawH2(t, fm.addr)
	grpcCallWith(t, frm, 1, fm.addr, "/svc.Admin/Call", "application/grpc")
	if evs := h2Events(t, frm, 1); len(evs) == 0 || evs[0].fields[":status"] != "421" {
		t.Errorf("misdirected gRPC call: %+v, want 421", evs)
	}

	f.p.AccessLog().Flush()
	f1.p.AccessLog().Flush()
	data, _ := os.ReadFile(path)
	for _, want := range []string{
		"/svc.Down/Call 502 14\n", "/svc.Late/Call?d=3s 504 14\n", "/svc.Late/Call?d=3s 504 4\n",
		"/svc.Admin/Call 403 7\n", "/svc.Page/Call 404 12\n", "/other/Call 404 12\n", "/svc.Admin/Call 403 -\n",
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("access log without %q:\n%s", want, data)
		}
	}
}

// TestGRPCMessageEncoded: grpc-message is percent-encoded
// (PROTOCOL-HTTP2.md: every byte but printable ASCII other than '%').
func TestGRPCMessageEncoded(t *testing.T) {
	for in, want := range map[string]string{
		"no route matches": "no route matches",
		"100% full":        "100%25 full",
		"拒绝":               "%E6%8B%92%E7%BB%9D",
		"a\tb\x7f":         "a%09b%7F",
	} {
		if got := grpcMessage(in); got != want {
			t.Errorf("grpcMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGRPCCodeOf: the mapping of http-grpc-status-mapping.md.
func TestGRPCCodeOf(t *testing.T) {
	r, _ := http.NewRequest("POST", "/", nil)
	for code, want := range map[int]int{400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14, 413: 2, 500: 2, 408: 2} {
		if got := grpcCodeOf(code, r, time.Now()); got != want {
			t.Errorf("%d: %d, want %d", code, got, want)
		}
	}
}

// TestGRPCTimeoutRewritten: a gRPC call's grpc-timeout reaches the target
// as what is left of it, on every attempt (Envoy rewrites it so): a
// retry after an attempt that took 300ms gets 300ms less, so that the
// backend's deadline is the client's. Before, every attempt carried the
// client's value, and the backend worked past the call's end. A request
// that is not gRPC, and an upstream that does not honour grpc-timeout
// (grpc_timeout_max negative), pass it as it came.
func TestGRPCTimeoutRewritten(t *testing.T) {
	const spent = 300 * time.Millisecond
	var mu sync.Mutex
	var got []string
	var n atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, strings.Join(r.Header["Grpc-Timeout"], ","))
		mu.Unlock()
		if n.Add(1) == 1 {
			time.Sleep(spent)
			panic(http.ErrAbortHandler) // the first attempt fails after a while
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "0")
	})
	a, b := h2cBackend(t, h), h2cBackend(t, h)
	for _, tc := range []struct {
		name  string
		most  time.Duration
		ctype string
		check func(first, retry time.Duration, firstRaw, retryRaw string) bool
	}{
		{"gRPC", 0, "application/grpc", func(first, retry time.Duration, _, _ string) bool {
			return first <= 5*time.Second && first > 4*time.Second && retry <= 5*time.Second-spent && retry > 0
		}},
		{"not gRPC", 0, "text/plain", func(_, _ time.Duration, f, r string) bool { return f == "5S" && r == "5S" }},
		{"not honoured", -1, "application/grpc", func(_, _ time.Duration, f, r string) bool { return f == "5S" && r == "5S" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			n.Store(0)
			cfg := Config{
				Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: a}, {Address: b}}, Protocol: "h2c",
					Transport: TransportConfig{GRPCTimeoutMax: tc.most}}},
				Sites: oneSite(RouteConfig{Upstream: "u", Retries: &RetryConfig{Tries: 2, NonIdempotent: true}}),
			}
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
			c := h2cClient(t)
			c.Timeout = testwait.Bound(10 * time.Second)
			req, _ := http.NewRequest("POST", f.url+"/svc.Echo/Call", http.NoBody)
			req.Header.Set("Content-Type", tc.ctype)
			req.Header.Set("Grpc-Timeout", "5S")
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if res.StatusCode != 200 || len(got) != 2 {
				t.Fatalf("%d after attempts with grpc-timeout %q, want 200 after 2", res.StatusCode, got)
			}
			gh := func(v string) time.Duration {
				d, ok := grpcTimeout(http.Header{"Content-Type": {"application/grpc"}, "Grpc-Timeout": {v}})
				if !ok {
					t.Errorf("grpc-timeout %q malformed", v)
				}
				return d
			}
			if !tc.check(gh(got[0]), gh(got[1]), got[0], got[1]) {
				t.Errorf("the attempts got grpc-timeout %q", got)
			}
		})
	}
}

// TestGRPCDeadlineBeforeWait: a gRPC call whose grpc-timeout is shorter
// than the upstream's response_header (or the upstream has none) is
// answered DEADLINE_EXCEEDED at its own deadline, by every upstream
// client, without charging the target (a client's short deadline says
// nothing of its health) or trying another (a retryable call);
// a call whose deadline passed before any attempt reaches no target.
// Before, the proxy waited for response_header (or for good) for a client
// that did not cancel the call itself (one behind another hop).
func TestGRPCDeadlineBeforeWait(t *testing.T) {
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "0")
	})
	a, b := h2cBackend(t, h), h2cBackend(t, h)
	for _, tc := range headClients() {
		for _, wait := range []time.Duration{testwait.Bound(20 * time.Second), 0} {
			t.Run(tc.name+"/"+wait.String(), func(t *testing.T) {
				cfg := Config{
					Upstreams: []UpstreamConfig{upstream("u", a, b)},
					Sites:     oneSite(RouteConfig{Upstream: "u", Retries: &RetryConfig{NonIdempotent: true}}),
				}
				cfg.Upstreams[0].Transport.ResponseHeaderTimeout = wait
				tc.setup(&cfg.Upstreams[0])
				obs := newEventObserver()
				f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}, obs: obs})
				call := func(path, timeout string) string {
					fr, _ := rawH2(t, f.addr) // h2Events decodes one stream's fields
					grpcCallWith(t, fr, 1, f.addr, path, "application/grpc", "grpc-timeout", timeout)
					return grpcStatus(h2Events(t, fr, 1))
				}
				calls.Store(0)
				start := time.Now()
				if got := call("/svc.Slow/Call?d=2s", "300m"); got != "4" {
					t.Errorf("slow call: grpc-status %q, want 4", got)
				}
				if el := time.Since(start); el >= testwait.Bound(10*time.Second) {
					t.Errorf("slow call answered after %v", el)
				}
				if got := call("/svc.Fast/Call?d=0s", "5S"); got != "0" {
					t.Errorf("the next call: grpc-status %q, want 0 (the target was charged for the deadline)", got)
				}
				if got := call("/svc.Fast/Call?d=0s", "1n"); got != "4" {
					t.Errorf("call past its deadline: grpc-status %q, want 4", got)
				}
				if n, d, r := calls.Load(), obs.downs(), obs.retryCount(); n != 2 || len(d) > 0 || r > 0 {
					t.Errorf("the targets got %d calls (want 2), %d retries (want none), health events %q (want none)", n, r, d)
				}
			})
		}
	}
}
