package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestHTTP2RapidReset: a client sending HEADERS+RST_STREAM pairs as fast
// as it can gets GOAWAY(ENHANCE_YOUR_CALM) and is disconnected, and only a
// few of its requests reach the backend.
func TestHTTP2RapidReset(t *testing.T) {
	seen := new(atomic.Int64)
	backend := countingBackend(t, "b", seen)
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.HTTP2MaxResetRate = 10 // bucket of 2×250 (max_concurrent_streams)
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()

	// The reader reports the first GOAWAY, or closes goAway when the
	// answer to the PING sent after the flood (so: everything was
	// processed without GOAWAY) or the end of the connection comes first.
	goAway := make(chan http2.ErrCode, 1)
	go func() {
		defer close(goAway)
		rf := http2.NewFramer(io.Discard, c)
		for {
			fm, err := rf.ReadFrame()
			if err != nil {
				return
			}
			switch fm := fm.(type) {
			case *http2.GoAwayFrame:
				goAway <- fm.ErrCode
				return
			case *http2.PingFrame:
				if fm.IsAck() {
					return
				}
			}
		}
	}()

	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "example.test"}} {
		enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
	}
	const pairs = 2000
	sent := 0
	for i := range pairs {
		id := uint32(2*i + 1)
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the proxy hung up
		}
		sent++
	}
	fr.WritePing(false, [8]byte{1})
	code, ok := <-goAway
	if !ok {
		t.Fatalf("no GOAWAY after %d HEADERS+RST_STREAM pairs", sent)
	}
	if code != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", code)
	}
	// The connection ends: reads see EOF or a reset, not the deadline.
	var b [1]byte
	for range 1000 {
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("connection still open after GOAWAY")
			}
			break
		}
	}
	// Let handlers already running finish before counting.
	f.p.Shutdown(context.Background())
	if n := seen.Load(); n > 200 {
		t.Errorf("backend got %d requests from %d reset streams; want only a few", n, sent)
	}
	t.Logf("sent %d pairs, backend saw %d requests", sent, seen.Load())
}

// TestResetStreamNotForwarded: a request whose stream is already gone
// (context canceled before the proxy sent anything) is not sent upstream.
func TestResetStreamNotForwarded(t *testing.T) {
	seen := new(atomic.Int64)
	backend := countingBackend(t, "b", seen)
	obs := newEventObserver()
	p, err := New(proxyTo(addrOf(backend)), obs, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "http://example.test/", nil)
	r.ProtoMajor, r.ProtoMinor, r.Proto = 2, 0, "HTTP/2.0"
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if n := seen.Load(); n != 0 {
		t.Errorf("backend got %d requests for a reset stream", n)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.done) != 1 || obs.done[0].Target != "" || obs.done[0].Status != 499 {
		t.Errorf("request events %+v, want one with status 499 and no upstream attempt", obs.done)
	}
}
