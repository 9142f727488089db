package stime

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testServer is an in-process HTTPS server on loopback that counts accepted
// connections.
type testServer struct {
	*httptest.Server
	accepted atomic.Int64
}

func newTestServer(t *testing.T, maxVersion uint16) *testServer {
	t.Helper()
	ts := &testServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/1k", func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("a"), 1024)) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 256<<10)) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) })
	// 103 Early Hints before the response, as a reverse proxy passes it on.
	mux.HandleFunc("/hint-1k", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Write(bytes.Repeat([]byte("a"), 1024))
	})
	mux.HandleFunc("/hint-fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		http.Error(w, "no", http.StatusServiceUnavailable)
	})
	ts.Server = httptest.NewUnstartedServer(mux)
	ts.Server.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			ts.accepted.Add(1)
		}
	}
	ts.Server.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Server.TLS = &tls.Config{MaxVersion: maxVersion}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

func (ts *testServer) clientConfig(cache bool) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	cfg := &tls.Config{RootCAs: pool, ServerName: "example.com"}
	if cache {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(16)
	}
	return cfg
}

func mustRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	if cfg.Duration == 0 {
		cfg.Duration = 30 * time.Second // bound only; -n ends these runs
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestCounts(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		ts := newTestServer(t, v)
		addr := ts.Listener.Addr().String()
		tests := []struct {
			name                                    string
			cfg                                     Config
			conns, resumed, requests, bytes, errors int64
		}{
			{"new", Config{Handshake: TLS(ts.clientConfig(false)), Concurrency: 4, Total: 20}, 20, 0, 0, 0, 0},
			{"reuse", Config{Handshake: TLS(ts.clientConfig(true)), Reuse: true, Concurrency: 2, Total: 20}, 20, 20, 0, 0, 0},
			{"www", Config{Handshake: TLS(ts.clientConfig(false)), Concurrency: 3, Total: 10, Path: "/1k"}, 10, 0, 10, 10240, 0},
			{"reuse-www", Config{Handshake: TLS(ts.clientConfig(true)), Reuse: true, Total: 5, Path: "/1k"}, 5, 5, 5, 5120, 0},
			{"fail-status", Config{Handshake: TLS(ts.clientConfig(false)), Total: 4, Path: "/fail"}, 4, 0, 0, -1, 4},
			// An informational response is not the response: a 503
			// after a 103 is an error, and the body is the 200's.
			{"hint-fail", Config{Handshake: TLS(ts.clientConfig(false)), Total: 4, Path: "/hint-fail"}, 4, 0, 0, -1, 4},
			{"hint-www", Config{Handshake: TLS(ts.clientConfig(false)), Total: 3, Path: "/hint-1k"}, 3, 0, 3, 3072, 0},
			{"hint-keepalive", Config{Handshake: TLS(ts.clientConfig(false)), Total: 6, Path: "/hint-1k", KeepAlive: true}, 1, 0, 6, 6144, 0},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", tls.VersionName(v), tt.name), func(t *testing.T) {
				tt.cfg.Addr = addr
				res := mustRun(t, tt.cfg)
				if res.Connections != tt.conns || res.Resumed != tt.resumed || res.Requests != tt.requests ||
					(tt.bytes >= 0 && res.Bytes != tt.bytes) || res.ErrorCount != tt.errors {
					t.Errorf("got conns %d resumed %d requests %d bytes %d errors %v (%s), want %d %d %d %d %d",
						res.Connections, res.Resumed, res.Requests, res.Bytes, res.Errors, res.FirstError,
						tt.conns, tt.resumed, tt.requests, tt.bytes, tt.errors)
				}
				if res.Handshake.Count != res.Connections {
					t.Errorf("latency count %d != connections %d", res.Handshake.Count, res.Connections)
				}
				if res.Request.Count != res.Requests {
					t.Errorf("request latency count %d != requests %d", res.Request.Count, res.Requests)
				}
				h := res.Handshake
				if res.Connections > 0 && !(0 < h.P50 && h.P50 <= h.P90 && h.P90 <= h.P99 && h.P99 <= h.Max) {
					t.Errorf("percentiles not ordered: %+v", h)
				}
				if tt.errors > 0 && res.Errors["request/http_5xx"] != tt.errors {
					t.Errorf("errors by kind %v", res.Errors)
				}
				if want := tls.VersionName(v); res.Versions[want] != res.Connections {
					t.Errorf("versions %v, want all %s", res.Versions, want)
				}
			})
		}
	}
}

func TestKeepAlive(t *testing.T) {
	ts := newTestServer(t, 0)
	res := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(ts.clientConfig(false)),
		Concurrency: 2, Total: 50, KeepAlive: true, Path: "/big"})
	if res.Requests != 50 || res.Bytes != 50*256<<10 || res.ErrorCount != 0 || res.Request.Count != 50 || res.Request.P99 <= 0 {
		t.Fatalf("requests %d bytes %d errors %v", res.Requests, res.Bytes, res.Errors)
	}
	// One connection per worker: the server keeps them alive.
	if res.Connections < 1 || res.Connections > 2 {
		t.Errorf("connections %d, want 1..2", res.Connections)
	}
	if got := ts.accepted.Load(); got != res.Connections {
		t.Errorf("server accepted %d, client handshakes %d", got, res.Connections)
	}
}

func TestServerSeesEveryConnection(t *testing.T) {
	ts := newTestServer(t, 0)
	res := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(ts.clientConfig(false)),
		Concurrency: 3, Total: 12, Path: "/1k"})
	// With a request per connection the server has accepted every connection
	// before the client got its response.
	if got := ts.accepted.Load(); got != 12 || res.Connections != 12 {
		t.Errorf("server accepted %d, client connections %d", got, res.Connections)
	}
}

func TestErrors(t *testing.T) {
	// A port with nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	ts := newTestServer(t, 0)
	untrusted := &tls.Config{ServerName: "example.com", RootCAs: x509.NewCertPool()}

	tests := []struct {
		name string
		cfg  Config
		kind string
	}{
		{"refused", Config{Addr: closed, Handshake: TLS(untrusted)}, "dial/refused"},
		{"untrusted", Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(untrusted)}, "handshake/certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Total = 3
			res := mustRun(t, tt.cfg)
			if res.Connections != 0 || res.ErrorCount != 3 || res.Errors[tt.kind] != 3 {
				t.Errorf("connections %d errors %v (%s), want 3 %s", res.Connections, res.Errors, res.FirstError, tt.kind)
			}
		})
	}
	// With -keepalive, -n bounds attempts even when no connection succeeds.
	res := mustRun(t, Config{Addr: closed, Handshake: TLS(untrusted), KeepAlive: true, Path: "/", Total: 4})
	if res.ErrorCount != 4 || res.Errors["dial/refused"] != 4 {
		t.Errorf("keep-alive against a closed port: errors %v", res.Errors)
	}
	// Reuse needs a working priming connection.
	if _, err := Run(context.Background(), Config{Addr: closed, Handshake: TLS(untrusted), Reuse: true, Total: 1}); err == nil {
		t.Error("priming against a closed port succeeded")
	}
}

func TestDurationBound(t *testing.T) {
	ts := newTestServer(t, 0)
	res := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(ts.clientConfig(true)),
		Concurrency: 2, Duration: 200 * time.Millisecond})
	if res.Connections == 0 || res.ErrorCount != 0 {
		t.Errorf("connections %d errors %v (%s)", res.Connections, res.Errors, res.FirstError)
	}
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"connections_per_second", "handshake_latency", "errors", "bytes_per_second"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	buf.Reset()
	res.WriteTable(&buf, true)
	if !strings.Contains(buf.String(), "connections/s") || !strings.Contains(buf.String(), "p50/p90/p99") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestRatePacing(t *testing.T) {
	ts := newTestServer(t, 0)
	const n, rate = 12, 200.0
	res := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(ts.clientConfig(false)),
		Concurrency: 3, Total: n, Rate: rate})
	if res.Connections != n || res.ErrorCount != 0 {
		t.Fatalf("connections %d errors %v", res.Connections, res.Errors)
	}
	// The last slot starts (n-1)/rate after the start: pacing never runs early.
	if min := float64(n-1) / rate; res.Elapsed < min {
		t.Errorf("elapsed %.4fs < %.4fs: pacing not applied", res.Elapsed, min)
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {50, 50}, {90, 90}, {99, 99}, {99.5, 100}, {100, 100}}
	for _, tt := range tests {
		if got := Percentile(s, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if Percentile(nil, 50) != 0 || Percentile(s[:1], 99) != 1 {
		t.Error("edge cases")
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&stageError{"dial", syscall.ECONNREFUSED}, "dial/refused"},
		{&stageError{"handshake", context.DeadlineExceeded}, "handshake/timeout"},
		{&stageError{"handshake", io.EOF}, "handshake/eof"},
		{&stageError{"handshake", errors.New("remote error: tls: handshake failure alert")}, "handshake/alert"},
		{&stageError{"request", &statusError{404}}, "request/http_4xx"},
		{&stageError{"request", fmt.Errorf("read: %w", syscall.ECONNRESET)}, "request/reset"},
		{errors.New("weird"), "other/other"},
	}
	for _, tt := range tests {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestRateLatencyFromSchedule: with -rate, a stall delays every operation
// scheduled behind it, and their latency must show it (measured from the
// scheduled start), not only the stalled operation's own (coordinated
// omission). Without -rate, latency is the handshake alone.
func TestRateLatencyFromSchedule(t *testing.T) {
	ts := newTestServer(t, 0)
	stalling := func() Handshaker {
		var n atomic.Int64
		inner := TLS(ts.clientConfig(false))
		return func(ctx context.Context, raw net.Conn) (net.Conn, ConnInfo, error) {
			if n.Add(1) == 1 {
				time.Sleep(300 * time.Millisecond) // the first handshake stalls
			}
			return inner(ctx, raw)
		}
	}
	// 20 operations due over 100 ms, one worker: after the 300 ms stall all
	// of them are at least 200 ms behind their schedule.
	paced := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: stalling(), Total: 20, Rate: 200})
	if paced.Handshake.P50 < 0.2 {
		t.Errorf("paced median %.3fs: latency ignores the time operations waited behind the stall", paced.Handshake.P50)
	}
	free := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: stalling(), Total: 20})
	if free.Handshake.P50 >= 0.2 || free.Handshake.Max < 0.3 {
		t.Errorf("unpaced median %.3fs max %.3fs: want the stall in the max only", free.Handshake.P50, free.Handshake.Max)
	}
	if len(paced.Handshake.Histogram) == 0 || paced.Handshake.P999 < paced.Handshake.P99 {
		t.Errorf("histogram %v, p99 %v p99.9 %v", paced.Handshake.Histogram, paced.Handshake.P99, paced.Handshake.P999)
	}
	var total int64
	for _, b := range paced.Handshake.Histogram {
		total += b.Count
	}
	if total != paced.Handshake.Count {
		t.Errorf("histogram holds %d samples, want %d", total, paced.Handshake.Count)
	}
}

func TestProgressReports(t *testing.T) {
	ts := newTestServer(t, 0)
	var calls atomic.Int64
	mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(ts.clientConfig(false)), Rate: 20, Total: 30,
		Progress: func(el time.Duration, conns, reqs, errs int64) { calls.Add(1) }})
	if calls.Load() == 0 {
		t.Error("no progress report during a 1.5 s run")
	}
}

// TestEndlessInformationalResponses: a server that sends only 1xx
// responses gets a bad_response error, not an endless read.
func TestEndlessInformationalResponses(t *testing.T) {
	heads := strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInformational+1) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	_, err := readFinalResponse(newResponseReader(strings.NewReader(heads)))
	if err == nil || Classify(&stageError{"request", err}) != "request/bad_response" {
		t.Errorf("error %v, want a request/bad_response", err)
	}
	heads = strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", maxInformational) + "HTTP/1.1 204 No Content\r\n\r\n"
	if resp, err := readFinalResponse(newResponseReader(strings.NewReader(heads))); err != nil || resp.StatusCode != 204 {
		t.Errorf("%d informational responses: %v, %v; want the 204", maxInformational, resp, err)
	}
}

// TestResponseHeadBounded: a response head longer than maxResponseHead (a
// server that never ends a header line) is a bad_response error, not
// buffered until the timeout; the body after a head is not bounded, and
// the next response on the connection gets a fresh budget.
func TestResponseHeadBounded(t *testing.T) {
	huge := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 4*maxResponseHead) + "\r\nContent-Length: 0\r\n\r\n"
	_, err := readFinalResponse(newResponseReader(strings.NewReader(huge)))
	if err == nil || !strings.Contains(err.Error(), "head longer than") || Classify(&stageError{"request", err}) != "request/bad_response" {
		t.Fatalf("a 4 MiB head: error %v, want a request/bad_response for its length", err)
	}
	body := strings.Repeat("b", 2*maxResponseHead)
	one := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	rr := newResponseReader(strings.NewReader(one + one))
	for i := range 2 {
		resp, err := readFinalResponse(rr)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != int64(len(body)) {
			t.Fatalf("response %d body: %d bytes, %v", i, n, err)
		}
	}
}

// TestSlowRateNotAFlood: a rate so low that the second slot is due past
// the end of the run makes one connection in the run. The slot's offset
// in nanoseconds (1e19 here) overflows a time.Duration, which became a
// time in the past, so every later slot started at once: an unpaced flood
// with latencies of 292 years.
func TestSlowRateNotAFlood(t *testing.T) {
	ts := newTestServer(t, 0)
	res := mustRun(t, Config{Addr: ts.Listener.Addr().String(), Handshake: TLS(ts.clientConfig(false)),
		Concurrency: 2, Rate: 1e-10, Duration: 300 * time.Millisecond})
	if res.Connections != 1 || res.ErrorCount != 0 {
		t.Fatalf("connections %d errors %v, want the one connection of slot 0", res.Connections, res.Errors)
	}
	if got := ts.accepted.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
}
