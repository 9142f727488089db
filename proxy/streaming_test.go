package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/net/websocket"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// patternReader yields n bytes of a repeating pattern without allocating.
type patternReader struct{ left int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	for i := range p {
		p[i] = byte(i * 7)
	}
	r.left -= int64(len(p))
	return len(p), nil
}

// heapWatcher samples the live heap while a transfer runs.
type heapWatcher struct {
	stop chan struct{}
	done chan struct{}
	max  atomic.Uint64
	base uint64
}

func watchHeap() *heapWatcher {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w := &heapWatcher{stop: make(chan struct{}), done: make(chan struct{}), base: ms.HeapInuse}
	go func() {
		defer close(w.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > w.max.Load() {
				w.max.Store(ms.HeapInuse)
			}
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *heapWatcher) growth() int64 {
	close(w.stop)
	<-w.done
	return int64(w.max.Load()) - int64(w.base)
}

func TestStream100MiBBoundedMemory(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() {
		size = 16 << 20
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			io.WriteString(w, strconv.FormatInt(n, 10))
			return
		}
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		}
		io.Copy(w, &patternReader{left: size})
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	const limit = 24 << 20
	for _, q := range []string{"", "?chunked=1"} {
		hw := watchHeap()
		res, err := c.Get(f.url + "/download" + q)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		g := hw.growth()
		if err != nil || n != size {
			t.Fatalf("download%s: %d bytes, err %v", q, n, err)
		}
		t.Logf("download%s %d MiB: heap in use grew by at most %.1f MiB", q, size>>20, float64(g)/(1<<20))
		if g > limit {
			t.Errorf("download%s: heap grew %d MiB while streaming %d MiB", q, g>>20, size>>20)
		}
	}
	// Upload, chunked (unknown length).
	hw := watchHeap()
	req, _ := http.NewRequest("POST", f.url+"/upload", &patternReader{left: size})
	req.ContentLength = -1
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	g := hw.growth()
	if string(b) != strconv.FormatInt(size, 10) {
		t.Fatalf("upload: backend counted %q, want %d", b, size)
	}
	t.Logf("upload %d MiB: heap in use grew by at most %.1f MiB", size>>20, float64(g)/(1<<20))
	if g > limit {
		t.Errorf("upload: heap grew %d MiB", g>>20)
	}
}

// TestSSEFlushedBeforeStreamEnds: the backend sends each event only after
// the client received the previous one, so any buffering deadlocks (and
// fails through the bounded wait) instead of passing slowly.
func TestSSEFlushedBeforeStreamEnds(t *testing.T) {
	next := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("h2=", h2), func(t *testing.T) {
			f, c := frontFor(t, cfg, h2)
			res, err := c.Get(f.url + "/events")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			br := bufio.NewReader(res.Body)
			for i := 1; i <= 3; i++ {
				got := make(chan string, 1)
				go func() {
					l, _ := br.ReadString('\n')
					br.ReadString('\n')
					got <- l
				}()
				select {
				case l := <-got:
					if l != fmt.Sprintf("data: %d\n", i) {
						t.Fatalf("event %d: %q", i, l)
					}
				case <-time.After(testwait.Bound(20 * time.Second)):
					t.Fatalf("event %d not delivered before the backend sent the next: buffered", i)
				}
				next <- struct{}{}
			}
		})
	}
}

func h2cClient(t testing.TB) *http.Client {
	tr := &http.Transport{DisableCompression: true} // responses as the proxy sent them
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestRequestTrailers: request trailers reach the backend only where the
// route allows them, and never under a name gmproxy sets or strips
// (forged identity through a trailer) or one the route's request_headers
// edit (in any spelling), over HTTP/1.1 chunked and h2, an h2
// body of declared length (content-length) too, buffered (request_buffer)
// or streamed. Response trailers always pass.
func TestRequestTrailers(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Sum, X-Seen")
		sum := sha256.Sum256(b)
		io.WriteString(w, "body\n")
		w.Header().Set("X-Sum", hex.EncodeToString(sum[:4])+" "+r.Trailer.Get("X-Req-Trailer"))
		var seen []string
		for k, v := range r.Trailer {
			if len(v) > 0 {
				seen = append(seen, k+"="+strings.Join(v, ","))
			}
		}
		sort.Strings(seen)
		w.Header().Set("X-Seen", strings.Join(seen, ";"))
	}))
	t.Cleanup(backend.Close)
	forged := http.Header{
		"X-Req-Trailer": {"t1"}, "X-Ssl-Client-Verify": {"SUCCESS"}, "X-Ssl-Client-S-Dn": {"CN=admin"},
		"X_ssl_client_verify": {"SUCCESS"}, "X-Forwarded-For": {"6.6.6.6"}, "X-Env": {"forged"}, "X_env": {"forged"},
	}
	sum := sha256.Sum256([]byte("hello"))
	for _, allow := range []bool{false, true} {
		cfg := proxyTo(addrOf(backend))
		cfg.Sites[0].Routes[0].AllowTrailers = allow
		cfg.Sites[0].Routes[0].RequestHeaders.Set = map[string]string{"X-Env": "prod"}
		wantSeen, wantSum := "", hex.EncodeToString(sum[:4])
		if allow {
			wantSeen, wantSum = "X-Req-Trailer=t1", wantSum+" t1"
		}
		for _, v := range []struct {
			h2     bool
			length int64 // -1: undeclared
			buffer int   // request_buffer
		}{{false, -1, 0}, {true, -1, 0}, {true, 5, 0}, {true, 5, -1}} {
			t.Run(fmt.Sprint("allow=", allow, "/h2=", v.h2, "/length=", v.length, "/request_buffer=", v.buffer), func(t *testing.T) {
				cfg := cfg
				cfg.Limits.RequestBuffer = v.buffer
				f, c := frontFor(t, cfg, v.h2)
				req, _ := http.NewRequest("POST", f.url+"/", io.NopCloser(strings.NewReader("hello")))
				req.ContentLength = v.length
				req.Trailer = forged.Clone()
				res, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.ReadAll(res.Body)
				res.Body.Close()
				if got := res.Trailer.Get("X-Sum"); got != wantSum {
					t.Errorf("response trailer %q, want %q", got, wantSum)
				}
				if got := res.Trailer.Get("X-Seen"); got != wantSeen {
					t.Errorf("backend saw trailers %q, want %q", got, wantSeen)
				}
			})
		}
		t.Run(fmt.Sprint("allow=", allow, "/raw chunked, undeclared trailer"), func(t *testing.T) {
			f := newFront(t, cfg, frontOpts{})
			res, _, _ := rawExchange(t, f.addr, "POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Req-Trailer\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Req-Trailer: t1\r\nX-Ssl-Client-Verify: SUCCESS\r\nX-Ssl-Client-S-Dn: CN=admin\r\n\r\n")
			if got := res.Trailer.Get("X-Seen"); got != wantSeen {
				t.Errorf("backend saw trailers %q, want %q", got, wantSeen)
			}
		})
		// Declared fields that must not be trailers (RFC 9110 §6.5.1): a
		// backend that merges trailers into the header would take them
		// for the request's own Authorization or Host.
		t.Run(fmt.Sprint("allow=", allow, "/raw chunked, forbidden trailers declared"), func(t *testing.T) {
			f := newFront(t, cfg, frontOpts{})
			res, _, _ := rawExchange(t, f.addr, "POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Req-Trailer, Authorization, Host\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Req-Trailer: t1\r\nAuthorization: Bearer forged\r\nHost: evil.test\r\n\r\n")
			if got := res.Trailer.Get("X-Seen"); got != wantSeen {
				t.Errorf("backend saw trailers %q, want %q", got, wantSeen)
			}
		})
		// The same spelled with '_' for '-', as a backend that reads '_'
		// as '-' (CGI, WSGI, Puma before 4.3.5) takes them.
		t.Run(fmt.Sprint("allow=", allow, "/raw chunked, forbidden trailers declared with '_'"), func(t *testing.T) {
			f := newFront(t, cfg, frontOpts{})
			res, _, _ := rawExchange(t, f.addr, "POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Req-Trailer, Transfer_Encoding, Content_Length, Proxy_Authorization\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Req-Trailer: t1\r\nTransfer_Encoding: chunked\r\nContent_Length: 99\r\nProxy_Authorization: Basic Zm9yZ2Vk\r\n\r\n")
			if got := res.Trailer.Get("X-Seen"); got != wantSeen {
				t.Errorf("backend saw trailers %q, want %q", got, wantSeen)
			}
		})
	}
}

// TestResponseTrailersFiltered: a backend's response trailers reach the
// client, declared or not, except fields that must not be trailers (RFC
// 9110 §6.5.1: Content-Length, Host, Authorization...) and hop-by-hop
// ones, which are neither announced in Trailer nor sent, over HTTP/1.1
// and h2.
func TestResponseTrailersFiltered(t *testing.T) {
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nTrailer: X-Sum, Host, Authorization\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"4\r\nbody\r\n0\r\nX-Sum: 1\r\nContent-Length: 99\r\nHost: evil.test\r\nX-Undeclared: u\r\nAuthorization: Basic eA==\r\nKeep-Alive: timeout=1\r\nUpgrade: other\r\n\r\n")
		return true
	})
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("h2=", h2), func(t *testing.T) {
			f, c := frontFor(t, proxyTo(b.addr()), h2)
			req, _ := http.NewRequest("GET", f.url+"/", nil)
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if string(body) != "body" {
				t.Fatalf("body %q", body)
			}
			if got := res.Trailer.Get("X-Sum"); got != "1" {
				t.Errorf("declared trailer X-Sum %q, want 1", got)
			}
			if got := res.Trailer.Get("X-Undeclared"); got != "u" {
				t.Errorf("undeclared trailer X-Undeclared %q, want u", got)
			}
			for _, k := range []string{"Content-Length", "Host", "Authorization", "Keep-Alive", "Upgrade"} {
				if v, ok := res.Trailer[k]; ok {
					t.Errorf("trailer %s: %q reached the client", k, v)
				}
			}
		})
	}
	// The announcement, on the wire.
	f := newFront(t, proxyTo(b.addr()), frontOpts{})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
	wire, _ := io.ReadAll(c)
	if !strings.Contains(string(wire), "\r\nTrailer: X-Sum\r\n") {
		t.Errorf("the response does not announce X-Sum alone:\n%s", wire)
	}
}

func TestWebSocketEcho(t *testing.T) {
	backend := wsEchoBackend(t)
	obs := newEventObserver()
	cfg := proxyTo(addrOf(backend))
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{Protocol: frontdoor.ProtoTLCP, Site: "s"}})
	ws := dialWS(t, f)
	for i := range 5 {
		wsEcho(t, ws, fmt.Sprintf("message %d %s", i, strings.Repeat("x", i*1000)))
	}
	ws.Close()
	select {
	case b := <-obs.streamC:
		if b[0] < 10000 || b[1] < 10000 {
			t.Fatalf("tunnel bytes in/out %v", b)
		}
	case <-time.After(testwait.Bound(20 * time.Second)):
		t.Fatal("no StreamBytes for the tunnel")
	}
}

// h2cBackend serves h over cleartext HTTP/2 (and HTTP/1.1) on loopback
// until the test ends, and returns its address.
func h2cBackend(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	srv.Protocols.SetHTTP1(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestH2BidiStreaming relays a gRPC-style stream over h2 on both sides: each
// message is answered before the next is sent.
func TestH2BidiStreaming(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			fmt.Fprintf(w, "echo %s\n", sc.Text())
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Grpc-Status", "0")
	}))
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", f.url+"/svc.Echo/Chat", pr)
	req.Header.Set("Content-Type", "application/grpc")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h2cClient(t).Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("client side is %s", res.Proto)
	}
	br := bufio.NewReader(res.Body)
	for i := range 5 {
		fmt.Fprintf(pw, "msg%d\n", i)
		l, err := br.ReadString('\n')
		if err != nil || l != fmt.Sprintf("echo msg%d\n", i) {
			t.Fatalf("message %d: %q %v", i, l, err)
		}
	}
	pw.Close()
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("unexpected data %q", rest)
	}
	if got := res.Trailer.Get("Grpc-Status"); got != "0" {
		t.Fatalf("grpc-status trailer %q, want 0", got)
	}
}

// TestWebSocketOverH2ExtendedConnect: RFC 8441 WebSocket over an h2
// stream, relayed to an HTTP/1.1 Upgrade backend. x/net/http2 only accepts
// :protocol when GODEBUG=http2xconnect=1 is set at process start (gmproxy
// restarts itself with it), so this test reruns itself in a
// child process with that setting.
func TestWebSocketOverH2ExtendedConnect(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestWebSocketOverH2ExtendedConnect", "GODEBUG=http2xconnect=1")
		return
	}
	backend := wsEchoBackend(t)
	cfg := proxyTo(addrOf(backend))
	const idle = 300 * time.Millisecond
	cfg.Upstreams[0].Transport.TunnelIdleTimeout = idle
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr := extendedConnect(t, f.addr)
	// The response's HEADERS, then one masked text frame "hi" from the
	// client; the echo comes back unmasked.
	var status string
	var got []byte
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
		if hf.Name == ":status" {
			status = hf.Value
		}
	})
	for len(got) < 4 {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("extended CONNECT: %v (status %q, %d bytes of the echo)", err, status, len(got))
		}
		switch fm := fm.(type) {
		case *http2.HeadersFrame:
			if fm.StreamID != 1 {
				continue
			}
			if _, err := dec.Write(fm.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
			if status != "200" {
				t.Fatalf("extended CONNECT status %q", status)
			}
			if err := fr.WriteData(1, false, []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}); err != nil {
				t.Fatal(err)
			}
		case *http2.DataFrame:
			if fm.StreamID == 1 {
				got = append(got, fm.Data()...)
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", fm.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v", fm.ErrCode)
		}
	}
	if string(got) != "\x81\x02hi" {
		t.Fatalf("echo frame %q", got)
	}
	// Then nothing either way: the tunnel ends after the idle timeout
	// (the stream ends, well before the connection's 20 s deadline).
	idleFrom := time.Now()
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the idle tunnel's stream did not end: %v", err)
		}
		if fm.Header().StreamID != 1 {
			continue
		}
		if _, ok := fm.(*http2.RSTStreamFrame); ok || fm.Header().Flags.Has(http2.FlagDataEndStream) {
			break
		}
	}
	// The proxy counts the idle time from its last copy, a little before
	// the echo reached this client, and checks it every idle/4.
	if d := time.Since(idleFrom); d < idle/2 {
		t.Errorf("the tunnel ended after %v idle, well before the idle timeout %v", d, idle)
	}
}

// extendedConnect opens an HTTP/2 connection to addr as a client of raw
// frames (net/http's Transport, which x/net/http2's wraps since Go 1.27,
// refuses a :protocol header field) and sends a WebSocket extended
// CONNECT (RFC 8441) on stream 1 once the server's SETTINGS allow it.
// The client's windows are the default 64 KiB.
func extendedConnect(t *testing.T, addr string) *http2.Framer {
	t.Helper()
	return extendedConnectTo(t, addr, "websocket")
}

// extendedConnectTo is extendedConnect with :protocol proto.
func extendedConnectTo(t *testing.T, addr, proto string) *http2.Framer {
	t.Helper()
	fr, sf := rawH2(t, addr)
	if v, _ := sf.Value(http2.SettingEnableConnectProtocol); v != 1 {
		t.Fatalf("SETTINGS_ENABLE_CONNECT_PROTOCOL = %d, want 1", v)
	}
	block := h2Block(":method", "CONNECT", ":protocol", proto, ":scheme", "http",
		":path", "/ws", ":authority", addr, "sec-websocket-version", "13", "origin", "http://"+addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return fr
}

// TestExtendedConnectIdleEndsBlockedWrite: an extended CONNECT tunnel
// whose client stopped reading (its flow-control window used up, no
// WINDOW_UPDATE) while the target keeps sending ends once it has been
// idle for the tunnel idle timeout, its handler included: the stream is
// reset then, not when the blocked write reaches send_timeout.
func TestExtendedConnectIdleEndsBlockedWrite(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectIdleEndsBlockedWrite", "GODEBUG=http2xconnect=1")
		return
	}
	cfg := proxyTo(addrOf(upgradeBackend(t, make([]byte, 1<<20))))
	const idle = 300 * time.Millisecond
	cfg.Upstreams[0].Transport.TunnelIdleTimeout = idle
	cfg.Limits.SendTimeout = 15 * time.Second
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr := extendedConnect(t, f.addr)
	start := time.Now()
	var got int
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the stream did not end (%d bytes received, %v): %v", got, time.Since(start), err)
		}
		if fm.Header().StreamID != 1 {
			continue
		}
		if df, ok := fm.(*http2.DataFrame); ok {
			got += len(df.Data())
		}
		if _, ok := fm.(*http2.RSTStreamFrame); ok || fm.Header().Flags.Has(http2.FlagDataEndStream) {
			break
		}
	}
	if got > 65535 {
		t.Fatalf("%d bytes received within a 64 KiB window", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the tunnel blocked on its client ended after %v: its handler waited for send_timeout (15 s), not the idle timeout (%v)", d, idle)
	}
}

// TestExtendedConnectTargetEnds: a tunnel whose target ends it in order
// ends the client's stream in order too: the data, then END_STREAM, not a
// reset (which tells the client the tunnel broke).
func TestExtendedConnectTargetEnds(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectTargetEnds", "GODEBUG=http2xconnect=1")
		return
	}
	backend := upgradeBackend(t, []byte("bye"))
	cfg := proxyTo(addrOf(backend))
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr := extendedConnect(t, f.addr)
	var got []byte
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the stream did not end (%q received): %v", got, err)
		}
		if fm.Header().StreamID != 1 {
			continue
		}
		if rst, ok := fm.(*http2.RSTStreamFrame); ok {
			t.Fatalf("stream reset (%v) after %q, want END_STREAM: the target ended the tunnel in order", rst.ErrCode, got)
		}
		if df, ok := fm.(*http2.DataFrame); ok {
			got = append(got, df.Data()...)
		}
		if fm.Header().Flags.Has(http2.FlagDataEndStream) {
			break
		}
	}
	if string(got) != "bye" {
		t.Errorf("tunnel data %q, want %q", got, "bye")
	}
}

// upgradeBackend is a target that switches protocols, sends data and
// closes the connection.
func upgradeBackend(t *testing.T, data []byte) *httptest.Server {
	return switchingBackend(t, func(c net.Conn) { c.Write(data) })
}

// switchingBackend is a target that switches to websocket and then hands
// the connection to serve (closed when serve returns).
func switchingBackend(t *testing.T, serve func(c net.Conn)) *httptest.Server {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + websocketAccept(r.Header.Get("Sec-Websocket-Key")) + "\r\n\r\n")
		brw.Flush()
		serve(c)
	}))
	t.Cleanup(backend.Close)
	return backend
}

// TestExtendedConnectNeedsTheSwitch: an extended CONNECT (RFC 8441) is
// a tunnel only once its target switched to the protocol asked for. Any
// 2xx answer to a CONNECT means the tunnel is open (RFC 9110 §9.3.6, RFC
// 8441 §5), so a target's ordinary 200 page (a backend without WebSocket
// on that path) or a 101 to another protocol must not pass as one: 502,
// as the HTTP/1.1 Upgrade path answers a switch to another protocol. A
// refusal (403) reaches the client as it is. The WebSocket handshake
// with the target is the proxy's (the h2 client has none, RFC 8441 §5):
// a Sec-WebSocket-Accept that does not answer the proxy's key is a 502
// too (RFC 6455 §4.1). A protocol without WebSocket's key and accept
// ("other", allowed on the route) has only the status and the Upgrade
// field to go by. The backend's answers below have their
// Sec-WebSocket-Accept (ACCEPT) filled in from the request's key.
func TestExtendedConnectNeedsTheSwitch(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectNeedsTheSwitch", "GODEBUG=http2xconnect=1")
		return
	}
	for _, tc := range []struct{ name, proto, answer, want string }{
		{"page", "websocket", "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n<html>not a websocket endpoint</html>\n", "502"},
		{"other protocol", "websocket", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", "502"},
		{"no protocol", "websocket", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n", "502"},
		{"refused", "websocket", "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", "403"},
		{"switched", "websocket", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: ACCEPT\r\n\r\n", "200"},
		{"wrong accept", "websocket", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n", "502"},
		{"no accept", "websocket", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "502"},
		// A protocol without WebSocket's key and accept: only the
		// status and the Upgrade field tell a switch.
		{"other/page", "other", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\npage\n", "502"},
		{"other/another protocol", "other", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", "502"},
		{"other/switched", "other", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n", "200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.WriteString(c, strings.Replace(tc.answer, "ACCEPT", websocketAccept(r.Header.Get("Sec-Websocket-Key")), 1))
				io.Copy(io.Discard, c)
			})
			cfg := proxyTo(addr)
			cfg.Sites[0].Routes[0].Upgrades = []string{"websocket", "other"}
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
			if got := h2Status(t, extendedConnectTo(t, f.addr, tc.proto), 1); got != tc.want {
				t.Errorf("extended CONNECT answered %s after the target's %.40q, want %s", got, tc.answer, tc.want)
			}
		})
	}
}

// TestUpgradeRequestWithBody: an HTTP/1.1 Upgrade request with a body
// (here chunked, arriving slowly) goes to the target as an ordinary
// request, without Upgrade, its body whole. Were it tunnelled, the
// transport would still be copying the body from the client's
// connection when a 101 came, while the tunnel read the same connection
// too: two readers of one bufio.Reader (a data race), the body's bytes
// split between the two copies.
func TestUpgradeRequestWithBody(t *testing.T) {
	type seen struct{ upgrade, body string }
	got := make(chan seen, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Get("Upgrade"), string(body)}
		io.WriteString(w, "plain")
	}))
	t.Cleanup(backend.Close)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
	for range 20 {
		time.Sleep(2 * time.Millisecond)
		io.WriteString(c, "lo\r\n5\r\nhel")
	}
	io.WriteString(c, "lo\r\n0\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(b) != "plain" {
		t.Errorf("Upgrade request with a body: %d %q, want the target's ordinary 200", res.StatusCode, b)
	}
	select {
	case s := <-got:
		if want := strings.Repeat("hello", 21); s.upgrade != "" || s.body != want {
			t.Errorf("the target got Upgrade %q and a body of %d bytes; want no Upgrade and %d bytes", s.upgrade, len(s.body), len(want))
		}
	case <-time.After(testwait.Bound(5 * time.Second)):
		t.Fatal("the request did not reach the target")
	}
}

// TestWebSocketToH2CUpstream: an h2c upstream has no Upgrade, so WebSocket
// requests to it go over HTTP/1.1 to the same target.
func TestWebSocketToH2CUpstream(t *testing.T) {
	backend := httptest.NewUnstartedServer(websocket.Handler(func(ws *websocket.Conn) { io.Copy(ws, ws) }))
	backend.Config.Protocols = new(http.Protocols)
	backend.Config.Protocols.SetHTTP1(true)
	backend.Config.Protocols.SetUnencryptedHTTP2(true)
	backend.Start()
	t.Cleanup(backend.Close)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Protocol: "h2c", Targets: []TargetConfig{{Address: addrOf(backend)}}}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	wsEcho(t, dialWS(t, f), "hello h2c")
}

// TestUpgradeOnlyAllowed: only websocket (and what a route lists) is
// tunnelled; an h2c upgrade reaches the backend as an ordinary request
// without Upgrade, so a backend that speaks h2c cannot switch behind the
// proxy's back.
func TestUpgradeOnlyAllowed(t *testing.T) {
	var switched atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if up := r.Header.Get("Upgrade"); up != "" {
			switched.Add(1)
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", up)
			w.WriteHeader(http.StatusSwitchingProtocols)
			return
		}
		io.WriteString(w, "plain")
	}))
	t.Cleanup(backend.Close)
	for _, tc := range []struct {
		upgrade  string
		allowed  []string
		wantCode int
	}{
		{"h2c", nil, 200},
		{"h2c", []string{"h2c", "websocket"}, 200},
		{"foo", nil, 200},
		{"foo/2", []string{"foo"}, 101},
		{"websocket", []string{}, 200},
	} {
		t.Run(tc.upgrade+"/"+strings.Join(tc.allowed, ","), func(t *testing.T) {
			switched.Store(0)
			cfg := proxyTo(addrOf(backend))
			cfg.Sites[0].Routes[0].Upgrades = tc.allowed
			f := newFront(t, cfg, frontOpts{})
			res, _, _ := rawExchange(t, f.addr, "GET / HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: "+tc.upgrade+"\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
			if res.StatusCode != tc.wantCode {
				t.Errorf("status %d, want %d", res.StatusCode, tc.wantCode)
			}
			if want := int64(0); tc.wantCode == 101 {
				want = 1
				if switched.Load() != want {
					t.Errorf("backend saw %d upgrade requests, want %d", switched.Load(), want)
				}
			} else if switched.Load() != 0 {
				t.Errorf("backend was asked to switch to %s", tc.upgrade)
			}
		})
	}
}

// TestContentLengthWithTransferEncoding: after a request carrying both
// Content-Length and Transfer-Encoding the connection is closed (RFC 9112
// §6.1), so a request smuggled behind it on the same connection is never
// served; ordinary pipelined requests are.
func TestContentLengthWithTransferEncoding(t *testing.T) {
	var smuggled atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/smuggled" {
			smuggled.Add(1)
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	next := "GET /smuggled HTTP/1.1\r\nHost: example.test\r\n\r\n"
	for _, tc := range []struct {
		name, first string
		ambiguous   bool
	}{
		{"CL and TE", "POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", true},
		{"TE then CL, other case", "POST / HTTP/1.1\r\nHost: example.test\r\ntransfer-encoding: chunked\r\nCONTENT-LENGTH: 5\r\n\r\n0\r\n\r\n", true},
		{"TE only", "POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false},
		{"CL only", "POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\r\nhello", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			smuggled.Store(0)
			res, c, br := rawExchange(t, f.addr, tc.first+next)
			if res.StatusCode != 200 || res.Close != tc.ambiguous {
				t.Errorf("first response: status %d close %v, want 200 close %v", res.StatusCode, res.Close, tc.ambiguous)
			}
			res2, err := http.ReadResponse(br, nil)
			if tc.ambiguous {
				if err == nil {
					res2.Body.Close()
					t.Errorf("the request behind it was answered: %d", res2.StatusCode)
				}
				c.Close()
				if smuggled.Load() != 0 {
					t.Errorf("the request behind it reached the backend")
				}
				return
			}
			if err != nil || res2.StatusCode != 200 || smuggled.Load() != 1 {
				t.Errorf("pipelined request after an ordinary one: %v %v, backend saw it %d times", res2, err, smuggled.Load())
			}
		})
	}
	// HTTP/1.0 with Transfer-Encoding: its framing is faulty (RFC 9112
	// §6.1); net/http's parser would take an empty body and read the
	// chunked one, and what follows, as the next requests.
	t.Run("TE in HTTP/1.0", func(t *testing.T) {
		smuggled.Store(0)
		res, c, br := rawExchange(t, f.addr, "POST / HTTP/1.0\r\nHost: example.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"+next)
		if res.StatusCode != 400 || !res.Close {
			t.Errorf("first response: status %d close %v, want 400 close", res.StatusCode, res.Close)
		}
		if res2, err := http.ReadResponse(br, nil); err == nil {
			res2.Body.Close()
			t.Errorf("the request behind it was answered: %d", res2.StatusCode)
		}
		c.Close()
		if smuggled.Load() != 0 {
			t.Errorf("the request behind it reached the backend")
		}
	})
}

// TestExtendedConnectOutlivesRequestTimeouts: read_timeout and
// write_timeout bound a request and its response, not the WebSocket a
// request opened. Over HTTP/1.1 the tunnel is the hijacked connection,
// whose deadlines are cleared; over h2 (RFC 8441, which browsers use
// once the server allows it) the tunnel is the request's stream, and the
// stream's own deadlines cut every WebSocket of an h2 client after
// read_timeout (or write_timeout), while the same WebSocket over
// HTTP/1.1 lived on.
func TestExtendedConnectOutlivesRequestTimeouts(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectOutlivesRequestTimeouts", "GODEBUG=http2xconnect=1")
		return
	}
	for _, lim := range []string{"read_timeout", "write_timeout"} {
		backend := wsEchoBackend(t)
		cfg := proxyTo(addrOf(backend))
		const d = 200 * time.Millisecond
		if lim == "read_timeout" {
			cfg.Limits.ReadTimeout = d
		} else {
			cfg.Limits.WriteTimeout = d
		}
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
		fr := extendedConnect(t, f.addr)
		status := ""
		dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
			if hf.Name == ":status" {
				status = hf.Value
			}
		})
		// echo sends one masked text frame "hi" and reads its echo.
		echo := func(when string) {
			t.Helper()
			if err := fr.WriteData(1, false, []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}); err != nil {
				t.Fatalf("%s, %s: %v", lim, when, err)
			}
			var got []byte
			for len(got) < 4 {
				fm, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("%s, %s: %v", lim, when, err)
				}
				switch fm := fm.(type) {
				case *http2.DataFrame:
					if fm.StreamID == 1 {
						got = append(got, fm.Data()...)
						if fm.StreamEnded() && len(got) < 4 {
							t.Fatalf("%s, %s: the tunnel ended", lim, when)
						}
					}
				case *http2.RSTStreamFrame:
					t.Fatalf("%s, %s: stream reset %v", lim, when, fm.ErrCode)
				case *http2.GoAwayFrame:
					t.Fatalf("%s, %s: GOAWAY %v", lim, when, fm.ErrCode)
				}
			}
			if string(got) != "\x81\x02hi" {
				t.Fatalf("%s, %s: echo %q", lim, when, got)
			}
		}
		for status == "" {
			fm, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("%s: extended CONNECT: %v", lim, err)
			}
			if hf, ok := fm.(*http2.HeadersFrame); ok && hf.StreamID == 1 {
				dec.Write(hf.HeaderBlockFragment())
			}
		}
		if status != "200" {
			t.Fatalf("%s: extended CONNECT status %q", lim, status)
		}
		echo("at once")
		time.Sleep(3 * d)
		echo("after " + lim + " passed")
	}
}

// TestExtendedConnectPassesSwitchFields: the target's fields in its
// switch (101) reach an h2 client in the 200 that opens its WebSocket
// (RFC 8441 §5), as they reach an HTTP/1.1 client in the 101
// (handleUpgrade): a session or affinity cookie a target sets in the
// handshake (RFC 6455 §4.1: the client processes it) was dropped, every
// field but the subprotocol and extensions. What belongs to the
// proxy's own handshake with the target stays out: the hop-by-hop
// fields and those Connection names, Sec-WebSocket-Accept (none over h2),
// and Content-Length, which a 2xx to a CONNECT must not carry (RFC 9110
// §9.3.6).
func TestExtendedConnectPassesSwitchFields(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectPassesSwitchFields", "GODEBUG=http2xconnect=1")
		return
	}
	addr := connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade, X-Hop\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Accept: "+websocketAccept(r.Header.Get("Sec-Websocket-Key"))+"\r\n"+
			"Sec-WebSocket-Protocol: chat\r\nSet-Cookie: affinity=t1; Path=/\r\nX-Hop: internal\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	f := newFront(t, proxyTo(addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr := extendedConnect(t, f.addr)
	got := map[string]string{}
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) { got[hf.Name] = hf.Value })
	for got[":status"] == "" {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("extended CONNECT: %v", err)
		}
		if hf, ok := fm.(*http2.HeadersFrame); ok && hf.StreamID == 1 {
			dec.Write(hf.HeaderBlockFragment())
		}
	}
	if got[":status"] != "200" {
		t.Fatalf("extended CONNECT status %q", got[":status"])
	}
	for k, want := range map[string]string{"set-cookie": "affinity=t1; Path=/", "sec-websocket-protocol": "chat"} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q (fields %v)", k, got[k], want, got)
		}
	}
	for _, k := range []string{"x-hop", "keep-alive", "sec-websocket-accept", "content-length", "connection", "upgrade"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s reached the client: %q", k, v)
		}
	}
}

// TestExtendedConnectWrongAcceptIsTargetFailure: the WebSocket handshake
// of an extended CONNECT with the target is the proxy's own, with a key
// it chose: a Sec-WebSocket-Accept that does not answer it is the
// target's fault alone (RFC 6455 §4.1), which no client can provoke, and
// the passive check counts it. It was not counted, and such a target kept
// its share of the tunnels, every one refused with 502.
func TestExtendedConnectWrongAcceptIsTargetFailure(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectWrongAcceptIsTargetFailure", "GODEBUG=http2xconnect=1")
		return
	}
	addr := connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		io.Copy(io.Discard, c)
	})
	cfg := proxyTo(addr)
	cfg.Upstreams[0].HealthCheck.Passive = PassiveHealthConfig{MaxFails: 1, FailWindow: time.Minute, Cooldown: time.Hour}
	cfg.Sites[0].Routes[0].Upgrades = []string{"websocket"}
	obs := newEventObserver()
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{ALPN: "h2"}})
	if got := h2Status(t, extendedConnectTo(t, f.addr, "websocket"), 1); got != "502" {
		t.Fatalf("extended CONNECT answered %s, want 502", got)
	}
	if downs := obs.downs(); len(downs) != 1 || downs[0] != "u "+addr+" down" {
		t.Fatalf("health events %v, want the target down", downs)
	}
}

// writeSizes is a ResponseWriter that keeps the largest body write.
type writeSizes struct {
	h          http.Header
	total, max int
}

func (w *writeSizes) Header() http.Header { return w.h }
func (w *writeSizes) WriteHeader(int)     {}
func (w *writeSizes) Write(b []byte) (int, error) {
	w.total += len(b)
	w.max = max(w.max, len(b))
	return len(b), nil
}

// An HTTP/2 stream's response body goes through a 32 KiB buffer: a client
// that keeps its stream's flow-control window at 0 blocks the handler in a
// Write until send_timeout, holding the buffer it wrote from, and one
// address may hold max_requests_per_client such streams. HTTP/1 keeps
// 64 KiB writes (four full records per write).
func TestH2ResponseBodyBuffer(t *testing.T) {
	const size = 1 << 20
	body := bytes.Repeat([]byte("x"), size)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
	}))
	defer backend.Close()
	p, err := New(proxyTo(addrOf(backend)), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, major := range []int{1, 2} {
		r := httptest.NewRequest("GET", "http://example.test/", nil)
		r.ProtoMajor, r.ProtoMinor = major, 1-major/2
		w := &writeSizes{h: http.Header{}}
		p.ServeHTTP(w, r)
		if w.total != size {
			t.Fatalf("HTTP/%d: %d body bytes, want %d", major, w.total, size)
		}
		switch {
		case major == 2 && w.max > 32<<10:
			t.Errorf("HTTP/2: a body write of %d bytes, want at most 32 KiB", w.max)
		case major == 1 && w.max <= 32<<10:
			t.Errorf("HTTP/1.1: body writes of at most %d bytes, want the 64 KiB buffer's", w.max)
		}
	}
}

// TestUpgradesEmptyListTunnelsNothing: a route's Upgrades of [] (YAML
// `upgrades: []`) tunnels no protocol: a WebSocket Upgrade goes to the
// target as an ordinary request without Upgrade; nil means the default
// [websocket].
func TestUpgradesEmptyListTunnelsNothing(t *testing.T) {
	got := make(chan string, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Upgrade")
		io.WriteString(w, "plain")
	}))
	t.Cleanup(backend.Close)
	for _, tc := range []struct {
		upgrades []string
		want     string
	}{{[]string{}, ""}, {nil, "websocket"}} {
		cfg := proxyTo(addrOf(backend))
		cfg.Sites[0].Routes[0].Upgrades = tc.upgrades
		f := newFront(t, cfg, frontOpts{})
		c := dialRaw(t, f.addr)
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		select {
		case up := <-got:
			if up != tc.want {
				t.Errorf("Upgrades %#v: the target got Upgrade %q, want %q", tc.upgrades, up, tc.want)
			}
		case <-time.After(testwait.Bound(5 * time.Second)):
			t.Fatalf("Upgrades %#v: the request did not reach the target", tc.upgrades)
		}
		c.Close()
	}
}

// TestUpgradeIgnoredFromHTTP10: an HTTP/1.0 request's Upgrade is ignored
// (RFC 9110 §7.8: "A server MUST ignore an Upgrade header field that is
// received in an HTTP/1.0 request"): it reaches the target as an
// ordinary request without Upgrade, and the client gets the target's
// ordinary answer, never a switch. An HTTP/1.0 intermediary in front,
// which does not know Connection, would pass the switched connection's
// bytes on as the body of a response it thinks ordinary.
func TestUpgradeIgnoredFromHTTP10(t *testing.T) {
	got := make(chan string, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Upgrade")
		if up := r.Header.Get("Upgrade"); up != "" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", up)
			w.Header().Set("Sec-WebSocket-Accept", websocketAccept(r.Header.Get("Sec-Websocket-Key")))
			w.WriteHeader(http.StatusSwitchingProtocols)
			return
		}
		io.WriteString(w, "plain")
	}))
	t.Cleanup(backend.Close)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.0\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(b) != "plain" {
		t.Errorf("HTTP/1.0 Upgrade request: %d %q, want the target's ordinary 200", res.StatusCode, b)
	}
	select {
	case up := <-got:
		if up != "" {
			t.Errorf("the target got Upgrade %q from an HTTP/1.0 request", up)
		}
	case <-time.After(testwait.Bound(5 * time.Second)):
		t.Fatal("the request did not reach the target")
	}
}
