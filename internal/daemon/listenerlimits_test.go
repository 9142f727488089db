package daemon

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestListenerLimits: a listener's own http limits apply to the requests
// of its connections although the first listener's differ: its
// send_timeout cuts a response its client does not read, and its
// http2_max_reset_rate answers a rapid-reset flood with
// GOAWAY(ENHANCE_YOUR_CALM) and few requests reaching the backend.
func TestListenerLimits(t *testing.T) {
	chunk := strings.Repeat("x", 32<<10)
	var seen atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if r.URL.Path != "/big" {
			io.WriteString(w, "ok")
			return
		}
		for range 8192 { // up to 256 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	cfg := testConfig(t, backend.Listener.Addr().String())
	second := cfg.Listeners[0]
	second.Address = "127.0.0.2:0"
	second.HTTP.SendTimeout = 300 * time.Millisecond
	second.HTTP.HTTP2MaxResetRate = 10
	cfg.Listeners = append(cfg.Listeners, second)
	td := startDaemon(t, cfg)
	addr := td.Addr(second.Address)
	if addr == "" {
		t.Fatal("the second listener is not listening")
	}
	pool := ecdsaRoots(t)
	dial := func(alpn string) *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(testwait.Bound(30 * time.Second)))
		return c
	}

	t.Run("send_timeout", func(t *testing.T) {
		c := dial("http/1.1")
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
		time.Sleep(2 * time.Second) // read nothing for a while
		c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		got, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("the response to a client that read nothing for 2 s did not end (%d bytes read)", got)
		} else if got >= 8192*int64(len(chunk)) {
			t.Errorf("the whole response (%d bytes) was delivered to a client that read nothing for 2 s", got)
		}
	})

	t.Run("http2_max_reset_rate", func(t *testing.T) {
		c := dial("h2")
		if c.ConnectionState().NegotiatedProtocol != "h2" {
			t.Fatalf("ALPN %q", c.ConnectionState().NegotiatedProtocol)
		}
		before := seen.Load()
		sent := testpeer.ExpectCalm(t, c, "https", "localhost", 2000, testpeer.Cancel)
		time.Sleep(200 * time.Millisecond) // handlers already started finish
		if n := seen.Load() - before; n > 200 {
			t.Errorf("backend got %d requests from %d reset streams; want only a few", n, sent)
		}
	})
}
