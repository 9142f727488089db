package proxy

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// deadlineTarget serves gRPC-like calls that outlast a deadline:
// /svc.S/Upload reads the request body until it fails and sends how it
// failed on ended; /svc.S/Watch?n=N sends N messages (0: until its
// context ends, 1000 at most) 20ms apart and sends how it ended on ended;
// both answer with grpc-status 0 in trailers. /svc.S/Trickle sends a
// plain (not gRPC) body of 1000 bytes 10 every 20ms, which the proxy
// buffers, and sends how it ended on ended.
func deadlineTarget(t *testing.T, ended chan<- string) string {
	return h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		switch {
		case strings.HasPrefix(r.URL.Path, "/svc.S/Upload"):
			buf := make([]byte, 512)
			for range 10000 { // bounded: the client sends a message every 20ms
				if _, err := r.Body.Read(buf); err != nil {
					ended <- "upload: " + err.Error()
					return
				}
			}
		case strings.HasPrefix(r.URL.Path, "/svc.S/Trickle"):
			// Not a gRPC response: the proxy buffers it.
			w.Header().Del("Trailer")
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "1000")
			for range 100 {
				select {
				case <-r.Context().Done():
					ended <- "trickle: " + r.Context().Err().Error()
					return
				case <-time.After(20 * time.Millisecond):
				}
				w.Write([]byte("0123456789"))
				w.(http.Flusher).Flush()
			}
			ended <- "trickle: done"
			return
		case strings.HasPrefix(r.URL.Path, "/svc.S/Watch"):
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for i := 0; n == 0 && i < 1000 || i < n; i++ {
				select {
				case <-r.Context().Done():
					ended <- "watch: " + r.Context().Err().Error()
					return
				case <-time.After(20 * time.Millisecond):
				}
				w.Write(grpcMsg("tick"))
				w.(http.Flusher).Flush()
			}
			ended <- "watch: done"
		}
		w.Header().Set("Grpc-Status", "0")
	}))
}

// rawH2Within is rawH2 whose connection fails its reads and writes after
// d (testwait.Bound): a stream that goes on fails the test soon.
func rawH2Within(t *testing.T, addr string, d time.Duration) *http2.Framer {
	t.Helper()
	c := dialRaw(t, addr)
	c.SetDeadline(time.Now().Add(testwait.Bound(d)))
	fr, _ := rawH2On(t, c)
	return fr
}

// TestGRPCDeadlineEndsStream: a gRPC call whose grpc-timeout the proxy
// honours ends whole at its deadline, as under Envoy's
// max_stream_duration with grpc_timeout_header_max: before, the deadline
// only cut the wait for the response head, which begins once the
// request body ends, so a client-streaming call (a long upload) and a
// server-streaming one (a long response) went on past it, holding a
// target's stream for a client that gave up. An upload still going at
// the deadline gets the Trailers-Only DEADLINE_EXCEEDED reply, a response
// stream trailers with grpc-status 4 and grpc-message "deadline
// exceeded" (over HTTP/1.1, a response none of which went out yet is
// dropped for the Trailers-Only reply); all soon after the deadline, and the target's stream is
// reset (RST_STREAM CANCEL to an h2c target, whose upload read fails with
// it; the connection closed to an HTTP/1.1 one). The access log keeps the
// status sent with grpc_status 4. A gRPC-Web response stream, whose
// trailers are in its body, is reset then. A streaming call that ends
// before its deadline, one with no honoured deadline (grpc_timeout_max
// negative) and a request that is not gRPC but carries a grpc-timeout
// all stream whole.
// For the HTTP/1.1 clients and h2c.
func TestGRPCDeadlineEndsStream(t *testing.T) {
	const deadline = 300 * time.Millisecond
	for _, tc := range headClients() {
		t.Run(tc.name, func(t *testing.T) {
			ended := make(chan string, 16)
			addr := deadlineTarget(t, ended)
			path := filepath.Join(t.TempDir(), "access.log")
			cfg := Config{
				Upstreams: []UpstreamConfig{upstream("u", addr), upstream("free", addr)},
				Sites: oneSite(
					RouteConfig{PathPrefix: "/svc.S/", Upstream: "u"},
					RouteConfig{PathPrefix: "/free/", Upstream: "free", StripPrefix: "/free"},
				),
				AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{uri} {status} {grpc_status}"},
			}
			tc.setup(&cfg.Upstreams[0])
			tc.setup(&cfg.Upstreams[1])
			cfg.Upstreams[1].Transport.GRPCTimeoutMax = -1 // not honoured
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}, logger: logger})
			targetEnd := func(what string) string {
				t.Helper()
				select {
				case s := <-ended:
					return s
				case <-time.After(testwait.Bound(5 * time.Second)):
					t.Fatalf("%s: the target's stream went on", what)
				}
				return ""
			}

			// A client-streaming call whose client sends a message
			// every 20ms and never ends its upload.
			fr := rawH2Within(t, f.addr, 5*time.Second)
			block := h2Block(":method", "POST", ":scheme", "http", ":path", "/svc.S/Upload", ":authority", f.addr,
				"content-type", "application/grpc", "te", "trailers", "grpc-timeout", "300m")
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			stop, sent := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sent)
				for range 500 { // 10 s at most
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if fr.WriteData(1, false, grpcMsg("chunk")) != nil {
						return
					}
				}
			}()
			start := time.Now()
			evs := h2Events(t, fr, 1)
			el := time.Since(start)
			close(stop)
			<-sent
			if len(evs) != 1 || evs[0].kind != "headers" || !evs[0].end || evs[0].fields[":status"] != "200" ||
				evs[0].fields["grpc-status"] != "4" {
				t.Errorf("upload past its deadline: the stream got %+v, want a Trailers-Only grpc-status 4", evs)
			}
			if el < deadline || el >= testwait.Bound(5*time.Second) {
				t.Errorf("upload past its deadline answered after %v (deadline %v)", el, deadline)
			}
			got := targetEnd("upload")
			if !strings.HasPrefix(got, "upload: ") || tc.name == "h2c" && !strings.Contains(got, "CANCEL") {
				t.Errorf("the target's upload ended with %q, want a reset (CANCEL over h2c)", got)
			}

			// A server-streaming call that would go on for 20 s.
			fr = rawH2Within(t, f.addr, 5*time.Second)
			start = time.Now()
			grpcCallWith(t, fr, 1, f.addr, "/svc.S/Watch", "application/grpc", "grpc-timeout", "300m")
			evs = h2Events(t, fr, 1)
			el = time.Since(start)
			last := evs[len(evs)-1]
			if len(evs) < 3 || evs[0].fields[":status"] != "200" || evs[1].kind != "data" || last.kind != "headers" || !last.end ||
				last.fields["grpc-status"] != "4" || last.fields["grpc-message"] != "deadline exceeded" {
				t.Errorf("response stream past its deadline: the stream got %+v, want messages, then trailers grpc-status 4 \"deadline exceeded\"", evs)
			}
			if el < deadline || el >= testwait.Bound(5*time.Second) {
				t.Errorf("response stream past its deadline ended after %v (deadline %v)", el, deadline)
			}
			if got := targetEnd("watch"); got != "watch: context canceled" {
				t.Errorf("the target's response stream ended with %q, want its context canceled (the stream reset)", got)
			}

			// gRPC-Web's trailers are a frame of its body: its
			// response ends broken (reset) at the deadline.
			fr = rawH2Within(t, f.addr, 5*time.Second)
			grpcCallWith(t, fr, 1, f.addr, "/svc.S/Watch?web", "application/grpc-web+proto", "grpc-timeout", "300m")
			if evs = h2Events(t, fr, 1); evs[len(evs)-1].kind != "rst" {
				t.Errorf("gRPC-Web response stream past its deadline: the stream got %+v, want it reset", evs)
			}
			if got := targetEnd("grpc-web watch"); got != "watch: context canceled" {
				t.Errorf("the target's gRPC-Web response stream ended with %q, want its context canceled", got)
			}

			// Over HTTP/1.1 a response none of which went out yet is
			// dropped: the gRPC-Web call gets the Trailers-Only reply.
			f1 := newFront(t, cfg, frontOpts{logger: logger})
			c := testClient(t)
			c.Timeout = testwait.Bound(5 * time.Second)
			status, body, h := get(t, c, f1.url+"/svc.S/Trickle", "Content-Type", "application/grpc-web", "Grpc-Timeout", "300m")
			if status != 200 || h.Get("Content-Type") != "application/grpc-web" || h.Get("Grpc-Status") != "4" || body != "" {
				t.Errorf("gRPC-Web call past its deadline, nothing sent yet: %d %v %q, want 200 and a Trailers-Only grpc-status 4", status, h, body)
			}
			if got := targetEnd("trickle"); got != "trickle: context canceled" {
				t.Errorf("the target's buffered response ended with %q, want its context canceled", got)
			}

			// Streams that end before their deadline, or have none
			// the proxy honours, or are not gRPC, are whole.
			for _, c := range []struct {
				path, ctype, timeout string
			}{
				{"/svc.S/Watch?n=5", "application/grpc", "10S"},
				{"/free/svc.S/Watch?n=25", "application/grpc", "300m"},
				{"/svc.S/Watch?n=25", "application/json", "300m"},
			} {
				fr = rawH2Within(t, f.addr, 5*time.Second)
				grpcCallWith(t, fr, 1, f.addr, c.path, c.ctype, "grpc-timeout", c.timeout)
				evs = h2Events(t, fr, 1)
				n, _ := strconv.Atoi(c.path[strings.LastIndexByte(c.path, '=')+1:])
				data := 0
				for _, e := range evs {
					if e.kind == "data" && e.n > 0 {
						data++
					}
				}
				last := evs[len(evs)-1]
				if data != n || last.kind != "headers" || !last.end || last.fields["grpc-status"] != "0" {
					t.Errorf("%s %s grpc-timeout %s: %d messages, then %+v; want %d and grpc-status 0", c.path, c.ctype, c.timeout, data, last, n)
				}
				if got := targetEnd(c.path); got != "watch: done" {
					t.Errorf("%s: the target's stream ended with %q, want done", c.path, got)
				}
			}

			if l := logs.String(); !strings.Contains(l, `level=INFO msg="gRPC call ended at its deadline during the response"`) ||
				!strings.Contains(l, "grpc_timeout=300m") || strings.Contains(l, "upstream body copy failed") {
				t.Errorf("the log does not tell the response stream ended at its deadline (info, with its grpc_timeout, no copy failure):\n%s", l)
			}
			f.p.AccessLog().Flush()
			f1.p.AccessLog().Flush()
			data, _ := os.ReadFile(path)
			for _, want := range []string{"/svc.S/Upload 504 4\n", "/svc.S/Watch 200 4\n", "/svc.S/Trickle 504 4\n", "/svc.S/Watch?n=5 200 0\n"} {
				if !strings.Contains(string(data), want) {
					t.Errorf("access log without %q:\n%s", want, data)
				}
			}
		})
	}
}

// TestGRPCDeadlinePassedBeforePick: a gRPC call whose deadline passed
// before any attempt (here a grpc-timeout of 1n) is answered
// DEADLINE_EXCEEDED with no target picked (the access log's
// upstream_addr is "-"): no attempt is made with an ended context, nor a
// target's balancing share taken. A call with time left tries the
// target (none listens: UNAVAILABLE).
func TestGRPCDeadlinePassedBeforePick(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	addr := closedAddr(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
		AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{grpc_status} {upstream_addr}"},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	for _, c := range []struct{ timeout, want string }{{"5S", "14"}, {"1n", "4"}} {
		fr := rawH2Within(t, f.addr, 5*time.Second)
		grpcCallWith(t, fr, 1, f.addr, "/svc.S/Call", "application/grpc", "grpc-timeout", c.timeout)
		if got := grpcStatus(h2Events(t, fr, 1)); got != c.want {
			t.Errorf("grpc-timeout %s: grpc-status %q, want %s", c.timeout, got, c.want)
		}
	}
	f.p.AccessLog().Flush()
	data, _ := os.ReadFile(path)
	if want := "14 " + addr + "\n4 -\n"; string(data) != want {
		t.Errorf("access log %q, want %q", data, want)
	}
}
