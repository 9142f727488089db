package proxy

import (
	"context"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testpeer"
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
	sent := testpeer.ExpectCalm(t, c, "http", "example.test", 2000)
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
