package proxy

// What a hostile or broken backend can do to the proxy and to the other
// clients: responses nobody asked for, hop-by-hop fields, impossible
// statuses, and timeouts a slow client could trip on the backend's behalf.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// readWholeRequest reads one request (head and body) from br, bounded by c's
// deadline.
func readWholeRequest(c net.Conn, br *bufio.Reader) (*http.Request, error) {
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, req.Body)
	return req, nil
}

// TestConnectionCloseOptionsRemoved: a backend's "Connection: close,
// X-Internal-Hop" names X-Internal-Hop as hop-by-hop (RFC 9110 §7.6.1):
// the proxy removes it, although http.ReadResponse drops a Connection
// field that says "close" (h1head.Fill keeps it for that reason).
func TestConnectionCloseOptionsRemoved(t *testing.T) {
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readWholeRequest(c, br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close, X-Internal-Hop\r\nX-Internal-Hop: backend-secret\r\nContent-Length: 2\r\n\r\nok")
	})
	f := newFront(t, proxyTo(addr), frontOpts{})
	for _, method := range []string{"GET", "HEAD"} {
		c := testClient(t)
		req, _ := http.NewRequest(method, f.url+"/", nil)
		req.Host = "example.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if v := res.Header.Get("X-Internal-Hop"); v != "" {
			t.Errorf("%s: status %d: the client got X-Internal-Hop: %q, a field the backend's Connection field marked hop-by-hop; want it removed", method, res.StatusCode, v)
		}
	}
}

// heldWrites lets a test backend put several TLS records in one TCP
// write (as any server does that writes its response's head and body
// with two calls under Nagle, or coalesces writes): while held, writes
// are buffered; flush sends them at once.
type heldWrites struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  bytes.Buffer
}

func (h *heldWrites) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hold {
		return h.buf.Write(b)
	}
	return h.Conn.Write(b)
}

func (h *heldWrites) setHold(on bool) {
	h.mu.Lock()
	h.hold = on
	h.mu.Unlock()
}

func (h *heldWrites) flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.Conn.Write(h.buf.Bytes())
	h.buf.Reset()
	return err
}

// staleSMBackend serves, on the first TLS-style connection made by
// wrap, a first request with two responses, each in its own record and both in
// one TCP write: the answer, then a second response nobody asked for
// (a backend that took one request for two, or answered a HEAD with a
// body). Later requests get "fresh:" and their path.
func staleSMBackend(t *testing.T, inner net.Listener, wrap func(net.Conn) net.Conn) string {
	t.Cleanup(func() { inner.Close() })
	var conns atomic.Int32
	go acceptLoop(inner, func(raw net.Conn) {
		first := conns.Add(1) == 1
		go func() {
			defer raw.Close()
			hc := &heldWrites{Conn: raw}
			c := wrap(hc)
			defer c.Close()
			br := bufio.NewReader(c)
			for i := 0; i < 4; i++ {
				req, err := readWholeRequest(c, br)
				if err != nil {
					return
				}
				if i == 0 && first {
					hc.setHold(true)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nfirst\n")
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 28\r\n\r\nstale, answered to request 1")
					hc.setHold(false)
					hc.flush()
					continue
				}
				body := "fresh:" + req.URL.Path
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			}
		}()
	})
	return inner.Addr().String()
}

// TestSMUnsolicitedResponseNotReused: a response nobody asked for is never
// read as the next request's answer. Over TLCP and TLS 1.3-SM the extra
// bytes may sit in the record layer's buffer, read with the answer's last
// record, where a peek at the socket does not see them: an idle connection
// that holds any (Conn.Buffered) is not reused, and the next client, on
// a fresh connection, gets its own answer.
func TestSMUnsolicitedResponseNotReused(t *testing.T) {
	p, _, inner0 := smBackendFixture(t)
	inner0.Close()
	var inner net.Listener
	for _, proto := range []string{"tlcp", "tls13sm"} {
		t.Run(proto, func(t *testing.T) {
			var addr string
			var tls *UpstreamTLSConfig
			if proto == "tlcp" {
				_, _, inner = smBackendFixture(t)
				cert, err := tlcp.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), p("server_enc.crt"), p("server_enc.key"), nil)
				if err != nil {
					t.Fatal(err)
				}
				cfg := &tlcp.Config{Certificates: []tlcp.Certificate{cert}}
				addr = staleSMBackend(t, inner, func(c net.Conn) net.Conn { return tlcp.Server(c, cfg) })
				tls = &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost"}
			} else {
				_, _, inner = smBackendFixture(t)
				cert, err := tls13sm.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), nil)
				if err != nil {
					t.Fatal(err)
				}
				cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{cert}}
				addr = staleSMBackend(t, inner, func(c net.Conn) net.Conn { return tls13sm.Server(c, cfg) })
				tls = &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost"}
			}
			f := newFront(t, smProxyTo("gm", proto, addr, tls), frontOpts{})
			code, body, _ := get(t, testClient(t), f.url+"/first", "Host", "example.test")
			if code != 200 || body != "first\n" {
				t.Fatalf("first client: %d %q", code, body)
			}
			time.Sleep(50 * time.Millisecond)
			code, body, _ = get(t, testClient(t), f.url+"/second", "Host", "example.test")
			if body != "fresh:/second" {
				t.Errorf("second client (its own connection): %d %q; want 200 \"fresh:/second\": it got the backend's unsolicited second answer to the FIRST client's request", code, body)
			}
		})
	}
}

// TestStatusOutOfRangeIs502: a backend status outside 100-599 ("HTTP/1.1
// 099 OK"; RFC 9110 §15) is a malformed response: 502, as a broken status
// line is (http.ReadResponse takes any three digits, and WriteHeader
// panics below 100: the client lost its connection without an answer).
func TestStatusOutOfRangeIs502(t *testing.T) {
	for _, status := range []string{"000", "099", "042", "600", "999"} {
		t.Run(status, func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readWholeRequest(c, br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 "+status+" Odd\r\nContent-Length: 2\r\n\r\nok")
				time.Sleep(200 * time.Millisecond)
			})
			f := newFront(t, proxyTo(addr), frontOpts{})
			c := dialRaw(t, f.addr)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("backend status %s: the client got no response at all (%v): the handler panicked; want 502 Bad Gateway", status, err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusBadGateway {
				t.Fatalf("backend status %s: client got %d, want 502", status, res.StatusCode)
			}
		})
	}
}

// TestSlowClientDoesNotChargeBackend: the upstream read_timeout bounds the
// wait for the backend, not for the client: a client that reads slowly
// (within send_timeout) gets the whole body, and the target, which never
// stalled, stays up, on both upstream paths (h1Client and, with
// max_conns_per_target, net/http's Transport).
func TestSlowClientDoesNotChargeBackend(t *testing.T) {
	const size = 32 << 20
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	srv := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for i := 0; i < size/len(chunk); i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	for _, path := range []string{"h1client", "transport"} {
		t.Run(path, func(t *testing.T) {
			cfg := proxyTo(srv)
			cfg.Upstreams[0].Transport.ReadTimeout = 300 * time.Millisecond
			if path == "transport" {
				cfg.Upstreams[0].Transport.MaxConnsPerTarget = 4 // the http.Transport path
			}
			f := newFront(t, cfg, frontOpts{})

			c := dialRaw(t, f.addr)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
			br := bufio.NewReaderSize(c, 4096)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // a slow reader, well within send_timeout (60s)
			c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			n, err := io.Copy(io.Discard, res.Body)
			if n != size {
				t.Errorf("slow client: got %d of %d body bytes (%v); want the whole body: the backend never stalled", n, size, err)
			}
			status, _, _ := get(t, testClient(t), f.url+"/", "Host", "example.test")
			if status != 200 {
				t.Errorf("next client: status %d; want 200: a slow client must not get the healthy target marked down", status)
			}
		})
	}
}

// httptestServer serves h on loopback until the test ends; it returns
// the address.
func httptestServer(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// TestHealthProbeNeedsItsWholeBody: an active probe whose response body
// stalls past the probe timeout, or is cut short, fails: a target that
// sends a status line and then hangs is marked down (and a probe like that
// does not end a passive cool-down).
func TestHealthProbeNeedsItsWholeBody(t *testing.T) {
	for _, mode := range []string{"stall", "cut"} {
		t.Run(mode, func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readWholeRequest(c, br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
				if mode == "stall" {
					// Hold until the proxy gives up (bounded).
					c.SetReadDeadline(time.Now().Add(3 * time.Second))
					io.Copy(io.Discard, c)
				}
			})
			cfg := proxyTo(addr)
			cfg.Upstreams[0].HealthCheck.Active = ActiveHealthConfig{
				Path: "/healthz", Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond, Fall: 1, Rise: 1,
			}
			f := newFront(t, cfg, frontOpts{})
			tg := f.p.Upstream("u").Targets()[0]
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && tg.Healthy() {
				time.Sleep(25 * time.Millisecond)
			}
			if tg.Healthy() {
				t.Errorf("target still healthy after 2s of probes (fall 1, timeout 200ms) whose responses carried 3 of 100 body bytes and then %s; want it marked down", map[string]string{"stall": "stalled", "cut": "closed the connection"}[mode])
			}
		})
	}
}

// TestUpgradeResponseHopByHopRemoved: a 101 passes on Connection: Upgrade
// and Upgrade only; the other hop-by-hop fields (Keep-Alive,
// Proxy-Authenticate) and those the backend's Connection field names are
// removed, as for any response (RFC 9110 §7.6.1).
func TestUpgradeResponseHopByHopRemoved(t *testing.T) {
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readWholeRequest(c, br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Internal-Hop\r\nX-Internal-Hop: backend-secret\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic realm=\"internal\"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, c)
	})
	f := newFront(t, proxyTo(addr), frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 101 {
		t.Fatalf("status %d", res.StatusCode)
	}
	for _, k := range []string{"X-Internal-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v := res.Header.Get(k); v != "" {
			t.Errorf("101 to the client carries %s: %q, a hop-by-hop field of the backend's; want it removed", k, v)
		}
	}
}

// TestUpgradeStatusLineIsTheProxys: the 101 the proxy writes to its
// client has the proxy's own status line, as every other response of
// the proxy: its HTTP version (RFC 9110 §6.2) and reason. The backend's
// reason went out as it came, and net/http's reader keeps a bare CR in
// it, which no sender may generate (RFC 9112 §2.2): a client that ends
// lines at CR read a field the route's response edits never saw. nginx
// refuses such a status line.
func TestUpgradeStatusLineIsTheProxys(t *testing.T) {
	for _, line := range []string{
		"HTTP/1.1 101 Switching\rSet-Cookie: injected=1",
		"HTTP/1.1 101 Switching\x00Protocols",
		"HTTP/1.0 101 Switching Protocols",
	} {
		t.Run(fmt.Sprintf("%q", line), func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readWholeRequest(c, br); err != nil {
					return
				}
				io.WriteString(c, line+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				io.Copy(io.Discard, c)
			})
			f := newFront(t, proxyTo(addr), frontOpts{})
			c := dialRaw(t, f.addr)
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
			status, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the status line: %v (got %q)", err, status)
			}
			if want := "HTTP/1.1 101 Switching Protocols\r\n"; status != want {
				t.Errorf("the client's status line is %q; want the proxy's own, %q", status, want)
			}
		})
	}
}

// TestUntypedResponseNotSniffed: a backend response without Content-Type
// reaches the client without one, on both fronts. The proxy is not the
// origin: a type sniffed from the body (both servers would add
// "text/html; charset=utf-8" for markup) would make a browser render as
// HTML an upload the backend serves untyped with "nosniff".
func TestUntypedResponseNotSniffed(t *testing.T) {
	const upload = "<html><body><script>alert(document.domain)</script></body></html>"
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for range 4 {
			if _, err := readWholeRequest(c, br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Content-Type-Options: nosniff\r\nContent-Length: "+strconv.Itoa(len(upload))+"\r\n\r\n"+upload)
		}
	})
	for _, h2 := range []bool{false, true} {
		for _, edit := range []bool{false, true} { // with a response edit: the Header map path
			t.Run(fmt.Sprintf("h2=%v/edit=%v", h2, edit), func(t *testing.T) {
				cfg := proxyTo(addr)
				if edit {
					cfg.Sites[0].Routes[0].ResponseHeaders.Set = map[string]string{"X-Edited": "1"}
				}
				f, c := frontFor(t, cfg, h2)
				code, body, hdr := get(t, c, f.url+"/uploads/1", "Host", "example.test")
				if code != 200 || body != upload {
					t.Fatalf("status %d body %q", code, body)
				}
				if ct, ok := hdr["Content-Type"]; ok {
					t.Errorf("the client got Content-Type %q for a backend response that had none; want none", ct)
				}
				if edit && hdr.Get("X-Edited") != "1" {
					t.Errorf("the route's response edit was not applied: %v", hdr)
				}
			})
		}
	}
}

// padFields is n filler field lines (a head of more than h1head.MaxFields
// fields is left to http.ReadResponse).
func padFields(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("X-Pad-" + strconv.Itoa(i) + ": v\r\n")
	}
	return b.String()
}

// TestResponseHeadBounded: a target's response head is bounded in bytes
// (max_response_header_bytes) and in field lines
// (max_response_header_fields), on every path a head is read by (h1head,
// http.ReadResponse in the HTTP/1.1 client, net/http's Transport): past
// either the client gets 502. A head of a million empty fields was taken
// whole and cost tens of MiB per response.
func TestResponseHeadBounded(t *testing.T) {
	var huge strings.Builder
	for i := 0; huge.Len() < (1<<20)-200; i++ {
		huge.WriteString("X" + strconv.Itoa(i) + ":\r\n")
	}
	cases := []struct {
		name      string
		fields    string
		maxFields int  // 0: default
		transport bool // max_conns_per_target: the Transport's path
		want      int
	}{
		{"1MiB", huge.String(), 0, false, 502},
		{"100KiB-of-10-fields", strings.Repeat("X-Big: "+strings.Repeat("v", 10<<10)+"\r\n", 10), 0, false, 502},
		{"100KiB-of-10-fields-transport", strings.Repeat("X-Big: "+strings.Repeat("v", 10<<10)+"\r\n", 10), 0, true, 502},
		{"60KiB-of-6-fields", strings.Repeat("X-Big: "+strings.Repeat("v", 10<<10)+"\r\n", 6), 0, false, 200},
		{"1MiB-transport", huge.String(), 0, true, 502},
		{"257-fields", padFields(DefaultMaxResponseHeaderFields), 0, false, 502}, // + Content-Length
		{"257-fields-transport", padFields(DefaultMaxResponseHeaderFields), 0, true, 502},
		{"256-fields", padFields(DefaultMaxResponseHeaderFields - 1), 0, false, 200},
		{"256-fields-transport", padFields(DefaultMaxResponseHeaderFields - 1), 0, true, 200},
		{"passed-on-head-over-4", padFields(4), 4, false, 502}, // h1head's, without a Header map
		{"passed-on-head-of-4", padFields(3), 4, false, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			head := "HTTP/1.1 200 OK\r\n" + tc.fields + "Content-Length: 2\r\n\r\nok"
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readWholeRequest(c, br); err != nil {
					return
				}
				c.SetWriteDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
				io.WriteString(c, head)
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				io.Copy(io.Discard, c)
			})
			cfg := proxyTo(addr)
			cfg.Upstreams[0].Transport.MaxResponseHeaderFields = tc.maxFields
			if tc.transport {
				cfg.Upstreams[0].Transport.MaxConnsPerTarget = 4
			}
			f := newFront(t, cfg, frontOpts{})
			code, body, _ := get(t, testClient(t), f.url+"/", "Host", "example.test")
			if code != tc.want || code == 200 && body != "ok" {
				t.Errorf("a head of %d bytes and %d fields: status %d (body %q); want %d", len(head), strings.Count(head, "\r\n")-2, code, body, tc.want)
			}
		})
	}
}

// TestConnectionCloseOptionsRemovedEverywhere: the fields a backend's
// "Connection: close, X-Internal-Hop" names are removed also on the paths
// that read a response head with http.ReadResponse, which drops a
// Connection field saying "close": a chunked response, a head of more
// than h1head.MaxFields fields, a head that comes in pieces, on h1Client
// and on net/http's Transport (after an informational response too).
func TestConnectionCloseOptionsRemovedEverywhere(t *testing.T) {
	cases := []struct {
		name      string
		head      string // after the status line and Connection, before the blank line
		body      string
		split     bool // the head comes in two writes, the Connection field in the second
		transport bool // max_conns_per_target: net/http's Transport reads the head
	}{
		{"chunked", "Transfer-Encoding: chunked\r\n", "2\r\nok\r\n0\r\n\r\n", false, false},
		{"33-fields", padFields(33) + "Content-Length: 2\r\n", "ok", false, false},
		{"chunked-in-pieces", "Transfer-Encoding: chunked\r\n", "2\r\nok\r\n0\r\n\r\n", true, false},
		{"transport", "Content-Length: 2\r\n", "ok", false, true},
		{"transport-in-pieces", "Content-Length: 2\r\n", "ok", true, true},
		{"transport-after-100", "Content-Length: 2\r\n", "ok", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readWholeRequest(c, br); err != nil {
					return
				}
				if strings.HasSuffix(tc.name, "-after-100") {
					io.WriteString(c, "HTTP/1.1 100 Continue\r\nConnection: X-Not-This\r\n\r\n")
				}
				if tc.split {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Early: 1\r\nConn")
					time.Sleep(50 * time.Millisecond)
				} else {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nConn")
				}
				io.WriteString(c, "ection: close, X-Internal-Hop\r\nX-Internal-Hop: backend-secret\r\n"+tc.head+"\r\n"+tc.body)
			})
			cfg := proxyTo(addr)
			if tc.transport {
				cfg.Upstreams[0].Transport.MaxConnsPerTarget = 4
			}
			f := newFront(t, cfg, frontOpts{})
			code, body, hdr := get(t, testClient(t), f.url+"/", "Host", "example.test")
			if code != 200 || body != "ok" {
				t.Fatalf("status %d body %q", code, body)
			}
			if v := hdr.Get("X-Internal-Hop"); v != "" {
				t.Errorf("the client got X-Internal-Hop: %q, a field the backend's Connection field marked hop-by-hop; want it removed", v)
			}
		})
	}
}

// TestLengthAndCodingRefused: a backend response with both
// Content-Length and Transfer-Encoding is refused (502) on h1Client and
// on net/http's Transport. net/http reads it as chunked and drops
// Content-Length, and the connection went back to the pool; the two
// framings disagreeing is how a backend (or what it echoes) splits a
// response, and RFC 9112 §6.3 has it handled as an error.
func TestLengthAndCodingRefused(t *testing.T) {
	for _, tc := range []struct {
		name, length string
		transport    bool
	}{
		{"h1client", "Content-Length", false},
		{"transport", "Content-Length", true},
		// A space before the colon: no valid name, but net/http keeps
		// it as "Content-Length " and frames by the chunks; forwarded,
		// the space would go (RFC 9112 §5.1) and the head frame twice.
		{"h1client/space-before-colon", "Content-Length ", false},
		{"transport/space-before-colon", "Content-Length ", true},
		// A status line that claims HTTP/2.0, which http.ReadResponse
		// takes (ProtoMajor 2) on an HTTP/1.1 connection and frames as
		// HTTP/1.1: not an HTTP/2 response, whose checks are others.
		{"h1client/HTTP/2.0", "Content-Length", false},
		{"transport/HTTP/2.0", "Content-Length", true},
	} {
		transport := tc.transport
		t.Run(tc.name, func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				for range 2 {
					if _, err := readWholeRequest(c, br); err != nil {
						return
					}
					version := "HTTP/1.1"
					if strings.HasSuffix(tc.name, "HTTP/2.0") {
						version = "HTTP/2.0"
					}
					io.WriteString(c, version+" 200 OK\r\n"+tc.length+": 45\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
				}
			})
			cfg := proxyTo(addr)
			if transport {
				cfg.Upstreams[0].Transport.MaxConnsPerTarget = 4
			}
			cfg.Upstreams[0].HealthCheck.Passive.MaxFails = -1
			f := newFront(t, cfg, frontOpts{})
			for i := range 2 {
				code, body, _ := get(t, testClient(t), f.url+"/", "Host", "example.test")
				if code != 502 {
					t.Errorf("request %d: status %d body %q for a response with Content-Length and Transfer-Encoding; want 502", i, code, body)
				}
			}
		})
	}
}

// TestNoContentWithLengthNotReused: a 204 that announces a body (RFC 9110
// §8.6: it must not) and writes it a moment later, when the next request
// is already on its way: the connection is not reused, so those bytes
// never become the next client's response (response queue poisoning), on
// gmproxy's HTTP/1.1 client and on net/http's Transport. A Content-Length
// of 0 counts too: a 204 may have none at all.
func TestNoContentWithLengthNotReused(t *testing.T) {
	for _, tc := range []struct {
		transport bool
		length    string
	}{{false, "44"}, {false, "0"}, {true, "44"}, {true, "0"}} {
		transport := tc.transport
		t.Run(map[bool]string{false: "h1client", true: "transport"}[transport]+" "+tc.length, func(t *testing.T) {
			var conns atomic.Int32
			addr := connBackend(t, func(c net.Conn) {
				n := conns.Add(1)
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					if _, err := readWholeRequest(c, br); err != nil {
						return
					}
					if n == 1 && i == 0 {
						io.WriteString(c, "HTTP/1.1 204 No Content\r\nContent-Length: "+tc.length+"\r\n\r\n")
						time.Sleep(200 * time.Millisecond) // the next request has gone out by then
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
						continue
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood")
				}
			})
			cfg := proxyTo(addr)
			cfg.Upstreams[0].HealthCheck.Passive.MaxFails = -1
			if transport {
				cfg.Upstreams[0].Transport.MaxConnsPerTarget = 4
			}
			f := newFront(t, cfg, frontOpts{})
			if out := rawRoundTrip(t, f.addr, "GET /a HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 2*time.Second); !strings.Contains(statusOf(out), " 204 ") {
				t.Fatalf("the 204 reached the client as %q", statusOf(out))
			}
			out := rawRoundTrip(t, f.addr, "GET /b HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", 2*time.Second)
			if !strings.HasSuffix(out, "good") {
				t.Errorf("the next client got %q: the bytes written after the 204", out)
			}
		})
	}
}

// TestRemovedContentTypeNotSniffed: a Content-Type the route removes
// (response_headers remove, to drop a backend's wrong label) is absent at
// the client, on a proxied and on a fixed (respond) response, as one the
// backend never sent: both fronts sniffed the body once the key was gone.
func TestRemovedContentTypeNotSniffed(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		io.WriteString(w, "<html><script>alert(document.cookie)</script></html>")
	}))
	t.Cleanup(be.Close)
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", addrOf(be))},
		Sites: oneSite(
			// The same with a fixed response (respond).
			RouteConfig{Path: "/fixed", Respond: &RespondConfig{Body: "<html><script>alert(1)</script></html>"},
				ResponseHeaders: HeaderOps{Remove: []string{"Content-Type"}}},
			RouteConfig{Upstream: "u",
				ResponseHeaders: HeaderOps{Remove: []string{"Content-Type"}}}),
	}
	for _, h2 := range []bool{false, true} {
		f, c := frontFor(t, cfg, h2)
		for _, path := range []string{"/", "/fixed"} {
			status, _, h := get(t, c, f.url+path, "Host", "example.test")
			if ct, ok := h["Content-Type"]; ok {
				t.Errorf("h2 front %v, %s: status %d with Content-Type %q; the route removed Content-Type and want none: the front sniffed the body", h2, path, status, ct)
			}
		}
	}
}

// tlsConnBackend is connBackend over TLS (httptest's certificate; the
// proxy is told to skip verification).
func tlsConnBackend(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	s := httptest.NewUnstartedServer(http.NotFoundHandler())
	s.StartTLS()
	certs := s.TLS.Certificates
	s.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: certs, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, serve)
}

// TestConnectionCloseOptionsRemovedOverTLS: the fields a backend's
// "Connection: close, X-Internal-Hop" names are removed on the tls and h2
// protocols too, when the target speaks HTTP/1.1 (ALPN): net/http's
// Transport made those TLS connections itself, out of the proxy's sight,
// and X-Internal-Hop reached the client (RFC 9110 §7.6.1).
func TestConnectionCloseOptionsRemovedOverTLS(t *testing.T) {
	addr := tlsConnBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readWholeRequest(c, br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close, X-Internal-Hop\r\nX-Internal-Hop: backend-secret\r\nContent-Length: 2\r\n\r\nok")
	})
	for _, c := range []struct {
		proto string
		hook  bool // connections made by an embedding program's DialTLSContext
	}{{"tls", false}, {"h2", false}, {"tls", true}, {"h2", true}} {
		proto := c.proto
		t.Run(fmt.Sprintf("%s/hook=%v", proto, c.hook), func(t *testing.T) {
			cfg := Config{
				Upstreams: []UpstreamConfig{{Name: "u", Protocol: proto, Targets: []TargetConfig{{Address: addr}},
					TLS: &UpstreamTLSConfig{InsecureSkipVerify: true}}},
				Sites: oneSite(RouteConfig{Upstream: "u"}),
			}
			if c.hook {
				cfg.Upstreams[0].DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}}
					return d.DialContext(ctx, network, addr)
				}
			}
			f := newFront(t, cfg, frontOpts{})
			status, body, h := get(t, testClient(t), f.url+"/", "Host", "example.test")
			if status != 200 || body != "ok" {
				t.Fatalf("status %d, body %q; want 200 ok", status, body)
			}
			if v := h.Get("X-Internal-Hop"); v != "" {
				t.Errorf("upstream protocol %s: the client got X-Internal-Hop: %q, a field the backend's \"Connection: close, X-Internal-Hop\" marked hop-by-hop; want it removed", proto, v)
			}
		})
	}
}

// TestResponseTrailerBounded: a backend's trailer section is bounded as
// its head is (max_response_header_fields): one of 1000 fields, after a
// chunked body or an h2 stream, cuts the response instead of reaching the
// client whole.
func TestResponseTrailerBounded(t *testing.T) {
	const n = 1000
	var tr strings.Builder
	for i := range n {
		fmt.Fprintf(&tr, "T%d: v\r\n", i)
	}
	trailer := tr.String()
	check := func(t *testing.T, f *front) {
		c := dialRaw(t, f.addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReaderSize(c, 1<<20), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(res.Body)
		if got := len(res.Trailer); err == nil || got > 0 {
			t.Errorf("status %d, body error %v: the client got %d trailer fields from the backend; want the response cut (over max_response_header_fields, %d)", res.StatusCode, err, got, DefaultMaxResponseHeaderFields)
		}
	}
	t.Run("http", func(t *testing.T) {
		addr := connBackend(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			if _, err := readWholeRequest(c, br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n2\r\nok\r\n0\r\n"+trailer+"\r\n")
		})
		check(t, newFront(t, proxyTo(addr), frontOpts{}))
	})
	t.Run("h2c", func(t *testing.T) {
		addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "ok")
			w.(http.Flusher).Flush() // no Content-Length: the proxy's client gets chunks and trailers
			for i := range n {
				w.Header().Set(http.TrailerPrefix+fmt.Sprint("T", i), "v")
			}
		}))
		cfg := proxyTo(addr)
		cfg.Upstreams[0].Protocol = "h2c"
		check(t, newFront(t, cfg, frontOpts{}))
	})
}

// trailerBackend answers every request with a chunked response whose head
// has the fields head (after the status line) and whose trailer section
// is trailer.
func trailerBackend(t *testing.T, head, trailer string) string {
	return connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readWholeRequest(c, br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n"+head+"Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"+trailer+"\r\n")
	})
}

// trailerGet sends one HTTP/1.1 request to the front and returns the
// response, its body and trailer read.
func trailerGet(t *testing.T, f *front) *http.Response {
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || string(body) != "ok" {
		t.Fatalf("status %d, body %q, error %v; want 200 ok", res.StatusCode, body, err)
	}
	return res
}

// TestResponseTrailersEditedAsTheHead: a backend's response trailers get
// the filtering its head gets. A trailer its Connection field names is
// hop-by-hop (RFC 9110 §7.6.1: removed, header or trailer alike), declared
// or not; one the route's response_headers remove or set does not reach
// the client either, as request_headers does for request trailers. Others
// pass.
func TestResponseTrailersEditedAsTheHead(t *testing.T) {
	t.Run("connection-option", func(t *testing.T) {
		addr := trailerBackend(t, "Connection: X-Internal-Hop, X-Other-Hop\r\nTrailer: X-Internal-Hop, X-Kept\r\n",
			"X-Internal-Hop: backend-secret\r\nX-Other-Hop: undeclared\r\nX-Kept: yes\r\n")
		f := newFront(t, proxyTo(addr), frontOpts{})
		res := trailerGet(t, f)
		for _, k := range []string{"X-Internal-Hop", "X-Other-Hop"} {
			if v := res.Trailer.Get(k); v != "" {
				t.Errorf("the client got the trailer %s: %q, which the backend's Connection field made hop-by-hop", k, v)
			}
		}
		if v := res.Trailer.Get("X-Kept"); v != "yes" {
			t.Errorf("trailer X-Kept = %q, want yes", v)
		}
	})
	t.Run("response-headers", func(t *testing.T) {
		addr := trailerBackend(t, "Trailer: X-Backend-Secret, X-Set\r\n", "X-Backend-Secret: s3cr3t\r\nX-Set: backend\r\nX-Kept: yes\r\n")
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("u", addr)},
			Sites: oneSite(RouteConfig{Upstream: "u",
				ResponseHeaders: HeaderOps{Remove: []string{"X-Backend-Secret"}, Set: map[string]string{"X-Set": "edge"}}}),
		}
		f := newFront(t, cfg, frontOpts{})
		res := trailerGet(t, f)
		if v := res.Trailer.Get("X-Backend-Secret"); v != "" {
			t.Errorf("the client got X-Backend-Secret: %q as a trailer; the route's response_headers remove it", v)
		}
		if v := res.Trailer.Get("X-Set"); v != "" || res.Header.Get("X-Set") != "edge" {
			t.Errorf("X-Set: header %q, trailer %q; want the route's edge in the head alone", res.Header.Get("X-Set"), v)
		}
		if v := res.Trailer.Get("X-Kept"); v != "yes" {
			t.Errorf("trailer X-Kept = %q, want yes", v)
		}
	})
}
