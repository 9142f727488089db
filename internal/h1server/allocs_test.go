package h1server

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestRequestAllocs bounds the allocations of one more keep-alive request
// on a connection (the difference between serving two requests and one):
// a plain GET's head is parsed by h1head (five allocations), the request
// gets its context (one), the handler sets a header value (one), and the
// response writer and connection state are reused.
func TestRequestAllocs(t *testing.T) {
	if testpeer.RaceEnabled {
		// The connection state is pooled, and the race detector's
		// sync.Pool drops a random share of what it is given.
		t.Skip("allocation counts are not the program's under the race detector")
	}
	const get = "GET /1k HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	body := []byte(strings.Repeat("x", 1024))
	s := &Server{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"application/octet-stream"}
		w.Write(body)
	})
	serve := func(n int) float64 {
		in := []byte(strings.Repeat(get, n))
		return testing.AllocsPerRun(200, func() {
			s.ServeConn(&sinkConn{fuzzConn{in: in, step: len(in)}})
		})
	}
	one, two := serve(1), serve(2)
	if d := two - one; d > 7 {
		t.Errorf("a keep-alive request costs %v allocations, want at most 7", d)
	}
	// With ReuseHeader the header map and its values' storage come from
	// the connection: three allocations less.
	s.ReuseHeader = true
	one, two = serve(1), serve(2)
	if d := two - one; d > 4 {
		t.Errorf("with ReuseHeader a keep-alive request costs %v allocations, want at most 4", d)
	}
}

// sinkConn is a fuzzConn that drops what is written.
type sinkConn struct{ fuzzConn }

func (c *sinkConn) Write(p []byte) (int, error) { return len(p), nil }
