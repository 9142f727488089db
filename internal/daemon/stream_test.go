package daemon

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestStreamSite: a site in TCP stream mode splices the decrypted TLCP
// connection to a TCP echo backend, next to HTTP sites on the same port.
func TestStreamSite(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sites[1].Routes = nil
	cfg.Sites[1].Stream = &conf.Stream{Target: echoServer(t), IdleTimeout: time.Minute, ConnectTimeout: 5 * time.Second}
	d := startDaemon(t, cfg)

	c := dialTLCP(t, d.addr, &tlcp.Config{ServerName: "x.b.example.cn"})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	msg := "legacy protocol line\n"
	io.WriteString(c, msg)
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q %v", buf, err)
	}
	// The HTTP site on the same port still answers.
	if body, _ := get(t, tlsClient(t, d.addr, "localhost", false), "https://localhost/h"); body == "" {
		t.Error("HTTP site silent")
	}
}

// echoServer is a TCP echo server on loopback until the test ends; it
// returns its address.
func echoServer(t testing.TB) string {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return echo.Addr().String()
}

// TestStreamSiteClientIP: conf's stream client_ip reaches the proxy: a
// stream site for 10.0.0.0/8 closes a client from 127.0.0.1 after its
// handshake instead of splicing it.
func TestStreamSiteClientIP(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sites[1].Routes = nil
	cfg.Sites[1].Stream = &conf.Stream{Target: echoServer(t), IdleTimeout: time.Minute, ConnectTimeout: 5 * time.Second,
		ClientIP: []string{"10.0.0.0/8"}}
	d := startDaemon(t, cfg)
	c := dialTLCP(t, d.addr, &tlcp.Config{ServerName: "x.b.example.cn"})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	io.WriteString(c, "ping")
	if n, err := io.ReadFull(c, make([]byte, 4)); err == nil {
		t.Fatalf("a client outside client_ip spliced (%d bytes echoed)", n)
	}
}
