package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRouteSendTimeout: a route's own send timeout replaces the
// listener's for its responses, as nginx's send_timeout in a location: a
// route without one (-1) passes a download whose client paused reading
// for longer than the listener's send_timeout, which cuts the same
// download on the site's other routes; a route with a shorter one cuts it
// where the listener has none, over HTTP/1.1 and HTTP/2.
func TestRouteSendTimeout(t *testing.T) {
	const size = 32 << 20 // more than the socket buffers between proxy and client hold
	chunk := strings.Repeat("x", 32<<10)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range size / len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	const short = 300 * time.Millisecond
	// pausedGet reads the first bytes of url's response, pauses for well
	// over short's 9/8, then reads the rest, and returns how many bytes
	// came and whether the body ended cleanly.
	pausedGet := func(t *testing.T, c *http.Client, url string) (int64, error) {
		t.Helper()
		res, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		first, err := io.ReadFull(res.Body, make([]byte, 1024))
		if err != nil {
			return int64(first), err
		}
		time.Sleep(4 * short)
		n, err := io.Copy(io.Discard, res.Body)
		return int64(first) + n, err
	}
	routes := func(rc RouteConfig) []SiteConfig {
		rc.PathPrefix, rc.Upstream = "/own/", "u"
		return oneSite(rc, RouteConfig{Upstream: "u"})
	}

	t.Run("none where the listener has one", func(t *testing.T) {
		cfg := proxyTo(addrOf(backend))
		cfg.Sites = routes(RouteConfig{SendTimeout: -1})
		cfg.Limits.SendTimeout = short
		f := newFront(t, cfg, frontOpts{})
		if n, err := pausedGet(t, testClient(t), f.url+"/own/"); n != size || err != nil {
			t.Errorf("route without a send timeout: %d of %d bytes, %v; want it all past the listener's %v", n, size, err, short)
		}
		if n, err := pausedGet(t, testClient(t), f.url+"/other"); n == size && err == nil {
			t.Errorf("another route: the whole response came past the listener's send_timeout %v", short)
		}
	})
	for _, h2 := range []bool{false, true} {
		// A route without a send timeout still has the listener's
		// write_timeout, a bound of its own on the whole response.
		name := "none keeps the listener's write_timeout, HTTP/1.1"
		if h2 {
			name = "none keeps the listener's write_timeout, HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			cfg := proxyTo(addrOf(backend))
			cfg.Sites = routes(RouteConfig{SendTimeout: -1})
			cfg.Limits.SendTimeout = time.Hour
			cfg.Limits.WriteTimeout = short
			f, c := frontFor(t, cfg, h2)
			if n, err := pausedGet(t, c, f.url+"/own/"); n == size && err == nil {
				t.Errorf("route without a send timeout: the whole response came past the listener's write_timeout %v", short)
			}
		})
	}
	for _, h2 := range []bool{false, true} {
		name := "shorter than the listener's, HTTP/1.1"
		if h2 {
			name = "shorter than the listener's, HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			cfg := proxyTo(addrOf(backend))
			cfg.Sites = routes(RouteConfig{SendTimeout: short})
			cfg.Limits.SendTimeout = time.Hour
			f, c := frontFor(t, cfg, h2)
			if n, err := pausedGet(t, c, f.url+"/own/"); n == size && err == nil {
				t.Errorf("route with send timeout %v: the whole response came past it", short)
			}
			if n, err := pausedGet(t, c, f.url+"/other"); n != size || err != nil {
				t.Errorf("another route: %d of %d bytes, %v; want it all (the listener's send_timeout is 1h)", n, size, err)
			}
		})
	}
}
