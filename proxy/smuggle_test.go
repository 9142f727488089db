package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestH2InvalidContentLengthRefused: an HTTP/2 request whose
// content-length is not one number is malformed (RFC 9113 §8.1.1, RFC
// 9110 §8.6) and refused with 400, as nginx refuses it. x/net/http2 takes
// such a value for a length of 0: the request went to the target as a
// POST with Content-Length: 0, the client's body dropped, and the client
// got the target's answer to a request it never made.
func TestH2InvalidContentLengthRefused(t *testing.T) {
	for _, cl := range []string{"5, 5", "abc", "+5", "-5", "", "0x5"} {
		b := newLenientBackend(t)
		f := newFront(t, proxyTo(b.addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
		fr, _ := rawH2(t, f.addr)
		// The body is not sent: the answer does not race its DATA.
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
			BlockFragment: h2Block(":method", "POST", ":scheme", "https", ":authority", "example.test", ":path", "/pay", "content-length", cl)}); err != nil {
			t.Fatal(err)
		}
		if got := h2Status(t, fr, 1); got != "400" {
			t.Errorf("content-length %q: got %q, want 400", cl, got)
		}
		if got := b.all(); len(got) > 0 {
			t.Errorf("content-length %q: the target got %q; want nothing", cl, got)
		}
	}
	// A valid length still goes through.
	b := newLenientBackend(t)
	f := newFront(t, proxyTo(b.addr), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr, _ := rawH2(t, f.addr)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: h2Block(":method", "POST", ":scheme", "https", ":authority", "example.test", ":path", "/pay", "content-length", "5")})
	fr.WriteData(1, true, []byte("hello"))
	if got := h2Status(t, fr, 1); got != "200" {
		t.Errorf("content-length 5: got %q, want 200", got)
	}
}

// TestResponseFieldNameNotTokenRefused: a backend response field whose
// name is no token ("Cache-Control : no-store", white space before the
// colon or inside the name) is refused with 502, on h1Client and on
// net/http's Transport, as nginx refuses it ("upstream sent invalid
// header"). net/http keeps such a field under its raw name and the
// servers then dropped it, so the response went on without it: RFC 9112
// §5.1 has a proxy remove the white space, never the field, and a
// Cache-Control, Vary or Set-Cookie left out changes what a cache in
// front stores and serves to others.
func TestResponseFieldNameNotTokenRefused(t *testing.T) {
	for _, line := range []string{"Cache-Control : no-store", "Cache-Control\t: private", "Cache Control: no-store"} {
		for _, transport := range []bool{false, true} {
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				for {
					if _, err := readWholeRequest(c, br); err != nil {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\n"+line+"\r\nContent-Length: 6\r\n\r\nsecret")
				}
			})
			cfg := proxyTo(addr)
			cfg.Upstreams[0].HealthCheck.Passive.MaxFails = -1
			if transport {
				cfg.Upstreams[0].Transport.MaxConnsPerTarget = 4
			}
			f := newFront(t, cfg, frontOpts{})
			code, body, hdr := get(t, testClient(t), f.url+"/", "Host", "example.test")
			if code != http.StatusBadGateway {
				t.Errorf("transport %v, %q: status %d, Cache-Control %q, body %q; want 502", transport, line, code, hdr.Get("Cache-Control"), body)
			}
		}
	}
}

// TestFramingFieldsWithUnderscoreNotForwarded: a client's
// "Transfer_Encoding: chunked" or "Content_Length" does not reach the
// target. The proxy frames the request by its Content-Length and takes
// those for ordinary fields, but a backend that reads '_' as '-' in field
// names (Mongrel-derived parsers, Puma before 4.3.5 among them) reads the
// first as Transfer-Encoding: it would end the body at the client's
// "0\r\n\r\n" and take the rest, which the proxy forwarded as body, for
// the next request on a connection the proxy shares between clients
// (request smuggling). nginx drops every field with '_' by default
// (underscores_in_headers off); the proxy drops those of the framing
// fields, as it does for those of the fields it sets.
func TestFramingFieldsWithUnderscoreNotForwarded(t *testing.T) {
	b := newLenientBackend(t)
	f := newFront(t, proxyTo(b.addr), frontOpts{})
	smuggled := "GET /admin HTTP/1.1\r\nHost: example.test\r\n\r\n"
	body := "0\r\n\r\n" + smuggled
	raw := "POST /upload HTTP/1.1\r\nHost: example.test\r\nTransfer_Encoding: chunked\r\ntransfer_encoding: chunked\r\nContent_Length: 0\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	res, _, _ := rawExchange(t, f.addr, raw)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 from the target", res.StatusCode)
	}
	got := b.all()
	if len(got) != 1 {
		t.Fatalf("the target got %d requests (%q); want 1", len(got), got)
	}
	head, fwd, _ := strings.Cut(got[0], "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n")[1:] {
		name, _, _ := strings.Cut(line, ":")
		if fold := strings.ToLower(strings.ReplaceAll(name, "_", "-")); (fold == "transfer-encoding" || fold == "content-length") && name != "Content-Length" {
			t.Errorf("the target got the field %q: read as %s by a backend that takes '_' for '-'", line, fold)
		}
	}
	if fwd != body {
		t.Errorf("the target got the body %q, want %q", fwd, body)
	}
}
