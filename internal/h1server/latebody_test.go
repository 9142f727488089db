package h1server

import (
	"bufio"
	"io"
	"net/http"
	"testing"
)

// TestBodyReadAfterHandler: a request body read after its handler
// returned (by a transport still sending it upstream, as net/http's may)
// fails with http.ErrBodyReadAfterClose, also once the connection serves
// the next request with a body: it never reads that request's bytes,
// which belong to another handler (or, once the connection's state is
// pooled, to another client).
func TestBodyReadAfterHandler(t *testing.T) {
	type late struct {
		n   int
		err error
		got string
	}
	kept := make(chan io.Reader, 1)
	result := make(chan late, 1)
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/first":
			// Read the first body in full, keep it for later.
			io.ReadAll(r.Body)
			kept <- r.Body
		case "/second":
			// The late reader of the first body reads now.
			b := make([]byte, 64)
			n, err := (<-kept).Read(b)
			result <- late{n, err, string(b[:n])}
			own, _ := io.ReadAll(r.Body)
			w.Write(own)
		}
	}))
	c := dial(t, addr)
	io.WriteString(c, "POST /first HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst"+
		"POST /second HTTP/1.1\r\nHost: a\r\nContent-Length: 14\r\n\r\nsecond's bytes")
	rs := readResponses(t, bufio.NewReader(c), "POST", "POST")
	l := <-result
	if l.n != 0 || l.err != http.ErrBodyReadAfterClose {
		t.Errorf("the first request's body, read after its handler, gave %d bytes (%q), %v; want http.ErrBodyReadAfterClose", l.n, l.got, l.err)
	}
	if got := bodyOf(rs[1]); got != "second's bytes" {
		t.Errorf("the second handler read its body as %q", got)
	}
}
