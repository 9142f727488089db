package proxy

import (
	"io"
	"net/http"
	"strconv"
	"testing"
)

// TestH2RefusedResponseClientBodyOpen: a response roundTrip refuses (here
// more header fields than max_response_header_fields) from an HTTP/2
// target, while the client's request stream is still open, is answered
// 502 at once. Closing the refused response's body waits for the
// Transport's writer, which was blocked reading the client's body: the
// handler hung until body_timeout and then answered 408, blaming the
// client for the target's malformed response.
func TestH2RefusedResponseClientBodyOpen(t *testing.T) {
	want502ClientBodyOpen(t, "the refused response", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range DefaultMaxResponseHeaderFields + 10 {
			w.Header().Set("X-F"+strconv.Itoa(i), "v")
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		io.Copy(io.Discard, r.Body) // a body to come: the stream stays open
	}))
}
