package daemon

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// captureConn records what a client writes and fails every read once the
// first flight is captured, so that a client handshake stops after its
// ClientHello.
type captureConn struct {
	net.Conn // nil: only Read, Write, Close and deadlines are used
	mu       sync.Mutex
	buf      bytes.Buffer
	wrote    chan struct{}
	once     sync.Once
}

func (c *captureConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf.Write(p)
	c.mu.Unlock()
	c.once.Do(func() { close(c.wrote) })
	return len(p), nil
}

func (c *captureConn) Read([]byte) (int, error) {
	<-c.wrote
	return 0, errors.New("capture: first flight only")
}

func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
func (c *captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv6loopback} }
func (c *captureConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv6loopback} }

// firstFlight returns the ClientHello flight that handshake writes.
func firstFlight(t *testing.T, handshake func(net.Conn) error) []byte {
	t.Helper()
	c := &captureConn{wrote: make(chan struct{})}
	handshake(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len() < 5 {
		t.Fatal("no first flight captured")
	}
	return bytes.Clone(c.buf.Bytes())
}

// recordedFlights are ClientHello flights of the in-repo TLCP and TLS 1.3-SM
// clients and of crypto/tls, made fresh for every run.
func recordedFlights(t *testing.T) map[string][]byte {
	roots := testRoots(t)
	return map[string][]byte{
		"tlcp": firstFlight(t, func(c net.Conn) error {
			return tlcp.Client(c, &tlcp.Config{RootCAs: roots, ServerName: "localhost"}).Handshake()
		}),
		"tls13sm": firstFlight(t, func(c net.Conn) error {
			return tls13sm.Client(c, &tls13sm.Config{RootCAs: roots, ServerName: "localhost"}).Handshake()
		}),
		"tls": firstFlight(t, func(c net.Conn) error {
			return tls.Client(c, &tls.Config{ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}}).Handshake()
		}),
	}
}

// reRecord re-frames flight's handshake payload in records of size bytes.
func reRecord(flight []byte, size int) []byte {
	var payload []byte
	for b := flight; len(b) >= 5; {
		n := int(b[3])<<8 | int(b[4])
		payload = append(payload, b[5:5+n]...)
		b = b[5+n:]
	}
	var out []byte
	for len(payload) > 0 {
		n := min(size, len(payload))
		out = append(out, 0x16, flight[1], flight[2], byte(n>>8), byte(n))
		out = append(out, payload[:n]...)
		payload = payload[n:]
	}
	return out
}

// hostileCase is one first flight sent to the daemon.
type hostileCase struct {
	name  string
	data  []byte
	flood []byte // sent again and again until the server closes (at most 10,000 times)
}

func hostileCases(t *testing.T) []hostileCase {
	rng := rand.New(rand.NewPCG(10, 16))
	flights := recordedFlights(t)
	var cases []hostileCase
	add := func(name string, data []byte) { cases = append(cases, hostileCase{name: name, data: data}) }
	for i := range 70 {
		b := make([]byte, 1+rng.IntN(2000))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%3 == 0 {
			b[0] = 0x16 // a handshake record of random content
		}
		add(fmt.Sprintf("random/%d", i), b)
	}
	for _, name := range []string{"tlcp", "tls13sm", "tls"} {
		f := flights[name]
		for i := range 20 {
			add(fmt.Sprintf("truncated/%s/%d", name, i), f[:1+i*(len(f)-1)/20])
		}
		for i := range 40 {
			m := bytes.Clone(f)
			for range 1 + rng.IntN(4) {
				m[rng.IntN(len(m))] ^= byte(1 + rng.IntN(255))
			}
			add(fmt.Sprintf("mutated/%s/%d", name, i), m)
		}
		add("1-byte-records/"+name, reRecord(f, 1))
		add("3-byte-records/"+name, reRecord(f, 3))
		for i, g := range [][]byte{
			{0x17, 0x03, 0x03, 0x00, 0x10}, {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}, []byte("garbage after the hello"),
			{0x14, 0x01, 0x01, 0x00, 0x01, 0x01}, bytes.Repeat([]byte{0xff}, 300),
		} {
			add(fmt.Sprintf("hello-then-garbage/%s/%d", name, i), append(bytes.Clone(f), g...))
		}
	}
	for i, n := range []int{16384 + 2048 + 1, 16384 + 2049, 0x7fff, 0x8000, 0xfffe, 0xffff, 20000, 40000, 65000, 65535} {
		add(fmt.Sprintf("oversized-record/%d", i), append([]byte{0x16, 0x03, 0x01, byte(n >> 8), byte(n)}, make([]byte, 100)...))
	}
	for i, n := range []int{1 << 16, 1 << 17, 1 << 20, 4 << 20, 8 << 20, 16<<20 - 1, 0xfffff0, 65537, 300000, 16 << 19} {
		rv := []byte{0x03, 0x03}
		if i%2 == 1 {
			rv = []byte{0x01, 0x01}
		}
		add(fmt.Sprintf("length-claim/%d", n), []byte{0x16, rv[0], rv[1], 0x00, 0x40, 0x01, byte(n >> 16), byte(n >> 8), byte(n), 0x03, 0x03})
	}
	for i, h := range [][]byte{
		{0x80, 0x2e, 0x01, 0x00, 0x02, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10},
		{0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10},
		{0x80, 0x03, 0x01, 0x03},
		append([]byte{0x80, 0xff, 0x01, 0x03, 0x03, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x10}, make([]byte, 200)...),
		{0xff, 0xff, 0xff, 0xff},
	} {
		add(fmt.Sprintf("sslv2/%d", i), h)
	}
	for i, r := range []string{
		"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
		"CONNECT localhost:443 HTTP/1.1\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "GET / HTTP/1.0\r\n\r\n",
		"HEAD / HTTP/1.1\r\nHost: " + string(bytes.Repeat([]byte("a"), 9000)) + "\r\n\r\n", "GET /", "OPTIONS * HTTP/1.1\r\n",
		"PROXY TCP4 203.0.113.7 127.0.0.1 5555 443\r\n", "Z",
	} {
		add(fmt.Sprintf("http/%d", i), []byte(r))
	}
	for i, rv := range [][2]byte{{3, 1}, {3, 3}, {1, 1}, {3, 4}, {3, 0}} {
		cases = append(cases, hostileCase{name: fmt.Sprintf("empty-records/%d", i), flood: []byte{0x16, rv[0], rv[1], 0, 0}})
	}
	return cases
}

// TestHostileFirstFlights replays hostile first flights through the
// daemon's handshake server (issue 10, hostile-input suite): every one must
// end in an alert or a close within the handshake timeout, no goroutine is
// left behind, the heap returns to its baseline, handshake slots and
// connections return to zero, and the daemon still serves a real client.
func TestHostileFirstFlights(t *testing.T) {
	if testing.Short() {
		t.Skip("300+ connections")
	}
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	const timeout = 500 * time.Millisecond
	cfg.Listeners[0].HandshakeTimeout = timeout
	addr, m := startMetricsDaemon(t, cfg)
	cases := hostileCases(t)
	if len(cases) < 300 {
		t.Fatalf("%d cases, want at least 300", len(cases))
	}

	// Warm up the daemon's lazily started goroutines, then take baselines.
	warm := tlsClient(t, addr, "localhost", false)
	get(t, warm, "https://localhost/warm")
	warm.CloseIdleConnections()
	waitIdle(t, m)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()

	var wg sync.WaitGroup
	sem := make(chan struct{}, 40)
	var mu sync.Mutex
	var failures []string
	for _, tc := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := replayHostile(addr, tc, timeout); err != nil {
				mu.Lock()
				failures = append(failures, tc.name+": "+err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	waitIdle(t, m)

	var g1 int
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); time.Now().Before(deadline); {
		if g1 = runtime.NumGoroutine(); g1 <= g0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g1 > g0 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the hostile flights, %d before:\n%s", g1, g0, buf[:runtime.Stack(buf, true)])
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	t.Logf("%d cases; heap %d -> %d bytes; goroutines %d -> %d", len(cases), m0.HeapAlloc, m1.HeapAlloc, g0, g1)
	if m1.HeapAlloc > m0.HeapAlloc+4<<20 {
		t.Errorf("heap grew from %d to %d bytes over the hostile flights", m0.HeapAlloc, m1.HeapAlloc)
	}
	if body, resp := get(t, tlsClient(t, addr, "localhost", false), "https://localhost/after"); resp.StatusCode != 200 {
		t.Errorf("after the hostile flights: %d %q", resp.StatusCode, body)
	}
}

// replayHostile sends tc's flight and reads until the server closes. The
// server must close (or reset) the connection within its handshake timeout;
// a generous margin above it separates "closed late" from "never closed".
func replayHostile(addr string, tc hostileCase, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(timeout + 15*time.Second)
	c.SetDeadline(deadline)
	c.Write(tc.data)
	if tc.flood != nil {
		for range 10000 {
			if _, err := c.Write(tc.flood); err != nil {
				break
			}
		}
	}
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // alerts, a ServerHello flight…
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("not closed by the server within %v", timeout+15*time.Second)
		}
		return nil
	}
}
