package proxy

import (
	"testing"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestH2HostDiffersFromAuthority: an HTTP/2 request whose Host field
// names another host than its :authority is malformed (RFC 9113 §8.3.1:
// a client must not send one; nginx answers 400 too) and gets 400: it
// was routed by :authority while the field, which stayed among the
// request's fields, said another host. A Host that names the same host
// (another case, a port, a final dot) is served, and so is one without
// :authority, which routes the request.
func TestH2HostDiffersFromAuthority(t *testing.T) {
	cfg := Config{Sites: oneSite(RouteConfig{Respond: &RespondConfig{Status: 200, Body: "ok"}})}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	for _, c := range []struct {
		fields []string
		want   string
	}{
		{[]string{":authority", "example.test", "host", "other.test"}, "400"},
		{[]string{":authority", "example.test", "host", "example.test", "host", "other.test"}, "400"},
		{[]string{":authority", "example.test:443", "host", "EXAMPLE.test."}, "200"},
		{[]string{":authority", "example.test", "host", "example.test"}, "200"},
		{[]string{"host", "example.test"}, "200"},
	} {
		fr, _ := rawH2(t, f.addr)
		block := h2Block(append([]string{":method", "GET", ":scheme", "https", ":path", "/"}, c.fields...)...)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true})
		if got := h2Status(t, fr, 1); got != c.want {
			t.Errorf("%q: %q, want %s", c.fields, got, c.want)
		}
	}
}
