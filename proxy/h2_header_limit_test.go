package proxy

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// TestH2TargetHeaderListLimit: a client request whose header fits the
// proxy's max_header_bytes but not an HTTP/2 target's advertised
// SETTINGS_MAX_HEADER_LIST_SIZE gets 431 (RFC 6585 §5) and is not the
// target's failure: it was marked down (passive health), so one client's
// request per target emptied the upstream and the next ordinary request
// got 503. It also pins the transport's error text, which is not exported
// (requestHeadersTooLarge).
func TestH2TargetHeaderListLimit(t *testing.T) {
	var addrs []string
	{
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }),
			Protocols: new(http.Protocols), MaxHeaderBytes: 4 << 10}
		srv.Protocols.SetUnencryptedHTTP2(true)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		addrs = append(addrs, ln.Addr().String())
	}
	up := upstream("u", addrs...)
	up.Protocol = upstreamproto.H2C
	cfg := Config{Upstreams: []UpstreamConfig{up}, Sites: oneSite(RouteConfig{Upstream: "u"})}
	f, c := frontFor(t, cfg, true)
	code, _, _ := get(t, c, f.url+"/", "Host", "example.test")
	if code != 200 {
		t.Fatalf("ordinary request: %d", code)
	}
	code, _, _ = get(t, c, f.url+"/", "Host", "example.test", "X-Big", strings.Repeat("a", 16<<10))
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a request over the target's header list limit: %d, want 431", code)
	}
	code, _, _ = get(t, c, f.url+"/", "Host", "example.test")
	if code != 200 {
		t.Fatalf("an ordinary request after one client's 16 KiB header field: %d; the targets were marked down for the client's request", code)
	}
}
