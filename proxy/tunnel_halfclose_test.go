package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// halfCloseBackend switches to websocket, reads the tunnel until the
// client's EOF (half-close), then answers with reply and closes: the
// ordinary "send, FIN, read the answer" exchange of a byte stream.
func halfCloseBackend(t *testing.T, reply string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + websocketAccept(r.Header.Get("Sec-Websocket-Key")) + "\r\n\r\n")
		brw.Flush()
		io.Copy(io.Discard, brw) // until the client's half-close reaches us
		c.Write([]byte(reply))
	}))
	t.Cleanup(s.Close)
	return s
}

// TestUpgradeTunnelClientHalfClose: after a 101 an HTTP/1.1 Upgrade is a
// two-way byte tunnel: a client that half-closes (a FIN after its last
// bytes) still gets what the target sends after seeing that EOF. The
// target side is net/http's upgraded body over the proxy's own
// connection wrappers, which pass the half-close on.
func TestUpgradeTunnelClientHalfClose(t *testing.T) {
	backend := halfCloseBackend(t, "answer-after-eof")
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 101 {
		t.Fatalf("status %d", res.StatusCode)
	}
	io.WriteString(c, "request-bytes")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, _ := io.ReadAll(br)
	if string(got) != "answer-after-eof" {
		t.Fatalf("after the client's half-close the tunnel returned %q, want %q: the proxy closed the target's direction too", got, "answer-after-eof")
	}
}

// TestTCPStreamClientHalfClose: the same exchange on a TCP stream site.
func TestTCPStreamClientHalfClose(t *testing.T) {
	addr := connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		io.Copy(io.Discard, c)
		c.Write([]byte("answer-after-eof"))
	})
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addr)},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Stream: &StreamConfig{Upstream: "u"}}}}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{SNI: "example.test"}})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "request-bytes")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, _ := io.ReadAll(c)
	if string(got) != "answer-after-eof" {
		t.Fatalf("stream site after half-close: %q", got)
	}
}

// TestExtendedConnectClientHalfClose: END_STREAM on an RFC 8441 tunnel is
// the client's half-close (§4), passed on to the target as a FIN; the
// target's answer after it still reaches the client.
func TestExtendedConnectClientHalfClose(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectClientHalfClose", "GODEBUG=http2xconnect=1")
		return
	}
	backend := halfCloseBackend(t, "answer-after-eof")
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr := extendedConnect(t, f.addr)
	var got []byte
	sent := false
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream did not end: %v (got %q)", err, got)
		}
		if fm.Header().StreamID != 1 {
			continue
		}
		switch fm := fm.(type) {
		case *http2.HeadersFrame:
			if !sent {
				sent = true
				fr.WriteData(1, true, []byte("request-bytes"))
			}
		case *http2.DataFrame:
			got = append(got, fm.Data()...)
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset %v after %q", fm.ErrCode, got)
		}
		if fm.Header().Flags.Has(http2.FlagDataEndStream) {
			break
		}
	}
	if string(got) != "answer-after-eof" {
		t.Fatalf("after END_STREAM the tunnel returned %q, want %q", got, "answer-after-eof")
	}
}

// recordingUpgradeBackend switches to websocket and reports the request
// line's target and Host it got.
func recordingUpgradeBackend(t *testing.T, seen chan<- string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.RequestURI + " host=" + r.Host
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + websocketAccept(r.Header.Get("Sec-Websocket-Key")) + "\r\n\r\n")
		brw.Flush()
	}))
	t.Cleanup(s.Close)
	return s
}

// TestExtendedConnectRouteRewrites: a route's strip_prefix and
// host_header apply to a WebSocket opened over h2 (RFC 8441) as over
// HTTP/1.1: a client cannot reach the unrewritten path or host by choosing
// h2.
func TestExtendedConnectRouteRewrites(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestExtendedConnectRouteRewrites", "GODEBUG=http2xconnect=1")
		return
	}
	seen := make(chan string, 4)
	backend := recordingUpgradeBackend(t, seen)
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addrOf(backend))},
		Sites: oneSite(RouteConfig{PathPrefix: "/ws", StripPrefix: "/ws", HostHeader: "internal.test", Upstream: "u"})}

	// HTTP/1.1 WebSocket: the route's rewrites apply.
	f1 := newFront(t, cfg, frontOpts{})
	c := dialRaw(t, f1.addr)
	io.WriteString(c, "GET /ws/chat HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	h1 := <-seen

	// The same over h2 extended CONNECT.
	f2 := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr, _ := rawH2(t, f2.addr)
	block := h2Block(":method", "CONNECT", ":protocol", "websocket", ":scheme", "https",
		":path", "/ws/chat", ":authority", "example.test", "sec-websocket-version", "13")
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
	var h2 string
	select {
	case h2 = <-seen:
	case <-time.After(3 * time.Second):
		t.Fatalf("no request reached the target (status %s)", h2Status(t, fr, 1))
	}
	if h1 != "/chat host=internal.test" {
		t.Fatalf("HTTP/1.1 control: %q", h1)
	}
	if h2 != h1 {
		t.Fatalf("extended CONNECT reached the target as %q, HTTP/1.1 as %q: strip_prefix / host_header not applied", h2, h1)
	}
}
