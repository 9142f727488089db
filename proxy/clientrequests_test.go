package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestMaxRequestsPerClient: one address holds at most
// MaxRequestsPerClient requests in progress over all its connections and
// HTTP/2 streams; one more gets 429 without reaching the target, another
// address is served, and the address is served again once its requests
// end (the count goes back to zero).
func TestMaxRequestsPerClient(t *testing.T) {
	var hits atomic.Int32
	backend, arrived, unblock := holdingBackend(t, &hits)
	cfg := proxyTo(backend)
	cfg.Limits.MaxRequestsPerClient = 2
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	c := h2cClient(t)

	// Two requests held on the target, as two streams of one connection.
	held := make(chan int, 2)
	for range 2 {
		go func() {
			res, err := c.Get(f.url + "/hold")
			if err != nil {
				held <- 0
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			held <- res.StatusCode
		}()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatal("the held requests did not reach the target")
		}
	}
	// A third stream of the same connection.
	if code, _, _ := get(t, c, f.url+"/other"); code != http.StatusTooManyRequests {
		t.Errorf("third request (h2 stream) from a client with 2 in progress: %d, want 429", code)
	}
	// Another connection from the same address (HTTP/1.1 on an h2 front
	// is not possible: a second h2 connection).
	c2 := h2cClient(t)
	if code, _, _ := get(t, c2, f.url+"/other"); code != http.StatusTooManyRequests {
		t.Errorf("request on a second connection from a client with 2 in progress: %d, want 429", code)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the target saw %d requests, want only the 2 held ones", n)
	}
	// Another address is served.
	if code := getFrom(t, "127.0.0.2", f.addr, "/other"); code != http.StatusOK {
		t.Errorf("request from another address: %d, want 200", code)
	}
	unblock()
	for range 2 {
		select {
		case code := <-held:
			if code != http.StatusOK {
				t.Errorf("held request: %d, want 200", code)
			}
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatal("held requests not answered after release")
		}
	}
	key := netip.MustParseAddr("127.0.0.1")
	for i := 0; f.p.limits.ClientRequests.InProgress(key) != 0 && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.p.limits.ClientRequests.InProgress(key); n != 0 {
		t.Fatalf("%d requests still counted after all ended", n)
	}
	if code, _, _ := get(t, c, f.url+"/other"); code != http.StatusOK {
		t.Errorf("request after the others ended: %d, want 200", code)
	}
}

// getFrom sends GET path to the proxy at addr from the local address ip
// (a loopback address) over prior-knowledge h2c and returns the status.
func getFrom(t testing.TB, ip, addr, path string) int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// TestMaxRequestsPerClientHTTP1: over HTTP/1.1 each connection has one
// request at a time, so the limit bounds a client's busy connections:
// with 1, a second connection's request gets 429, and the refused
// connection stays usable.
func TestMaxRequestsPerClientHTTP1(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.MaxRequestsPerClient = 1
	f := newFront(t, cfg, frontOpts{})
	c1 := dialRaw(t, f.addr)
	io.WriteString(c1, "GET /hold HTTP/1.1\r\nHost: example.test\r\n\r\n")
	select {
	case <-arrived:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("held request did not reach the target")
	}
	res, c2, br := rawExchange(t, f.addr, "POST /x HTTP/1.1\r\nHost: example.test\r\nContent-Length: 3\r\n\r\nabc")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second connection's request: %d, want 429", res.StatusCode)
	}
	close(release)
	res1, err := http.ReadResponse(bufio.NewReader(c1), nil)
	if err != nil || res1.StatusCode != 200 {
		t.Fatalf("held request: %v %v", res1, err)
	}
	res1.Body.Close()
	// The refused connection serves its next request once the first ended.
	for i := 0; ; i++ {
		io.WriteString(c2, "GET /x HTTP/1.1\r\nHost: example.test\r\n\r\n")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("next request on the refused connection: %v", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == 200 {
			break
		}
		if i == 50 {
			t.Fatalf("next request on the refused connection: %d, want 200", res.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkClientRequests: one request's count and release
// (max_requests_per_client, on by default in the daemon).
func BenchmarkClientRequests(b *testing.B) {
	var t ClientRequests
	key := netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		if !t.acquire(key, 1024) {
			b.Fatal("refused")
		}
		t.release(key)
	}
}

// holdingBackend starts a target that answers "ok", counting its requests
// in hits (when not nil); a request for /hold says so on arrived and waits
// until unblock is called (by the test's end at the latest; unblock may be
// called more than once).
func holdingBackend(t *testing.T, hits *atomic.Int32) (addr string, arrived <-chan struct{}, unblock func()) {
	t.Helper()
	in := make(chan struct{}, 16)
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits != nil {
			hits.Add(1)
		}
		if r.URL.Path == "/hold" {
			in <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	var once sync.Once
	unblock = func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	return addrOf(backend), in, unblock
}
