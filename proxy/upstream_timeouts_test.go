package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// stallingBackend answers every request on a raw connection with a
// response of 100 body bytes, sent as chunks of 10 bytes every gap, of
// which only the first `sent` chunks ever come (the rest never: the
// backend stalls, keeping the connection open). closed receives one value
// per connection that the proxy closed.
func stallingBackend(t *testing.T, sent int, gap time.Duration) (addr string, closed <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	addr = connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n")
		for i := range min(sent, 10) {
			if i > 0 {
				time.Sleep(gap)
			}
			io.WriteString(c, strings.Repeat(fmt.Sprint(i), 10))
		}
		// Stall: wait for the proxy to close (bounded).
		c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		if _, err := io.Copy(io.Discard, c); err == nil {
			ch <- struct{}{}
		}
	})
	return addr, ch
}

// h1Clients are the two ways the proxy talks HTTP/1.1 to a target, for
// tests that check both: its own client, and net/http's Transport (which
// max_conns_per_target selects).
var h1Clients = []struct {
	name  string
	setup func(*UpstreamConfig)
}{
	{"h1 client", func(*UpstreamConfig) {}},
	{"transport", func(uc *UpstreamConfig) { uc.Transport.MaxConnsPerTarget = 4 }},
}

// TestUpstreamReadTimeout: a target that stops sending a response body
// has its response cut after read_timeout (the client sees the body end
// early, and the proxy closes the target's connection); a target that
// sends slowly, with every gap under the timeout but the whole body
// taking several times it, is passed on whole. Both for the HTTP/1.1
// client's connections (a read deadline) and http.Transport's, HTTP/1.1
// (max_conns) and h2c (a timer that closes the body).
func TestUpstreamReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range h1Clients {
		t.Run(tc.name, func(t *testing.T) {
			mk := func(addr string) *front {
				cfg := proxyTo(addr)
				cfg.Upstreams[0].Transport.ReadTimeout = timeout
				tc.setup(&cfg.Upstreams[0])
				return newFront(t, cfg, frontOpts{})
			}
			t.Run("stalled", func(t *testing.T) {
				addr, closed := stallingBackend(t, 2, 0)
				f := mk(addr)
				start := time.Now()
				expectCut(t, f)
				if d := time.Since(start); d < timeout {
					t.Errorf("cut after %v, before the read timeout %v", d, timeout)
				}
				select {
				case <-closed:
				case <-time.After(testwait.Bound(10 * time.Second)):
					t.Error("the proxy kept the stalled target's connection open")
				}
			})
			t.Run("slow", func(t *testing.T) {
				// Gaps of a third of the timeout: a loaded machine may
				// stretch one by twice that and the body still passes.
				addr, _ := stallingBackend(t, 10, timeout/3)
				f := mk(addr)
				status, body, _ := get(t, testClient(t), f.url+"/")
				if status != 200 || len(body) != 100 {
					t.Fatalf("status %d, %d bytes; want the whole body sent in gaps under the timeout", status, len(body))
				}
			})
		})
	}
	t.Run("h2c", func(t *testing.T) {
		stall := make(chan struct{})
		defer close(stall)
		gone := make(chan struct{}, 1)
		addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, strings.Repeat("x", 20))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				gone <- struct{}{}
			case <-stall:
			case <-time.After(testwait.Bound(20 * time.Second)):
			}
		}))
		cfg := Config{
			Upstreams: []UpstreamConfig{{Name: "u", Protocol: "h2c", Targets: []TargetConfig{{Address: addr}},
				Transport: TransportConfig{ReadTimeout: timeout}}},
			Sites: oneSite(RouteConfig{Upstream: "u"}),
		}
		f := newFront(t, cfg, frontOpts{})
		expectCut(t, f)
		select {
		case <-gone: // the proxy reset the stream
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Error("the stalled h2c stream was never ended")
		}
	})
}

// expectCut fails t unless a GET to f fails within 10 s: a body that
// ends early, or, when none of the response had left the proxy's write
// buffer, a whole 504 in its place (not a 502: the target stalled). The
// targets of the tests stall for 20 s.
func expectCut(t *testing.T, f *front) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		res, err := testClient(t).Get(f.url + "/")
		if err != nil {
			done <- nil
			return
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case err != nil:
			err = nil // cut
		case res.StatusCode == http.StatusGatewayTimeout && !strings.Contains(string(body), "00000"):
			// None of the target's response had reached the
			// client (it was still in the write buffer): a
			// whole 504 in its place, without its bytes.
		default:
			err = fmt.Errorf("status %d and a complete body of %d bytes; want the response cut, or a 504 instead of it", res.StatusCode, len(body))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the response from a stalled target was not cut within 10s")
	}
}

// TestTunnelIdleTimeout: a WebSocket tunnel with no data either way for
// the upstream's tunnel idle timeout is closed; one with traffic in gaps
// under it stays open past it.
func TestTunnelIdleTimeout(t *testing.T) {
	const idle = 400 * time.Millisecond
	backend := wsEchoBackend(t)
	cfg := proxyTo(addrOf(backend))
	cfg.Upstreams[0].Transport.TunnelIdleTimeout = idle
	f := newFront(t, cfg, frontOpts{})
	ws := dialWS(t, f)
	for i := range 8 { // 8 gaps of idle/4: twice the timeout in all
		wsEcho(t, ws, fmt.Sprint("message ", i))
		time.Sleep(idle / 4)
	}
	ws.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	var b [1]byte
	if n, err := ws.Read(b[:]); err == nil {
		t.Fatalf("read %d bytes from an idle tunnel; want it closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the idle tunnel stayed open for 10s (idle timeout %v)", idle)
	}
}

// TestUpstreamWriteTimeout: a target that reads a request's head and
// then stops reading its body fails the exchange after write_timeout
// (504) on every path a body takes: net/http's Transport (a body over
// h1Client's 64 KiB, or any body with max_conns_per_target) and h2c. A
// client that pauses between parts of its body for longer than the
// timeout is not the target's stall: that exchange succeeds.
func TestUpstreamWriteTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h2c      bool
		maxConns int // with a cap every body goes on the Transport
		size     int
	}{
		{"transport", false, 0, 64 << 20}, // more than both sockets' buffers take
		{"transport-capped", false, 4, 64 << 20},
		{"h2c", true, 0, 16 << 20}, // more than the stream's flow-control window
	} {
		t.Run("target-stops-reading/"+tc.name, func(t *testing.T) {
			held := make(chan struct{})
			t.Cleanup(func() { close(held) })
			wait := func() { // read no body; hold the exchange (bounded)
				select {
				case <-held:
				case <-time.After(testwait.Bound(10 * time.Second)):
				}
			}
			var addr string
			if tc.h2c {
				addr = h2cBackend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { wait() }))
			} else {
				addr = connBackend(t, func(c net.Conn) {
					c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
					if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
						wait()
					}
				})
			}
			cfg := proxyTo(addr)
			if tc.h2c {
				cfg.Upstreams[0].Protocol = "h2c"
			}
			cfg.Upstreams[0].Transport.MaxConnsPerTarget = tc.maxConns
			cfg.Upstreams[0].Transport.WriteTimeout = 300 * time.Millisecond
			cfg.Upstreams[0].HealthCheck.Passive.MaxFails = -1
			f := newFront(t, cfg, frontOpts{})
			c := dialRaw(t, f.addr)
			io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: "+fmt.Sprint(tc.size)+"\r\n\r\n")
			go func() { // the client sends as fast as the proxy takes it
				chunk := make([]byte, 64<<10)
				c.SetWriteDeadline(time.Now().Add(testwait.Bound(8 * time.Second)))
				for sent := 0; sent < tc.size; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("no response within 5s (%v) while the target reads none of the body; want 504 after write_timeout (300ms)", err)
			}
			if !strings.HasPrefix(line, "HTTP/1.1 504") {
				t.Errorf("got %q; want 504", strings.TrimSpace(line))
			}
		})
	}
	for _, h2c := range []bool{false, true} {
		t.Run(map[bool]string{false: "client-pauses/transport", true: "client-pauses/h2c"}[h2c], func(t *testing.T) {
			var addr string
			if h2c {
				addr = h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Length", fmt.Sprint(2*len(r.Method)))
					w.WriteHeader(200)
					for range 2 {
						w.(http.Flusher).Flush()
						time.Sleep(100 * time.Millisecond)
						io.WriteString(w, r.Method)
					}
				}))
			} else {
				addr = connBackend(t, func(c net.Conn) {
					br := bufio.NewReader(c)
					req, err := readWholeRequest(c, br)
					if err != nil {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+fmt.Sprint(2*len(req.Method))+"\r\n\r\n")
					for range 2 {
						time.Sleep(100 * time.Millisecond)
						io.WriteString(c, req.Method)
					}
				})
			}
			// The response's body comes after pauses: its reads use the
			// attempt's context, which outlives the write_timeout watch.
			cfg := proxyTo(addr)
			if h2c {
				cfg.Upstreams[0].Protocol = "h2c"
			}
			cfg.Upstreams[0].Transport.WriteTimeout = 300 * time.Millisecond
			f := newFront(t, cfg, frontOpts{})
			c := dialRaw(t, f.addr)
			part := strings.Repeat("p", 40<<10)
			// 120 KiB: over h1Client's bodies, so on the Transport.
			io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: "+fmt.Sprint(3*len(part))+"\r\n\r\n"+part)
			for range 2 {
				time.Sleep(700 * time.Millisecond)
				io.WriteString(c, part)
			}
			c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 200 {
				t.Fatalf("status %d for a client pausing 700ms between parts (write_timeout 300ms); want 200: the client's pauses are not the target's", res.StatusCode)
			}
			if b, err := io.ReadAll(res.Body); string(b) != "POSTPOST" || err != nil {
				t.Errorf("response body %q (%v); want POSTPOST", b, err)
			}
		})
	}
}

// TestWriteTimeoutNotChargedWithClientPauses: on h1Client (bodies up to
// 64 KiB of known length) a client that uploads slowly, each pause within
// body_timeout but the whole upload longer than write_timeout, reaches a
// target that reads everything: 200. The write deadline is moved before
// each write to the target, not set once per exchange (which answered 504
// and charged the target the client's pauses).
func TestWriteTimeoutNotChargedWithClientPauses(t *testing.T) {
	addr := methodBackend(t)
	cfg := proxyTo(addr)
	cfg.Upstreams[0].Transport.WriteTimeout = 300 * time.Millisecond
	cfg.Limits.RequestBuffer = -1 // streamed: the client's pauses fall within the write to the target
	f := newFront(t, cfg, frontOpts{})
	c := dialRaw(t, f.addr)
	part := strings.Repeat("p", 5000)
	// 15000 bytes: a body h1Client carries (known length, under 64 KiB),
	// written to the target in pieces as they come (4 KiB buffer).
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: 15000\r\n\r\n"+part)
	for range 2 {
		time.Sleep(500 * time.Millisecond)
		io.WriteString(c, part)
	}
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d (%q) for a 15000-byte upload paused 500ms twice by the client (write_timeout 300ms, body_timeout 60s) to a target that reads everything; want 200: the client's pauses are not the target's stall", res.StatusCode, b)
	}
}

// TestWriteTimeoutNotChargedWithDial: a new connection that takes longer
// than write_timeout to establish (connect and handshake have their own
// timeouts) does not fail the request as a write timeout: 200.
func TestWriteTimeoutNotChargedWithDial(t *testing.T) {
	addr := methodBackend(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Protocol: "tlcp", Targets: []TargetConfig{{Address: addr}},
			// A handshake that takes 700ms (the hook returns a plain
			// connection: HTTP/1.1 over "the caller's encryption").
			DialTLSContext: func(ctx context.Context, network, a string) (net.Conn, error) {
				select {
				case <-time.After(700 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				var d net.Dialer
				return d.DialContext(ctx, network, a)
			},
			Transport: TransportConfig{WriteTimeout: 300 * time.Millisecond}}},
		Sites: oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	body := strings.Repeat("b", 100<<10) // over h1Client's 64 KiB: the Transport's
	res, _, _ := rawExchange(t, f.addr, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\n\r\n"+body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d for a POST whose new connection took 700ms to establish (write_timeout 300ms, connect+handshake timeouts 15s); want 200: write_timeout bounds the target taking the body, not the dial", res.StatusCode)
	}
}

// TestWriteTimeoutNotChargedWithExpectContinue: a forwarded "Expect:
// 100-continue" makes net/http's Transport write the head and wait up to
// a second for the target's 100 before it sends the body; a target that
// sends no 100 (RFC 9110 §10.1.1 lets it) and reads the body once it
// comes is not stalling, with a write_timeout under that second: 200.
func TestWriteTimeoutNotChargedWithExpectContinue(t *testing.T) {
	addr := methodBackend(t)
	cfg := proxyTo(addr)
	cfg.Upstreams[0].Transport.WriteTimeout = 300 * time.Millisecond
	f := newFront(t, cfg, frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: example.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	for err == nil && res.StatusCode == http.StatusContinue {
		res, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d (%q) for an Expect: 100-continue upload to a target that reads the body but sends no 100 (write_timeout 300ms); want 200: the Transport's ExpectContinueTimeout wait is not the target's stall", res.StatusCode, b)
	}
}

// trickleConn writes in pieces of piece bytes, one every gap: a path to
// the target that takes bytes steadily, but slowly.
type trickleConn struct {
	net.Conn
	piece int
	gap   time.Duration
}

func (c trickleConn) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), c.piece)
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
		time.Sleep(c.gap)
	}
	return n, nil
}

// TestWriteTimeoutKeepsSteadyProgress: write_timeout runs between two
// writes to the target (nginx's proxy_send_timeout): a target that takes
// a body steadily but slowly (4 KiB every 110ms, 37 KiB/s, a slow link)
// keeps its exchange although one of the Transport's 32 KiB buffers takes
// it 770ms (its last piece goes after 7 gaps), more than the 600ms
// timeout (a deadline set 675ms ahead): on a connection whose timed-out
// write cannot resume, writes are bounded per 16 KiB record, whose last
// piece goes after 3 gaps, 330ms.
//
// The margins are wide on both sides: a record has 270ms to spare for
// the scheduler's delays (90ms a gap; with 1 KiB every 12ms it had 10ms
// a gap, which a loaded machine overran), and a 32 KiB write misses its
// deadline by 95ms even if every gap is exact (a late gap only makes it
// later).
func TestWriteTimeoutKeepsSteadyProgress(t *testing.T) {
	addr := methodBackend(t)
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Protocol: "tlcp", Targets: []TargetConfig{{Address: addr}},
			DialTLSContext: func(ctx context.Context, network, a string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, a)
				if err != nil {
					return nil, err
				}
				return trickleConn{c, 4 << 10, 110 * time.Millisecond}, nil
			},
			Transport: TransportConfig{WriteTimeout: 600 * time.Millisecond, MaxConnsPerTarget: 4}}},
		Sites: oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	body := strings.Repeat("b", 48<<10) // one full 32 KiB buffer; about 1.3s at 37 KiB/s
	res, _, _ := rawExchange(t, f.addr, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\n\r\n"+body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d for a POST to a target taking 4 KiB every 110ms (write_timeout 600ms); want 200: the target never went 600ms without taking more of the request", res.StatusCode)
	}
}

// methodBackend answers every request, once its body is read whole, with
// the request's method as the body.
func methodBackend(t *testing.T) string {
	return connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := readWholeRequest(c, br)
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+fmt.Sprint(len(req.Method))+"\r\n\r\n"+req.Method)
		}
	})
}

// TestSendWatchOnMonotonicClock: the write_timeout watch of an HTTP/2
// target measures the time since the last read of the body on the
// monotonic clock. On the wall clock a step forward of more than
// write_timeout cancelled uploads in progress (504, the target charged),
// and a step back stretched the timeout by the step. The instants
// recorded must be monoclock readings.
func TestSendWatchOnMonotonicClock(t *testing.T) {
	req, err := http.NewRequest("POST", "http://127.0.0.1:1/", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := monoclock.Now()
	_, w := watchSend(req, time.Hour)
	defer w.end()
	after := monoclock.Now()
	if l := w.last.Load(); l < before || l > after {
		t.Errorf("watch started at %d, not a monotonic reading within [%d, %d]", l, before, after)
	}
	w.readStarts()
	before = monoclock.Now()
	w.readEnds()
	after = monoclock.Now()
	if l := w.last.Load(); l < before || l > after {
		t.Errorf("last read ended at %d, not a monotonic reading within [%d, %d]", l, before, after)
	}
}

// TestStalledBodyNotCountedAsFailure: a response body cut because its
// target stalled past read_timeout does not charge the target (nginx's
// max_fails does not count it): a quiet gRPC watch or event stream is no
// sign of a failing target, and a few at once took it out of rotation.
// A body the target broke off does charge it.
func TestStalledBodyNotCountedAsFailure(t *testing.T) {
	passive := HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: 1, FailWindow: time.Minute, Cooldown: time.Hour}}
	stalled, _ := stallingBackend(t, 2, 0)
	broken := connBackend(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n0123456789")
	})
	for _, tc := range []struct {
		addr    string
		charged bool
	}{{stalled, false}, {broken, true}} {
		cfg := proxyTo(tc.addr)
		cfg.Upstreams[0].Transport.ReadTimeout = 200 * time.Millisecond
		cfg.Upstreams[0].HealthCheck = passive
		f := newFront(t, cfg, frontOpts{})
		res, err := testClient(t).Get(f.url + "/")
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				t.Fatalf("target %s: its cut response passed as a 200", tc.addr)
			}
		}
		if up := f.p.upstreams["u"].Targets()[0].Healthy(); up == tc.charged {
			t.Errorf("target that %s: healthy %v after one cut response, want %v", map[bool]string{false: "stalled", true: "broke off"}[tc.charged], up, !tc.charged)
		}
	}
}
