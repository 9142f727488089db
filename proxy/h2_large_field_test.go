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
// KiB field). So is one whose large head the server refused before the
// handler saw it (431 for a head over max_header_bytes, 400 for a
// connection-specific field, RST_STREAM for a malformed field), or that
// sent a large trailer section, or a huge cookie field whose crumbs are
// small: the decoder kept its buffer all the same.
// A connection whose fields are smaller, a long cookie of small crumbs
// included, serves its next request.
func TestH2LargeFieldClosesConnection(t *testing.T) {
	backend := nameBackend(t, "b")
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.MaxHeaderBytes = 1 << 20
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	big := strings.Repeat("a", 2*h2LargeField)
	crumbs := strings.Repeat("c=1; ", 2*h2LargeField/5) + "c=1"
	huge := strings.Repeat("h", 600<<10) // two of them: over max_header_bytes
	for _, tc := range []struct {
		name    string
		fields  []string
		trailer []string // sent after a DATA frame, when set
		status  string   // the answer, as h2Status gives it
		closed  bool
	}{
		{"a large header field", []string{":path", "/", "x-big", big}, nil, "200", true},
		{"a large :path", []string{":path", "/" + big}, nil, "200", true},
		{"a large cookie crumb", []string{":path", "/", "cookie", "a=" + big}, nil, "200", true},
		{"small fields", []string{":path", "/", "x-small", big[:100]}, nil, "200", false},
		{"a long cookie of small crumbs", []string{":path", "/", "cookie", crumbs}, nil, "200", false},
		{"a huge cookie of small crumbs in one field", []string{":path", "/", "cookie", strings.Repeat("c=1; ", 100<<10) + "c=1"}, nil, "200", true},
		{"a head over max_header_bytes", []string{":path", "/", "x-huge1", huge, "x-huge2", huge}, nil, "431", true},
		{"a large head with a connection-specific field", []string{":path", "/", "x-huge", huge, "connection", "close"}, nil, "400", true},
		{"a large head with a malformed field", []string{":path", "/", "x-huge", huge, "X-Upper", "1"}, nil, "RST PROTOCOL_ERROR", true},
		{"a large trailer field", []string{":method", "POST", ":path", "/"}, []string{"x-big", huge}, "200", true},
	} {
		c := dialRaw(t, f.addr)
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		writeBlock := func(id uint32, block []byte, endStream bool) {
			const frame = 16 << 10 // the client's frames, as large as the server allows
			first := min(len(block), frame)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first], EndStream: endStream, EndHeaders: first == len(block)})
			for i := first; i < len(block); i += frame {
				j := min(i+frame, len(block))
				fr.WriteContinuation(id, j == len(block), block[i:j])
			}
		}
		request := func(id uint32) {
			fields := append([]string{":scheme", "https", ":authority", "example.test"}, tc.fields...)
			if fields[4] != ":method" {
				fields = append([]string{":method", "GET"}, fields...)
			}
			writeBlock(id, h2Block(fields...), tc.trailer == nil)
			if tc.trailer != nil {
				fr.WriteData(id, false, []byte("x"))
				writeBlock(id, h2Block(tc.trailer...), true)
			}
		}
		request(1)
		// Frames until stream 1's status (or reset), and from then until
		// a GOAWAY or the end: x/net/http2 sends the graceful close's
		// GOAWAY (NO_ERROR) as it writes the response head, before or
		// after it.
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
			switch fm := fm.(type) {
			case *http2.GoAwayFrame:
				goaway = fm.ErrCode == http2.ErrCodeNo
			case *http2.HeadersFrame:
				if fm.StreamID == 1 {
					dec.Write(fm.HeaderBlockFragment())
				}
			case *http2.RSTStreamFrame:
				if fm.StreamID == 1 {
					status = "RST " + fm.ErrCode.String()
				}
			}
			if status != "" && (goaway || !tc.closed) {
				break
			}
		}
		if status != tc.status {
			t.Errorf("%s: %q, want %s", tc.name, status, tc.status)
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
