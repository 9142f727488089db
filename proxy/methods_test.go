package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// Requests that a reverse proxy must not forward as they come: CONNECT
// (no tunnels), :protocol outside an extended CONNECT, an h2 :authority
// that no Host field may hold.

// rawH2 opens an HTTP/2 connection to addr as a client of raw frames
// (net/http's Transport refuses what these tests send) and exchanges
// SETTINGS; it returns the server's.
func rawH2(t *testing.T, addr string) (*http2.Framer, *http2.SettingsFrame) {
	t.Helper()
	return rawH2On(t, dialRaw(t, addr))
}

// rawH2On is rawH2 on the connection c.
func rawH2On(t *testing.T, c net.Conn) (*http2.Framer, *http2.SettingsFrame) {
	t.Helper()
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := fm.(*http2.SettingsFrame); ok && !sf.IsAck() {
			fr.WriteSettingsAck()
			return fr, sf
		}
	}
}

// h2Block hpack-encodes fields (name, value pairs).
func h2Block(fields ...string) []byte {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return block.Bytes()
}

// h2Status reads frames until stream id's response status, its reset or
// the connection's end, and returns the status ("RST code", "GOAWAY
// code"; "" if none).
func h2Status(t *testing.T, fr *http2.Framer, id uint32) string {
	t.Helper()
	status := ""
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
		if hf.Name == ":status" {
			status = hf.Value
		}
	})
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			return status
		}
		switch fm := fm.(type) {
		case *http2.HeadersFrame:
			dec.Write(fm.HeaderBlockFragment())
			if fm.StreamID == id && status != "" {
				return status
			}
		case *http2.RSTStreamFrame:
			if fm.StreamID == id {
				return "RST " + fm.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "GOAWAY " + fm.ErrCode.String()
		}
	}
}

// keepAliveBackend is an HTTP/1.1 target that reads requests one after
// another on each connection (a CONNECT without Content-Length has no
// content, RFC 9110 §9.3.6) and answers each with answer's status,
// keeping the connection, as many servers do after refusing a CONNECT.
// It reports every request on seen.
func keepAliveBackend(t *testing.T, answer func(*http.Request) int, seen chan<- string) string {
	return connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, r.Body)
			seen <- r.Method + " " + r.RequestURI + " verify=" + r.Header.Get("X-Ssl-Client-Verify") + " real-ip=" + r.Header.Get("X-Real-Ip")
			code := answer(r)
			fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", code, http.StatusText(code))
		}
	})
}

// noRequestsSeen fails t if the target reports a request within d.
func noRequestsSeen(t *testing.T, seen <-chan string, d time.Duration) {
	t.Helper()
	select {
	case s := <-seen:
		t.Errorf("the target got a request: %s", s)
	case <-time.After(d):
	}
}

// smuggledRequest is what a CONNECT's content would hold to be read by a
// target as a request the proxy never saw, with identity fields the
// proxy strips from every request it does see.
const smuggledRequest = "GET /smuggled HTTP/1.1\r\nHost: internal\r\nX-Ssl-Client-Verify: SUCCESS\r\nX-Real-Ip: 10.9.9.9\r\n\r\n"

// TestConnectRefused: a CONNECT (RFC 9110 §9.3.6; over h2 RFC 9113 §8.5:
// :method CONNECT, :authority, no :path) asks for a tunnel, which a
// reverse proxy does not open: 501, and the target sees nothing.
// Forwarded, its content (the h2 stream's DATA, an HTTP/1.1 body framed
// by Content-Length) would be written unframed after the head (net/http
// writes a CONNECT body as is), and a target that refused the CONNECT
// and kept its connection would read it as the next request. Over
// HTTP/1.1 the connection closes after the 501: what follows may be
// bytes meant for the tunnel.
func TestConnectRefused(t *testing.T) {
	seen := make(chan string, 16)
	addr := keepAliveBackend(t, func(r *http.Request) int {
		if r.Method == http.MethodConnect {
			return http.StatusMethodNotAllowed
		}
		return http.StatusOK
	}, seen)

	f2 := newFront(t, proxyTo(addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr, _ := rawH2(t, f2.addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: h2Block(":method", "CONNECT", ":authority", "example.test:443")}); err != nil {
		t.Fatal(err)
	}
	fr.WriteData(1, true, []byte(smuggledRequest))
	if status := h2Status(t, fr, 1); status != "501" {
		t.Errorf("h2 CONNECT: %s, want 501", status)
	}
	noRequestsSeen(t, seen, 300*time.Millisecond)

	f1 := newFront(t, proxyTo(addr), frontOpts{})
	res, c, br := rawExchange(t, f1.addr, fmt.Sprintf("CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\nContent-Length: %d\r\n\r\n%s", len(smuggledRequest), smuggledRequest))
	if res.StatusCode != http.StatusNotImplemented || !res.Close {
		t.Errorf("HTTP/1.1 CONNECT: %d (close %v), want 501 and the connection closed", res.StatusCode, res.Close)
	}
	io.Copy(io.Discard, res.Body)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := br.ReadByte(); err == nil {
		t.Errorf("the connection stays open after a refused CONNECT (read %q)", n)
	}
	noRequestsSeen(t, seen, 300*time.Millisecond)
}

// TestProtocolPseudoHeaderOnlyOnConnect: with extended CONNECT on
// (GODEBUG=http2xconnect=1, which gmproxy always runs with), x/net/http2
// takes a :protocol pseudo-header on any request and hands it to the
// handler as r.Header[":protocol"]. RFC 8441 §4 allows it on CONNECT
// only: on a POST it is malformed, 400. Copied upstream, the field name
// would fail every attempt before anything was sent, each charged to its
// target: one request from any client would take the whole upstream out
// of service.
func TestProtocolPseudoHeaderOnlyOnConnect(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestProtocolPseudoHeaderOnlyOnConnect", "GODEBUG=http2xconnect=1")
		return
	}
	a, b := nameBackend(t, "a"), nameBackend(t, "b")
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", addrOf(a), addrOf(b))},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
	}
	obs := newEventObserver()
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{ALPN: "h2"}})
	fr, _ := rawH2(t, f.addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: h2Block(":method", "POST", ":scheme", "https", ":path", "/", ":authority", "example.test", ":protocol", "websocket")}); err != nil {
		t.Fatal(err)
	}
	fr.WriteData(1, true, []byte("hello"))
	if status := h2Status(t, fr, 1); status != "400" {
		t.Errorf("POST with :protocol: %s, want 400", status)
	}
	if d := obs.downs(); len(d) > 0 {
		t.Errorf("a client's malformed request marked targets down: %v", d)
	}
	if code, _, _ := get(t, h2cClient(t), f.url+"/"); code != 200 {
		t.Errorf("an ordinary request after it: status %d, want 200", code)
	}
}

// TestH2InvalidAuthorityRefused: an h2 :authority holding bytes no Host
// field may (RFC 9110 §7.2, RFC 3986 reg-name) is refused as an
// HTTP/1.1 Host with them is (internal/h1server: 400): by the proxy
// (400; the HTTP/2 server of Go 1.27's net/http does not check
// :authority) or, on an older Go, by x/net/http2 (a stream error, RFC
// 9113 §8.1.1). It never reaches the target, whose X-Forwarded-Host
// would carry it into the links and redirects it builds.
func TestH2InvalidAuthorityRefused(t *testing.T) {
	got := make(chan string, 4)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- "Host " + r.Host + " X-Forwarded-Host " + r.Header.Get("X-Forwarded-Host")
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	for _, bad := range []string{`x"><script>1</script>`, "a b", "a\\b", "a{b}"} {
		f1 := newFront(t, cfg, frontOpts{})
		if res, _, _ := rawExchange(t, f1.addr, "GET / HTTP/1.1\r\nHost: "+bad+"\r\n\r\n"); res.StatusCode != 400 {
			t.Errorf("HTTP/1.1 Host %q: status %d, want 400", bad, res.StatusCode)
		}
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
		fr, _ := rawH2(t, f.addr)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
			BlockFragment: h2Block(":method", "GET", ":scheme", "https", ":path", "/", ":authority", bad)}); err != nil {
			t.Fatal(err)
		}
		if status := h2Status(t, fr, 1); status != "400" && status != "RST PROTOCOL_ERROR" {
			t.Errorf("h2 :authority %q: %s, want 400 or the stream reset", bad, status)
		}
		select {
		case s := <-got:
			t.Errorf("h2 :authority %q reached the target: %s", bad, s)
		default:
		}
	}
}

// TestExtendedConnectToRespondRoute: an RFC 8441 extended CONNECT (a
// WebSocket over an h2 stream) that reaches a route answering by itself
// (respond) is refused, 501 as for a protocol the route does not tunnel:
// any 2xx to a CONNECT tells the client that the tunnel is open (RFC 9110
// §9.3.6, RFC 8441 §5), and the route's 200 with its body went out as
// the opening of a WebSocket that is not there, the body as its first
// bytes. Over HTTP/1.1 the same route's 200 is no switch (101) and the
// client's handshake fails. A route's own refusal (a 403) goes out as it
// is.
func TestExtendedConnectToRespondRoute(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectToRespondRoute", "GODEBUG=http2xconnect=1")
		return
	}
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/deny", Respond: &RespondConfig{Status: 403, Body: "no"}},
		RouteConfig{Respond: &RespondConfig{Body: "ok"}},
	)}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	for path, want := range map[string]string{"/ws": "501", "/deny": "403"} {
		fr, _ := rawH2(t, f.addr)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
			BlockFragment: h2Block(":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":path", path,
				":authority", "example.test", "sec-websocket-version", "13")}); err != nil {
			t.Fatal(err)
		}
		if status := h2Status(t, fr, 1); status != want {
			t.Errorf("extended CONNECT to a respond route at %s: %s, want %s", path, status, want)
		}
	}
}

// TestRefusedConnectNotLoggedAsFailure: a 501 answers what the client
// asked for and gmproxy does not do (CONNECT, a protocol a route does not
// tunnel). Over HTTP/2 a client may ask it on every stream of one
// connection at no cost, so it is logged at debug level, as other
// refusals of a client's request (4xx) are: at the default level each
// would add a warning to the program log, one per stream, without bound.
func TestRefusedConnectNotLoggedAsFailure(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
		f := newFront(t, proxyTo(deadAddr(t)), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}, logger: logger})
		fr, _ := rawH2(t, f.addr)
		// One decoder for the connection: the answers index its table.
		var statuses []string
		dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
			if hf.Name == ":status" {
				statuses = append(statuses, hf.Value)
			}
		})
		const streams = 5
		for i := range streams {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), EndHeaders: true, EndStream: true,
				BlockFragment: h2Block(":method", "CONNECT", ":authority", "example.test:443")}); err != nil {
				t.Fatal(err)
			}
		}
		for len(statuses) < streams {
			fm, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("after %d answers: %v", len(statuses), err)
			}
			if hf, ok := fm.(*http2.HeadersFrame); ok {
				if _, err := dec.Write(hf.HeaderBlockFragment()); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, s := range statuses {
			if s != "501" {
				t.Fatalf("CONNECT %d: %s, want 501", i, s)
			}
		}
		n := strings.Count(logs.String(), "request failed")
		switch {
		case level == slog.LevelInfo && n != 0:
			t.Errorf("%d refused CONNECTs logged at the default level, want none:\n%s", n, logs.String())
		case level == slog.LevelDebug && n != streams:
			t.Errorf("%d refused CONNECTs logged at debug level, want %d:\n%s", n, streams, logs.String())
		}
	}
}

// TestTraceRefused: TRACE is refused (501, RFC 9110 §15.6.2: refused for
// every resource, as CONNECT is; nginx's 405 lacks the Allow field
// §15.5.6 requires), over
// HTTP/1.1 and HTTP/2, and never reaches a target: one that honours it
// (Apache's default TraceEnable on, RFC 9110 §9.3.8) echoes the request
// it got, and so shows the client what the proxy added to it: a shared
// secret a route's request_headers set for the backend, the client
// certificate headers, the internal host_header.
func TestTraceRefused(t *testing.T) {
	var reached atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "message/http")
		r.Write(w) // the request as it came, as a TRACE target echoes it
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	cfg.Sites[0].Routes[0].RequestHeaders.Set = map[string]string{"X-Backend-Token": "s3cret"}
	f := newFront(t, cfg, frontOpts{})
	req, _ := http.NewRequest(http.MethodTrace, f.url+"/", nil)
	req.Host = "example.test"
	res, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotImplemented || strings.Contains(string(b), "s3cret") {
		t.Errorf("HTTP/1.1 TRACE: %d %q, want 501 and no echo", res.StatusCode, b)
	}
	f2 := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	if st := h2Send(t, f2.addr, ":method", "TRACE", ":scheme", "https", ":path", "/", ":authority", "example.test"); st != "501" {
		t.Errorf("h2 TRACE: %s, want 501", st)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d TRACE requests reached the target", n)
	}
}
