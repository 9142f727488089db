package h1head

import (
	"bufio"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"
)

// scanInPieces feeds head to a HeadScan split at cut and returns
// the values and how many bytes it took.
func scanInPieces(head string, cut int) ([]string, int, bool) {
	var s HeadScan
	cut = min(max(cut, 0), len(head))
	n := s.Write([]byte(head[:cut]))
	if n == cut {
		n += s.Write([]byte(head[cut:]))
	}
	return s.Connection(), n, s.Done()
}

// TestHeadScan: the Connection fields of a head, however it is
// split, without the bytes after it; and whether it has both framings.
func TestHeadScan(t *testing.T) {
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
		var s HeadScan
		if s.Write([]byte(tc.head)); s.StatusCode() != 200 || s.LengthAndCoding() {
			t.Errorf("%q: status %d, both framings %v", tc.head, s.StatusCode(), s.LengthAndCoding())
		}
		for cut := range len(tc.head) + 1 {
			got, n, done := scanInPieces(tc.head, cut)
			if !slices.Equal(got, tc.want) || n != end || !done {
				t.Fatalf("%q split at %d: values %q, took %d bytes (done %v); want %q, %d", tc.head, cut, got, n, done, tc.want, end)
			}
		}
	}
}

// FuzzHeadScan: for every head net/textproto reads, the scan finds
// the Connection values it does (before net/http drops them), however
// the head is split.
func FuzzHeadScan(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: a\r\n\r\n", 10)
	f.Add("HTTP/1.1 200 OK\r\nConnection: close,\r\n X-Folded\r\n\r\n", 30)
	f.Add("HTTP/1.1 200 OK\nconnection:\n\nx", 3)
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", 20)
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
			var s HeadScan
			s.Write([]byte(head))
			if s.StatusCode() != res.StatusCode {
				t.Errorf("%q: status %d; http.ReadResponse's %d", head, s.StatusCode(), res.StatusCode)
			}
		}
		var whole HeadScan
		whole.Write([]byte(head))
		_, cl := h["Content-Length"]
		_, te := h["Transfer-Encoding"]
		if whole.LengthAndCoding() != (cl && te) {
			t.Errorf("%q: LengthAndCoding %v; textproto has Content-Length %v, Transfer-Encoding %v", head, whole.LengthAndCoding(), cl, te)
		}
		if want := h["Connection"]; !done || !slices.Equal(got, want) {
			t.Fatalf("%q: scan found %q (done %v); textproto %q", head, got, done, want)
		}
	})
}

// TestHeadScanBothFramings: a head with both Content-Length and
// Transfer-Encoding, in any case and order, is noted; one with either
// alone, or with them in the body after it, is not.
func TestHeadScanBothFramings(t *testing.T) {
	for head, want := range map[string]bool{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n":       true,
		"HTTP/1.1 200 OK\r\ntransfer-encoding:chunked\r\nX: 1\r\ncontent-length:2\r\n\r\n": true,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nContent-Length: 2\r\n\r\n":   false,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Transfer-Encoding: chunked\r\n\r\n":     false,
	} {
		var s HeadScan
		s.Write([]byte(head))
		if s.LengthAndCoding() != want {
			t.Errorf("%q: LengthAndCoding %v; want %v", head, s.LengthAndCoding(), want)
		}
	}
}

// TestHeadScanFraming: a head that frames itself twice (Content-Length
// and Transfer-Encoding) is seen as such also when a name has white space
// before its colon ("Content-Length :", no field name by RFC 9112 §5.1,
// which net/http keeps under that name and a forwarding proxy would have
// to trim): LengthAndCoding, whatever else refuses such a name.
func TestHeadScanFraming(t *testing.T) {
	for head, both := range map[string]bool{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n":   true,
		"HTTP/1.1 200 OK\r\nContent-Length : 5\r\nTransfer-Encoding: chunked\r\n\r\n":  true,
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding\t: chunked\r\n\r\n": true,
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Transfer-Encoding: chunked\r\n\r\n": false,
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n":                                 false,
	} {
		var s HeadScan
		s.Write([]byte(head))
		if s.LengthAndCoding() != both {
			t.Errorf("%q: both framings %v, want %v", head, s.LengthAndCoding(), both)
		}
	}
}
