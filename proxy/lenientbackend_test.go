package proxy

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// lenientBackend records each request it parses leniently (request line,
// raw head, body) and answers 200 "ok" keeping the connection.
type lenientBackend struct {
	addr string
	mu   sync.Mutex
	reqs []string // raw head + body
}

func newLenientBackend(t testing.TB) *lenientBackend {
	b := &lenientBackend{}
	b.addr = connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		br := bufio.NewReader(c)
		for i := 0; i < 32; i++ {
			var head strings.Builder
			cl, chunked := -1, false
			first := true
			for j := 0; j < 200; j++ {
				line, err := br.ReadString('\n')
				head.WriteString(line)
				if err != nil {
					b.add(head.String())
					return
				}
				l := strings.TrimRight(line, "\r\n")
				if first {
					first = false
					continue
				}
				if l == "" {
					break
				}
				k, v, _ := strings.Cut(l, ":")
				v = strings.TrimSpace(v)
				switch strings.ToLower(k) {
				case "content-length":
					cl, _ = strconv.Atoi(v)
				case "transfer-encoding":
					chunked = strings.Contains(strings.ToLower(v), "chunked")
				}
			}
			var body strings.Builder
			if chunked {
				for k := 0; k < 1000; k++ {
					line, err := br.ReadString('\n')
					body.WriteString(line)
					if err != nil {
						break
					}
					n, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
					if n == 0 {
						for {
							tl, err := br.ReadString('\n')
							body.WriteString(tl)
							if err != nil || strings.TrimRight(tl, "\r\n") == "" {
								break
							}
						}
						break
					}
					buf := make([]byte, n+2)
					io.ReadFull(br, buf)
					body.Write(buf)
				}
			} else if cl > 0 {
				buf := make([]byte, cl)
				io.ReadFull(br, buf)
				body.Write(buf)
			}
			b.add(head.String() + body.String())
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return b
}

func (b *lenientBackend) add(s string) {
	b.mu.Lock()
	b.reqs = append(b.reqs, s)
	b.mu.Unlock()
}

func (b *lenientBackend) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.reqs...)
}
