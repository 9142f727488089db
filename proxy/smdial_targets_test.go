package proxy

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestSMDialerSessionsPerTarget: an upstream with a fixed server_name
// and two targets that do not share session state (their own ticket
// keys), dialed in turn. Each target's sessions are kept apart, so that
// every new connection after the first to a target resumes; one session
// per server name made each dial offer the other target's session and
// fall back to a full handshake, every time.
func TestSMDialerSessionsPerTarget(t *testing.T) {
	p := func(n string) string { return pkiPath(t, n) }
	tlcpCert, err := tlcp.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), p("server_enc.crt"), p("server_enc.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	smCert, err := tls13sm.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	key := func(b byte) ticket.Static {
		k, err := ticket.NewKey([]byte{b, 31: b}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ticket.Static{k}
	}
	// serve accepts connections until the test ends, handshakes with
	// wrap and writes one byte: the client reads it after any tickets.
	serve := func(wrap func(net.Conn) handshaker) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
					if sc := wrap(c); sc.HandshakeContext(context.Background()) == nil {
						sc.Write([]byte{1})
						sc.Read(make([]byte, 1)) // until the client closes
					}
				}()
			}
		}()
		return ln.Addr().String()
	}
	for _, tc := range []struct {
		proto   string
		tls     *UpstreamTLSConfig
		target  func(secret byte) string
		resumed func(net.Conn) bool
	}{
		{upstreamproto.TLCP, &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost"}, func(secret byte) string {
			cfg := &tlcp.Config{Certificates: []tlcp.Certificate{tlcpCert}, TicketKeys: key(secret), SessionCacheDisabled: true}
			return serve(func(c net.Conn) handshaker { return tlcp.Server(c, cfg) })
		}, func(c net.Conn) bool { return c.(*tlcp.Conn).ConnectionState().DidResume }},
		{upstreamproto.TLS13SM, &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost"}, func(secret byte) string {
			cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{smCert}, TicketKeys: key(secret)}
			return serve(func(c net.Conn) handshaker { return tls13sm.Server(c, cfg) })
		}, func(c net.Conn) bool { return c.(*tls13sm.Conn).ConnectionState().DidResume }},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			a, b := tc.target(1), tc.target(2)
			dial, err := smDialer(&UpstreamConfig{Name: "gm", Protocol: tc.proto, TLS: tc.tls}, &net.Dialer{})
			if err != nil {
				t.Fatal(err)
			}
			for i, addr := range []string{a, b, a, b, a} {
				c, err := dial(context.Background(), "tcp", addr)
				if err != nil {
					t.Fatalf("dial %d (%s): %v", i, addr, err)
				}
				if _, err := c.Read(make([]byte, 1)); err != nil {
					t.Fatalf("dial %d (%s): read: %v", i, addr, err)
				}
				if got, want := tc.resumed(c), i >= 2; got != want {
					t.Errorf("dial %d (%s): resumed %v, want %v", i, addr, got, want)
				}
				c.Close()
			}
		})
	}
}
