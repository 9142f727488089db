package proxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestStreamProxyHeaderDestination: a TCP stream site behind a load
// balancer that speaks PROXY protocol to gmproxy, with proxy_protocol
// towards its target: the header gmproxy sends names the inbound header's
// source and destination (the address the client connected to), not
// gmproxy's own socket as the destination.
func TestStreamProxyHeaderDestination(t *testing.T) {
	got := make(chan string, 1)
	addr := connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		l, _ := bufio.NewReader(c).ReadString('\n')
		got <- l
	})
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addr)},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u", ProxyProtocol: "v1"}}}}
	f := newFront(t, cfg, frontOpts{
		state: &frontdoor.ConnState{SNI: "example.test"},
		wrap: func(ln net.Listener) net.Listener {
			pl, err := NewProxyProtocolListener(ln, []string{"127.0.0.1/32"}, time.Second, true)
			if err != nil {
				t.Fatal(err)
			}
			return pl
		},
	})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "PROXY TCP4 203.0.113.7 198.51.100.9 5555 443\r\nhello")
	select {
	case l := <-got:
		if want := "PROXY TCP4 203.0.113.7 198.51.100.9 5555 443\r\n"; l != want {
			t.Fatalf("header to the target %q, want %q", l, want)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no header reached the target")
	}
}
