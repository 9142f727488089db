package proxy

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestH2RefusedResponseClientBodyOpen: a response roundTrip refuses (here
// more header fields than max_response_header_fields) from an HTTP/2
// target, while the client's request stream is still open, is answered
// 502 at once. Closing the refused response's body waits for the
// Transport's writer, which was blocked reading the client's body: the
// handler hung until body_timeout and then answered 408, blaming the
// client for the target's malformed response.
func TestH2RefusedResponseClientBodyOpen(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range DefaultMaxResponseHeaderFields + 10 {
			w.Header().Set("X-F"+strconv.Itoa(i), "v")
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		io.Copy(io.Discard, r.Body) // a body to come: the stream stays open
	}))
	f := h2cFront(t, addr, LimitsConfig{BodyTimeout: 500 * time.Millisecond})
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/call", nil) // the stream stays open
	if err := fr.WriteData(1, false, grpcMsg("first")); err != nil {
		t.Fatal(err)
	}
	evs := h2Events(t, fr, 1)
	if len(evs) == 0 || evs[0].kind != "headers" || evs[0].fields[":status"] != "502" {
		t.Fatalf("the refused response was answered %+v, want 502", evs)
	}
}
