package proxy

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// refusalObserver counts the front door's refusals by reason.
type refusalObserver struct {
	frontdoor.NopObserver
	mu      sync.Mutex
	refused map[string]int
}

func (o *refusalObserver) ConnRefused(_, why string) {
	o.mu.Lock()
	o.refused[why]++
	o.mu.Unlock()
}

func (o *refusalObserver) count(why string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused[why]
}

// TestProxyProtocolPerClientLimits: behind a trusted balancer, the
// per-client handshake limit counts each client by the address its PROXY
// header names, not every client as the balancer's one address (which
// would refuse the second client's handshake), and reads no header in the
// accept loop: a balancer connection whose header has not come yet holds
// up no other connection's accept.
func TestProxyProtocolPerClientLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pp := &ProxyProtocolListener{Listener: ln, Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Timeout: time.Hour}
	never := frontdoor.HandshakerFunc(func(context.Context, net.Conn, *frontdoor.ClientHello) (*frontdoor.Established, error) {
		return nil, io.EOF
	})
	obs := &refusalObserver{refused: map[string]int{}}
	cfg := &frontdoor.ListenerConfig{Name: "l", TLS: true, HandshakeTimeout: time.Hour, MaxHandshakesPerClient: 1,
		Sites: frontdoor.NewSites([]*frontdoor.Site{{Name: "s", TLS: never}}, nil)}
	s := frontdoor.NewServer(cfg, obs, func(c *frontdoor.Conn) { c.Close() })
	go s.Serve(pp)
	t.Cleanup(func() { s.Close() })

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(testwait.Bound(20 * time.Second)); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("waited in vain for %s", what)
			}
		}
	}
	dial := func(first string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, first)
		return c
	}
	// A hello's record header and nothing more: the handshake stays in
	// progress.
	const pending = "\x16\x03\x01\x00\x40"

	// A balancer connection whose header is late.
	dial("")
	dial("PROXY TCP4 203.0.113.1 127.0.0.1 1111 443\r\n" + pending)
	waitFor("the first client's handshake", func() bool { return s.Handshaking() == 2 && s.Clients() == 1 })
	dial("PROXY TCP4 203.0.113.2 127.0.0.1 2222 443\r\n" + pending)
	waitFor("another client's handshake through the same balancer", func() bool { return s.Handshaking() == 3 && s.Clients() == 2 })
	if n := obs.count(frontdoor.RefuseMaxHandshakesPerClient); n != 0 {
		t.Fatalf("%d connections refused at max_handshakes_per_client before the first client opened a second one", n)
	}
	dial("PROXY TCP4 203.0.113.1 127.0.0.1 3333 443\r\n" + pending)
	waitFor("the first client's second handshake refused", func() bool { return obs.count(frontdoor.RefuseMaxHandshakesPerClient) == 1 })
}
