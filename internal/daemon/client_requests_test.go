package daemon

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestMaxRequestsPerClientAcrossReload: a listener's
// max_requests_per_client bounds one address's requests in progress, and
// requests begun before a reload that changed the listener's http limits
// still count after it (the count is the listener's, not the
// configuration's).
func TestMaxRequestsPerClientAcrossReload(t *testing.T) {
	b := newBackend(t)
	released := false
	unblock := func() {
		if !released {
			released = true
			close(b.release)
		}
	}
	t.Cleanup(unblock)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Listeners[0].HTTP.MaxRequestsPerClient = 2
	td := startDaemon(t, cfg)
	client := func() *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost"}, ForceAttemptHTTP2: false}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	}
	status := func(c *http.Client, path string) int {
		res, err := c.Get("https://" + td.addr + path)
		if err != nil {
			t.Error(err)
			return 0
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	held := make(chan int, 2)
	for range 2 {
		c := client()
		go func() { held <- status(c, "/slow") }()
	}
	for range 2 {
		select {
		case <-b.slowStarted:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatal("held requests did not reach the backend")
		}
	}
	if code := status(client(), "/x"); code != http.StatusTooManyRequests {
		t.Errorf("third request from a client with 2 in progress: %d, want 429", code)
	}
	// A reload that changes the http limits gives new connections a new
	// set of servers; the two held requests still count.
	next := testConfig(t, b.Listener.Addr().String())
	next.Listeners[0].HTTP.MaxRequestsPerClient = 2
	next.Listeners[0].HTTP.IdleTimeout = 90 * time.Second
	td.reloadWith(t, next)
	if code := status(client(), "/x"); code != http.StatusTooManyRequests {
		t.Errorf("after a reload, a third request from a client with 2 in progress: %d, want 429", code)
	}
	unblock()
	for range 2 {
		if code := <-held; code != http.StatusOK {
			t.Errorf("held request: %d, want 200", code)
		}
	}
	if code := status(client(), "/x"); code != http.StatusOK {
		t.Errorf("request once the others ended: %d, want 200", code)
	}
}
