package daemon

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

type noHandshake struct{ net.Conn }

func (noHandshake) HandshakeContext(context.Context) error { return nil }

// TestSMDialRefusesUnusableAddress: the daemon's TLCP and TLS 1.3-SM
// upstream dialer refuses, as the proxy's, to connect to 0.0.0.0 (this
// host's own listeners on Linux), and connects to 127.0.0.1.
func TestSMDialRefusesUnusableAddress(t *testing.T) {
	addr := testpeer.ServeLoopback(t, func(net.Conn) {})
	_, port, _ := net.SplitHostPort(addr)
	dial := smDial(time.Second, func(context.Context, string) *struct{} { return nil },
		func(raw net.Conn, _ *struct{}) handshaker { return noHandshake{raw} })
	c, err := dial(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatalf("127.0.0.1: %v", err)
	}
	c.Close()
	if c, err := dial(context.Background(), "tcp", net.JoinHostPort("0.0.0.0", port)); err == nil {
		c.Close()
		t.Error("0.0.0.0: connected (to this host); want refused")
	}
}
