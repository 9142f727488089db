package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestClientGoneCancelsUpstream: an HTTP/1.1 client that goes away while
// the backend is still working on its request gets that request
// cancelled upstream (the backend sees its request context end) and is
// logged with status 499, with or without a request body.
func TestClientGoneCancelsUpstream(t *testing.T) {
	entered, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	ended := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // net/http watches the connection only after the body
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-ended:
		}
	}))
	t.Cleanup(backend.Close)
	// Before backend.Close, which waits for its handlers: a request never
	// cancelled (the test failed) ends now.
	t.Cleanup(func() { close(ended) })
	obs := newEventObserver()
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{obs: obs})
	for _, req := range []string{
		"GET /slow HTTP/1.1\r\nHost: example.test\r\n\r\n",
		"POST /slow HTTP/1.1\r\nHost: example.test\r\nContent-Length: 3\r\n\r\nabc",
	} {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		testpeer.Recv(t, entered, "request at the backend")
		c.Close()
		// The cancellation follows the client's close at once: 10 s
		// (testwait), not WaitLimit, is what a mutant that stops it costs.
		select {
		case <-cancelled:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("no cancellation at the backend within %v", testwait.Bound(10*time.Second))
		}
	}
	// The proxy's report follows the backend's cancellation.
	deadline := time.Now().Add(testpeer.WaitLimit)
	for {
		obs.mu.Lock()
		n := len(obs.done)
		var statuses []int
		for _, ev := range obs.done {
			statuses = append(statuses, ev.Status)
		}
		obs.mu.Unlock()
		if n == 2 {
			if statuses[0] != 499 || statuses[1] != 499 {
				t.Errorf("statuses %v, want 499 for both", statuses)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d request events, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
