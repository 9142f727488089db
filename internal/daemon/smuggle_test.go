package daemon

import (
	"bufio"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gmproxy/gmproxy/tlcp"
)

// TestSmuggledRequestNotServed: over TLCP through the daemon, a request
// carrying both Content-Length and Transfer-Encoding is answered with
// Connection: close and the request hidden behind it (what a peer that
// trusted Content-Length would take for the next request) never reaches
// the backend (RFC 9112 §6.1). An ordinary pipelined request is served.
func TestSmuggledRequestNotServed(t *testing.T) {
	var smuggled atomic.Int64
	b := newBackend(t)
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/smuggled" {
			smuggled.Add(1)
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	behind := "GET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n"
	for _, tc := range []struct {
		name, first string
		ambiguous   bool
	}{
		{"CL and TE", "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true},
		{"TE then CL", "POST / HTTP/1.1\r\nHost: localhost\r\ntransfer-encoding: chunked\r\ncontent-length: 44\r\n\r\n0\r\n\r\n", true},
		{"TE only", "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			smuggled.Store(0)
			c := dialTLCP(t, d.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}})
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, tc.first+behind); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || res.Close != tc.ambiguous {
				t.Fatalf("first response: %d, close %v; want 200, close %v", res.StatusCode, res.Close, tc.ambiguous)
			}
			if tc.ambiguous {
				rest, _ := io.ReadAll(br)
				if len(rest) != 0 || smuggled.Load() != 0 {
					t.Errorf("the request behind it was served: %q, backend saw it %d times", rest, smuggled.Load())
				}
				return
			}
			res, err = http.ReadResponse(br, nil)
			if err != nil || res.StatusCode != 200 || smuggled.Load() != 1 {
				t.Errorf("pipelined request after an ordinary one: %v %v, backend saw it %d times", res, err, smuggled.Load())
			}
		})
	}
}
