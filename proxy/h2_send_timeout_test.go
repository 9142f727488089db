package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// h2RawClient opens a raw HTTP/2 connection to addr: the preface,
// SETTINGS granting the largest stream window, and a connection
// WINDOW_UPDATE to the largest window, so that flow control
// never stops the server: only TCP does, once the client stops reading.
func h2RawClient(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	return c, fr
}

func h2Get(t *testing.T, fr *http2.Framer, stream uint32, path string) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "example.test"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// TestH2SendTimeoutClientNotReading: send_timeout holds on HTTP/2 when
// the client stops reading the TCP connection itself (rather than
// withholding WINDOW_UPDATE). A stream's write deadline only queues a
// RST_STREAM behind the frame write blocked in conn.Write, so the handler,
// its upstream exchange and the connection were held for as long as the
// client kept the socket open; the connection's write timeout
// (http2.Server.WriteByteTimeout = send_timeout) closes it. HTTP/1.1 is
// cut after send_timeout too (TestSendTimeout).
func TestH2SendTimeoutClientNotReading(t *testing.T) {
	backend := longResponseBackend(t)
	obs := newEventObserver()
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = 300 * time.Millisecond
	f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{ALPN: "h2"}})

	_, fr := h2RawClient(t, f.addr)
	h2Get(t, fr, 1, "/big")
	// Read nothing from here on.
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		obs.mu.Lock()
		n := len(obs.done)
		obs.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("HTTP/2 response to a client that stopped reading its connection still running %v after it began, send_timeout 300ms: want it cut after send_timeout", time.Since(start).Round(time.Millisecond))
}

// TestH2WriteByteTimeoutSet: the HTTP/2 server closes a connection that
// takes no byte for send_timeout (WriteByteTimeout), which also covers
// what no stream's write waits on (the frames the server sends on its
// own, what is left after a handler returned); the stall watch of a
// response (initSend) cuts a connection only once a stream's write has
// waited twice as long, so the end-to-end tests pass without this too.
func TestH2WriteByteTimeoutSet(t *testing.T) {
	cfg := Config{Sites: oneSite(RouteConfig{Respond: &RespondConfig{Status: 200}})}
	cfg.Limits.SendTimeout = 300 * time.Millisecond
	p, err := New(cfg, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.h2.WriteByteTimeout; got != 300*time.Millisecond {
		t.Errorf("http2.Server.WriteByteTimeout %v, want send_timeout 300ms", got)
	}
}
