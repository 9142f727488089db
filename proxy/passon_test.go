package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestPassOnHeader: a backend's plain response goes to an HTTP/1.1
// client with its field lines as they came (in their order, the
// backend's Date, repeated fields each on its line); a response with a
// hop-by-hop field, a route that edits response fields, a HEAD request
// and an HTTP/1.0 client take the Header map, and the hop-by-hop fields
// are removed.
func TestPassOnHeader(t *testing.T) {
	const date = "Mon, 01 Jan 2001 00:00:00 GMT"
	b := newRawBackend(t, func(_ int64, w *bufio.Writer, r *http.Request) bool {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nx-custom: A\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Type: text/plain\r\nDate: "+date+"\r\n")
		switch r.URL.Path {
		case "/keep-alive":
			io.WriteString(w, "Keep-Alive: timeout=5\r\n")
		case "/proxy-authenticate":
			io.WriteString(w, "Proxy-Authenticate: Basic\r\n")
		case "/upgrade":
			io.WriteString(w, "Upgrade: h2c\r\n")
		case "/connection":
			io.WriteString(w, "Connection: X-Secret\r\nX-Secret: s\r\n")
		}
		io.WriteString(w, "Content-Length: 2\r\n\r\nok")
		return true
	})
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", b.addr())},
		Sites: oneSite(
			RouteConfig{PathPrefix: "/edited", Upstream: "u", ResponseHeaders: HeaderOps{Set: map[string]string{"X-Edit": "1"}}},
			RouteConfig{Upstream: "u"},
		),
	}
	f := newFront(t, cfg, frontOpts{})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	br := bufio.NewReader(c)
	// head sends a request and returns the response head's lines.
	head := func(method, path, proto string) []string {
		t.Helper()
		io.WriteString(c, method+" "+path+" "+proto+"\r\nHost: example.test\r\nConnection: keep-alive\r\n\r\n")
		var lines []string
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			l = strings.TrimRight(l, "\r\n")
			if l == "" {
				break
			}
			lines = append(lines, l)
		}
		if method != "HEAD" {
			var body [2]byte
			if _, err := io.ReadFull(br, body[:]); err != nil || string(body[:]) != "ok" {
				t.Fatalf("%s %s: body %q %v", method, path, body, err)
			}
		}
		return lines
	}
	got := strings.Join(head("GET", "/plain", "HTTP/1.1"), "|")
	want := "HTTP/1.1 200 OK|X-Custom: A|Set-Cookie: a=1|Set-Cookie: b=2|Content-Type: text/plain|Date: " + date + "|Content-Length: 2"
	if got != want {
		t.Errorf("passed on:\n got %s\nwant %s", got, want)
	}
	// The Header map's way: fields sorted by name.
	sorted := "HTTP/1.1 200 OK|Content-Length: 2|Content-Type: text/plain|Date: " + date + "|Set-Cookie: a=1|Set-Cookie: b=2|X-Custom: A"
	for _, path := range []string{"/keep-alive", "/proxy-authenticate", "/upgrade", "/connection"} {
		if got := strings.Join(head("GET", path, "HTTP/1.1"), "|"); got != sorted {
			t.Errorf("%s: hop-by-hop fields not removed, or not the map's way:\n got %s\nwant %s", path, got, sorted)
		}
	}
	edited := "HTTP/1.1 200 OK|Content-Length: 2|Content-Type: text/plain|Date: " + date + "|Set-Cookie: a=1|Set-Cookie: b=2|X-Custom: A|X-Edit: 1"
	if got := strings.Join(head("GET", "/edited", "HTTP/1.1"), "|"); got != edited {
		t.Errorf("edited route:\n got %s\nwant %s", got, edited)
	}
	if got := strings.Join(head("HEAD", "/plain", "HTTP/1.1"), "|"); got != sorted {
		t.Errorf("HEAD:\n got %s\nwant %s", got, sorted)
	}
	http10 := "HTTP/1.0 200 OK|Content-Length: 2|Content-Type: text/plain|Date: " + date + "|Set-Cookie: a=1|Set-Cookie: b=2|X-Custom: A|Connection: keep-alive"
	if got := strings.Join(head("GET", "/plain", "HTTP/1.0"), "|"); got != http10 {
		t.Errorf("HTTP/1.0:\n got %s\nwant %s", got, http10)
	}
}
