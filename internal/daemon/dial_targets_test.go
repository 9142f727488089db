package daemon

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestUpstreamSessionsPerTarget: an upstream with tls.server_name and two
// targets that share no session state (their own ticket keys), dialed in
// turn. Each target's client sessions are kept apart, so every new
// connection after the first to a target resumes; with one session per
// server name each dial offered the other target's and made a full
// handshake, every time.
func TestUpstreamSessionsPerTarget(t *testing.T) {
	p := testPKI(t)
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
	tlcpTarget := func(secret byte) string {
		cfg := &tlcp.Config{Certificates: []tlcp.Certificate{{
			SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
			EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
		}}, TicketKeys: key(secret), SessionCacheDisabled: true}
		return serve(func(c net.Conn) handshaker { return tlcp.Server(c, cfg) })
	}
	smTarget := func(secret byte) string {
		cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{{
			Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: p.ServerSign.Key,
		}}, TicketKeys: key(secret)}
		return serve(func(c net.Conn) handshaker { return tls13sm.Server(c, cfg) })
	}
	for _, tc := range []struct {
		proto   string
		target  func(secret byte) string
		resumed func(net.Conn) bool
	}{
		{upstreamproto.TLCP, tlcpTarget, func(c net.Conn) bool { return c.(*tlcp.Conn).ConnectionState().DidResume }},
		{upstreamproto.TLS13SM, smTarget, func(c net.Conn) bool { return c.(*tls13sm.Conn).ConnectionState().DidResume }},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			a, b := tc.target(1), tc.target(2)
			cfg := &conf.Config{Upstreams: []conf.Upstream{{
				Name: "gm", Protocol: tc.proto,
				Targets:  []conf.Target{{Address: a, Weight: 1}, {Address: b, Weight: 1}},
				TLS:      conf.UpstreamTLSConfig{ServerName: "localhost"},
				Material: conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{p.CA.Cert}},
			}}}
			pc := &proxy.Config{Upstreams: []proxy.UpstreamConfig{{Name: "gm"}}}
			if err := wireUpstreamDialers(&Env{}, 1, cfg, pc); err != nil {
				t.Fatal(err)
			}
			dial := pc.Upstreams[0].DialTLSContext
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
