package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/gmproxy/gmproxy/handshake"
)

func TestShutdownDrainsInFlight(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		entered := make(chan struct{}, 1)
		release := make(chan struct{})
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			io.WriteString(w, "finished")
		}))
		cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addrOf(b))}, Sites: oneSite(RouteConfig{Upstream: "u"})}
		var opts frontOpts
		c := testClient(t)
		if h2 {
			opts.state = &handshake.ConnState{ALPN: "h2"}
			c = h2cClient(t)
		}
		f := newFront(t, cfg, opts)
		type result struct {
			code int
			body string
		}
		done := make(chan result)
		go func() {
			res, err := c.Get(f.url + "/slow")
			if err != nil {
				done <- result{0, err.Error()}
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			done <- result{res.StatusCode, string(body)}
		}()
		<-entered
		shut := make(chan error)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- f.p.Shutdown(ctx)
		}()
		// New connections are refused once shutdown started.
		for i := 0; i < 200; i++ {
			a, bb := net.Pipe()
			err := f.p.ServeHTTP1(a)
			a.Close()
			bb.Close()
			if err != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		r := <-done
		if r.code != 200 || r.body != "finished" {
			t.Fatalf("h2=%v: in-flight request during shutdown: %d %q", h2, r.code, r.body)
		}
		if err := <-shut; err != nil {
			t.Fatalf("h2=%v: Shutdown: %v", h2, err)
		}
		if err := f.p.ServeHTTP1(nopConn{}); err == nil {
			t.Fatalf("h2=%v: connection accepted after shutdown", h2)
		}
		b.Close()
	}
}

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

func TestCloseCutsTunnels(t *testing.T) {
	backend := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) { io.Copy(ws, ws) }))
	t.Cleanup(backend.Close)
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addrOf(backend))}, Sites: oneSite(RouteConfig{Upstream: "u"})}
	f := newFront(t, cfg, frontOpts{})
	ws, err := websocket.Dial("ws://"+f.addr+"/ws", "", "http://"+f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	websocket.Message.Send(ws, "ping")
	var s string
	if err := websocket.Message.Receive(ws, &s); err != nil || s != "ping" {
		t.Fatalf("echo %q %v", s, err)
	}
	// Shutdown with an expired context leaves the tunnel up (reload must
	// not cut tunnels) ...
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.p.Shutdown(ctx)
	websocket.Message.Send(ws, "still there")
	if err := websocket.Message.Receive(ws, &s); err != nil || s != "still there" {
		t.Fatalf("tunnel cut by Shutdown: %q %v", s, err)
	}
	// ... Close cuts it.
	f.p.Close()
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := websocket.Message.Receive(ws, &s); err == nil {
		t.Fatal("tunnel survived Close")
	}
}
