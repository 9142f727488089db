package proxy

// A raw loopback backend that records, byte for byte, every request head
// and body it receives, and a raw client.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// rawRecorder is a backend that reads HTTP/1.1 requests with
// http.ReadRequest over a tee, so that the exact bytes the proxy sent are
// kept, and answers each with 200 "ok".
type rawRecorder struct {
	addr string
	mu   sync.Mutex
	raw  []string // one entry per request: the exact bytes of head + body
	got  chan string
}

func newRawRecorder(t testing.TB) *rawRecorder {
	t.Helper()
	r := &rawRecorder{got: make(chan string, 64)}
	r.addr = connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		var tee bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &tee))
		for i := 0; i < 64; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			// What was consumed by this request: the tee minus what
			// bufio buffered ahead.
			all := tee.Bytes()
			used := len(all) - br.Buffered()
			s := string(all[:used])
			rest := append([]byte(nil), all[used:]...)
			tee.Reset()
			tee.Write(rest)
			r.mu.Lock()
			r.raw = append(r.raw, s)
			r.mu.Unlock()
			select {
			case r.got <- s:
			default:
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return r
}

func (r *rawRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.raw...)
}

// rawRoundTrip writes raw on a new connection to addr and returns what
// came back until the proxy closed the connection or d passed.
func rawRoundTrip(t testing.TB, addr, raw string, d time.Duration) string {
	t.Helper()
	c := dialRaw(t, addr)
	c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func statusOf(resp string) string {
	line, _, _ := strings.Cut(resp, "\r\n")
	return line
}
