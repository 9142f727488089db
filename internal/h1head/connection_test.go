package h1head

import (
	"bufio"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"
)

// scanInPieces feeds head to a ConnectionScan split at cut and returns
// the values and how many bytes it took.
func scanInPieces(head string, cut int) ([]string, int, bool) {
	var s ConnectionScan
	cut = min(max(cut, 0), len(head))
	n := s.Write([]byte(head[:cut]))
	if n == cut {
		n += s.Write([]byte(head[cut:]))
	}
	return s.Values(), n, s.Done()
}

// TestConnectionScan: the Connection fields of a head, however it is
// split, without the bytes after it.
func TestConnectionScan(t *testing.T) {
	for _, tc := range []struct {
		head string
		want []string
	}{
		{"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: a\r\n\r\nbody", []string{"close, X-Hop"}},
		{"HTTP/1.1 200 OK\r\nconnection:close\r\nCONNECTION:  x-a ,x-b \t\r\n\r\n", []string{"close", "x-a ,x-b"}},
		{"HTTP/1.1 200 OK\nConnection: close,\n\tX-Folded\nX: y\n\nConnection: body", []string{"close, X-Folded"}},
		{"HTTP/1.1 200 OK\r\nX-Connection: close\r\nConnections: x\r\n\r\n", nil},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nConnection: next\r\n\r\n", nil},
	} {
		end := strings.Index(tc.head, "\r\n\r\n") + 4
		if end < 4 {
			end = strings.Index(tc.head, "\n\n") + 2
		}
		var s ConnectionScan
		if s.Write([]byte(tc.head)); s.StatusCode() != 200 {
			t.Errorf("%q: status %d", tc.head, s.StatusCode())
		}
		for cut := range len(tc.head) + 1 {
			got, n, done := scanInPieces(tc.head, cut)
			if !slices.Equal(got, tc.want) || n != end || !done {
				t.Fatalf("%q split at %d: values %q, took %d bytes (done %v); want %q, %d", tc.head, cut, got, n, done, tc.want, end)
			}
		}
	}
}

// FuzzConnectionScan: for every head net/textproto reads, the scan finds
// the Connection values it does (before net/http drops them), however
// the head is split.
func FuzzConnectionScan(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: a\r\n\r\n", 10)
	f.Add("HTTP/1.1 200 OK\r\nConnection: close,\r\n X-Folded\r\n\r\n", 30)
	f.Add("HTTP/1.1 200 OK\nconnection:\n\nx", 3)
	f.Fuzz(func(t *testing.T, head string, cut int) {
		r := textproto.NewReader(bufio.NewReader(strings.NewReader(head)))
		if _, err := r.ReadLine(); err != nil {
			return
		}
		h, err := r.ReadMIMEHeader()
		if err != nil {
			return
		}
		got, _, done := scanInPieces(head, cut)
		if res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(head)), nil); err == nil {
			var s ConnectionScan
			s.Write([]byte(head))
			if s.StatusCode() != res.StatusCode {
				t.Errorf("%q: status %d; http.ReadResponse's %d", head, s.StatusCode(), res.StatusCode)
			}
		}
		if want := h["Connection"]; !done || !slices.Equal(got, want) {
			t.Fatalf("%q: scan found %q (done %v); textproto %q", head, got, done, want)
		}
	})
}
