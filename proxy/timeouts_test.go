package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestBodyTimeout: a body dribbled with pauses shorter than body_timeout
// goes through whole, however long it takes in all; one that stalls past
// it gets 408 and the connection is closed (HTTP/1.1), or 408 on its
// stream (HTTP/2). Neither counts against the backend.
func TestBodyTimeout(t *testing.T) {
	hits := new(atomic.Int64)
	backend := countingBackend(t, "b", hits)
	obs := newEventObserver()
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.BodyTimeout = 400 * time.Millisecond
	f := newFront(t, cfg, frontOpts{obs: obs})
	const body = "0123456789abcdefghij"

	t.Run("dribbled", func(t *testing.T) {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: %d\r\n\r\n", len(body))
		for i := range len(body) { // 20 pauses of 50ms: longer than the timeout in all
			time.Sleep(50 * time.Millisecond)
			c.Write([]byte{body[i]})
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || string(got) != "b:"+body {
			t.Errorf("dribbled body: %d %q", res.StatusCode, got)
		}
	})
	t.Run("stalled h1", func(t *testing.T) {
		res, c, br := rawExchange(t, f.addr, "POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 20\r\n\r\n01234")
		if res.StatusCode != http.StatusRequestTimeout || !res.Close {
			t.Errorf("stalled body: status %d close %v, want 408 and close", res.StatusCode, res.Close)
		}
		c.Write([]byte("56789"))
		if _, err := br.ReadByte(); err == nil {
			t.Errorf("connection still open after 408")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("connection still open after 408")
		}
	})
	t.Run("stalled h2", func(t *testing.T) {
		f2, c := frontFor(t, cfg, true)
		pr, pw := io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequest("POST", f2.url+"/", pr)
		go pw.Write([]byte("01234"))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("stalled h2 body: status %d, want 408", res.StatusCode)
		}
	})
	if d := obs.downs(); len(d) > 0 {
		t.Errorf("health events %q: a slow client counted against the backend", d)
	}
}

// TestReadTimeoutCountsFromTheHead: read_timeout bounds the whole request
// from the first byte of its head: after a head trickled over longer than
// it (read_header_timeout allows that) the body gets no more time,
// although body_timeout, which the body's reads arm, would let a body
// trickled byte by byte go on.
func TestReadTimeoutCountsFromTheHead(t *testing.T) {
	backend := countingBackend(t, "b", new(atomic.Int64))
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.ReadTimeout = time.Second
	cfg.Limits.ReadHeaderTimeout = 4 * time.Second
	cfg.Limits.BodyTimeout = time.Second
	f := newFront(t, cfg, frontOpts{})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	head := "POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 1000\r\n\r\n"
	start := time.Now()
	for i := range 15 { // the head over 1.5 s
		c.Write([]byte(head[i*len(head)/15 : (i+1)*len(head)/15]))
		time.Sleep(100 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, c) // until the proxy closes
	}()
	for i := 0; i < 40; i++ { // the body, a byte every 100 ms
		select {
		case <-done:
			i = 40
		case <-time.After(100 * time.Millisecond):
			c.Write([]byte("b"))
		}
	}
	<-done
	if took := time.Since(start); took > 2100*time.Millisecond { // 2.5 s when counted from the handler's start
		t.Errorf("read_timeout 1s: the request was cut %v after its first byte", took.Round(100*time.Millisecond))
	}
}

// TestSendTimeout: a client that stops reading a long response is cut
// after send_timeout instead of holding the request (and its upstream
// connection) for ever.
func TestSendTimeout(t *testing.T) {
	backend := longResponseBackend(t)
	obs := newEventObserver()
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = 300 * time.Millisecond
	f := newFront(t, cfg, frontOpts{obs: obs})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
	// Read nothing; the request must end on its own.
	for i := 0; ; i++ {
		obs.mu.Lock()
		n := len(obs.done)
		obs.mu.Unlock()
		if n > 0 {
			break
		}
		if i == 2000 {
			t.Fatal("the response to a client that reads nothing never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	got, _ := io.Copy(io.Discard, c)
	if got >= 256<<20 {
		t.Errorf("the whole response (%d bytes) was delivered", got)
	}
}

// TestSendTimeoutKeepAlive: send_timeout's write deadline stays on an
// HTTP/1.1 connection between its requests (re-armed only when it grew
// old), so it must still bound a later response of the connection, and
// one left from a request long ago must not fail a later response's
// writes, a 100 Continue sent before the response included.
func TestSendTimeoutKeepAlive(t *testing.T) {
	chunk := strings.Repeat("x", 32<<10)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "ok %s", b)
			return
		}
		for range 8192 { // up to 256 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	const sendTimeout = 300 * time.Millisecond
	obs := newEventObserver()
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = sendTimeout
	f := newFront(t, cfg, frontOpts{obs: obs})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(30 * time.Second)))
	br := bufio.NewReader(c)
	get := func(req string, want string) {
		t.Helper()
		io.WriteString(c, req)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != 200 || string(b) != want {
			t.Fatalf("%q: %d %q %v, want 200 %q", req, res.StatusCode, b, err, want)
		}
	}
	get("GET /a HTTP/1.1\r\nHost: example.test\r\n\r\n", "ok ")
	get("GET /b HTTP/1.1\r\nHost: example.test\r\n\r\n", "ok ")

	// Idle for longer than the deadline the last response left.
	time.Sleep(sendTimeout*9/8 + 200*time.Millisecond)
	io.WriteString(c, "POST /c HTTP/1.1\r\nHost: example.test\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("after an idle wait: %v %v, want 100 Continue", res, err)
	}
	get("body", "ok body")
	time.Sleep(sendTimeout*9/8 + 200*time.Millisecond)
	get("GET /d HTTP/1.1\r\nHost: example.test\r\n\r\n", "ok ")

	// A response on the same connection that the client does not read
	// must end on its own.
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: example.test\r\n\r\n")
	for i := 0; ; i++ {
		obs.mu.Lock()
		n := len(obs.done)
		obs.mu.Unlock()
		if n == 5 {
			break
		}
		if i == 2000 {
			t.Fatal("a later response to a client that reads nothing never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, _ := io.Copy(io.Discard, br)
	if got >= 256<<20 {
		t.Errorf("the whole response (%d bytes) was delivered", got)
	}
}

// keptWriter is a ResponseWriter with a kept write deadline, recording
// the deadlines set on it.
type keptWriter struct {
	httptest.ResponseRecorder
	kept time.Time
	sets []time.Time
}

func (w *keptWriter) WriteDeadline() time.Time { return w.kept }
func (w *keptWriter) SetWriteDeadline(t time.Time) error {
	w.sets = append(w.sets, t)
	return nil
}

// TestSendDeadlineKept: a kept write deadline between the timeout and 9/8
// of it away is left in place; one nearer, or further than the timeout
// allows (a reload shortened it), is replaced by a fresh one.
func TestSendDeadlineKept(t *testing.T) {
	const d = 8 * time.Second
	cfg := proxyTo("127.0.0.1:1")
	cfg.Limits.SendTimeout = d
	p, err := New(cfg, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := httptest.NewRequest("GET", "http://example.test/", nil)
	for _, tc := range []struct {
		ahead time.Duration // 0: none kept
		set   bool
	}{
		{0, true},
		{d + d/16, false},
		{d + d/8 - 10*time.Millisecond, false},
		{d - time.Second, true},
		{time.Minute, true},
	} {
		rs := getReqState(&keptWriter{})
		rs.start = time.Now()
		w := rs.w.rw.(*keptWriter)
		if tc.ahead > 0 {
			w.kept = rs.start.Add(tc.ahead)
		}
		p.initSend(rs, r)
		if set := len(w.sets) > 0; set != tc.set {
			t.Errorf("kept deadline %v ahead: set a new one %v, want %v", tc.ahead, set, tc.set)
		} else if set && w.sets[0].Sub(rs.start) < d {
			t.Errorf("kept deadline %v ahead: the new one is %v ahead, under the timeout", tc.ahead, w.sets[0].Sub(rs.start))
		}
		putReqState(rs)
	}
}

// TestOpDeadlineFirstArming: the first operation of a request always sets
// its deadline, however long the timeout (and however young the process:
// the monotonic clock starts near zero).
func TestOpDeadlineFirstArming(t *testing.T) {
	o := opDeadline{d: 1000 * time.Hour}
	dl, ok := o.due()
	if !ok || time.Until(dl) < 1000*time.Hour {
		t.Fatalf("first due() = %v, %v; want a deadline at least the timeout away", dl, ok)
	}
	if _, ok := o.due(); ok {
		t.Error("a deadline armed just now was armed again")
	}
}

// A request whose body the client breaks (malformed chunked framing) or
// cuts short (closes mid-body) is the client's failure: a malformed body
// gets 400 and close, a cut one nothing, and neither marks the target
// down (MaxFails 1: one charged failure would). Both
// upstream paths are covered: h1Client (small Content-Length) and
// net/http's Transport (chunked, large Content-Length).
func TestClientBodyErrorNotTargetFailure(t *testing.T) {
	hits := new(atomic.Int64)
	backend := countingBackend(t, "b", hits)
	obs := newEventObserver()
	f := newFront(t, proxyTo(addrOf(backend)), frontOpts{obs: obs})
	const head = "POST /up HTTP/1.1\r\nHost: example.test\r\n"
	for _, tc := range []struct {
		name, raw string
		cut       bool // the client half-closes after raw: its body ends early
	}{
		{"bad chunk size", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", false},
		{"chunk size overflow", head + "Transfer-Encoding: chunked\r\n\r\n10000000000000003\r\nabc\r\n0\r\n\r\n", false},
		{"chunk line with bare LF", head + "Transfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n", false},
		{"chunk data overrun", head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", false},
		{"short body, h1Client", head + "Content-Length: 100\r\n\r\nabc", true},
		{"short body, Transport", head + "Content-Length: 1000000\r\n\r\nabc", true},
		{"cut chunked body", head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, f.addr)
			io.WriteString(c, tc.raw)
			if tc.cut {
				c.(*net.TCPConn).CloseWrite()
			}
			out, _ := io.ReadAll(c)
			first, _, _ := strings.Cut(string(out), "\r\n")
			switch {
			case tc.cut && len(out) != 0:
				t.Errorf("cut body answered %q, want nothing (client gone)", out)
			case !tc.cut && (first != "HTTP/1.1 400 Bad Request" || !strings.Contains(string(out), "Connection: close\r\n")):
				t.Errorf("malformed body answered %q, want 400 and close", out)
			}
			nextRequestServed(t, f.addr)
		})
	}
	if d := obs.downs(); len(d) > 0 {
		t.Errorf("a client's body error marked a target down: %q", d)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// Logged as what they were: 400 for a malformed body, 499 (client
	// gone) for a cut one, not 502.
	var got []int
	for _, ev := range obs.done {
		if ev.Method == http.MethodPost {
			got = append(got, ev.Status)
		}
	}
	if want := []int{400, 400, 400, 400, 499, 499, 499}; !slices.Equal(got, want) {
		t.Errorf("logged statuses %v, want %v", got, want)
	}
}

// duplexBackend answers POST /duplex at once with the head and first
// chunk ("start") of a chunked response, signals answered, then reads the
// request body to its end or error and closes; any other request gets a
// short 200 after its body.
func duplexBackend(t *testing.T) (addr string, answered <-chan struct{}) {
	ch := make(chan struct{}, 16)
	addr = connBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/duplex" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nstart\r\n")
				ch <- struct{}{}
				io.Copy(io.Discard, req.Body)
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return addr, ch
}

// TestClientBodyErrorFullDuplex: a target that answers while it still
// reads the request body (full duplex) is not charged when the client's
// body then breaks (malformed, cut short or stalled past body_timeout):
// the client's response ends broken, and the target stays in service
// (MaxFails 1: one charge would take it down).
func TestClientBodyErrorFullDuplex(t *testing.T) {
	addr, answered := duplexBackend(t)
	obs := newEventObserver()
	cfg := proxyTo(addr)
	cfg.Limits.BodyTimeout = 300 * time.Millisecond
	f := newFront(t, cfg, frontOpts{obs: obs})
	for _, tc := range []struct {
		name, breakWith string // breakWith "": half-close; "stall": send nothing more
	}{
		{"malformed chunk", "zz\r\n"},
		{"cut", ""},
		{"stalled", "stall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, f.addr)
			c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			io.WriteString(c, "POST /duplex HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
			select {
			case <-answered:
			case <-time.After(testwait.Bound(5 * time.Second)):
				t.Fatal("the request never reached the backend while its body was open")
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			first := make([]byte, 5)
			if _, err := io.ReadFull(res.Body, first); err != nil || string(first) != "start" {
				t.Fatalf("first chunk %q (%v), want start: the target's answer did not come before the body ended", first, err)
			}
			switch tc.breakWith {
			case "stall":
			case "":
				c.(*net.TCPConn).CloseWrite()
			default:
				io.WriteString(c, tc.breakWith)
			}
			if rest, err := io.ReadAll(res.Body); err == nil {
				t.Errorf("response ended cleanly after %q although its exchange was cut", rest)
			}
			nextRequestServed(t, f.addr)
		})
	}
	if d := obs.downs(); len(d) > 0 {
		t.Errorf("a client's body error marked a target down: %q", d)
	}
}

// nextRequestServed checks that a plain GET through the front at addr
// gets 200: the only target was not charged for the client's body before.
func nextRequestServed(t *testing.T, addr string) {
	t.Helper()
	res, _, _ := rawExchange(t, addr, "GET /innocent HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
	if res.StatusCode != http.StatusOK {
		t.Errorf("next request: %s, want 200 (the target was charged for the client's body)", res.Status)
	}
}

// longResponseBackend answers with up to 256 MiB, written as long as the
// proxy takes it.
func longResponseBackend(t *testing.T) *httptest.Server {
	chunk := strings.Repeat("x", 32<<10)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 8192 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	return backend
}

// TestWatchedBodyCloseStopsTimer: a watched body closed while its timer's
// function runs (it fired between reads, as the proxy wrote to a slow
// client) is not watched again: the timer does not re-arm itself after
// Close, which would keep the body, and its timer, alive for good, firing
// every read_timeout.
func TestWatchedBodyCloseStopsTimer(t *testing.T) {
	b := watchBody(io.NopCloser(strings.NewReader("x")), time.Hour)
	b.Close()
	b.expire() // the timer's function, already running when Close stopped it
	if b.t.Stop() {
		t.Fatal("the timer of a closed body was armed again")
	}
}

// TestWatchedBodyTinyTimeout: a read timeout short enough for the timer to
// fire before watchBody has stored it (read: 1ns in the configuration, a
// route's timeouts.read included) ends a read that waits with the read
// timeout's error; its function found no timer to move and crashed the
// process.
func TestWatchedBodyTinyTimeout(t *testing.T) {
	for range 5000 {
		pr, pw := io.Pipe()
		b := watchBody(pr, 1)
		_, err := b.Read(make([]byte, 1))
		var rte *readTimeoutError
		if !errors.As(err, &rte) {
			t.Fatalf("a read past the timeout: %v, want the read timeout's error", err)
		}
		b.Close()
		pw.Close()
	}
}
