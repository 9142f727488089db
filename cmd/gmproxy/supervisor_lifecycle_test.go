package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// The worker mode's graceful shutdown and reload, as the single process's
// tests (TestRunConfigFileShutdown, TestReloadUnderTraffic) check them:
// the same outcomes and exit codes through the supervisor.

// workerRun is a `gmproxy run` of this test binary in worker mode, with
// its admin listener.
type workerRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	admin  string
	logs   lockedBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
	hc     *http.Client
	pids   []int // the workers seen, killed when the test ends first
}

func newWorkerRun(t *testing.T, admin string) *workerRun {
	return &workerRun{t: t, admin: admin, exited: make(chan struct{}), hc: &http.Client{Timeout: 20 * time.Second}}
}

// watch follows r.cmd, started: it records its exit, kills it and its
// workers when the test ends first, and waits until it is ready.
func (r *workerRun) watch() {
	t := r.t
	t.Helper()
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			r.workers() // the workers now, restarted ones included
			r.cmd.Process.Kill()
			// The workers hold the output pipe, which Wait waits for
			// (up to WaitDelay): its process group goes now, not when
			// the workers are done with their requests.
			syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.exited
			for _, pid := range r.pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("gmproxy output:\n%s", r.logs.String())
		}
	})
	r.waitFor("readiness", func() bool { code, _ := r.get("/readyz"); return code == 200 })
}

// startWorkerRun starts gmproxy on cfgPath, with the extra environment
// env, and waits until it is ready (a supervisor is ready when every
// worker is). When the test ends first, it kills gmproxy and its workers.
func startWorkerRun(t *testing.T, cfgPath, admin string, env ...string) *workerRun {
	t.Helper()
	r := newWorkerRun(t, admin)
	r.cmd = startGmproxy(t, &r.logs, cfgPath, env...)
	r.watch()
	if ws := r.workers(); len(ws) != 2 {
		t.Fatalf("workers: %+v, want 2", ws)
	}
	return r
}

// workers is the supervisor's GET /workers; it remembers their PIDs.
func (r *workerRun) workers() []workerStatus {
	var ws []workerStatus
	_, body := r.get("/workers")
	json.Unmarshal([]byte(body), &ws)
	for _, w := range ws {
		r.pids = append(r.pids, w.PID)
	}
	return ws
}

// get is a GET of the admin listener: the status code and the body.
func (r *workerRun) get(path string) (int, string) {
	resp, err := r.hc.Get("http://" + r.admin + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls ok for up to 30 s (testwait); it fails the test when
// gmproxy exits first or the time runs out.
func (r *workerRun) waitFor(what string, ok func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(testwait.Bound(30 * time.Second)); time.Now().Before(deadline); {
		if ok() {
			return
		}
		select {
		case <-r.exited:
			r.t.Fatalf("gmproxy exited (%v) while waiting for %s", r.err, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.t.Fatalf("timed out waiting for %s", what)
}

// workerCounter returns worker i's sum of the series name whose labels
// contain match, from its own metrics.
func (r *workerRun) workerCounter(i int, name, match string) float64 {
	r.t.Helper()
	code, body := r.get(fmt.Sprintf("/workers/%d/metrics", i))
	if code != 200 {
		r.t.Fatalf("worker %d metrics: %d %s", i, code, body)
	}
	return sumSeries(r.t, body, name, match)
}

// exitCode waits up to limit for gmproxy's exit and returns its status.
func (r *workerRun) exitCode(limit time.Duration) int {
	r.t.Helper()
	select {
	case <-r.exited:
	case <-time.After(limit):
		r.t.Fatalf("gmproxy did not exit within %v", limit)
	}
	if r.err == nil {
		return 0
	}
	if ee, ok := r.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	r.t.Fatalf("gmproxy: %v", r.err)
	return -1
}

// writeProxyConfig writes a 2-worker TLCP site that proxies to backend,
// adding the request header X-Config: header.
func writeProxyConfig(t *testing.T, path, listen, admin, backend, grace, header string) {
	t.Helper()
	routes := fmt.Sprintf("[{path_prefix: /, upstream: app, request_headers: {set: {X-Config: %q}}}]", header)
	writeConfig(t, path, "workers: 2\n", listen, admin, routes,
		fmt.Sprintf("upstreams: [{name: app, targets: [%s]}]\nshutdown_grace: %s\n", backend, grace))
}

// configEchoBackend starts a backend that answers "config " and the
// request's X-Config header (writeProxyConfig), and returns its address.
func configEchoBackend(t *testing.T) string {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "config "+r.Header.Get("X-Config")+"\n")
	}))
	t.Cleanup(backend.Close)
	return backend.Listener.Addr().String()
}

// testRoots is the test PKI's CA.
func testRoots(t *testing.T) *smx509.CertPool {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join("..", "..", "conf", "testdata", "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := smx509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return roots
}

// plainTLCP is a TLCP client configuration trusting roots, ECC-SM4-GCM.
func plainTLCP(roots *smx509.CertPool) *tlcp.Config {
	return &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}
}

// tlcpGet makes a TLCP connection to addr with cfg and sends GET path on
// it; the response is read by the returned function, which closes the
// connection.
func tlcpGet(cfg *tlcp.Config, addr, path string) (c *tlcp.Conn, read func() (int, string, error), err error) {
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	raw.SetDeadline(time.Now().Add(testwait.Bound(30 * time.Second)))
	c = tlcp.Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil, nil, err
	}
	req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		raw.Close()
		return nil, nil, err
	}
	return c, func() (int, string, error) {
		defer raw.Close()
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return 0, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), err
	}, nil
}

// slowRequestsInBothWorkers starts gmproxy with 2 workers and the given
// shutdown_grace in front of a target that answers "slow done" to a
// request once release gets a value (or is closed, at the test's end),
// and opens requests until both workers hold one in flight (the kernel
// spreads connections over the workers' sockets). It returns the run, its
// listener, release and each request's read.
func slowRequestsInBothWorkers(t *testing.T, roots *smx509.CertPool, grace string) (r *workerRun, listen string, release chan struct{}, reads []func() (int, string, error)) {
	t.Helper()
	started := make(chan struct{}, 64)
	release = make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-release:
		case <-time.After(testwait.Bound(60 * time.Second)):
		}
		io.WriteString(w, "slow done\n")
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(release) })
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend.Listener.Addr().String(), grace, "v1")
	r = startWorkerRun(t, cfgPath, admin)
	for len(reads) < 40 {
		_, read, err := tlcpGet(plainTLCP(roots), listen, "/slow")
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, read)
		select {
		case <-started:
		case <-time.After(testwait.Bound(30 * time.Second)):
			t.Fatal("a request never reached the target")
		}
		if r.workerCounter(0, "gmproxy_handshakes_total", "") > 0 && r.workerCounter(1, "gmproxy_handshakes_total", "") > 0 {
			return r, listen, release, reads
		}
	}
	t.Fatal("40 connections all went to one worker")
	return
}

// TestWorkersShutdown: SIGTERM to the supervisor stops both workers'
// listeners, lets requests in flight in both workers finish and exits 0;
// when the grace period ends first, or a second signal comes, the cut
// requests fail and the exit status is 1.
func TestWorkersShutdown(t *testing.T) {
	roots := testRoots(t)
	for _, tc := range []struct {
		name, grace string
		drained     bool
		twice       bool // a second signal during the drain
	}{{"drained", "30s", true, false}, {"grace-over", "300ms", false, false}, {"second-signal", "30s", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r, listen, release, reads := slowRequestsInBothWorkers(t, roots, tc.grace)
			r.cmd.Process.Signal(syscall.SIGTERM)
			// New connections are refused by both workers soon: how soon
			// depends on the machine's load, so the bound is testwait's.
			refuseBy := time.Now().Add(testwait.Bound(20 * time.Second))
			for {
				c, err := net.DialTimeout("tcp", listen, 5*time.Second)
				if err != nil {
					break
				}
				c.Close()
				if time.Now().After(refuseBy) {
					t.Fatal("still accepting connections long after SIGTERM")
				}
				time.Sleep(time.Millisecond)
			}
			if tc.drained {
				for range reads {
					release <- struct{}{}
				}
				for i, read := range reads {
					if code, body, err := read(); code != 200 || body != "slow done\n" || err != nil {
						t.Errorf("in-flight request %d: %d %q %v", i, code, body, err)
					}
				}
				if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
					t.Errorf("exit %d after a drained shutdown", code)
				}
				return
			}
			if tc.twice {
				// The workers closed their listeners: the supervisor has
				// forwarded the first signal and waits for them.
				r.cmd.Process.Signal(syscall.SIGINT)
			}
			// The grace period's end (300 ms) or the second signal ends
			// the drain: 10 s (testwait) is plenty, and well within the
			// second-signal case's 30 s grace, which a second signal not
			// acted on leaves the workers to wait.
			if code := r.exitCode(testwait.Bound(10 * time.Second)); code != 1 {
				t.Errorf("exit %d, want 1: requests were cut", code)
			}
			if tc.twice && !strings.Contains(r.logs.String(), "second signal") {
				t.Error("no log of the forced close")
			}
			for i, read := range reads {
				if code, body, err := read(); err == nil && code == 200 {
					t.Errorf("cut request %d succeeded: %q", i, body)
				}
			}
			for _, pid := range r.pids {
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("worker pid %d still runs", pid)
				}
			}
		})
	}
}

// TestWorkersReloadUnderTraffic: SIGHUP and POST /reload while clients make
// a bounded number of requests, on new and on kept-alive connections: no
// request fails, and both workers apply the new configuration.
func TestWorkersReloadUnderTraffic(t *testing.T) {
	backend := configEchoBackend(t)
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend, "5s", "v0")
	r := startWorkerRun(t, cfgPath, admin)
	roots := testRoots(t)

	const perClient = 80
	var failed, done atomic.Int64
	var wg sync.WaitGroup
	// Two clients open a connection per request; two keep theirs.
	for ci := 0; ci < 4; ci++ {
		keep := ci >= 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{DisableKeepAlives: !keep, DialTLS: func(_, addr string) (net.Conn, error) {
				raw, err := net.DialTimeout("tcp", listen, 10*time.Second)
				if err != nil {
					return nil, err
				}
				c := tlcp.Client(raw, plainTLCP(roots))
				if err := c.Handshake(); err != nil {
					raw.Close()
					return nil, err
				}
				return c, nil
			}}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
			for i := 0; i < perClient; i++ {
				resp, err := hc.Get("https://localhost/traffic")
				if err != nil {
					failed.Add(1)
					t.Errorf("client %d: request %d: %v", ci, i, err)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(string(b), "config v") {
					failed.Add(1)
					t.Errorf("client %d: request %d: %d %q %v", ci, i, resp.StatusCode, b, err)
				}
				done.Add(1)
			}
		}()
	}
	// Four reloads while the traffic flows, alternately by signal and by
	// the admin endpoint; each is complete when both workers count it.
	for i := 1; i <= 4; i++ {
		deadline := time.Now().Add(testwait.Bound(30 * time.Second))
		for done.Load() < int64(i*4*perClient/6) {
			if time.Now().After(deadline) {
				t.Fatalf("reload %d: only %d requests done in 30 s", i, done.Load())
			}
			time.Sleep(time.Millisecond)
		}
		writeProxyConfig(t, cfgPath, listen, admin, backend, "5s", fmt.Sprintf("v%d", i))
		if i%2 == 1 {
			r.cmd.Process.Signal(syscall.SIGHUP)
		} else {
			resp, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("POST /reload: %d %s", resp.StatusCode, b)
			}
		}
		r.waitFor(fmt.Sprintf("reload %d in both workers", i), func() bool {
			return r.workerCounter(0, "gmproxy_config_reloads_total", `result="success"`) == float64(i+1) &&
				r.workerCounter(1, "gmproxy_config_reloads_total", `result="success"`) == float64(i+1)
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed across reloads", n, 4*perClient)
	}
	// Both workers answer with the last configuration: new connections
	// until each has served one.
	seen := [2]bool{}
	for try := 0; try < 40 && !(seen[0] && seen[1]); try++ {
		before := [2]float64{r.workerCounter(0, "gmproxy_handshakes_total", ""), r.workerCounter(1, "gmproxy_handshakes_total", "")}
		_, read, err := tlcpGet(plainTLCP(roots), listen, "/after")
		if err != nil {
			t.Fatal(err)
		}
		if code, body, err := read(); code != 200 || body != "config v4\n" || err != nil {
			t.Errorf("after the reloads: %d %q %v", code, body, err)
		}
		for i := range seen {
			if r.workerCounter(i, "gmproxy_handshakes_total", "") > before[i] {
				seen[i] = true
			}
		}
	}
	if !seen[0] || !seen[1] {
		t.Errorf("40 connections after the reloads did not reach both workers: %v", seen)
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// TestWorkersAccessLog: both workers write whole lines to one access log
// file, and SIGUSR1 to the supervisor makes both reopen it after it was
// moved away (log rotation): the old file keeps the lines written before,
// the new one gets those written after.
func TestWorkersAccessLog(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	logFile := filepath.Join(filepath.Dir(cfgPath), "access.log")
	writeSiteConfig(t, cfgPath, "workers: 2\nlog: {level: info}\n", listen, admin, "hi")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), `access_log: {path: "off"}`, fmt.Sprintf("access_log: {path: %q, format: combined}", logFile), 1))
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := startWorkerRun(t, cfgPath, admin)
	roots := testRoots(t)

	// requests makes GET /<prefix>-N on new connections until both workers
	// have served one; it returns how many it made.
	requests := func(prefix string) int {
		t.Helper()
		before := [2]float64{r.workerCounter(0, "gmproxy_handshakes_total", ""), r.workerCounter(1, "gmproxy_handshakes_total", "")}
		for n := 1; n <= 40; n++ {
			_, read, err := tlcpGet(plainTLCP(roots), listen, fmt.Sprintf("/%s-%d", prefix, n))
			if err != nil {
				t.Fatal(err)
			}
			if code, body, err := read(); code != 200 || body != "hi" || err != nil {
				t.Fatalf("GET: %d %q %v", code, body, err)
			}
			if n >= 2 && r.workerCounter(0, "gmproxy_handshakes_total", "") > before[0] && r.workerCounter(1, "gmproxy_handshakes_total", "") > before[1] {
				return n
			}
		}
		t.Fatalf("40 connections did not reach both workers")
		return 0
	}
	// lines reads file's lines, each a whole combined-format line.
	lines := func(file string) []string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l == "" {
				continue
			}
			if !strings.HasPrefix(l, "127.0.0.1 - - [") || !strings.Contains(l, `" 200 2 "-" "Go-http-client/1.1"`) {
				t.Errorf("%s: malformed line %q", filepath.Base(file), l)
			}
			out = append(out, l)
		}
		return out
	}
	// count is how many of ls request a path starting with /prefix-.
	count := func(ls []string, prefix string) int {
		n := 0
		for _, l := range ls {
			if strings.Contains(l, `"GET /`+prefix+"-") {
				n++
			}
		}
		return n
	}

	nBefore := requests("before")
	r.waitFor("the access log lines", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Count(string(b), "\n") == nBefore
	})
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	r.cmd.Process.Signal(syscall.SIGUSR1)
	r.waitFor("both workers reopening the access log", func() bool {
		return strings.Count(r.logs.String(), "reopening the access log") == 2
	})
	r.waitFor("the new access log", func() bool { _, err := os.Stat(logFile); return err == nil })
	time.Sleep(200 * time.Millisecond) // each worker logs before it reopens
	nAfter := requests("after")
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	old, now := lines(logFile+".1"), lines(logFile)
	if len(old) != nBefore || count(old, "before") != nBefore {
		t.Errorf("rotated file: %d lines, %d of the %d before the rotation:\n%s", len(old), count(old, "before"), nBefore, strings.Join(old, "\n"))
	}
	if len(now) != nAfter || count(now, "after") != nAfter {
		t.Errorf("new file: %d lines, %d of the %d after the rotation:\n%s", len(now), count(now, "after"), nAfter, strings.Join(now, "\n"))
	}
}

// TestWorkersPerClientLimit: max_connections_per_client bounds a client's
// connections over both workers together (the kernel spreads them over
// the workers; counted by each alone, a client could hold twice the
// limit); the counts of a worker that dies go with it, so its replacement
// does not inherit connections that no longer exist.
func TestWorkersPerClientLimit(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	writeSiteConfig(t, cfgPath, "workers: 2\n", listen, admin, "hi")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "    protocols: [tlcp]\n", "    protocols: [tlcp]\n    max_connections_per_client: 3\n", 1))
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := startWorkerRun(t, cfgPath, admin)
	roots := testRoots(t)

	// open makes connections until n are up or one is refused (reset or
	// closed before its handshake ends); it returns those up.
	type kept struct {
		c  *tlcp.Conn
		br *bufio.Reader
	}
	open := func(n int) []kept {
		t.Helper()
		var up []kept
		for len(up) < n {
			raw, err := net.DialTimeout("tcp", listen, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			c := tlcp.Client(raw, plainTLCP(roots))
			if err := c.Handshake(); err != nil {
				raw.Close()
				return up
			}
			up = append(up, kept{c, bufio.NewReader(c)})
		}
		return up
	}
	// alive reports whether k still gets an answer.
	alive := func(k kept) bool {
		req, _ := http.NewRequest("GET", "https://localhost/", nil)
		if err := req.Write(k.c); err != nil {
			return false
		}
		resp, err := http.ReadResponse(k.br, req)
		if err != nil {
			return false
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	active := func(i int) float64 { return r.workerCounter(i, "gmproxy_connections_active", "") }
	refused := func() float64 {
		return r.workerCounter(0, "gmproxy_connections_refused_total", `reason="max_connections_per_client"`) +
			r.workerCounter(1, "gmproxy_connections_refused_total", `reason="max_connections_per_client"`)
	}

	// Three connections, then refusals, whichever worker is asked: ten
	// tries reach both workers but for a chance of 2⁻⁹.
	up := open(3)
	if len(up) != 3 {
		t.Fatalf("only %d connections of the limit of 3 were served", len(up))
	}
	for i := 0; i < 7; i++ {
		if more := open(1); len(more) != 0 {
			t.Fatalf("connection %d served beyond the limit of 3 (workers hold %v and %v)", 4+i, active(0), active(1))
		}
	}
	if got := refused(); got != 7 {
		t.Errorf("%v refusals counted, want 7", got)
	}

	// Kill a worker that holds some of them: its connections end, and
	// once it is back the client may open as many as it lost.
	victim := 0
	if active(0) == 0 {
		victim = 1
	}
	ws := r.workers()
	syscall.Kill(ws[victim].PID, syscall.SIGKILL)
	r.waitFor("the worker restarted", func() bool {
		ws := r.workers()
		return len(ws) == 2 && ws[victim].PID != ws[1-victim].PID && ws[victim].Restarts == 1 && ws[victim].Ready
	})
	left := 0
	for _, k := range up {
		if alive(k) {
			left++
		}
	}
	if left == 3 {
		t.Fatal("no connection ended with the killed worker")
	}
	more := open(3)
	if len(more) != 3-left {
		t.Errorf("after the worker holding %d of 3 connections died, %d more were served, want %d", 3-left, len(more), 3-left)
	}
	for _, k := range append(up, more...) {
		k.c.Close()
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// TestWorkerRestartAfterRefusedReload: a worker started again after a
// crash runs the configuration the others run, not the file a reload
// refused since (it would fail to start, and after maxQuickDeaths the
// supervisor would stop every worker).
func TestWorkerRestartAfterRefusedReload(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	workersConfig(t, cfgPath, listen, admin, "one")
	r := startWorkerRun(t, cfgPath, admin)
	ws := r.workers()
	if err := os.WriteFile(cfgPath, []byte("workers: 2\nlisteners: [{address: "+listen+"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("reload of a bad file: %d, want 422", res.StatusCode)
	}
	old := ws[0].PID
	syscall.Kill(old, syscall.SIGKILL)
	r.waitFor("worker 0 started again and ready", func() bool {
		ws := r.workers()
		return len(ws) == 2 && ws[0].PID != old && ws[0].Ready
	})
	if code, _ := r.get("/readyz"); code != 200 {
		t.Errorf("/readyz %d after the restart", code)
	}
}

// TestWorkersShutdownKillsHungWorker: a worker that does not stop (here
// stopped with SIGSTOP, as a deadlock would leave it) is killed
// workerKillMargin after the grace period, and gmproxy exits with 1
// instead of waiting for ever. gmproxy runs with a margin of
// hungKillMargin, not the production 10 s, which the test and its
// mutants would otherwise wait each time.
func TestWorkersShutdownKillsHungWorker(t *testing.T) {
	const hungKillMargin = time.Second
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer backend.Close()
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend.Listener.Addr().String(), "300ms", "v1")
	r := startWorkerRun(t, cfgPath, admin, envTestKillMargin+"="+hungKillMargin.String())
	r.hang(0)
	r.cmd.Process.Signal(syscall.SIGTERM)
	// The wait is bounded by exitCode: without the kill, the hung worker
	// keeps the supervisor waiting for good.
	if code := r.exitCode(hungKillMargin + testwait.Bound(10*time.Second)); code != 1 {
		t.Errorf("exit status %d with a hung worker, want 1", code)
	}
	if !strings.Contains(r.logs.String(), "killing it") {
		t.Errorf("the kill is not logged:\n%s", r.logs.String())
	}
}

// TestWorkersHungWorkerReplaced: a worker that stops answering while
// running (here stopped with SIGSTOP) is killed after workerProbeMisses
// probes and started again; the other worker keeps serving, and the
// supervisor is ready again with a new process in its place.
func TestWorkersHungWorkerReplaced(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer backend.Close()
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend.Listener.Addr().String(), "300ms", "v1")
	r := startWorkerRun(t, cfgPath, admin)
	hung := r.hang(0)
	// Bounded by waitFor's 30 s: the kill comes after about
	// workerProbeMisses × (workerProbeInterval + workerProbeTimeout).
	r.waitFor("the hung worker replaced", func() bool {
		ws := r.workers()
		return len(ws) == 2 && ws[0].PID != hung.PID && ws[0].Ready && ws[0].Restarts == hung.Restarts+1
	})
	if code, _ := r.get("/readyz"); code != 200 {
		t.Errorf("/readyz %d after the replacement, want 200", code)
	}
	if !strings.Contains(r.logs.String(), "worker not answering: killing it") {
		t.Errorf("the kill is not logged:\n%s", r.logs.String())
	}
	if err := syscall.Kill(hung.PID, 0); err == nil {
		t.Errorf("the hung worker %d still exists", hung.PID)
	}
}

// TestWorkersReloadAllOrNone: a reload that one worker cannot make (here
// it hangs, and is killed and started again meanwhile) is made by none:
// the other worker, which could, keeps the running configuration too, so
// that every worker serves the same one.
func TestWorkersReloadAllOrNone(t *testing.T) {
	backend := configEchoBackend(t)
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend, "5s", "v1")
	r := startWorkerRun(t, cfgPath, admin)
	hung := r.hang(0)
	writeProxyConfig(t, cfgPath, listen, admin, backend, "5s", "v2")
	res, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("reload with a hung worker: %d %s, want 422", res.StatusCode, body)
	}
	r.waitFor("the hung worker replaced", func() bool {
		ws := r.workers()
		return len(ws) == 2 && ws[0].PID != hung.PID && ws[0].Ready && ws[1].Ready
	})
	// New connections spread over both workers (SO_REUSEPORT): 40 of
	// them miss one worker with odds of 2^-39.
	roots := testRoots(t)
	seen := map[string]int{}
	for range 40 {
		_, read, err := tlcpGet(plainTLCP(roots), listen, "/which")
		if err != nil {
			t.Fatal(err)
		}
		code, b, err := read()
		if err != nil || code != 200 {
			t.Fatalf("GET: %d %q %v", code, b, err)
		}
		seen[strings.TrimSpace(b)]++
	}
	if len(seen) != 1 || seen["config v1"] == 0 {
		t.Errorf("after a refused reload the workers serve %v, want config v1 only", seen)
	}
}

// hang stops worker i with SIGSTOP, as a deadlock would leave it (it is
// killed at the test's end), and returns its status from before.
func (r *workerRun) hang(i int) workerStatus {
	r.t.Helper()
	w := r.workers()[i]
	if err := syscall.Kill(w.PID, syscall.SIGSTOP); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { syscall.Kill(w.PID, syscall.SIGKILL) })
	// kill returns once the signal is queued: Linux wakes one thread of
	// the worker, which stops the others when it runs. On a busy machine
	// (CI's mutation baseline) another thread answered a reload request
	// sent after the kill. The test's next step must find it stopped.
	r.waitFor(fmt.Sprintf("worker %d (pid %d) stopped", i, w.PID), func() bool { return processStopped(w.PID) })
	return w
}

// processStopped reports whether every thread of process pid is stopped
// by a signal (state T in /proc/pid/task/*/stat).
func processStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

// TestWorkersStopWholeGroup: systemd's default KillMode=control-group
// (deploy/systemd/gmproxy.service does not change it) sends SIGTERM to
// every process of the service at once, supervisor and workers alike, as
// a Ctrl-C in a terminal sends SIGINT to the whole process group. That is
// one stop request: in-flight requests must drain and gmproxy exit 0. A
// worker must not take the supervisor's forwarded SIGTERM for a second
// signal and cut every connection.
func TestWorkersStopWholeGroup(t *testing.T) {
	r, _, release, reads := slowRequestsInBothWorkers(t, testRoots(t), "30s")
	ws := r.workers()
	// As systemd's control-group kill: every process of the unit. The
	// workers' own signal goes first and is taken before the supervisor
	// forwards its stop, so that the two cannot merge into one pending
	// signal: the forwarded one always arrives as a second SIGTERM.
	const took = "signal received: graceful shutdown"
	before := strings.Count(r.logs.String(), took)
	for _, w := range ws {
		syscall.Kill(w.PID, syscall.SIGTERM)
	}
	r.waitFor("the workers to take their SIGTERM", func() bool { return strings.Count(r.logs.String(), took) >= before+len(ws) })
	r.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond)
	for range reads {
		select {
		case release <- struct{}{}:
		case <-time.After(testwait.Bound(5 * time.Second)):
		}
	}
	for i, read := range reads {
		if code, body, err := read(); code != 200 || body != "slow done\n" || err != nil {
			t.Errorf("in-flight request %d after one stop request: %d %q %v", i, code, body, err)
		}
	}
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("exit %d after one stop request to the whole group, want 0", code)
	}
}

// TestWorkersStopSignalAfterDrain: a stop sent to the whole group reaches
// a worker twice, from the sender and from the supervisor; a worker with
// nothing to drain may be done with the first when the second comes. It
// must still exit with its drain's status: the signal was Go's default
// (the process ends by it) once run returned, so such a worker died of
// it on its way out, and a clean stop's supervisor exited 1. Each worker
// here waits between run's end and its exit (envTestExitPause) and gets
// a SIGTERM then, deterministically.
func TestWorkersStopSignalAfterDrain(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer backend.Close()
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend.Listener.Addr().String(), "30s", "v1")
	r := startWorkerRun(t, cfgPath, admin, envTestExitPause+"=2s")
	ws := r.workers()
	r.cmd.Process.Signal(syscall.SIGTERM)
	const done = envTestExitPause + ": worker "
	r.waitFor("both workers' drain", func() bool { return strings.Count(r.logs.String(), done) >= len(ws) })
	for _, w := range ws {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
			syscall.Kill(w.PID, sig)
		}
	}
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("exit %d after a clean stop, want 0", code)
	}
	if strings.Contains(r.logs.String(), "exited with status") {
		t.Errorf("a worker's exit was a failure:\n%s", grepLines(r.logs.String(), "exited with status"))
	}
}

// TestWorkersGroupSignalsActOnce: every signal an operator sends to the
// whole process group (kill -- -PGID, systemd's KillMode=control-group)
// reaches the workers beside the supervisor, and must have the outcome it
// has sent to the supervisor alone: SIGHUP one reload of every worker
// together, SIGUSR1 one reopen of each worker's access log (each reopened
// twice: the supervisor passed SIGUSR1 on), SIGUSR2 nothing, as the
// supervisor ignores it (every worker took it for the supervisor's order
// to close every connection, exited and was restarted), and a stop then
// exits 0. The workers' copies go first (for SIGUSR1 once the
// supervisor's was passed on), so that none merges with the supervisor's
// into one pending signal.
func TestWorkersGroupSignalsActOnce(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	writeSiteConfig(t, cfgPath, "workers: 2\nlog: {level: info}\n", listen, admin, "hi")
	r := startWorkerRun(t, cfgPath, admin)
	ws := r.workers()
	group := func(sig syscall.Signal) {
		for _, w := range ws {
			syscall.Kill(w.PID, sig)
		}
		r.cmd.Process.Signal(sig)
	}
	count := func(s string) int { return strings.Count(r.logs.String(), s) }

	group(syscall.SIGHUP)
	r.waitFor("the reload", func() bool {
		return count("reload succeeded in every worker") == 1 && count("SIGHUP ignored") == len(ws)
	})
	_, m := r.get("/metrics")
	if n := sumSeries(t, m, "gmproxy_config_reloads_total", `result="success"`); n != 2 {
		t.Errorf("%v successful loads after one SIGHUP to the group, want 2 (the start's and the reload)", n)
	}
	for i := range ws {
		if n := r.workerCounter(i, "gmproxy_config_reloads_total", `result="success"`); n != 2 {
			t.Errorf("worker %d: %v successful loads after one SIGHUP to the group, want 2", i, n)
		}
	}

	const reopened = "SIGUSR1: reopening the access log"
	// The supervisor's first, and the workers' once it passed it on:
	// a worker's own copy could merge with a forwarded SIGUSR1 pending.
	r.cmd.Process.Signal(syscall.SIGUSR1)
	r.waitFor("the reopen", func() bool { return count(reopened) >= len(ws) })
	for _, w := range ws {
		syscall.Kill(w.PID, syscall.SIGUSR1)
	}
	r.waitFor("the workers' own SIGUSR1", func() bool { return count(reopened) > len(ws) || count("SIGUSR1 ignored") == len(ws) })
	if n := count(reopened); n != len(ws) {
		t.Errorf("%d reopens of the access log after one SIGUSR1 to the group of %d workers, want %d:\n%s", n, len(ws), len(ws), grepLines(r.logs.String(), "SIGUSR1"))
	}

	group(syscall.SIGUSR2)
	r.waitFor("the workers' SIGUSR2", func() bool { return count("SIGUSR2 ignored") == len(ws) || count("worker died") > 0 })
	if got := r.workers(); len(got) != len(ws) || got[0].PID != ws[0].PID || got[1].PID != ws[1].PID || strings.Contains(r.logs.String(), "worker died") {
		t.Errorf("workers %+v after SIGUSR2 to the group, want %+v still running:\n%s", got, ws, grepLines(r.logs.String(), "worker"))
	}

	group(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("exit %d after one stop request to the group, want 0", code)
	}
}

// TestWorkersRefusePortTakenByAnother: the workers listen with
// SO_REUSEPORT, which the kernel also grants to any other process of the
// same user that sets it: a second gmproxy started by mistake on a port
// the service serves (another configuration, a test run) would start and
// silently take a share of its connections. Like a single process, a
// supervisor whose listener's port is already taken does not start.
func TestWorkersRefusePortTakenByAnother(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	other, err := listenReusePort(listen) // another gmproxy's worker
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	workersConfig(t, cfgPath, listen, admin, "w")
	r := &workerRun{t: t, admin: admin, exited: make(chan struct{}), hc: &http.Client{Timeout: 20 * time.Second}}
	r.cmd = startGmproxy(t, &r.logs, cfgPath)
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			r.workers()
			r.cmd.Process.Kill()
			<-r.exited
			for _, pid := range r.pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("gmproxy output:\n%s", r.logs.String())
		}
	})
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 1 {
		t.Fatalf("exit status %d, want 1", code)
	}
	if out := r.logs.String(); !strings.Contains(out, "address already in use") || !strings.Contains(out, listen) {
		t.Errorf("no word of the taken port %s:\n%s", listen, out)
	}
}

// TestWorkersReloadRefusesPortTakenByAnother: a reload that adds a
// listener on a port another process holds with SO_REUSEPORT is refused,
// as in a single process, rather than having the workers share that
// process's port.
func TestWorkersReloadRefusesPortTakenByAnother(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	workersConfig(t, cfgPath, listen, admin, "w")
	r := startWorkerRun(t, cfgPath, admin)
	taken := freePort(t)
	other, err := listenReusePort(taken) // another gmproxy's worker
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	workersConfig(t, cfgPath, listen+"\n    protocols: [tlcp]\n  - address: "+taken, admin, "w")
	res, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK || !strings.Contains(string(body), "address already in use") {
		t.Errorf("reload adding a listener on %s, held by another process: %d %s, want a refusal", taken, res.StatusCode, body)
	}
	// No worker holds the port: once the other process lets it go, a
	// socket without SO_REUSEPORT gets it.
	other.Close()
	ln, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatalf("a worker kept %s: %v", taken, err)
	}
	ln.Close()
}

// TestWorkersRefusedReloadInMetrics: a reload the supervisor refuses
// before asking any worker (a file that does not parse, the commonest
// refusal) shows in the merged /metrics as one refused by a single
// process does: gmproxy_config_last_reload_successful 0 and one more
// gmproxy_config_reloads_total{result="failure"}; the next reload that
// works sets it back to 1.
func TestWorkersRefusedReloadInMetrics(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	workersConfig(t, cfgPath, listen, admin, "w")
	r := startWorkerRun(t, cfgPath, admin)
	reload := func() int {
		t.Helper()
		res, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	scrape := func() (ok, successes, failures float64) {
		t.Helper()
		code, body := r.get("/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		return sumSeries(t, body, "gmproxy_config_last_reload_successful", ""),
			sumSeries(t, body, "gmproxy_config_reloads_total", `result="success"`),
			sumSeries(t, body, "gmproxy_config_reloads_total", `result="failure"`)
	}
	// The start counts one success, as in a single process (not one per
	// worker).
	if ok, successes, failures := scrape(); ok != 1 || successes != 1 || failures != 0 {
		t.Fatalf("at start: last_reload_successful %v, successes %v, failures %v; want 1, 1, 0", ok, successes, failures)
	}
	if err := os.WriteFile(cfgPath, []byte("listeners: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := reload(); code == http.StatusOK {
		t.Fatal("a file that does not parse reloaded")
	}
	if ok, successes, failures := scrape(); ok != 0 || successes != 1 || failures != 1 {
		t.Errorf("after a refused reload: last_reload_successful %v, successes %v, failures %v; want 0, 1, 1", ok, successes, failures)
	}
	workersConfig(t, cfgPath, listen, admin, "w2")
	if code := reload(); code != http.StatusOK {
		t.Fatalf("reload: %d", code)
	}
	if ok, successes, failures := scrape(); ok != 1 || successes != 2 || failures != 1 {
		t.Errorf("after a reload that worked: last_reload_successful %v, successes %v, failures %v; want 1, 2, 1", ok, successes, failures)
	}
	lastSuccess := func() float64 {
		t.Helper()
		_, body := r.get("/metrics")
		return sumSeries(t, body, "gmproxy_config_last_reload_success_timestamp_seconds", "")
	}
	reloadedAt := lastSuccess()
	if reloadedAt == 0 {
		t.Fatal("no gmproxy_config_last_reload_success_timestamp_seconds after a reload that worked")
	}
	// A worker started again after a crash is no reload.
	old := r.workers()[0].PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.waitFor("worker 0 started again and ready", func() bool {
		ws := r.workers()
		return ws[0].PID != old && ws[0].Ready
	})
	if ok, successes, failures := scrape(); ok != 1 || successes != 2 || failures != 1 {
		t.Errorf("after a worker was started again: last_reload_successful %v, successes %v, failures %v; want 1, 2, 1", ok, successes, failures)
	}
	if at := lastSuccess(); at != reloadedAt {
		t.Errorf("after a worker was started again: last_reload_success_timestamp_seconds %v, want the reload's %v", at, reloadedAt)
	}
}

// TestWorkersDeathSeenDuringReload: a worker that dies while a reload
// waits on another (hung) worker is seen at once, not when the reload ends
// (up to workerReloadTimeout later): its death is handled (logged, its
// clients no longer counted against the others' per-client limits), and it
// is started again once the reload ends.
func TestWorkersDeathSeenDuringReload(t *testing.T) {
	backend := configEchoBackend(t)
	cfgPath, listen, admin := workersTestPaths(t)
	writeProxyConfig(t, cfgPath, listen, admin, backend, "5s", "v1")
	r := startWorkerRun(t, cfgPath, admin)
	hung := r.hang(0)
	victim := r.workers()[1]
	writeProxyConfig(t, cfgPath, listen, admin, backend, "5s", "v2")
	reloaded := make(chan int, 1)
	go func() {
		res, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
		if err != nil {
			reloaded <- 0
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		reloaded <- res.StatusCode
	}()
	r.waitFor("the reload waiting on the hung worker", func() bool {
		return strings.Contains(r.logs.String(), "reloading configuration in every worker")
	})
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	died := fmt.Sprintf(`msg="worker died: restarting it" worker=1 pid=%d `, victim.PID)
	r.waitFor("worker 1's death seen", func() bool { return strings.Contains(r.logs.String(), died) })
	select {
	case code := <-reloaded:
		t.Fatalf("the death was seen only after the reload ended (%d): the hung worker is killed by the watchdog after several seconds", code)
	default:
	}
	select {
	case <-reloaded:
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("the reload never answered")
	}
	r.waitFor("both workers replaced and ready", func() bool {
		ws := r.workers()
		return len(ws) == 2 && ws[0].PID != hung.PID && ws[1].PID != victim.PID && ws[0].Ready && ws[1].Ready
	})
}

// TestWorkersRateLimit: a route's rate_limit bounds a client over both
// workers together (the kernel spreads its connections over them; counted
// by each alone, it could send twice the burst).
func TestWorkersRateLimit(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	writeConfig(t, cfgPath, "workers: 2\n", listen, admin, "[{respond: {status: 200, body: hi}, rate_limit: {rate: 1/h, burst: 4}}]", "shutdown_grace: 5s\n")
	r := startWorkerRun(t, cfgPath, admin)
	roots := testRoots(t)
	codes := map[int]int{}
	for range 20 {
		_, read, err := tlcpGet(plainTLCP(roots), listen, "/")
		if err != nil {
			t.Fatal(err)
		}
		code, _, err := read()
		if err != nil {
			t.Fatal(err)
		}
		codes[code]++
	}
	served := func(i int) float64 { return r.workerCounter(i, "gmproxy_http_requests_total", "") }
	// Twenty connections reach both workers but for a chance of 2⁻¹⁹.
	if served(0) == 0 || served(1) == 0 {
		t.Fatalf("one worker served every request (%v and %v): the test shows nothing", served(0), served(1))
	}
	if codes[200] != 5 || codes[429] != 15 {
		t.Fatalf("answers %v over both workers, want 5 × 200 (1 + burst) and 15 × 429", codes)
	}
}

// TestQuitIsGracefulShutdown: nginx and Tengine take SIGQUIT for their
// graceful shutdown (`nginx -s quit`; the unit files of their packages
// stop with it, KillSignal=SIGQUIT), and a migrated unit or script sends
// it to gmproxy. It is a stop request like SIGTERM: in-flight requests
// drain and gmproxy exits 0, one process or a supervisor and its workers
// alike, also when it reaches every process of the service
// (KillMode=control-group). Not handled, Go's default for it ends the
// process at once with a dump of every goroutine (exit status 2),
// cutting every connection.
func TestQuitIsGracefulShutdown(t *testing.T) {
	roots := testRoots(t)
	t.Run("workers", func(t *testing.T) {
		r, _, release, reads := slowRequestsInBothWorkers(t, roots, "30s")
		// Every process of the group, the workers first (as in
		// TestWorkersStopWholeGroup), so that the supervisor's
		// forwarded SIGTERM always comes second to a worker.
		const took = "signal received: graceful shutdown"
		before := strings.Count(r.logs.String(), took)
		ws := r.workers()
		for _, w := range ws {
			syscall.Kill(w.PID, syscall.SIGQUIT)
		}
		r.waitFor("the workers to take their SIGQUIT", func() bool { return strings.Count(r.logs.String(), took) >= before+len(ws) })
		r.cmd.Process.Signal(syscall.SIGQUIT)
		r.waitFor("the supervisor's graceful shutdown", func() bool { return strings.Contains(r.logs.String(), "graceful shutdown of every worker") })
		for range reads {
			select {
			case release <- struct{}{}:
			case <-time.After(testwait.Bound(5 * time.Second)):
			}
		}
		for i, read := range reads {
			if code, body, err := read(); code != 200 || body != "slow done\n" || err != nil {
				t.Errorf("in-flight request %d after SIGQUIT: %d %q %v", i, code, body, err)
			}
		}
		if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
			t.Errorf("exit %d after SIGQUIT, want 0 (drained)", code)
		}
	})
	t.Run("single", func(t *testing.T) {
		started := make(chan struct{}, 4)
		release := make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started <- struct{}{}
			<-release
			io.WriteString(w, "slow done\n")
		}))
		defer backend.Close()
		defer unblock() // before the backend's Close, which waits for its handlers
		cfgPath, listen, admin := workersTestPaths(t)
		routes := "[{path_prefix: /, upstream: app}]"
		writeConfig(t, cfgPath, "workers: 1\n", listen, admin, routes,
			fmt.Sprintf("upstreams: [{name: app, targets: [%s]}]\nshutdown_grace: 30s\n", backend.Listener.Addr()))
		r := &workerRun{t: t, admin: admin, exited: make(chan struct{}), hc: &http.Client{Timeout: 20 * time.Second}}
		r.cmd = startGmproxy(t, &r.logs, cfgPath)
		go func() { r.err = r.cmd.Wait(); close(r.exited) }()
		t.Cleanup(func() {
			select {
			case <-r.exited:
			default:
				r.cmd.Process.Kill()
				<-r.exited
			}
			if t.Failed() {
				t.Logf("gmproxy output:\n%s", r.logs.String())
			}
		})
		r.waitFor("readiness", func() bool { code, _ := r.get("/readyz"); return code == 200 })
		_, read, err := tlcpGet(plainTLCP(roots), listen, "/slow")
		if err != nil {
			t.Fatal(err)
		}
		<-started
		r.cmd.Process.Signal(syscall.SIGQUIT)
		r.waitFor("the graceful shutdown", func() bool { return strings.Contains(r.logs.String(), "graceful shutdown") })
		unblock()
		if code, body, err := read(); code != 200 || body != "slow done\n" || err != nil {
			t.Errorf("in-flight request after SIGQUIT: %d %q %v", code, body, err)
		}
		if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
			t.Errorf("exit %d after SIGQUIT, want 0 (drained)", code)
		}
	})
}

// TestRestartedWorkerRunsSupervisorsBinary: a worker started again after
// a crash runs the supervisor's own program, not whatever file is at its
// path now. A package upgrade replaces that file (renames a new one over
// it) while gmproxy runs: a worker restarted from the path ran the new
// version beside workers of the old one, mapping tables and answering
// reload steps of the old one's making (nginx's workers are forks of
// their master: a new binary runs only after a restart or an explicit
// upgrade); a file removed left the worker dead for good.
func TestRestartedWorkerRunsSupervisorsBinary(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	workersConfig(t, cfgPath, listen, admin, "w")
	dir := t.TempDir()
	exe := filepath.Join(dir, "gmproxy")
	src, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, src, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newWorkerRun(t, admin)
	r.cmd = exec.Command(exe, "run", "-c", cfgPath)
	r.cmd.Args[0] = "gmproxy" // as a shell found it on PATH
	r.cmd.Env = append(os.Environ(), envTestMain+"=1", "TMPDIR="+t.TempDir())
	r.cmd.Stdout, r.cmd.Stderr = &r.logs, &r.logs
	r.cmd.WaitDelay = 10 * time.Second
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.watch()
	ws := r.workers()
	if len(ws) != 2 {
		t.Fatalf("workers: %+v, want 2", ws)
	}
	// The upgrade: another program renamed over the supervisor's file.
	next := filepath.Join(dir, "gmproxy.new")
	if err := os.WriteFile(next, []byte("#!/bin/sh\necho another gmproxy version >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, exe); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(ws[0].PID, syscall.SIGKILL)
	r.waitFor("worker 0 started again and ready", func() bool {
		now := r.workers()
		return len(now) == 2 && now[0].PID != ws[0].PID && now[0].Ready
	})
	if strings.Contains(r.logs.String(), "another gmproxy version") {
		t.Errorf("a worker was started from the file now at the supervisor's path")
	}
	if !strings.Contains(r.logs.String(), "no longer the program running") {
		t.Errorf("no word that the file at gmproxy's path changed")
	}
	// ps shows the worker started from /proc/self/exe as the supervisor
	// is shown (its argv[0] and its name), not as "exe".
	now := r.workers()
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", now[0].PID)); err != nil {
		t.Error(err)
	} else if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 != "gmproxy" {
		t.Errorf("the restarted worker's argv[0] is %q, want the supervisor's gmproxy", argv0)
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", now[0].PID)); err != nil {
		t.Error(err)
	} else if got := strings.TrimSpace(string(comm)); got != "gmproxy" {
		t.Errorf("the restarted worker is named %q (/proc/PID/comm), want gmproxy", got)
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
}
