package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// echoTCP is a TCP echo server; with withPP it first reads a PROXY header
// and reports it on hdrs.
func echoTCP(t *testing.T, withPP bool, hdrs chan<- *ProxyHeader) string {
	return connBackend(t, func(c net.Conn) {
		var r io.Reader = c
		if withPP {
			br := bufio.NewReader(c)
			h, err := ReadProxyHeader(br)
			if err != nil {
				t.Logf("echo: PROXY header: %v", err)
				hdrs <- nil
				return
			}
			hdrs <- h
			r = br
		}
		io.Copy(c, r)
	})
}

func TestTCPStreamEcho(t *testing.T) {
	for _, pp := range []string{"", "v1", "v2"} {
		t.Run("proxy_protocol="+pp, func(t *testing.T) {
			hdrs := make(chan *ProxyHeader, 1)
			target := echoTCP(t, pp != "", hdrs)
			obs := newEventObserver()
			logPath := t.TempDir() + "/access.log"
			cfg := Config{
				AccessLog: AccessLogConfig{Path: logPath, Format: "template", Template: "{method} {site} {upstream_addr} {bytes_in} {bytes_out} {tls_protocol}"},
				Upstreams: []UpstreamConfig{upstream("legacy", deadAddr(t), target)},
				Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ProxyProtocol: pp}}},
			}
			f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{Site: "tcp", Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-CBC-SM3"}})
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			payload := bytes.Repeat([]byte("legacy protocol line\n"), 10000)
			go func() {
				c.Write(payload)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			c.Close()
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("echo: %d bytes (want %d), err %v", len(got), len(payload), err)
			}
			if pp != "" {
				h := testpeer.Recv(t, hdrs, "PROXY header at the target")
				if h == nil || h.Source == nil || h.Source.IP.String() != "127.0.0.1" || h.Destination.String() != f.addr {
					t.Fatalf("PROXY header at target: %+v", h)
				}
			}
			obs.waitStreamTotal(t, [2]int64{int64(len(payload)), int64(len(payload))})
			// The stream is logged after its last StreamBytes report:
			// poll (bounded) until the line is there.
			want := "STREAM tcp " + target + " 210000 210000 NTLSv1.1"
			var line []byte
			for i := 0; i < 2000; i++ {
				f.p.AccessLog().Flush()
				if line, _ = os.ReadFile(logPath); strings.Contains(string(line), want) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !strings.Contains(string(line), want) {
				t.Errorf("access log %q", line)
			}
		})
	}
}

func TestTCPStreamIdleTimeout(t *testing.T) {
	target := echoTCP(t, false, nil)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("legacy", target)},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", IdleTimeout: 300 * time.Millisecond}}},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hi"))
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	// Silent now: the proxy must close the stream by itself.
	c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if n, err := c.Read(b); err != io.EOF {
		t.Fatalf("read after idle: %d %v, want EOF from the proxy", n, err)
	}
}

func TestTCPStreamAllTargetsDown(t *testing.T) {
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("legacy", deadAddr(t))},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("want the connection closed, got %v", err)
	}
}

// TestStreamBytesReportedWhileOpen: long streams report progress before
// they end (deltas every streamReportInterval).
func TestStreamBytesReportedWhileOpen(t *testing.T) {
	old := streamReportInterval.Load()
	streamReportInterval.Store(int64(10 * time.Millisecond))
	defer streamReportInterval.Store(old)
	target := echoTCP(t, false, nil)
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("legacy", target)},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}},
	}
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("abc"))
	io.ReadFull(c, make([]byte, 3))
	// The reports, however the ticker splits them, add up to the bytes
	// while the stream is still open ...
	obs.waitStreamTotal(t, [2]int64{3, 3})
	c.Write([]byte("de"))
	io.ReadFull(c, make([]byte, 2))
	c.Close()
	// ... and to all of them once it ended.
	obs.waitStreamTotal(t, [2]int64{5, 5})
}

// TestTCPStreamConnectTimeout: a stream's connect timeout bounds the dial
// to a target of a named upstream too (instead of the upstream's own, 10s
// here): a target that never completes the TCP handshake (a listener whose
// queue is full drops the SYN) fails the stream within it.
func TestTCPStreamConnectTimeout(t *testing.T) {
	addr := fullListener(t)
	u := upstream("legacy", addr)
	u.Transport.ConnectTimeout = 10 * time.Second
	u.HealthCheck.Passive.MaxFails = -1
	cfg := Config{
		Upstreams: []UpstreamConfig{u},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ConnectTimeout: 300 * time.Millisecond}}},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(start.Add(8 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("want the connection closed, got %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the stream gave up after %v, want about its 300ms connect timeout", took.Round(100*time.Millisecond))
	}
}

// fullListener returns the address of a loopback listener with a backlog
// of 0 whose queue is full and never accepted from: a connection to it
// never completes (its SYNs are dropped).
func fullListener(t *testing.T) string {
	t.Helper()
	fd, addr := boundSocket(t)
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ { // fill the queue; later dials hang
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the listener's queue never filled: cannot make a connect that hangs here")
	return ""
}

// TestTCPStreamRetriesBoundedByTotalTime: retries.total_time bounds a
// stream's retries as it does a request's (no attempt starts after it):
// stream mode went on to tries targets, one connect (and handshake)
// timeout each. Here the first dead target's failure is already past
// the total time, so no second target is dialled.
func TestTCPStreamRetriesBoundedByTotalTime(t *testing.T) {
	u := UpstreamConfig{Name: "legacy",
		Targets:     []TargetConfig{{Address: deadAddr(t)}, {Address: deadAddr(t)}, {Address: deadAddr(t)}},
		HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}},
		Retries:     RetryConfig{Tries: 3, Duration: time.Nanosecond}}
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{u},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}},
	}
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("want the connection closed, got %v", err)
	}
	if n := obs.retryCount(); n != 0 {
		t.Errorf("%d retries after the total time was over, want 0", n)
	}
}

// TestTCPStreamCountedWhileDialling: a stream counts against its target
// (least_conn, max_conns_per_target) from the moment it is sent there,
// as a request does, not only once the connection is up: during a slow
// connect or handshake every new stream saw the target idle, and a burst
// of them all went past the cap.
func TestTCPStreamCountedWhileDialling(t *testing.T) {
	addr := fullListener(t)
	u := upstream("legacy", addr)
	u.HealthCheck.Passive.MaxFails = -1
	u.Transport.MaxConnsPerTarget = 1
	cfg := Config{
		Upstreams: []UpstreamConfig{u},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ConnectTimeout: testwait.Bound(20 * time.Second)}}},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tg := f.p.Upstream("legacy").Targets()[0]
	for i := 0; tg.InFlight() != 1; i++ {
		if i == 1000 {
			t.Fatalf("a stream connecting to the target: %d in flight there, want 1", tg.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Another stream finds the target at its cap and is refused.
	c2, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if _, err := c2.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a second stream past the cap: %v, want the connection closed", err)
	}
	c.Close()
}

// TestTCPStreamDialCutByClose: Close ends a stream's dial to its target
// at once, rather than at the stream's connect timeout (one per target
// tried), and the cut dial is not the target's failure.
func TestTCPStreamDialCutByClose(t *testing.T) {
	addr := fullListener(t)
	u := upstream("legacy", addr)
	u.HealthCheck.Passive.MaxFails = 1
	cfg := Config{
		Upstreams: []UpstreamConfig{u},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ConnectTimeout: time.Minute}}},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tg := f.p.Upstream("legacy").Targets()[0]
	waitInFlight := func(want int64, what string) {
		t.Helper()
		deadline := time.Now().Add(testwait.Bound(10 * time.Second))
		for tg.InFlight() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d streams in flight at the target, want %d", what, tg.InFlight(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitInFlight(1, "the stream dialling")
	f.p.Close()
	waitInFlight(0, "Close during the dial (connect timeout 1 min)")
	if !tg.Healthy() {
		t.Error("the dial Close cut counted as the target's failure (max_fails 1): target marked down")
	}
}

// TestTCPStreamNoRetryCountedWithoutTarget: a stream whose lone target
// fails is not retried, and no retry is reported (the metric counted one
// before looking for another target).
func TestTCPStreamNoRetryCountedWithoutTarget(t *testing.T) {
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("legacy", deadAddr(t))},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}},
	}
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{Site: "tcp"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("want the connection closed, got %v", err)
	}
	if n := obs.retryCount(); n != 0 {
		t.Errorf("%d retries reported, none made (one target)", n)
	}
}

// TestTCPStreamClientIP: a stream site's client_ip admits only the listed
// clients: one from another address is closed before any target is
// dialled (the target sees no connection); a listed one is spliced.
func TestTCPStreamClientIP(t *testing.T) {
	var dialled atomic.Int64
	target := connBackend(t, func(c net.Conn) {
		dialled.Add(1)
		io.Copy(c, c)
	})
	for _, tc := range []struct {
		nets  []string
		admit bool
	}{{[]string{"10.0.0.0/8", "64:ff9b::10.0.0.0/104"}, false}, {[]string{"10.0.0.0/8", "127.0.0.0/8"}, true}} {
		before := dialled.Load()
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("legacy", target)},
			Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ClientIP: tc.nets}}},
		}
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
		got, err := pingThrough(t, f.addr)
		switch {
		case tc.admit && (err != nil || string(got) != "ping"):
			t.Errorf("client_ip %v, client 127.0.0.1: echo %q, %v; want it spliced", tc.nets, got, err)
		case !tc.admit && err == nil:
			t.Errorf("client_ip %v, client 127.0.0.1: spliced; want it closed", tc.nets)
		case !tc.admit && dialled.Load() != before:
			t.Errorf("client_ip %v: the target was dialled for a client not admitted", tc.nets)
		}
	}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("legacy", target)},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ClientIP: []string{"10.0.0.0/33"}}}},
	}
	if p, err := New(cfg, nil, testLogger(t)); err == nil {
		p.Close()
		t.Error("stream client_ip 10.0.0.0/33 accepted")
	}
}

// TestTCPStreamStaleHandshake: a stream connection whose handshake was
// made under a client authentication the site no longer has (a reload
// replaced its CA while the handshake was in progress: the connection
// goes to the new generation), or on a listener that no longer serves
// the site, is closed without reaching the target, as an HTTP request on
// such a connection gets 421. A connection whose handshake met the site's
// current policy is spliced.
func TestTCPStreamStaleHandshake(t *testing.T) {
	var dialled atomic.Int64
	target := connBackend(t, func(c net.Conn) {
		dialled.Add(1)
		io.Copy(c, c)
	})
	for _, tc := range []struct {
		name   string
		state  frontdoor.ConnState
		splice bool
	}{
		{"same policy", frontdoor.ConnState{Site: "tcp", Listener: "l", ClientAuthPolicy: "require:new"}, true},
		{"policy changed", frontdoor.ConnState{Site: "tcp", Listener: "l", ClientAuthPolicy: "require:old"}, false},
		{"no policy then", frontdoor.ConnState{Site: "tcp", Listener: "l"}, false},
		{"listener no longer serves it", frontdoor.ConnState{Site: "tcp", Listener: "gone", ClientAuthPolicy: "require:new"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				Upstreams:     []UpstreamConfig{upstream("legacy", target)},
				Sites:         []SiteConfig{{Name: "tcp", ClientAuth: true, ClientAuthPolicy: "require:new", Stream: &StreamConfig{Upstream: "legacy"}}},
				ListenerSites: map[string][]string{"l": {"tcp"}, "gone": {}},
			}
			before := dialled.Load()
			f := newFront(t, cfg, frontOpts{state: &tc.state})
			got, err := pingThrough(t, f.addr)
			switch {
			case tc.splice && (err != nil || string(got) != "ping"):
				t.Errorf("echo %q, %v; want it spliced", got, err)
			case !tc.splice && (err == nil || dialled.Load() != before):
				t.Errorf("spliced to the target (dialled %d times), err %v; want the connection closed before any dial", dialled.Load()-before, err)
			}
		})
	}
}

// pingThrough sends "ping" on a new connection to addr (a stream route in
// front of an echo target) and returns the 4 bytes read back, or the
// error that cut them short.
func pingThrough(t *testing.T, addr string) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	io.WriteString(c, "ping")
	got := make([]byte, 4)
	_, err = io.ReadFull(c, got)
	return got, err
}
