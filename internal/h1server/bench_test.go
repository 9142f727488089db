package h1server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
)

// The per-request cost of a kept-alive GET answered with 1 KiB, through
// this server and through net/http's with the same handler, over
// loopback TCP (client included in both).
func BenchmarkKeepAlive(b *testing.B) {
	body := make([]byte, 1024)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
	})
	b.Run("h1server", func(b *testing.B) {
		_, addr := testServer(b, &Server{}, h)
		benchClient(b, addr)
	})
	b.Run("net-http", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s := &http.Server{Handler: h}
		go s.Serve(ln)
		b.Cleanup(func() { s.Close() })
		benchClient(b, ln.Addr().String())
	})
}

// benchClient sends b.N GETs on one connection, one at a time.
func benchClient(b *testing.B, addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /1k HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	br := bufio.NewReaderSize(c, 16<<10)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := readRawResponse(br); err != nil {
			b.Fatal(err)
		}
	}
	// CPU time of the process (server and client) per request: less
	// sensitive than ns/op to the other load of a shared machine.
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
}

// processCPU returns the process's user+system CPU time in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

var clPrefix = []byte("content-length: ")

// readRawResponse reads one response with a Content-Length.
func readRawResponse(br *bufio.Reader) error {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > len(clPrefix) && bytes.EqualFold(line[:len(clPrefix)], clPrefix) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(line[len(clPrefix):])))
		}
	}
	if n < 0 {
		return io.ErrUnexpectedEOF
	}
	_, err := br.Discard(n)
	return err
}

// BenchmarkClientWatch is the per-request cost of the client watch (what
// replaces net/http's per-request background read) on a request whose
// handler returns before watchDelay: the bookkeeping at the handler's
// start and end.
func BenchmarkClientWatch(b *testing.B) {
	c := newConn(&Server{}, nil)
	c.scope = &connScope{Context: context.Background()}
	b.ReportAllocs()
	for range b.N {
		c.watch.begin(true)
		c.watch.end(c)
	}
}
