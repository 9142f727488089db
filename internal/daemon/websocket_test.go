package daemon

import (
	"io"
	"net/http/httptest"
	"testing"

	"golang.org/x/net/websocket"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/tlcp"
)

// wsConfig is testConfig with a route /ws to a WebSocket echo server.
func wsConfig(t *testing.T) *conf.Config {
	t.Helper()
	ws := httptest.NewServer(websocket.Handler(func(c *websocket.Conn) { io.Copy(c, c) }))
	t.Cleanup(ws.Close)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Upstreams = append(cfg.Upstreams, conf.Upstream{Name: "ws", Targets: []conf.Target{{Address: ws.Listener.Addr().String(), Weight: 1}}})
	cfg.Sites[0].Routes = append([]conf.Route{{Name: "ws", PathPrefix: "/ws", Upstream: "ws"}}, cfg.Sites[0].Routes...)
	return cfg
}

// dialWebSocket opens a WebSocket to /ws over TLCP.
func dialWebSocket(t *testing.T, addr string) *websocket.Conn {
	t.Helper()
	c := dialTLCP(t, addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	wcfg, err := websocket.NewConfig("wss://localhost/ws", "https://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := websocket.NewClient(wcfg, c)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestWebSocketOverTLCP: a WebSocket (HTTP/1.1 Upgrade) opened over TLCP
// is tunnelled to the backend and echoes, and survives a reload.
func TestWebSocketOverTLCP(t *testing.T) {
	d := startDaemon(t, wsConfig(t))
	conn := dialWebSocket(t, d.addr)
	echo := func(msg string) {
		t.Helper()
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo %q: %q %v", msg, buf, err)
		}
	}
	echo("before reload")
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	echo("after reload")
}
