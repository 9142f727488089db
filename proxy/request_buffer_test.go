package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// startUpload connects to addr and sends a POST head of length with
// Expect: 100-continue, and waits for the proxy's 100 Continue: the proxy's
// handler is then reading the body. The connection closes when the test
// ends.
func startUpload(t *testing.T, addr string, length int) (net.Conn, *bufio.Reader) {
	t.Helper()
	return startUploadFrom(t, "127.0.0.1", addr, length)
}

// startUploadFrom is startUpload from the loopback address from.
func startUploadFrom(t *testing.T, from, addr string, length int) (net.Conn, *bufio.Reader) {
	t.Helper()
	return startUploadWith(t, from, addr, length, "")
}

// startUploadWith is startUploadFrom with more header lines (each ending
// in CRLF).
func startUploadWith(t *testing.T, from, addr string, length int, header string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n%s\r\n", length, header)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("100 Continue not followed by an empty line: %q %v", blank, err)
	}
	return c, br
}

// TestSlowUploadHoldsNoTarget: a body of declared length within
// request_buffer is read whole before a target is picked: while it
// trickles in, no target connection is taken and the backend sees
// nothing; once whole it goes through as sent.
func TestSlowUploadHoldsNoTarget(t *testing.T) {
	var hits atomic.Int64
	backend := countingBackend(t, "b", &hits)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	body := strings.Repeat("x", 40<<10)
	c, br := startUpload(t, f.addr, len(body))
	io.WriteString(c, body[:len(body)/2])
	target := f.p.Upstream("u").Targets()[0]
	for range 5 { // the proxy reads what came, and waits
		time.Sleep(5 * time.Millisecond)
		if n := target.InFlight(); n != 0 || hits.Load() != 0 {
			t.Fatalf("half a body in: %d request(s) on the target, %d at the backend", n, hits.Load())
		}
	}
	io.WriteString(c, body[len(body)/2:])
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(got) != "b:"+body {
		t.Errorf("got %d and %d bytes, want 200 and the body echoed", res.StatusCode, len(got))
	}
}

// TestBufferedUploadFailures: a buffered body that stalls past
// body_timeout gets 408, and one cut short ends the connection with no
// answer; neither reaches the backend or is charged to the target.
func TestBufferedUploadFailures(t *testing.T) {
	for _, stall := range []bool{true, false} {
		t.Run(fmt.Sprint("stall=", stall), func(t *testing.T) {
			var hits atomic.Int64
			backend := countingBackend(t, "b", &hits)
			cfg := proxyTo(addrOf(backend))
			cfg.Limits.BodyTimeout = 100 * time.Millisecond
			cfg.Upstreams[0].HealthCheck.Passive = PassiveHealthConfig{MaxFails: 1, Cooldown: time.Hour}
			f := newFront(t, cfg, frontOpts{})
			c, br := startUpload(t, f.addr, 1000)
			io.WriteString(c, "partial")
			if stall {
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.StatusCode != http.StatusRequestTimeout {
					t.Errorf("stalled body: %d, want 408", res.StatusCode)
				}
			} else {
				c.(*net.TCPConn).CloseWrite()
				if res, err := http.ReadResponse(br, nil); err == nil {
					t.Errorf("a body cut short was answered %d", res.StatusCode)
				}
			}
			if hits.Load() != 0 {
				t.Error("the backend got a request whose body never came whole")
			}
			if !f.p.Upstream("u").Targets()[0].Healthy() {
				t.Error("the client's failure was charged to the target")
			}
		})
	}
}

// TestBufferedUploadRetried: a buffered body goes again to the next
// target after a connect failure (nothing of it was sent), whole.
func TestBufferedUploadRetried(t *testing.T) {
	var hits atomic.Int64
	live := countingBackend(t, "live", &hits)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: deadAddr(t)}, {Address: addrOf(live)}},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}}},
		Sites: oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	body := strings.Repeat("y", 10<<10)
	for range 2 {
		if code, got := doReq(t, c, "POST", f.url+"/", body); code != 200 || got != "live:"+body {
			t.Fatalf("POST: %d, %d bytes", code, len(got))
		}
	}
}

// TestBufferedUploadSlowTarget: once a buffered body is whole, the body
// timeout no longer runs on the client's connection: a target that takes
// longer than body_timeout to answer still gets its answer through.
func TestBufferedUploadSlowTarget(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(400 * time.Millisecond)
		w.Write(b)
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.BodyTimeout = 100 * time.Millisecond
	f := newFront(t, cfg, frontOpts{})
	if code, got := doReq(t, testClient(t), "POST", f.url+"/", "payload"); code != 200 || got != "payload" {
		t.Errorf("got %d %q, want 200 and the body echoed", code, got)
	}
}

// TestBufferedUploadBytesIn: a request whose body stalls is reported with
// the body bytes that did arrive, buffered (request_buffer) or streamed
// alike: the access log and metrics count what the client sent.
func TestBufferedUploadBytesIn(t *testing.T) {
	for _, buffer := range []int{0, -1} {
		t.Run(fmt.Sprint("request_buffer=", buffer), func(t *testing.T) {
			var hits atomic.Int64
			backend := countingBackend(t, "b", &hits)
			cfg := proxyTo(addrOf(backend))
			cfg.Limits.BodyTimeout = 100 * time.Millisecond
			cfg.Limits.RequestBuffer = buffer
			obs := newEventObserver()
			f := newFront(t, cfg, frontOpts{obs: obs})
			c, br := startUpload(t, f.addr, 1000)
			io.WriteString(c, "partial")
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("stalled body: %d, want 408", res.StatusCode)
			}
			var ev []RequestEvent
			deadline := time.Now().Add(testwait.Bound(10 * time.Second))
			for len(ev) == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				obs.mu.Lock()
				ev = append(ev[:0], obs.done...)
				obs.mu.Unlock()
			}
			if len(ev) != 1 {
				t.Fatalf("%d request events, want 1", len(ev))
			}
			if ev[0].BytesIn != int64(len("partial")) {
				t.Errorf("BytesIn %d, want %d", ev[0].BytesIn, len("partial"))
			}
		})
	}
}

// TestBufferedUploadRetryDuration: retries.duration bounds the time spent
// on attempts, not the client's upload: a buffered body that took longer
// than it to arrive still goes to the next target after a connect
// failure, as it did when it streamed (the connect failure came before
// the upload).
func TestBufferedUploadRetryDuration(t *testing.T) {
	var hits atomic.Int64
	live := countingBackend(t, "live", &hits)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: deadAddr(t)}, {Address: addrOf(live)}},
			Retries:     RetryConfig{Duration: 50 * time.Millisecond},
			HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}}},
		Sites: oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	body := strings.Repeat("z", 1000)
	for i := range 2 { // round robin: one of the two tries the dead target first
		c, br := startUpload(t, f.addr, len(body))
		io.WriteString(c, body[:10])
		time.Sleep(200 * time.Millisecond) // a slow client: longer than retries.duration
		io.WriteString(c, body[10:])
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		c.Close()
		if res.StatusCode != 200 || string(got) != "live:"+body {
			t.Errorf("request %d: %d, %d bytes; want 200 from the live target", i, res.StatusCode, len(got))
		}
	}
}

// TestBufferedUploadExpectNotForwarded: a client's Expect: 100-continue
// is answered by the proxy reading the body; the buffered body goes to the
// target whole, without the Expect field that would make it wait for a
// 100 of its own.
func TestBufferedUploadExpectNotForwarded(t *testing.T) {
	expect := make(chan string, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		expect <- r.Header.Get("Expect")
		io.Copy(w, r.Body)
	}))
	t.Cleanup(backend.Close)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	c, br := startUpload(t, f.addr, 5)
	io.WriteString(c, "hello")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(got) != "hello" {
		t.Errorf("got %d %q", res.StatusCode, got)
	}
	if e := <-expect; e != "" {
		t.Errorf("the target got Expect: %s for a body the proxy had whole", e)
	}
}

// TestBufferedUploadsBoundedInTotal: past the process's bound on buffered
// bodies (RequestBufferTotal, nearly all taken here, as by many clients
// each trickling uploads), a body streams to the target as with buffering
// off instead of growing memory; it arrives whole, and what it took of the
// bound comes back.
func TestBufferedUploadsBoundedInTotal(t *testing.T) {
	held := RequestBufferTotal - 8<<10
	if !bodyBuffers.total.take(held) {
		t.Fatal("test setup: the bound is in use")
	}
	t.Cleanup(func() { bodyBuffers.total.give(held) })
	before := bodyBuffers.total.left.Load()
	var hits atomic.Int64
	backend := countingBackend(t, "b", &hits)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	body := strings.Repeat("z", 40<<10)
	c, br := startUpload(t, f.addr, len(body))
	io.WriteString(c, body[:20<<10])
	target := f.p.Upstream("u").Targets()[0]
	targetTaken(t, target, "with the bound taken, the upload waited to be whole instead of streaming")
	io.WriteString(c, body[20<<10:])
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(got) != "b:"+body {
		t.Errorf("got %d and %d bytes, want 200 and the body echoed", res.StatusCode, len(got))
	}
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); bodyBuffers.total.left.Load() != before; {
		if time.Now().After(deadline) {
			t.Fatalf("the bound has %d bytes left after the request, want %d back", bodyBuffers.total.left.Load(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBufferedUploadWaitsForEndStream: an HTTP/2 body is whole when its
// stream ends (END_STREAM, on a DATA frame or on the trailers after
// them), not when its declared length is in: a client that sends its
// content-length in DATA and then holds the end of its stream, or its
// trailers, holds no target connection meanwhile.
func TestBufferedUploadWaitsForEndStream(t *testing.T) {
	for _, trailers := range []bool{false, true} {
		t.Run(fmt.Sprint("trailers=", trailers), func(t *testing.T) {
			var hits atomic.Int64
			backend := countingBackend(t, "b", &hits)
			cfg := proxyTo(addrOf(backend))
			cfg.Sites[0].Routes[0].AllowTrailers = true
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
			fr, _ := rawH2(t, f.addr)
			fields := []string{":method", "POST", ":scheme", "https", ":authority", "example.test", ":path", "/", "content-length", "5"}
			if trailers {
				fields = append(fields, "trailer", "x-sum")
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Block(fields...), EndHeaders: true})
			fr.WriteData(1, false, []byte("hello"))
			target := f.p.Upstream("u").Targets()[0]
			for range 50 { // the proxy reads the body, and waits for its end
				time.Sleep(5 * time.Millisecond)
				if n := target.InFlight(); n != 0 || hits.Load() != 0 {
					t.Fatalf("stream not ended: %d request(s) on the target, %d at the backend", n, hits.Load())
				}
			}
			if trailers {
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Block("x-sum", "1"), EndHeaders: true, EndStream: true})
			} else {
				fr.WriteData(1, true, nil)
			}
			if st := h2Status(t, fr, 1); st != "200" || hits.Load() != 1 {
				t.Errorf("stream ended: %s, %d request(s) at the backend; want 200 and 1", st, hits.Load())
			}
		})
	}
}

// TestBufferedUploadsBoundedPerClient: one client address may hold
// RequestBufferPerClient of the process's bound on buffered bodies: past
// its share its uploads stream, while another address's are still
// buffered (before, one address with max_requests_per_client uploads one
// byte short took the whole bound, and buffering was off for everyone).
// What a request took is given back to its address.
func TestBufferedUploadsBoundedPerClient(t *testing.T) {
	holdShare(t, netip.MustParseAddr("127.0.0.1"))
	var hits atomic.Int64
	backend := countingBackend(t, "b", &hits)
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	target := f.p.Upstream("u").Targets()[0]
	body := strings.Repeat("z", 40<<10)

	// Another address: buffered, no target while its body is not whole.
	other, obr := startUploadFrom(t, "127.0.0.2", f.addr, len(body))
	io.WriteString(other, body[:20<<10])
	noTargetYet(t, target, "an upload of another address took a target before it was whole")
	// The greedy address, past its share: streams at once.
	c, br := startUploadFrom(t, "127.0.0.1", f.addr, len(body))
	io.WriteString(c, body[:20<<10])
	targetTaken(t, target, "past its share, the address's upload waited to be whole instead of streaming")
	finishUploads(t, body[20<<10:], "b:"+body, upload{c, br}, upload{other, obr})
	other2 := netip.MustParseAddr("127.0.0.2")
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); !bodyBuffers.take(other2, 0, RequestBufferPerClient); {
		if time.Now().After(deadline) {
			t.Fatal("127.0.0.2's share not given back after its request")
		}
		time.Sleep(5 * time.Millisecond)
	}
	bodyBuffers.give(other2, RequestBufferPerClient)
}

// TestBodyBudgetOneLargeBody: a client's share bounds what it holds with
// many requests, not one body: its only buffering request may grow past
// the share (up to the listener's request_buffer, at most 16 MiB), while
// another request of the same address then gets nothing and streams.
func TestBodyBudgetOneLargeBody(t *testing.T) {
	b := newBodyBudget(64<<20, 4<<20)
	c := netip.MustParseAddr("192.0.2.1")
	mine := 0
	for mine < 12<<20 {
		if !b.take(c, mine, 1<<20) {
			t.Fatalf("the client's only request refused at %d bytes (share 4 MiB)", mine)
		}
		mine += 1 << 20
	}
	if b.take(c, 0, 4<<10) {
		t.Error("a second request of the same address took a share while the first holds 12 MiB")
	}
	if !b.take(netip.MustParseAddr("192.0.2.2"), 0, 4<<20) {
		t.Error("another address refused its share")
	}
	b.give(c, mine)
	if !b.take(c, 0, 4<<20) {
		t.Error("the client's share not given back")
	}
}

// TestBufferedUploadsPerClientBehindTrustedProxy: behind a proxy of
// trusted_proxies, the buffered bodies' per-client share is the client's
// that the proxy names (X-Forwarded-For, as max_requests_per_client
// counts it), not the proxy's one address: a client of the proxy past
// its share streams while another client of the same proxy is still
// buffered.
func TestBufferedUploadsPerClientBehindTrustedProxy(t *testing.T) {
	holdShare(t, netip.MustParseAddr("192.0.2.7"))
	var hits atomic.Int64
	backend := countingBackend(t, "b", &hits)
	cfg := proxyTo(addrOf(backend))
	cfg.TrustedProxies = []string{"127.0.0.1"}
	f := newFront(t, cfg, frontOpts{})
	target := f.p.Upstream("u").Targets()[0]
	body := strings.Repeat("z", 40<<10)

	// Another client of the proxy: buffered.
	other, obr := startUploadWith(t, "127.0.0.1", f.addr, len(body), "X-Forwarded-For: 192.0.2.8\r\n")
	io.WriteString(other, body[:20<<10])
	noTargetYet(t, target, "another client's upload took a target before it was whole")
	// The greedy client, past its share: streams at once.
	c, br := startUploadWith(t, "127.0.0.1", f.addr, len(body), "X-Forwarded-For: 192.0.2.7\r\n")
	io.WriteString(c, body[:20<<10])
	targetTaken(t, target, "past its share, the client's upload waited to be whole: counted under the proxy's address")
	finishUploads(t, body[20<<10:], "b:"+body, upload{c, br}, upload{other, obr})
}

// upload is a request whose body is under way: its connection and the
// reader of its response (startUploadWith).
type upload struct {
	c  net.Conn
	br *bufio.Reader
}

// finishUploads sends rest on each upload and checks that its response
// is 200 with want.
func finishUploads(t *testing.T, rest, want string, uploads ...upload) {
	t.Helper()
	for _, u := range uploads {
		io.WriteString(u.c, rest)
		res, err := http.ReadResponse(u.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || string(got) != want {
			t.Errorf("got %d and %d bytes, want 200 and the body echoed", res.StatusCode, len(got))
		}
	}
}

// noTargetYet checks for a while (200 ms) that no request holds target:
// an upload being buffered takes none until its body is whole. what
// says what it means when one does.
func noTargetYet(t *testing.T, target *Target, what string) {
	t.Helper()
	for range 40 {
		time.Sleep(5 * time.Millisecond)
		if n := target.InFlight(); n != 0 {
			t.Fatalf("%s (%d in flight)", what, n)
		}
	}
}

// targetTaken waits (within testwait's bound) until a request holds
// target: an upload that streams takes it at once. what says what it
// means when none does.
func targetTaken(t *testing.T, target *Target, what string) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); target.InFlight() == 0; {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdShare takes all but 8 KiB of client's share of the buffered bodies'
// bound for the test (given back at its end): the client's next upload
// over 8 KiB finds no room and streams.
func holdShare(t *testing.T, client netip.Addr) {
	t.Helper()
	held := RequestBufferPerClient - 8<<10
	if !bodyBuffers.take(client, 0, held) {
		t.Fatal("test setup: the share is in use")
	}
	t.Cleanup(func() { bodyBuffers.give(client, held) })
}
