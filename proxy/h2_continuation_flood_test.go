package proxy

import (
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestH2EmptyContinuationFlood: a header block of empty CONTINUATION
// frames (CVE-2024-27316's class) ends the connection with
// GOAWAY(ENHANCE_YOUR_CALM) once it holds more than
// h2MaxEmptyContinuations, long before read_header_timeout: x/net/http2
// bounds a block by its payload octets only, which empty frames do not
// grow. A block closed by a few empty frames is served.
func TestH2EmptyContinuationFlood(t *testing.T) {
	backend := nameBackend(t, "b")
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.ReadHeaderTimeout = time.Minute
	cfg.Limits.IdleTimeout = time.Minute
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	block := h2Block(":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/")

	fr, _ := rawH2(t, f.addr)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:2], EndStream: true})
	for range 1000 { // 9000 octets: the socket buffers take them
		if fr.WriteContinuation(1, false, nil) != nil {
			break
		}
	}
	if got := h2Status(t, fr, 1); got != "GOAWAY ENHANCE_YOUR_CALM" {
		t.Errorf("a header block of 1000 empty CONTINUATIONs: %q, want GOAWAY ENHANCE_YOUR_CALM (read_header_timeout 1m)", got)
	}

	// The bound is per block: two blocks on one connection, each with
	// a non-empty CONTINUATION and as many empty ones as one may hold.
	fr, _ = rawH2(t, f.addr)
	for _, id := range []uint32{1, 3} {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:2], EndStream: true})
		fr.WriteContinuation(id, false, block[2:])
		for range h2MaxEmptyContinuations - 1 {
			fr.WriteContinuation(id, false, nil)
		}
		fr.WriteContinuation(id, true, nil)
		if got := h2Status(t, fr, id); got != "200" {
			t.Errorf("stream %d, a header block closed by %d empty CONTINUATIONs: %q, want 200", id, h2MaxEmptyContinuations, got)
		}
	}
}
