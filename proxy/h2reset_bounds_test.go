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

// TestHTTP2InFlightDataAfterEarlyResponse: a well-behaved client uploads a
// body in DATA frames; the proxy answers at once without reading it (here
// its own error response for a host no site serves; an upstream that
// rejects an upload unread does the same), and x/net ends the stream with
// RST_STREAM(NO_ERROR) after the response (RFC 9113 §8.1). The DATA
// frames the client had in flight by then (within the stream's and the
// connection's flow-control windows; the test sends them once the RST is
// out, as the network delays them) each get RST_STREAM(STREAM_CLOSED)
// from x/net (a DATA frame on a closed stream), and the guard counts each
// as a client-caused reset. One ordinary rejected upload must not get the
// whole connection GOAWAY(ENHANCE_YOUR_CALM).
func TestHTTP2InFlightDataAfterEarlyResponse(t *testing.T) {
	f := newFront(t, proxyTo("127.0.0.1:1"), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/upload"}, {":authority", "nosuch.test"}} {
		enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// The complete response, then the server's RST_STREAM(NO_ERROR).
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := fm.(*http2.RSTStreamFrame); ok && r.StreamID == 1 {
			if r.ErrCode != http2.ErrCodeNo {
				t.Fatalf("stream reset with %v", r.ErrCode)
			}
			break
		}
	}
	// The DATA frames the client had in flight: 600 × 1000 octets, well
	// within the 1 MiB stream and connection windows the server advertised.
	payload := make([]byte, 1000)
	for range 600 {
		if err := fr.WriteData(1, false, payload); err != nil {
			t.Fatalf("writing in-flight DATA: %v", err)
		}
	}
	// The server writes its resets after the PING answer at times (a
	// control frame goes first), and the guard trips on the client's next
	// read: a second PING once the first is answered, then 300 ms.
	fr.WritePing(false, [8]byte{7})
	pings := 0
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() && pings == 2 {
				return // still open, no GOAWAY
			}
			t.Fatalf("connection ended: %v", err)
		}
		switch fm := fm.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v after one upload answered early with 600 DATA frames in flight", fm.ErrCode)
		case *http2.PingFrame:
			if fm.IsAck() {
				if pings++; pings == 1 {
					time.Sleep(100 * time.Millisecond)
					fr.WritePing(false, [8]byte{8})
				} else {
					c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				}
			}
		}
	}
}

// TestResetGuardGoAwayNotInsideHeaderBlock: a header block larger than the
// client's SETTINGS_MAX_FRAME_SIZE goes out as HEADERS then CONTINUATION
// frames, which must follow each other with no frame in between (RFC 9113
// §6.2, §6.10: anything else is a connection error PROTOCOL_ERROR). The
// server writes each frame with its own Write, so a flood seen between
// them must not put the GOAWAY there.
func TestResetGuardGoAwayNotInsideHeaderBlock(t *testing.T) {
	c := &blockingConn{started: make(chan struct{}), release: make(chan struct{}), closedAt: -1}
	close(c.release)
	c.in = twoStreamsReset()
	g := newResetGuard(c, 1, 1, nil)
	headers := h2Frame(h2FrameHeaders, 0 /* no END_HEADERS */, 1, 100)
	continuation := h2Frame(0x9 /* CONTINUATION */, 0x4 /* END_HEADERS */, 1, 100)
	if _, err := g.Write(headers); err != nil {
		t.Fatal(err)
	}
	readUntilFlood(t, g)
	if _, err := g.Write(continuation); err != nil {
		t.Fatal(err)
	}
	g.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	// The wire: whole frames, a GOAWAY among them, and no frame between
	// the HEADERS and its CONTINUATION.
	var types []byte
	inBlock, goAway := false, false
	for b := c.out; len(b) > 0; {
		if len(b) < h2FrameHeaderLen {
			t.Fatalf("the wire ends in %d octets of a frame header", len(b))
		}
		n := h2FrameHeaderLen + (int(b[0])<<16 | int(b[1])<<8 | int(b[2]))
		if n > len(b) {
			t.Fatalf("the wire ends inside a frame of type %#x", b[3])
		}
		if inBlock && b[3] != 0x9 { // CONTINUATION
			t.Fatalf("frames %x: inside the header block came a frame of type %#x, not its CONTINUATION", append(types, b[3]), b[3])
		}
		switch b[3] {
		case h2FrameHeaders, 0x9:
			inBlock = b[4]&0x4 == 0 // END_HEADERS
		case h2FrameGoAway:
			goAway = true
		}
		types = append(types, b[3])
		b = b[n:]
	}
	if !goAway {
		t.Fatalf("frames %x: no GOAWAY", types)
	}
}
