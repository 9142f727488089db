package h1server

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestHugeHeaderBufferReleased: a response whose header does not fit the
// pooled buffer gets a buffer of its own; like the pooled one, it must go
// when the response is done, not stay with the connection while it waits
// (idle_timeout) for its next request, nor with the pooled connection
// state after it.
func TestHugeHeaderBufferReleased(t *testing.T) {
	held := make(chan int, 2)
	_, addr := testServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held <- cap(w.(*response).buf)
		if r.URL.Path == "/big" {
			w.Header().Set("X-Big", strings.Repeat("a", 3*bufSize))
		}
		w.Write([]byte("ok"))
	}))
	c := dial(t, addr)
	fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	for _, res := range readResponses(t, br, "GET", "GET") {
		if b := bodyOf(res); b != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	<-held
	if n := <-held; n != 0 {
		t.Errorf("the next request started with a %d-byte response buffer left from the last response's header", n)
	}
}
