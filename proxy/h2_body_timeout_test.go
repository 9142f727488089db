package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// h2cFront is a proxy for an h2c upstream at addr with limits l, whose
// client connections speak HTTP/2.
func h2cFront(t *testing.T, addr string, l LimitsConfig) *front {
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
		Limits:    l,
	}
	return newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
}

// TestH2BodyTimeoutTargetSlow: body_timeout bounds a read of the client's
// body, not the time a target takes to accept what was read: over HTTP/2
// a target that answers and then takes the body slower than
// body_timeout (its flow-control window shut meanwhile) gets it whole
// from a client that was ready to send all along.
func TestH2BodyTimeoutTargetSlow(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	const size = 4 << 20 // past the target's 1 MiB stream window
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(4 * bodyTimeout) // a slow target, on purpose
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n, err)
	}))
	f := h2cFront(t, addr, LimitsConfig{BodyTimeout: bodyTimeout, RequestBuffer: -1})
	res, err := h2cClient(t).Post(f.url+"/up", "application/octet-stream", io.MultiReader(bytes.NewReader(make([]byte, size))))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if want := fmt.Sprint(size, nil); string(body) != want || err != nil {
		t.Fatalf("target answered %q, %v; want %q", body, err, want)
	}
}

// TestH2BodyTimeoutClientStalls: an HTTP/2 client that stops sending its
// body midway has its request ended after body_timeout (408).
func TestH2BodyTimeoutClientStalls(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	f := h2cFront(t, addr, LimitsConfig{BodyTimeout: 200 * time.Millisecond, RequestBuffer: -1})
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/up", nil)
	if err := fr.WriteData(1, false, []byte("part")); err != nil {
		t.Fatal(err)
	}
	// A gRPC call: 408 goes as UNKNOWN with 408's text (grpcReply).
	evs := h2Events(t, fr, 1)
	if len(evs) == 0 || evs[0].kind != "headers" || evs[0].fields["grpc-status"] != "2" || evs[0].fields["grpc-message"] != "request body timed out" {
		t.Fatalf("the stalled request got %+v, want 408 (UNKNOWN, request body timed out)", evs)
	}
}
