package proxy

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestH2BodyOverDeclaredLength: an HTTP/2 client that sends more body
// than its content-length declared, while the proxy streams it to the
// target, sent a malformed request (RFC 9113 §8.1.1); x/net resets its
// stream, and the access log says 400, not 499 (a client that went away).
// Which the proxy learns first, the stream's reset or the body's error,
// depends on scheduling, and each takes its own path to the answer: the
// exchange is repeated so that both are likely taken.
func TestH2BodyOverDeclaredLength(t *testing.T) {
	for i := range 4 {
		if got := overlongH2Body(t); got != "/up 400" {
			t.Fatalf("exchange %d: access log %q, want \"/up 400\"", i, got)
		}
	}
}

// overlongH2Body sends one request whose body outgrows its content-length
// and returns the access log's line for it.
func overlongH2Body(t *testing.T) string {
	got := make(chan struct{})
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadFull(r.Body, make([]byte, 3))
		close(got)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
		Limits:    LimitsConfig{RequestBuffer: -1},
		AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{uri} {status}"},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr, _ := rawH2(t, f.addr)
	block := h2Block(":method", "POST", ":scheme", "http", ":path", "/up", ":authority", f.addr, "content-length", "5")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, false, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got: // the body is on its way to the target
	case <-time.After(10 * time.Second):
		t.Fatal("the body's first bytes did not reach the target")
	}
	if err := fr.WriteData(1, true, []byte("defghij")); err != nil {
		t.Fatal(err)
	}
	h2Events(t, fr, 1)
	data := waitAccessLog(t, f, path)
	return strings.TrimSpace(string(data))
}
