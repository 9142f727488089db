package proxy

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestH2ReadHeaderTimeout: read_header_timeout bounds the reading of an
// h2 request's header block as it bounds an HTTP/1.1 head. x/net/http2
// has no such bound: a client that began a header block (HEADERS without
// END_HEADERS, or a HEADERS frame short of its payload) and sent no more
// held the connection until its idle timeout, and for as long as it
// liked while another of its streams was open. Frames that keep coming
// within the block (empty CONTINUATIONs) do not extend its time. A
// request whose block comes in pieces within the timeout is served.
func TestH2ReadHeaderTimeout(t *testing.T) {
	backend := nameBackend(t, "b")
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.ReadHeaderTimeout = 300 * time.Millisecond
	cfg.Limits.IdleTimeout = time.Minute
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	block := h2Block(":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/")

	for _, tc := range []struct {
		name  string
		start func(c net.Conn, fr *http2.Framer)
	}{
		{"HEADERS without END_HEADERS", func(c net.Conn, fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:2], EndStream: true})
		}},
		{"HEADERS short of its payload", func(c net.Conn, fr *http2.Framer) {
			hdr := []byte{0, 0, byte(len(block)), 0x1, 0x5, 0, 0, 0, 1} // HEADERS, END_STREAM|END_HEADERS, stream 1
			c.Write(append(hdr, block[:2]...))
		}},
		{"HEADERS, then one-octet CONTINUATIONs without end", func(c net.Conn, fr *http2.Framer) {
			// Frames that add next to nothing to the block: each is
			// progress of a kind, none extends the block's time.
			// (Empty ones are a flood: TestH2EmptyContinuationFlood.)
			long := h2Block(":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/", "x-pad", strings.Repeat("a", 4000))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: long[:2], EndStream: true})
			go func() {
				w := http2.NewFramer(c, nil)
				for i := range 1000 { // 10 s at most
					if w.WriteContinuation(1, false, long[2+i:3+i]) != nil {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}},
	} {
		c := dialRaw(t, f.addr)
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		tc.start(c, fr)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, err := fr.ReadFrame()
			if err == nil {
				continue
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("%s: the connection is still open 5s after the block began; read_header_timeout 300ms", tc.name)
			}
			break
		}
		c.Close()
	}

	// The block in two pieces, well within the timeout.
	c := dialRaw(t, f.addr)
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:2], EndStream: true})
	time.Sleep(50 * time.Millisecond)
	fr.WriteContinuation(1, true, block[2:])
	if status := h2Status(t, fr, 1); status != "200" {
		t.Errorf("a header block in two pieces: %q, want 200", status)
	}
}
