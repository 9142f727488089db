package daemon

import (
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestReloadRemovedListenerCutsTunnels: a TCP stream and a WebSocket
// tunnel (a hijacked HTTP/1.1 connection) of a listener a reload removes
// follow the drain rules of that listener's HTTP connections, the grace
// period and then cut, instead of staying open on a port the
// configuration no longer has; those of the listener the reload keeps
// stay open (a reload cuts none there).
func TestReloadRemovedListenerCutsTunnels(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, addr string) net.Conn
	}{
		{"stream", func(t *testing.T, addr string) net.Conn {
			c := dialTLCP(t, addr, &tlcp.Config{ServerName: "x.b.example.cn"})
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			return c
		}},
		{"websocket", func(t *testing.T, addr string) net.Conn { return dialWebSocket(t, addr) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := wsConfig(t)
			cfg.Sites[1].Routes = nil
			cfg.Sites[1].Stream = &conf.Stream{Target: echoServer(t), IdleTimeout: time.Hour, ConnectTimeout: 5 * time.Second}
			two := cfg.Listeners[0]
			two.Address = "localhost:0" // another key, another loopback socket
			cfg.Listeners = append(cfg.Listeners, two)
			cfg.ShutdownGrace = 100 * time.Millisecond
			td := startDaemon(t, cfg)
			echo := func(c net.Conn) error {
				msg := "line\n"
				if _, err := io.WriteString(c, msg); err != nil {
					return err
				}
				c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
				_, err := io.ReadFull(c, make([]byte, len(msg)))
				return err
			}
			kept, removed := tc.open(t, td.addr), tc.open(t, td.Addr(two.Address))
			defer kept.Close()
			defer removed.Close()
			for _, c := range []net.Conn{kept, removed} {
				if err := echo(c); err != nil {
					t.Fatalf("test setup: echo: %v", err)
				}
			}
			one := *cfg
			one.Listeners = cfg.Listeners[:1]
			td.setConfig(&one)
			if err := td.Reload(); err != nil {
				t.Fatal(err)
			}
			// Cut: the read ends with EOF or a reset. Still open: it
			// waits for the deadline (the stream is allowed an hour
			// idle, a WebSocket has no limit).
			removed.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			if _, err := removed.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("a tunnel of the listener the reload removed is still open past its grace period")
			}
			if err := echo(kept); err != nil {
				t.Fatalf("the tunnel of the listener the reload kept: %v", err)
			}
			// The cut is counted (before the connection is closed) in
			// gmproxy_connections_cut_total of the listener removed
			// only.
			if got, want := td.obs.cutOn(), map[string]int{two.Address: 1}; !maps.Equal(got, want) {
				t.Errorf("connections cut by listener: %v, want %v", got, want)
			}
		})
	}
}
