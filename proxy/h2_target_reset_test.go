package proxy

import (
	"net/http"
	"testing"
	"time"
)

// TestH2TargetResetClientBodyOpen: an HTTP/2 target that resets the
// stream before answering, while the client still holds its request
// stream open, is a target failure answered 502 at once. net/http's
// Transport waits for its writer, blocked reading the client's body,
// before it returns the reset: the handler waited for the client up to
// body_timeout and answered 408, blaming the client and not the target.
func TestH2TargetResetClientBodyOpen(t *testing.T) {
	want502ClientBodyOpen(t, "the target's reset", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // RST_STREAM, no answer
	}))
}

// want502ClientBodyOpen sends a request to target through a proxy with
// a 500 ms body_timeout, keeps its stream open after a first message, and
// fails unless the answer is 502 (what names the target's failure), as a
// gRPC call gets it.
func want502ClientBodyOpen(t *testing.T, what string, target http.Handler) {
	t.Helper()
	f := h2cFront(t, h2cBackend(t, target), LimitsConfig{BodyTimeout: 500 * time.Millisecond})
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/call", nil) // the stream stays open
	if err := fr.WriteData(1, false, grpcMsg("first")); err != nil {
		t.Fatal(err)
	}
	// A gRPC call: 502 goes as UNAVAILABLE with 502's text (grpcReply).
	evs := h2Events(t, fr, 1)
	if len(evs) == 0 || evs[0].kind != "headers" || evs[0].fields["grpc-status"] != "14" || evs[0].fields["grpc-message"] != "no upstream target answered" {
		t.Fatalf("%s was answered %+v, want 502 (UNAVAILABLE, no upstream target answered)", what, evs)
	}
}
