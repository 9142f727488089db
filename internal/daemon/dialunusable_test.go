package daemon

import (
	"context"
	"net"
	"testing"
	"time"
)

type noHandshake struct{ net.Conn }

func (noHandshake) HandshakeContext(context.Context) error { return nil }

// TestSMDialRefusesUnusableAddress: the daemon's TLCP and TLS 1.3-SM
// upstream dialer refuses, as the proxy's, to connect to 0.0.0.0 (this
// host's own listeners on Linux), and connects to 127.0.0.1.
func TestSMDialRefusesUnusableAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
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
