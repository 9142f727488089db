package proxy

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestH2UpstreamStreamWindowBounded: what an HTTP/2 target may send on a
// stream the client does not read is bounded by the proxy's receive window
// per upstream stream (h2UpstreamStreamWindow), not Go's default of 4 MiB:
// a client holding its window at 0 made the proxy take and hold 4 MiB per
// stream, up to max_requests_per_client streams per address, until
// send_timeout.
func TestH2UpstreamStreamWindowBounded(t *testing.T) {
	var sent atomic.Int64
	chunk := make([]byte, 16<<10)
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for range 512 { // 8 MiB at most
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	f := grpcFront(t, addr)
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	go func() {
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	block := h2Block(":method", "GET", ":scheme", "http", ":path", "/big", ":authority", addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	// Wait until the target stops getting its writes taken.
	last := int64(-1)
	for i := 0; i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
		n := sent.Load()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	if n := sent.Load(); n > 1<<20 {
		t.Errorf("the target sent %d KiB on a stream whose client reads nothing: the proxy takes and holds that much (want at most 1 MiB)", n>>10)
	} else {
		t.Logf("the target sent %d KiB on a stream whose client reads nothing", n>>10)
	}
}
