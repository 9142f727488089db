package daemon

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestH2SendTimeoutClientNotReading: on the daemon's own wiring
// (http.send_timeout, h2 over TLS through frontdoor), an HTTP/2 client
// that grants flow-control window and then stops reading its connection
// has its response, and the upstream exchange, cut after send_timeout
// (newHTTPSet sets http2.Server.WriteByteTimeout).
func TestH2SendTimeoutClientNotReading(t *testing.T) {
	chunk := strings.Repeat("x", 32<<10)
	ended := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		for range 8192 { // up to 256 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	cfg := testConfig(t, backend.Listener.Addr().String())
	cfg.Listeners[0].HTTP.SendTimeout = 300 * time.Millisecond
	td := startDaemon(t, cfg)

	raw, err := net.Dial("tcp", td.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	// A small receive buffer: the proxy's connection takes nothing once
	// a few KiB are in flight, and the frame being written blocks, so the
	// stream's reset cannot go either (the connection is cut); with
	// loopback's autotuned megabytes the test was that case only now and
	// then, under load.
	raw.(*net.TCPConn).SetReadBuffer(4 << 10)
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	c := tls.Client(raw, &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/big"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// Read nothing from here on.
	start := time.Now()
	select {
	case <-ended:
	case <-time.After(testwait.Bound(5 * time.Second)):
		t.Fatalf("h2 client that stopped reading: its response (and the upstream exchange) still running %v later with send_timeout 300ms; want it cut after send_timeout", time.Since(start).Round(time.Millisecond))
	}
}

// TestH2WriteByteTimeoutSet: a listener's HTTP/2 server closes a
// connection that takes no byte for its send_timeout (see proxy's test of
// the same name).
func TestH2WriteByteTimeoutSet(t *testing.T) {
	l := &listener{sets: map[*httpSet]struct{}{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := l.newHTTPSet(HTTPLimits{SendTimeout: 300 * time.Millisecond})
	if got := s.h2.WriteByteTimeout; got != 300*time.Millisecond {
		t.Errorf("http2.Server.WriteByteTimeout %v, want send_timeout 300ms", got)
	}
}
