package proxy

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestDialRefusesUnusableAddress: the upstream dialer refuses to connect
// to 0.0.0.0 or ::, which Linux takes to this host's own listeners: a
// target name dialled by name (its lookup failed at start) that the
// system resolver later answers so (a DNS filter blocking it) would
// reach the proxy's own ports. 127.0.0.1 on the same port still connects.
func TestDialRefusesUnusableAddress(t *testing.T) {
	addr := testpeer.ServeLoopback(t, func(net.Conn) {})
	_, port, _ := net.SplitHostPort(addr)
	_, _, dial, err := newTransport(&UpstreamConfig{Name: "u"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatalf("127.0.0.1: %v", err)
	}
	c.Close()
	for _, host := range []string{"0.0.0.0", "::", "::ffff:0.0.0.0"} {
		c, err := dial(context.Background(), "tcp", net.JoinHostPort(host, port))
		if err == nil {
			c.Close()
			t.Errorf("%s: connected (to this host); want refused", host)
		} else if !strings.Contains(err.Error(), "names no host to connect to") {
			t.Logf("%s: %v", host, err) // :: without IPv6 fails otherwise
		}
	}
}
