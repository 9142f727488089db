package frontdoor

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

func TestClientKey(t *testing.T) {
	for _, tt := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), Port: 1, Zone: "eth0"}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 2}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1"), Port: 2}, "2001:db8:1:3::"},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, ""},
		{&net.TCPAddr{}, ""},
	} {
		k, ok := ClientKey(tt.addr)
		got := ""
		if ok {
			got = k.String()
		}
		if got != tt.want {
			t.Errorf("ClientKey(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestAdmitTrustedProxy: the per-client limits do not count a trusted
// proxy's connections, whether its address comes as IPv4, as a
// dual-stack socket shows an IPv4 peer (::ffff:a.b.c.d) or as IPv6 with
// a zone; another address, even in the proxy's /64, is still held.
func TestAdmitTrustedProxy(t *testing.T) {
	cfg := &ListenerConfig{MaxConnsPerClient: 1, MaxHandshakesPerClient: 1,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::1/128")}}
	var tab clientTable
	for _, a := range []*net.TCPAddr{
		{IP: net.ParseIP("192.0.2.7").To4(), Port: 1},
		{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1},
		{IP: net.ParseIP("2001:db8::1"), Port: 1, Zone: "eth0"},
	} {
		for i := range 3 {
			if c, why := tab.admit(cfg, a); c != nil || why != "" {
				t.Fatalf("connection %d from the trusted proxy %v: counted %v, refused %q", i, a, c != nil, why)
			}
		}
	}
	if n := tab.len(); n != 0 {
		t.Fatalf("%d clients counted for the trusted proxy", n)
	}
	for _, ip := range []string{"198.51.100.1", "2001:db8::2"} {
		a := &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}
		if c, why := tab.admit(cfg, a); c == nil || why != "" {
			t.Fatalf("first connection from %s: counted %v, refused %q", ip, c != nil, why)
		}
		if _, why := tab.admit(cfg, a); why != RefuseMaxConnectionsPerClient {
			t.Errorf("second connection from %s: refused %q, want %s", ip, why, RefuseMaxConnectionsPerClient)
		}
	}
}

// gaugeObserver keeps the balances an operator's gauges are made of.
type gaugeObserver struct {
	NopObserver
	mu                               sync.Mutex
	accepted, closed, started, ended int
	refused                          map[string]int
	reasons                          map[string]int
}

func newGaugeObserver() *gaugeObserver {
	return &gaugeObserver{refused: map[string]int{}, reasons: map[string]int{}}
}

func (o *gaugeObserver) ConnAccepted(string) { o.mu.Lock(); o.accepted++; o.mu.Unlock() }
func (o *gaugeObserver) ConnClosed(string)   { o.mu.Lock(); o.closed++; o.mu.Unlock() }
func (o *gaugeObserver) ConnRefused(_, why string) {
	o.mu.Lock()
	o.refused[why]++
	o.mu.Unlock()
}
func (o *gaugeObserver) HandshakeStarted(string) { o.mu.Lock(); o.started++; o.mu.Unlock() }
func (o *gaugeObserver) HandshakeDone(ev HandshakeEvent) {
	o.mu.Lock()
	o.ended++
	if ev.Reason != "" {
		o.reasons[ev.Reason]++
	}
	o.mu.Unlock()
}

func (o *gaugeObserver) refusedCount(why string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused[why]
}

// zero waits (bounded) for every gauge of s and o to return to zero:
// connections open, handshake slots, first-flight bytes, clients counted,
// and the observer's active connections and handshakes in progress.
func (o *gaugeObserver) zero(t *testing.T, s *Server) {
	t.Helper()
	var state string
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); time.Now().Before(deadline); {
		o.mu.Lock()
		active, inProgress := o.accepted-o.closed, o.started-o.ended
		o.mu.Unlock()
		if s.Conns() == 0 && s.Handshaking() == 0 && s.HandshakeBytes() == 0 && s.Clients() == 0 && active == 0 && inProgress == 0 {
			return
		}
		state = fmt.Sprintf("conns %d, handshake slots %d, hello bytes %d, clients %d, active %d, in progress %d",
			s.Conns(), s.Handshaking(), s.HandshakeBytes(), s.Clients(), active, inProgress)
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gauges did not return to zero: %s", state)
}

// dialFrom dials addr from the loopback address from.
func dialFrom(t *testing.T, from, addr string) net.Conn { return testpeer.DialFrom(t, from, addr) }

// refusedNow reports whether the server closed c without a word. The
// refusal comes at the accept: 10 s (testwait) is plenty, and is what a
// mutant that lets the connection in costs.
func refusedNow(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection neither served nor closed")
	}
	return err != nil
}

// TestServerPerClientHandshakes: one address is held to its share of the
// handshake slots while another address still gets a handshake; the slots
// and the client table return to zero afterwards.
func TestServerPerClientHandshakes(t *testing.T) {
	sites, pool := tlsSites(t)
	obs := newGaugeObserver()
	s, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, MaxHandshakesPerClient: 3, Sites: sites}, obs)
	var slow []net.Conn
	for range 3 {
		slow = append(slow, dialFrom(t, "127.0.0.2", addr))
	}
	waitFor(t, "three handshakes", func() bool { return s.Handshaking() == 3 })
	if !refusedNow(t, dialFrom(t, "127.0.0.2", addr)) {
		t.Fatal("fourth handshake from 127.0.0.2 not refused")
	}
	if n := obs.refusedCount(RefuseMaxHandshakesPerClient); n != 1 {
		t.Fatalf("refused %d for max_handshakes_per_client, want 1", n)
	}
	c := tls.Client(dialFrom(t, "127.0.0.1", addr), &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
	if err := c.Handshake(); err != nil {
		t.Fatalf("another client's handshake: %v", err)
	}
	io.ReadAll(c)
	c.Close()
	for _, c := range slow {
		c.Close()
	}
	obs.zero(t, s)
}

// TestServerPerClientConnections: established connections count against
// max_connections_per_client until they close.
func TestServerPerClientConnections(t *testing.T) {
	sites, pool := tlsSites(t)
	obs := newGaugeObserver()
	s, addr, release := startHoldingServer(t, &ListenerConfig{Name: "l", TLS: true, MaxConnsPerClient: 2, Sites: sites}, obs)
	dial := func() (*tls.Conn, error) {
		c := tls.Client(dialFrom(t, "127.0.0.3", addr), &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
		if err := c.Handshake(); err != nil {
			return nil, err
		}
		_, err := c.Read(make([]byte, 3))
		return c, err
	}
	for range 2 {
		if _, err := dial(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dial(); err == nil {
		t.Fatal("third connection from one client served")
	}
	if n := obs.refusedCount(RefuseMaxConnectionsPerClient); n != 1 {
		t.Fatalf("refused %d for max_connections_per_client, want 1", n)
	}
	release()
	obs.zero(t, s)
	if _, err := dial(); err != nil {
		t.Fatalf("after the others closed: %v", err)
	}
}

// TestServerHandshakeBytesBound: partial hellos that together would hold
// more than MaxHandshakeBytes are closed and counted; the bytes return to
// zero and a complete hello is served afterwards.
func TestServerHandshakeBytesBound(t *testing.T) {
	sites, pool := tlsSites(t)
	obs := newGaugeObserver()
	s, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, HandshakeTimeout: time.Minute, MaxHandshakeBytes: 64 << 10, Sites: sites}, obs)
	// Each sends one full 16 KiB record of a hello claiming 48 KiB.
	part := partialHello(3*0x4000-4, []int{0x4000, 0x4000, 0x4000}, recordHeaderLen+0x4000)
	var conns []net.Conn
	for range 8 {
		c := dialFrom(t, "127.0.0.1", addr)
		c.Write(part)
		conns = append(conns, c)
	}
	waitFor(t, "refusals for max_handshake_bytes", func() bool { return obs.refusedCount(RefuseMaxHandshakeBytes) >= 4 })
	if b := s.HandshakeBytes(); b > 64<<10 {
		t.Fatalf("%d bytes held, bound 64 KiB", b)
	}
	for _, c := range conns {
		c.Close()
	}
	obs.zero(t, s)
	c := tls.Client(dialFrom(t, "127.0.0.1", addr), &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
	if err := c.Handshake(); err != nil {
		t.Fatalf("hello after the bound freed: %v", err)
	}
	c.Close()
}

// peerHeaderConn stands for a PROXY protocol connection whose header is bad.
type peerHeaderConn struct {
	net.Conn
	err error
}

func (c peerHeaderConn) ReadPeerHeader() error { return c.err }

type peerHeaderListener struct{ net.Listener }

func (l peerHeaderListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerHeaderConn{c, errors.New("bad PROXY header")}, nil
}

// TestServerGaugesReturnToZero: after every kind of refusal or failure the
// connections, handshake slots, first-flight bytes and per-client counts
// come back to zero, and the refusal or failure is counted under its reason.
func TestServerGaugesReturnToZero(t *testing.T) {
	sites, _ := tlsSites(t)
	// Each case holds what it needs open through dial and is refused or
	// fails on its last connection.
	type dialer func(from string) net.Conn
	hold := func(t *testing.T, s *Server, dial dialer, from string) {
		dial(from)
		waitFor(t, "one handshake", func() bool { return s.Handshaking() == 1 })
		if !refusedNow(t, dial(from)) {
			t.Fatal("not refused")
		}
	}
	for _, tt := range []struct {
		name    string
		cfg     ListenerConfig
		proxy   bool
		run     func(t *testing.T, s *Server, dial dialer)
		refused string // refusal reason counted, or
		failure string // handshake failure reason counted
	}{
		{"max_handshakes", ListenerConfig{MaxHandshakes: 1, MaxHandshakesPerClient: 5}, false, func(t *testing.T, s *Server, dial dialer) {
			hold(t, s, dial, "127.0.0.1")
		}, RefuseMaxHandshakes, ""},
		{"max_connections", ListenerConfig{MaxConns: 1, MaxHandshakesPerClient: 5}, false, func(t *testing.T, s *Server, dial dialer) {
			hold(t, s, dial, "127.0.0.1")
		}, RefuseMaxConnections, ""},
		{"max_handshakes_per_client", ListenerConfig{MaxHandshakesPerClient: 1, MaxConnsPerClient: 5}, false, func(t *testing.T, s *Server, dial dialer) {
			hold(t, s, dial, "127.0.0.4")
		}, RefuseMaxHandshakesPerClient, ""},
		{"max_connections_per_client", ListenerConfig{MaxConnsPerClient: 1}, false, func(t *testing.T, s *Server, dial dialer) {
			hold(t, s, dial, "127.0.0.5")
		}, RefuseMaxConnectionsPerClient, ""},
		{"handshake_timeout", ListenerConfig{HandshakeTimeout: 50 * time.Millisecond, MaxHandshakesPerClient: 5}, false, func(t *testing.T, s *Server, dial dialer) {
			c := dial("127.0.0.1")
			c.Write([]byte{0x16, 3, 1, 0, 0x40})
			if !refusedNow(t, c) {
				t.Fatal("not closed")
			}
		}, "", ReasonTimeout},
		{"malformed_hello", ListenerConfig{MaxHandshakesPerClient: 5}, false, func(t *testing.T, s *Server, dial dialer) {
			c := dial("127.0.0.1")
			c.Write([]byte{0x16, 3, 1, 0, 4, typeClientHello, 0, 0, 0})
			c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			if got, err := io.ReadAll(c); err != nil || !bytes.Equal(got, alertRecord(0x0303, alertDecodeError)) {
				t.Fatalf("answered %x (%v), want a decode_error alert and the close", got, err)
			}
		}, "", ReasonProtocolError},
		{"proxy_protocol", ListenerConfig{MaxHandshakesPerClient: 5}, true, func(t *testing.T, s *Server, dial dialer) {
			if !refusedNow(t, dial("127.0.0.1")) {
				t.Fatal("not closed")
			}
		}, RefuseProxyProtocol, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obs := newGaugeObserver()
			cfg := tt.cfg
			cfg.Name, cfg.TLS, cfg.Sites = "l", true, sites
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := NewServer(&cfg, obs, func(c *Conn) { c.Close() })
			if tt.proxy {
				go s.Serve(peerHeaderListener{ln})
			} else {
				go s.Serve(ln)
			}
			defer s.Close()
			var conns []net.Conn
			tt.run(t, s, func(from string) net.Conn {
				c := dialFrom(t, from, ln.Addr().String())
				conns = append(conns, c)
				return c
			})
			for _, c := range conns {
				c.Close()
			}
			obs.zero(t, s)
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if tt.refused != "" && obs.refused[tt.refused] != 1 {
				t.Errorf("refusals %v, want one %s", obs.refused, tt.refused)
			}
			if tt.failure != "" && obs.reasons[tt.failure] == 0 {
				t.Errorf("handshake failures %v, want %s", obs.reasons, tt.failure)
			}
		})
	}
}

// TestServerPerClientShared: two servers (as two worker processes) that
// share a client table hold one client to max_connections_per_client
// together, and give its connections back as they close.
func TestServerPerClientShared(t *testing.T) {
	if !clientshare.Supported {
		t.Skip("no shared client table on this platform")
	}
	f, err := clientshare.Create(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table, err := clientshare.Map(f)
	if err != nil {
		t.Fatal(err)
	}
	sites, pool := tlsSites(t)
	var addrs [2]string
	var releases [2]func()
	var obs [2]*gaugeObserver
	for w := range 2 {
		view, err := table.Worker(w)
		if err != nil {
			t.Fatal(err)
		}
		obs[w] = newGaugeObserver()
		_, addrs[w], releases[w] = startHoldingServer(t, &ListenerConfig{Name: "l", TLS: true, MaxConnsPerClient: 2, SharedClients: view, Sites: sites}, obs[w])
	}
	dial := func(w int) error {
		c := tls.Client(dialFrom(t, "127.0.0.4", addrs[w]), &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
		if err := c.Handshake(); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 3))
		return err
	}
	for w := range 2 {
		if err := dial(w); err != nil {
			t.Fatalf("server %d: %v", w, err)
		}
	}
	for w := range 2 {
		if dial(w) == nil {
			t.Fatalf("server %d served a third connection of one client", w)
		}
		if n := obs[w].refusedCount(RefuseMaxConnectionsPerClient); n != 1 {
			t.Errorf("server %d refused %d for max_connections_per_client, want 1", w, n)
		}
	}
	releases[1]() // server 1's connection closes
	waitFor(t, "server 1's connection given back", func() bool { return dial(0) == nil })
}

// TestHandshakeConnCloseGivesNothingBack: a Conn returned by the public
// Server.Handshake (not through Serve) was never counted in Conns nor
// reported to ConnAccepted, so its Close gives back nothing: were it to
// take one off Conns and report ConnClosed, each such close would let
// Serve admit one connection more than MaxConns, and the gauges would go
// negative.
func TestHandshakeConnCloseGivesNothingBack(t *testing.T) {
	sites, pool := tlsSites(t)
	obs := newGaugeObserver()
	cfg := &ListenerConfig{Name: "l", TLS: true, MaxConns: 1, Sites: sites}
	s, addr, release := startHoldingServer(t, cfg, obs)
	defer release()

	// One connection handshaken by hand through the public Handshake.
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(b, &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
		if c.Handshake() == nil {
			io.Copy(io.Discard, c) // take the close_notify
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := s.Handshake(ctx, cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := s.Conns(); n != 0 {
		t.Errorf("Conns() = %d after closing a Handshake() connection that Serve never counted, want 0", n)
	}
	obs.mu.Lock()
	acc, cl := obs.accepted, obs.closed
	obs.mu.Unlock()
	if cl != acc {
		t.Errorf("observer: %d ConnAccepted, %d ConnClosed", acc, cl)
	}

	// MaxConns is 1: while one Serve connection is held, a second one must
	// be refused.
	dial := func() error {
		c := tls.Client(dialFrom(t, "127.0.0.1", addr), &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
		if err := c.Handshake(); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 3))
		return err
	}
	if err := dial(); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err == nil {
		t.Errorf("MaxConns 1: a second concurrent connection was served")
	}
}
