package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/h1server"
	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// floodUntilCut writes to c until a write fails or n writes are done and
// reports the failure (nil: all went through).
func floodUntilCut(c net.Conn, n int) error {
	c.SetWriteDeadline(time.Now().Add(4 * time.Second))
	buf := make([]byte, 64<<10)
	for range n {
		if _, err := c.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// trickle sends one byte every 100 ms to c, reading nothing, until ended
// has a value or 10 s passed; it returns how long the tunnel lasted.
func trickle(t *testing.T, c net.Conn, ended <-chan error) time.Duration {
	t.Helper()
	start := time.Now()
	for range 100 {
		select {
		case err := <-ended:
			if err == nil {
				t.Fatal("the target wrote 128 MiB to a client that reads nothing")
			}
			return time.Since(start)
		default:
		}
		c.Write([]byte("x"))
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the tunnel to a client that reads nothing was still open after 10 s")
	return 0
}

// TestUpgradeTunnelSendTimeout: a WebSocket tunnel whose client stops
// reading, while it sends a byte now and then (which keeps the idle
// watchdog quiet), is cut after send_timeout, as a response would be, and
// not only when the target gives up (its own write deadline, 4 s here).
func TestUpgradeTunnelSendTimeout(t *testing.T) {
	ended := make(chan error, 1)
	backend := switchingBackend(t, func(c net.Conn) {
		go io.Copy(io.Discard, c)
		ended <- floodUntilCut(c, 2000)
	})
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = 300 * time.Millisecond
	f := newFront(t, cfg, frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	if d := trickle(t, c, ended); d > 3*time.Second {
		t.Fatalf("the tunnel was cut after %v, by the target's own write deadline: send_timeout (300ms) not applied", d)
	}
}

// TestStreamSlowReaderCut: the same for a TCP stream site, whose bound is
// its idle_timeout.
func TestStreamSlowReaderCut(t *testing.T) {
	ended := make(chan error, 1)
	addr := connBackend(t, func(c net.Conn) {
		go io.Copy(io.Discard, c)
		ended <- floodUntilCut(c, 2000)
	})
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addr)},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u", IdleTimeout: 300 * time.Millisecond}}}}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{SNI: "example.test", Site: "s"}})
	c := dialRaw(t, f.addr)
	if d := trickle(t, c, ended); d > 3*time.Second {
		t.Fatalf("the stream was cut after %v, by the target's own write deadline: a stalled write to the client not bounded", d)
	}
}

// TestTunnelTargetHalfClose: a target that half-closes (FIN) after its
// last bytes still gets what the client sends afterwards, over an
// HTTP/1.1 Upgrade tunnel (also with send_timeout's wrapper in the way)
// and a TCP stream: half-closes go through, in order.
func TestTunnelTargetHalfClose(t *testing.T) {
	serve := func(got chan<- string) func(net.Conn) {
		return func(c net.Conn) {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte("bye"))
			c.(*net.TCPConn).CloseWrite()
			b, _ := io.ReadAll(c)
			got <- string(b)
		}
	}
	check := func(t *testing.T, c net.Conn, r io.Reader, got <-chan string) {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if b, _ := io.ReadAll(r); string(b) != "bye" {
			t.Fatalf("the client read %q, want the target's bytes and its end", b)
		}
		io.WriteString(c, "late-client-bytes")
		c.(*net.TCPConn).CloseWrite()
		select {
		case s := <-got:
			if s != "late-client-bytes" {
				t.Fatalf("the target got %q after its half-close", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the target never saw the client's end")
		}
	}
	t.Run("upgrade", func(t *testing.T) {
		got := make(chan string, 1)
		cfg := proxyTo(addrOf(switchingBackend(t, serve(got))))
		cfg.Limits.SendTimeout = time.Minute
		f := newFront(t, cfg, frontOpts{})
		c := dialRaw(t, f.addr)
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		br := bufio.NewReader(c)
		if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != 101 {
			t.Fatalf("upgrade: %v %v", res, err)
		}
		check(t, c, br, got)
	})
	t.Run("stream", func(t *testing.T) {
		got := make(chan string, 1)
		addr := connBackend(t, serve(got))
		cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addr)},
			Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u", IdleTimeout: time.Minute}}}}
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{SNI: "example.test", Site: "s"}})
		c := dialRaw(t, f.addr)
		check(t, c, c, got)
	})
}

// TestUpgradeTunnelSendTimeoutOfListener: the send_timeout that bounds a
// WebSocket tunnel is the one of the connection's listener
// (ConnContextLimits), as for every response, not the proxy's own (the
// daemon's first listener's): here the proxy has none and the listener
// 300 ms.
func TestUpgradeTunnelSendTimeoutOfListener(t *testing.T) {
	ended := make(chan error, 1)
	backend := switchingBackend(t, func(c net.Conn) {
		go io.Copy(io.Discard, c)
		ended <- floodUntilCut(c, 2000)
	})
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = -1 // off
	p, err := New(cfg, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitsConfig{SendTimeout: 300 * time.Millisecond}.WithDefaults()
	srv := &h1server.Server{Handler: p, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		return ConnContextLimits(ctx, c, &lim)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); srv.Close(); p.Close() })
	go acceptLoop(ln, func(c net.Conn) { go srv.ServeConn(c) })
	c := dialRaw(t, ln.Addr().String())
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	if d := trickle(t, c, ended); d > 3*time.Second {
		t.Fatalf("the tunnel was cut after %v, by the target's own write deadline: the listener's send_timeout (300ms) not applied", d)
	}
}

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	wdl time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error { c.wdl = t; return nil }
func (c *deadlineConn) Write(p []byte) (int, error)        { return len(p), nil }

// TestSendBoundedNotBeforeTimeout: a tunnel's write to the client (under
// send_timeout, or a stream's idle_timeout) is never cut before the
// timeout: a write that starts while the deadline in place is kept (moved
// at most every eighth of the timeout) still has the whole timeout ahead
// of it, as the documentation promises (cut after between the value and
// 9/8 of it).
func TestSendBoundedNotBeforeTimeout(t *testing.T) {
	const d = time.Hour
	dc := &deadlineConn{}
	c := &sendBounded{ReadWriteCloser: dc, conn: dc, d: d}
	c.Write([]byte("a"))
	time.Sleep(10 * time.Millisecond) // well within d/8: the deadline stays
	start := time.Now()
	c.Write([]byte("b"))
	if left := dc.wdl.Sub(start); left < d {
		t.Fatalf("a write began with %v left before its deadline, less than the timeout (%v): the client would be cut early", left, d)
	}
}

// TestTunnelTimesOnMonotonicClock: a tunnel's idle timeout (tunnel_idle,
// a stream's idle_timeout) and the send bound of its client side are
// durations since the last data, measured on the monotonic clock. On the
// wall clock a step forward past the idle timeout cut every tunnel and
// stream at once, and a step back kept an idle one for the step longer
// and stopped moving the send deadline until the wall clock caught up,
// cutting busy ones when it passed. The instants recorded must be
// monoclock readings.
func TestTunnelTimesOnMonotonicClock(t *testing.T) {
	var last, n atomic.Int64
	before := monoclock.Now()
	if _, err := copyDir(io.Discard, strings.NewReader("data"), &last, &n); err != nil {
		t.Fatal(err)
	}
	after := monoclock.Now()
	if l := last.Load(); l < before || l > after {
		t.Errorf("tunnel data moved at %d, not a monotonic reading within [%d, %d]", l, before, after)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go io.Copy(io.Discard, b)
	sb := &sendBounded{ReadWriteCloser: a, conn: a, d: time.Hour}
	before = monoclock.Now()
	if _, err := sb.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	after = monoclock.Now()
	if sb.set < before || sb.set > after {
		t.Errorf("send deadline moved at %d, not a monotonic reading within [%d, %d]", sb.set, before, after)
	}
}

// TestTunnelTargetStopsReading: a tunnel whose target stops reading,
// while it sends a byte now and then (which keeps the idle watchdog
// quiet), is cut once a write to it takes no byte for the bound towards
// targets (an Upgrade tunnel's write_timeout, as nginx's
// proxy_send_timeout bounds an upgraded connection; a stream site's
// idle_timeout, as nginx stream's proxy_timeout), and does not hold the
// client, its goroutines and the target for as long as the client sends.
func TestTunnelTargetStopsReading(t *testing.T) {
	// stall sends a byte every 100 ms to c and reads nothing, until a
	// write fails or 10 s passed.
	stall := func(c net.Conn) {
		for range 100 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// check floods the target through c and fails unless the proxy cut
	// the client before c's own write deadline (4 s) did.
	check := func(t *testing.T, c net.Conn) {
		start := time.Now()
		err := floodUntilCut(c, 2000)
		if err == nil {
			t.Fatal("128 MiB went to a target that reads nothing")
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the client's writes were still held after %v, by its own write deadline: the write to a target that reads nothing not bounded", time.Since(start))
		}
	}
	t.Run("upgrade", func(t *testing.T) {
		cfg := proxyTo(addrOf(switchingBackend(t, stall)))
		cfg.Upstreams[0].Transport.WriteTimeout = 300 * time.Millisecond
		f := newFront(t, cfg, frontOpts{})
		c := dialRaw(t, f.addr)
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		check(t, c)
	})
	t.Run("stream", func(t *testing.T) {
		cfg := Config{Upstreams: []UpstreamConfig{upstream("u", connBackend(t, stall))},
			Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u", IdleTimeout: 300 * time.Millisecond}}}}
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{SNI: "example.test", Site: "s"}})
		check(t, dialRaw(t, f.addr))
	})
}
