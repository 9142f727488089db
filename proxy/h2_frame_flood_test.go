package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/lograte"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// lengthBackend answers 200 to a request whose body has the length its
// X-Want-Length gives, 400 to any other.
func lengthBackend(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if strconv.FormatInt(n, 10) != r.Header.Get("X-Want-Length") {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(s.Close)
	return addrOf(s)
}

// floodFront is an h2 front door to a lengthBackend whose connections
// would stay open a minute without the guard.
func floodFront(t *testing.T) *front {
	cfg := proxyTo(lengthBackend(t))
	cfg.Limits.ReadHeaderTimeout = time.Minute
	cfg.Limits.IdleTimeout = time.Minute
	cfg.Limits.BodyTimeout = time.Minute
	return newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
}

// frameFlood runs testpeer's FrameFlood of frames send's frames on a new
// connection to addr and fails t unless the server ended it with
// GOAWAY(ENHANCE_YOUR_CALM).
func frameFlood(t *testing.T, addr string, frames int, send testpeer.Sender) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(15 * time.Second)))
	sent := testpeer.ExpectFrameFloodCalm(t, c, "http", "example.test", frames, send)
	t.Logf("%d frames sent", sent)
}

// TestH2EmptyDataFlood: DATA frames that carry no data octet and do not
// end their stream (CVE-2019-9518, "empty frames flood"), sent one after
// another on an open request, end the connection with
// GOAWAY(ENHANCE_YOUR_CALM) once more than h2MaxEmptyData come in a row:
// each is a frame read and a pass through the server's loop for nothing,
// and nothing bounded them over a connection (body_timeout ends one
// stream). A DATA frame of padding only counts as empty (x/net gives the
// padding's window back at once, in two WINDOW_UPDATEs). Empty
// frames between data, and empty DATA frames with END_STREAM (gRPC
// clients and browsers end a body so), are served.
func TestH2EmptyDataFlood(t *testing.T) {
	f := floodFront(t)
	t.Run("empty", func(t *testing.T) { frameFlood(t, f.addr, 3000, testpeer.EmptyData) })
	t.Run("padding only", func(t *testing.T) { frameFlood(t, f.addr, 3000, testpeer.PaddedEmptyData) })

	t.Run("served", func(t *testing.T) {
		fr, _ := rawH2(t, f.addr)
		// Each body: as many empty DATA frames as may come in a row
		// (some padded) before and after each of three data frames
		// (one padded), then an empty DATA frame with END_STREAM (every
		// other one padded), which the next body's empty frames follow.
		// 20 such requests: more empty END_STREAM frames than
		// h2MaxEmptyData.
		for i := range 20 {
			id := uint32(2*i + 1)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
				BlockFragment: h2Block(":method", "POST", ":scheme", "http", ":authority", "example.test", ":path", "/", "x-want-length", "30")})
			empties := func() {
				for k := range h2MaxEmptyData {
					if k%2 == 1 {
						fr.WriteDataPadded(id, false, nil, make([]byte, 3))
					} else {
						fr.WriteData(id, false, nil)
					}
				}
			}
			for j := range 3 {
				empties()
				if j == 1 {
					fr.WriteDataPadded(id, false, bytes.Repeat([]byte("x"), 10), make([]byte, 5))
				} else {
					fr.WriteData(id, false, bytes.Repeat([]byte("x"), 10))
				}
			}
			empties()
			if i%2 == 0 {
				fr.WriteData(id, true, nil)
			} else {
				fr.WriteDataPadded(id, true, nil, make([]byte, 2))
			}
			if got := h2Status(t, fr, id); got != "200" {
				t.Fatalf("stream %d, a body of data frames each followed by %d empty ones, ended by an empty END_STREAM: %q, want 200", id, h2MaxEmptyData, got)
			}
		}
	})
}

// TestH2UnknownFrameFlood: frames of a type HTTP/2 does not define, which
// RFC 9113 §5.5 has the server ignore, end the connection with
// GOAWAY(ENHANCE_YOUR_CALM) once more than h2MaxUnknownFrames come
// between two of the client's requests (or data octets): before, a
// client could send them for as long as the connection lived, each read
// and handed to the server's loop for nothing, and the idle timeout
// counts only streams. A client that sends a few with each request, as
// browsers send PRIORITY_UPDATE (0x10, RFC 9218) or a reserved type
// (Chrome's GREASE frames), is served however many requests it makes.
func TestH2UnknownFrameFlood(t *testing.T) {
	f := floodFront(t)
	t.Run("flood", func(t *testing.T) { frameFlood(t, f.addr, 3000, testpeer.UnknownFrame) })

	t.Run("served", func(t *testing.T) {
		fr, _ := rawH2(t, f.addr)
		unknown := func(n int) {
			for k := range n {
				if k%2 == 0 {
					fr.WritePriorityUpdate(1, "u=2")
				} else {
					fr.WriteRawFrame(0xfa, 0, 0, []byte{1, 2, 3})
				}
			}
		}
		request := func(id uint32, body ...string) {
			t.Helper()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: len(body) == 0,
				BlockFragment: h2Block(":method", "POST", ":scheme", "http", ":authority", "example.test", ":path", "/", "x-want-length", strconv.Itoa(len(body)))})
			for k, b := range body {
				if k > 0 {
					unknown(h2MaxUnknownFrames)
				}
				fr.WriteData(id, k == len(body)-1, []byte(b))
			}
			if got := h2Status(t, fr, id); got != "200" {
				t.Fatalf("stream %d, each request or data frame after %d unknown frames: %q, want 200", id, h2MaxUnknownFrames, got)
			}
		}
		// As many unknown frames as may come in a row before each of
		// two requests without a body, then between the DATA frames of
		// a third: in all, five times the bound.
		unknown(h2MaxUnknownFrames)
		request(1)
		unknown(h2MaxUnknownFrames)
		request(3)
		request(5, "x", "x", "x")
	})
}

// TestFrameFloodWarnings: the warning of each flood of the client's frames
// names it, its bound and the client, through the reset floods' limiter.
func TestFrameFloodWarnings(t *testing.T) {
	defer func(l *lograte.Limiter) { resetFloodLog = l }(resetFloodLog)
	for _, tc := range []struct {
		kind floodKind
		want string
		err  error
	}{
		{floodResets, "reset streams too fast: GOAWAY ENHANCE_YOUR_CALM\" client=pipe max_reset_rate=100 ", errResetFlood},
		{floodContinuations, "empty CONTINUATION frames: GOAWAY ENHANCE_YOUR_CALM\" client=pipe max_empty_continuations=8 ", errContinuationFlood},
		{floodEmptyData, "empty DATA frames in a row: GOAWAY ENHANCE_YOUR_CALM\" client=pipe max_empty_data=10 ", errEmptyDataFlood},
		{floodUnknownFrames, "extension frames without requests or data: GOAWAY ENHANCE_YOUR_CALM\" client=pipe max_unknown_frames=1000 ", errUnknownFrameFlood},
	} {
		resetFloodLog = &lograte.Limiter{Interval: int64(time.Hour)}
		var logs testpeer.SyncBuffer
		l := LimitsConfig{}.WithDefaults()
		a, b := net.Pipe()
		go io.Copy(io.Discard, b) // the GOAWAY
		g := GuardHTTP2(a, &l, slog.New(slog.NewTextHandler(&logs, nil))).(*resetGuard)
		g.tripOn(tc.kind)
		if _, err := g.Read(make([]byte, 1)); err != tc.err {
			t.Errorf("kind %d: Read error %v, want %v", tc.kind, err, tc.err)
		}
		a.Close()
		b.Close()
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("kind %d: log %q, want it with %q", tc.kind, logs.String(), tc.want)
		}
	}
}
