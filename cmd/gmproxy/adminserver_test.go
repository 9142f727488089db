package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestAdminServerBounds: an admin listener closes a kept-alive connection
// left idle (adminIdleTimeout), and serves at most adminMaxConns
// connections at once: one more is served only once another closes.
func TestAdminServerBounds(t *testing.T) {
	defer func(d time.Duration, n int) { adminIdleTimeout, adminMaxConns = d, n }(adminIdleTimeout, adminMaxConns)
	adminIdleTimeout, adminMaxConns = 200*time.Millisecond, 3
	start := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
		serveAdmin(srv, ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	addr := start()
	get := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Idle after a request: closed by the server.
	c := dial()
	if err := get(c); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle kept-alive connection: read %d, %v; want EOF (closed by the server)", n, err)
	}

	// adminMaxConns connections held (not idle long enough to be closed):
	// one more waits for a free one.
	adminIdleTimeout = time.Minute
	addr = start()
	var held []net.Conn
	for range adminMaxConns {
		h := dial()
		if err := get(h); err != nil { // accepted and served
			t.Fatal(err)
		}
		held = append(held, h)
	}
	extra := dial() // in the listen queue
	io.WriteString(extra, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	extra.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := extra.Read(make([]byte, 1)); err == nil {
		t.Fatalf("connection %d served (%d bytes) while %d were held", adminMaxConns+1, n, adminMaxConns)
	}
	held[0].Close()
	extra.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after one closed, the waiting connection: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestPprofSecondsBounded: a profile or trace asked of the admin
// listener's own /debug/pprof/ (a single process, which serves the
// traffic, or the supervisor) runs at most maxProfileSeconds, as a
// worker's through the supervisor does: net/http/pprof bounds it only by
// the server's WriteTimeout, which the admin server has none of, so a
// client could keep the execution tracer on the traffic for days. The
// seconds are checked wherever pprof reads them: query or form body.
func TestPprofSecondsBounded(t *testing.T) {
	single, sup := pprofAdmins(t)
	type request struct {
		method, target, form string
		want                 int
	}
	own := []request{
		{"GET", "/debug/pprof/profile?seconds=" + strconv.Itoa(maxProfileSeconds), "", 200},
		{"GET", "/debug/pprof/profile?seconds=" + strconv.Itoa(maxProfileSeconds+1), "", 400},
		{"GET", "/debug/pprof/trace?seconds=1e7", "", 400},
		{"GET", "/debug/pprof/heap?seconds=100000", "", 400},
		{"POST", "/debug/pprof/trace", "seconds=100000", 400},
	}
	for name, h := range map[string]http.Handler{"single process": single, "supervisor": sup} {
		reqs := own
		if h == sup {
			reqs = append(reqs, request{"GET", "/workers/1/debug/pprof/profile?seconds=" + strconv.Itoa(maxProfileSeconds+1), "", 400},
				request{"GET", "/workers/1/debug/pprof/profile?seconds=" + strconv.Itoa(maxProfileSeconds), "", 502})
		}
		for _, tc := range reqs {
			// The request's context is done: a profile let through
			// stops at once (pprof waits on it) rather than holding
			// the test.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var body io.Reader
			if tc.form != "" {
				body = strings.NewReader(tc.form)
			}
			req := httptest.NewRequestWithContext(ctx, tc.method, "http://127.0.0.1:9100"+tc.target, body)
			if tc.form != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("%s: %s %s %s: %d, want %d", name, tc.method, tc.target, tc.form, rec.Code, tc.want)
			}
		}
	}
}

// TestAdminServerHeaderBound: an admin listener refuses a request head
// past adminMaxHeaderBytes (431), well under net/http's 1 MiB default:
// its clients (Prometheus, gmproxy reload, an operator's curl) send a few
// hundred bytes, and each of its adminMaxConns connections may otherwise
// hold a megabyte while its head arrives.
func TestAdminServerHeaderBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	serveAdmin(srv, ln)
	defer srv.Close()
	get := func(pad int) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/metrics", nil)
		req.Header.Set("X-Pad", strings.Repeat("a", pad))
		res, err := (&http.Client{Timeout: testwait.Bound(10 * time.Second)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if code := get(1 << 10); code != http.StatusOK {
		t.Errorf("a 1 KiB header: %d, want 200", code)
	}
	if code := get(2 * adminMaxHeaderBytes); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header of %d bytes: %d, want 431", 2*adminMaxHeaderBytes, code)
	}
}

// TestAdminServerWriteBound: an answer the client stops reading (a stuck
// scraper of a large /metrics) ends after adminWriteTimeout, giving its
// connection back (the admin listener serves adminMaxConns at once), and
// a profile's seconds come on top of it: a CPU profile of a second is
// still answered whole when adminWriteTimeout is shorter.
func TestAdminServerWriteBound(t *testing.T) {
	defer func(d time.Duration) { adminWriteTimeout = d }(adminWriteTimeout)
	adminWriteTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range (1 << 30) / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
		ended <- nil
	}))
	serveAdmin(srv, ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("1 GiB written to a client that reads nothing")
		}
	case <-time.After(testwait.Bound(20 * time.Second)):
		t.Fatalf("an answer the client does not read still being written %v after adminWriteTimeout (%v): the connection is held", testwait.Bound(20*time.Second), adminWriteTimeout)
	}

	// A worker's profile through the supervisor: its seconds too.
	cfg := conf.Default()
	cfg.Admin.Pprof = true
	s := &supervisor{n: 2, hc: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		time.Sleep(time.Second) // the profile's second
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("profile")), Request: r}, nil
	})}}
	s.admin.set(cfg.Admin)
	ln3, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ssrv := adminServer(s.adminMux(cfg, nil))
	serveAdmin(ssrv, ln3)
	defer ssrv.Close()
	res, err := (&http.Client{Timeout: testwait.Bound(30 * time.Second)}).Get("http://" + ln3.Addr().String() + "/workers/1/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatalf("worker 1's profile of 1 s through the supervisor with adminWriteTimeout %v: %v; want it answered (its seconds on top)", adminWriteTimeout, err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || string(body) != "profile" {
		t.Fatalf("worker 1's profile of 1 s through the supervisor: %d %q, %v; want the worker's whole answer", res.StatusCode, body, err)
	}

	if newTelemetry == nil {
		t.Skip("no telemetry in this build")
	}
	var live adminState
	live.set(cfg.Admin)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	psrv := adminServer(newTelemetry(log, &daemon.Env{Logger: log}).AdminHandler(ln2.Addr().String(), &live, nil))
	serveAdmin(psrv, ln2)
	defer psrv.Close()
	res, err = (&http.Client{Timeout: testwait.Bound(30 * time.Second)}).Get("http://" + ln2.Addr().String() + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatalf("a profile of 1 s with adminWriteTimeout %v: %v; want it answered (its seconds on top)", adminWriteTimeout, err)
	}
	body, err = io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("a profile of 1 s with adminWriteTimeout %v: %d, %d bytes, %v; want 200 and the whole profile", adminWriteTimeout, res.StatusCode, len(body), err)
	}
}

// TestAdminReloadOutlivesWriteBound: a reload answers when it is done, and
// may take longer than adminWriteTimeout (a supervisor's waits for every
// worker, up to reloadTimeout; a worker's prepare step has
// workerReloadTimeout): its answer still reaches the client, at the
// supervisor's or a single process's POST /reload and at a worker's
// reload steps, which the supervisor reads to decide to commit or abort.
func TestAdminReloadOutlivesWriteBound(t *testing.T) {
	defer func(d time.Duration) { adminWriteTimeout = d }(adminWriteTimeout)
	adminWriteTimeout = 200 * time.Millisecond
	slow := func(context.Context) error {
		time.Sleep(4 * adminWriteTimeout)
		return nil
	}
	post := func(h http.Handler, path string) (int, string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := adminServer(h)
		serveAdmin(srv, ln)
		defer srv.Close()
		res, err := (&http.Client{Timeout: testwait.Bound(30 * time.Second)}).Post("http://"+ln.Addr().String()+path, "text/plain", nil)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}

	mux := http.NewServeMux()
	mux.Handle("POST /reload", controlHandler(new(adminState), "127.0.0.1:9", slow))
	if code, body, err := post(mux, "/reload"); err != nil || code != http.StatusOK || !strings.Contains(body, "reloaded") {
		t.Errorf("POST /reload taking %v with adminWriteTimeout %v: %d %q, %v; want 200 reloaded", 4*adminWriteTimeout, adminWriteTimeout, code, body, err)
	}

	reqs := make(chan reloadSignal)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case rq := <-reqs:
				rq.answer(slow(context.Background())) // the main loop making the step
			case <-done:
				return
			}
		}
	}()
	r := &runner{reqs: reqs}
	steps := r.reloadSteps(http.NotFoundHandler())
	for _, step := range []string{"/reload/prepare", "/reload/commit"} {
		if code, body, err := post(steps, step); err != nil || code != http.StatusOK || body != "ok\n" {
			t.Errorf("a worker's POST %s taking %v with adminWriteTimeout %v: %d %q, %v; want 200 ok", step, 4*adminWriteTimeout, adminWriteTimeout, code, body, err)
		}
	}
}

// TestAdminServerBodyBound: a request that declares a body (Content-Length
// or chunked) and sends none is answered, and its connection closed,
// after adminReadTimeout: net/http reads an unread body of up to 256 KiB
// before it answers, with no deadline on a server without ReadTimeout,
// so each such request held one of adminMaxConns connections for good (a
// few of them kept Prometheus and gmproxy reload out). A pprof form
// still reaches the handler, and a profile waiting on its request's
// context past adminReadTimeout is not cut.
func TestAdminServerBodyBound(t *testing.T) {
	defer func(d time.Duration) { adminReadTimeout = d }(adminReadTimeout)
	adminReadTimeout = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/profile" {
			io.WriteString(w, "ok") // leaves the body unread, as every other handler
			return
		}
		seconds := r.FormValue("seconds") // as pprof reads it
		// A profile waits on the request's context for its seconds.
		select {
		case <-r.Context().Done():
			seconds = "cancelled"
		case <-time.After(3 * adminReadTimeout):
		}
		io.WriteString(w, seconds)
	}))
	serveAdmin(srv, ln)
	defer srv.Close()
	send := func(req string) (*http.Response, string) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%.60q: no answer: %v", req, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(body)
	}
	for _, req := range []string{
		"GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n",
		"POST /reload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nseco",
		"GET /metrics HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		if res, _ := send(req); !res.Close {
			t.Errorf("%.60q, the body not sent: answered %d, the connection kept; want it closed", req, res.StatusCode)
		}
	}
	form := "seconds=5"
	for _, req := range []string{
		"POST /debug/pprof/profile HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 9\r\n\r\n" + form,
		"POST /debug/pprof/profile HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n" + form + "\r\n0\r\n\r\n",
		"GET /debug/pprof/profile?seconds=5 HTTP/1.1\r\nHost: localhost\r\n\r\n",
	} {
		if res, body := send(req); res.StatusCode != http.StatusOK || body != "5" {
			t.Errorf("%.60q: %d %q, want 200 \"5\" (the form read, the request not cancelled by adminReadTimeout)", req, res.StatusCode, body)
		}
	}
}

// TestAdminServerBodySizeBound: an admin listener reads at most
// adminMaxBodyBytes of a request's body: a pprof form over it is refused
// (413) before any profile starts, where net/http would read 10 MB of it
// (some 32 MiB allocated to parse) on each connection. A form within it
// still sets the profile's seconds.
func TestAdminServerBodySizeBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 4)
	srv := adminServer(boundSeconds(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran <- r.FormValue("seconds")
	})))
	serveAdmin(srv, ln)
	defer srv.Close()
	post := func(form string) int {
		t.Helper()
		res, err := (&http.Client{Timeout: testwait.Bound(20 * time.Second)}).Post("http://"+ln.Addr().String()+"/debug/pprof/profile", "application/x-www-form-urlencoded", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	big := "seconds=1&pad=" + strings.Repeat("a", 1<<20)
	if code := post(big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a form of %d bytes: %d, want 413", len(big), code)
	}
	select {
	case s := <-ran:
		t.Errorf("a form of %d bytes reached pprof (seconds %q)", len(big), s)
	default:
	}
	if code := post("seconds=5"); code != http.StatusOK || <-ran != "5" {
		t.Errorf("seconds=5 as a form: %d, want 200 with its seconds", code)
	}
}

// TestPprofRefusesOtherSites: the admin listener's /debug/pprof/ (the
// single process's, the supervisor's and, through it, a worker's) is
// refused to a page of another site: through a rebound Host, or marked
// cross-site by its browser; a worker's own, on its Unix socket, answers
// the supervisor, whose Host names no address.
func TestPprofRefusesOtherSites(t *testing.T) {
	single, sup := pprofAdmins(t)
	for _, tc := range []struct {
		h                     http.Handler
		target, host, secSite string
		want                  int
	}{
		{single, "/debug/pprof/cmdline", "127.0.0.1:9100", "", 200},
		{single, "/debug/pprof/cmdline", "evil.example:9100", "", 403},
		{single, "/debug/pprof/cmdline", "127.0.0.1:9100", "cross-site", 403},
		{sup, "/debug/pprof/cmdline", "localhost:9100", "same-origin", 200},
		{sup, "/debug/pprof/cmdline", "evil.example", "", 403},
		{sup, "/workers/1/debug/pprof/cmdline", "127.0.0.1:9100", "", 502},
		{sup, "/workers/1/debug/pprof/cmdline", "evil.example:9100", "", 403},
		{sup, "/workers/1/debug/pprof/cmdline", "127.0.0.1:9100", "cross-site", 403},
	} {
		req := httptest.NewRequest("GET", "http://"+tc.host+tc.target, nil)
		if tc.secSite != "" {
			req.Header.Set("Sec-Fetch-Site", tc.secSite)
		}
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s Host %s Sec-Fetch-Site %q: %d, want %d", tc.target, tc.host, tc.secSite, rec.Code, tc.want)
		}
	}

	sock := t.TempDir() + "/w.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := adminServer(single)
	serveAdmin(srv, ln)
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, "unix", sock)
	}}}
	res, err := hc.Get("http://worker0/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("a worker's pprof on its Unix socket, as the supervisor asks for it: %d, want 200", res.StatusCode)
	}
}

// pprofAdmins returns the admin handlers, pprof on and at the default
// admin address, of a single process and of a supervisor whose workers
// are unreachable (a worker's profile let through is 502); it skips t in
// a build without telemetry.
func pprofAdmins(t *testing.T) (single, sup http.Handler) {
	t.Helper()
	if newTelemetry == nil {
		t.Skip("no telemetry in this build")
	}
	var live adminState
	cfg := conf.Default()
	cfg.Admin.Pprof = true
	live.set(cfg.Admin)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	single = newTelemetry(log, &daemon.Env{Logger: log}).AdminHandler(cfg.Admin.Address, &live, nil)
	s := &supervisor{n: 2, hc: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("no worker in this test")
	})}}
	s.admin.set(cfg.Admin)
	return single, s.adminMux(cfg, nil)
}

// TestWorkerPprofSecondsAsPprof: a worker's profile or trace through the
// supervisor is given the time pprof takes for the seconds asked, read as
// pprof reads them: seconds=0 (or 0.5 for a CPU profile, which pprof reads
// as an integer) profiles for pprof's default 30 s, so the worker's
// answer must be waited for past those 30 s; and a trace's fractional
// seconds, which pprof takes, are taken.
func TestWorkerPprofSecondsAsPprof(t *testing.T) {
	cfg := conf.Default()
	cfg.Admin.Pprof = true
	var left time.Duration
	s := &supervisor{n: 2, hc: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		d, ok := r.Context().Deadline()
		if !ok {
			t.Error("worker pprof request without a deadline")
		}
		left = time.Until(d)
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("profile")), Request: r}, nil
	})}}
	s.admin.set(cfg.Admin)
	h := s.adminMux(cfg, nil)
	for _, q := range []string{"profile?seconds=0", "profile?seconds=0.5", "trace?seconds=0.5"} {
		left = 0
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9100/workers/1/debug/pprof/"+q, nil))
		if rec.Code != 200 {
			t.Errorf("GET /workers/1/debug/pprof/%s: %d %q; want the worker's answer (pprof takes these seconds)", q, rec.Code, rec.Body)
			continue
		}
		// pprof profiles 30 s for these; the wait must outlast them
		// (with its margin), not end with them.
		if left <= 45*time.Second {
			t.Errorf("GET /workers/1/debug/pprof/%s: the worker's answer waited for %v; want more than pprof's 30 s default profile and a margin", q, left.Round(time.Second))
		}
	}
}
