package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestMaxRequestsPerClientBehindTrustedProxy: behind a proxy of
// trusted_proxies (127.0.0.1), max_requests_per_client counts each client
// by the address its X-Forwarded-For names (X-Real-IP, IPv6 by /64), as
// nginx's realip keys its limits: a client at its limit gets 429 while
// another client of the same proxy is served. An untrusted peer
// (127.0.0.2) is counted by its own address whatever X-Forwarded-For it
// writes. Every count returns to zero once the requests end.
func TestMaxRequestsPerClientBehindTrustedProxy(t *testing.T) {
	backend, arrived, unblock := holdingBackend(t, nil)
	cfg := proxyTo(backend)
	cfg.TrustedProxies = []string{"127.0.0.1"}
	cfg.Limits.MaxRequestsPerClient = 1
	f := newFront(t, cfg, frontOpts{})

	request := func(from, xff, path string) net.Conn {
		c := testpeer.DialFrom(t, from, f.addr)
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: example.test\r\nX-Forwarded-For: "+xff+"\r\n\r\n")
		return c
	}
	var held []net.Conn
	hold := func(from, xff string) {
		t.Helper()
		held = append(held, request(from, xff, "/hold"))
		select {
		case <-arrived:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("held request from %s (X-Forwarded-For %s) did not reach the target", from, xff)
		}
	}
	status := func(from, xff string) int {
		t.Helper()
		res, err := http.ReadResponse(bufio.NewReader(request(from, xff, "/x")), nil)
		if err != nil {
			t.Fatalf("request from %s (X-Forwarded-For %s): %v", from, xff, err)
		}
		res.Body.Close()
		return res.StatusCode
	}

	hold("127.0.0.1", "203.0.113.1")
	if code := status("127.0.0.1", "198.51.100.7, 203.0.113.2"); code != http.StatusOK {
		t.Errorf("another client of the trusted proxy while 203.0.113.1 is at its limit: %d, want 200", code)
	}
	if code := status("127.0.0.1", "203.0.113.1"); code != http.StatusTooManyRequests {
		t.Errorf("203.0.113.1 over its limit through the trusted proxy: %d, want 429", code)
	}
	hold("127.0.0.1", "2001:db8:1::1")
	if code := status("127.0.0.1", "2001:db8:1::2"); code != http.StatusTooManyRequests {
		t.Errorf("another address of the /64 at its limit: %d, want 429", code)
	}
	if code := status("127.0.0.1", "2001:db8:2::1"); code != http.StatusOK {
		t.Errorf("another /64: %d, want 200", code)
	}

	// An untrusted peer's X-Forwarded-For is its own writing: it names no
	// other client to count by.
	hold("127.0.0.2", "203.0.113.3")
	if code := status("127.0.0.2", "203.0.113.4"); code != http.StatusTooManyRequests {
		t.Errorf("untrusted peer at its limit, with another X-Forwarded-For: %d, want 429", code)
	}

	unblock()
	for _, c := range held {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("held request: %v %v", res, err)
		}
		res.Body.Close()
	}
	for _, k := range []string{"203.0.113.1", "2001:db8:1::", "127.0.0.2", "127.0.0.1"} {
		key := netip.MustParseAddr(k)
		for i := 0; f.p.limits.ClientRequests.InProgress(key) != 0 && i < 500; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if n := f.p.limits.ClientRequests.InProgress(key); n != 0 {
			t.Errorf("%s: %d requests still counted after all ended", k, n)
		}
	}
}
