package proxy

import (
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestH2LargeFieldClosesConnection: an HTTP/2 request with a field over
// h2LargeField (a header field, a cookie crumb, :path) is answered, then
// its connection is closed gracefully (GOAWAY NO_ERROR after the
// response): x/net/http2's HPACK decoder keeps the buffer of a field that
// spanned frames for the connection's life, so a client could have each
// of its connections hold up to max_header_bytes while it idled between
// small requests (measured: 0.63 MiB per idle connection after one 600
// KiB field). A connection whose fields are smaller, a long cookie of
// small crumbs included, serves its next request.
func TestH2LargeFieldClosesConnection(t *testing.T) {
	backend := nameBackend(t, "b")
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.MaxHeaderBytes = 1 << 20
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	big := strings.Repeat("a", 2*h2LargeField)
	crumbs := strings.Repeat("c=1; ", 2*h2LargeField/5) + "c=1"
	for _, tc := range []struct {
		name   string
		fields []string
		closed bool
	}{
		{"a large header field", []string{":path", "/", "x-big", big}, true},
		{"a large :path", []string{":path", "/" + big}, true},
		{"a large cookie crumb", []string{":path", "/", "cookie", "a=" + big}, true},
		{"small fields", []string{":path", "/", "x-small", big[:100]}, false},
		{"a long cookie of small crumbs", []string{":path", "/", "cookie", crumbs}, false},
	} {
		c := dialRaw(t, f.addr)
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		request := func(id uint32) {
			block := h2Block(append([]string{":method", "GET", ":scheme", "https", ":authority", "example.test"}, tc.fields...)...)
			const frame = 16 << 10 // the client's frames, as large as the server allows
			first := min(len(block), frame)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first], EndStream: true, EndHeaders: first == len(block)})
			for i := first; i < len(block); i += frame {
				j := min(i+frame, len(block))
				fr.WriteContinuation(id, j == len(block), block[i:j])
			}
		}
		request(1)
		// Frames until stream 1's status, and from then until a GOAWAY
		// or the end: x/net/http2 sends the graceful close's GOAWAY
		// (NO_ERROR) as it writes the response head, before or after it.
		status, goaway := "", false
		dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
			if hf.Name == ":status" {
				status = hf.Value
			}
		})
		for {
			fm, err := fr.ReadFrame()
			if err != nil {
				break
			}
			if g, ok := fm.(*http2.GoAwayFrame); ok {
				goaway = g.ErrCode == http2.ErrCodeNo
			}
			if h, ok := fm.(*http2.HeadersFrame); ok && h.StreamID == 1 {
				dec.Write(h.HeaderBlockFragment())
			}
			if status != "" && (goaway || !tc.closed) {
				break
			}
		}
		if status != "200" {
			t.Errorf("%s: %q, want 200", tc.name, status)
		}
		if goaway != tc.closed {
			t.Errorf("%s: GOAWAY NO_ERROR after the answer %v, want %v", tc.name, goaway, tc.closed)
		}
		if !tc.closed {
			request(3)
			if got := h2Status(t, fr, 3); got != "200" {
				t.Errorf("%s: a second request on the connection: %q, want 200", tc.name, got)
			}
		}
		c.Close()
	}
}
