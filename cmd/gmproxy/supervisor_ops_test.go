package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/clientshare"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/metrics"
)

// TestWorkersTakeKeyPasswordFromEnv: a site whose encrypted keys take
// their password from key_password_env starts in worker mode, as with
// workers: 1. The supervisor reads the configuration first, which removes
// the variable from its environment; the workers get the password from
// it. With admin.pprof, a worker's profiles are served through the
// supervisor under /workers/N/debug/pprof/.
func TestWorkersTakeKeyPasswordFromEnv(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	pki, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "pki-tongsuo"))
	y := fmt.Sprintf(`workers: 2
listeners:
  - address: %[1]s
    protocols: [tlcp]
sites:
  - name: s
    server_names: [localhost]
    tlcp:
      sign_cert: %[3]s/server_sign.crt
      sign_key: %[3]s/server_sign.gmssl.key.pem
      enc_cert: %[3]s/server_enc.crt
      enc_key: %[3]s/server_enc.gmssl.key.pem
      key_password_env: GMPROXY_TEST_KEY_PW
    routes: [{respond: {status: 200, body: ok}}]
admin:
  address: %[2]s
  pprof: true
access_log: {path: "off"}
shutdown_grace: 2s
`, listen, admin, pki)
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd := startGmproxy(t, &logs, cfgPath, "GMPROXY_TEST_KEY_PW=P@ssw0rd")
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second}
	ready := false
	for deadline := time.Now().Add(testwait.Bound(30 * time.Second)); !ready && time.Now().Before(deadline); {
		select {
		case <-exited:
			t.Fatalf("gmproxy (workers: 2) with key_password_env exited (%v) instead of serving:\n%s", werr, lastLines(logs.String(), 8))
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := hc.Get("http://" + admin + "/readyz"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == 200
		}
	}
	if !ready {
		t.Fatalf("gmproxy not ready in 30 s:\n%s", lastLines(logs.String(), 8))
	}
	for _, path := range []string{"/debug/pprof/cmdline", "/workers/1/debug/pprof/cmdline"} {
		resp, err := hc.Get("http://" + admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "run") {
			t.Errorf("GET %s with admin.pprof: %d %q, want 200 and the command line", path, resp.StatusCode, b)
		}
	}
	resp, err := hc.Get("http://" + admin + "/workers/1/debug/pprof/profile?seconds=100000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a worker profile of 100000 s: %d, want 400", resp.StatusCode)
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestSupervisorPprofOnlyWhenOn: the supervisor's admin listener serves
// /debug/pprof/ while the admin.pprof in force is on, and not otherwise:
// a reload that turns it on or off applies at once.
func TestSupervisorPprofOnlyWhenOn(t *testing.T) {
	cfg := conf.Default()
	cfg.Admin.Address = "127.0.0.1:9100"
	s := &supervisor{n: 2}
	mux := s.adminMux(cfg, nil)
	for _, on := range []bool{false, true, false} {
		cfg.Admin.Pprof = on
		s.admin.set(cfg.Admin)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9100/debug/pprof/", nil))
		if want := map[bool]int{false: 404, true: 200}[on]; rec.Code != want {
			t.Errorf("GET /debug/pprof/ with admin.pprof %v: %d, want %d", on, rec.Code, want)
		}
	}
}

// TestRetiredSeriesFollowReload: the sums the supervisor keeps of dead
// workers lose the series of a site a reload removed, as the live
// workers' own do, and keep the others.
func TestRetiredSeriesFollowReload(t *testing.T) {
	old := `# TYPE gmproxy_http_requests_total counter
gmproxy_http_requests_total{site="old",route="/",method="GET",code="2xx"} 5
gmproxy_http_requests_total{site="kept",route="/",method="GET",code="2xx"} 1
`
	after := `# TYPE gmproxy_http_requests_total counter
gmproxy_http_requests_total{site="kept",route="/",method="GET",code="2xx"} 3
`
	parse := func(s string) map[string]*dto.MetricFamily {
		f, err := parseMetrics(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var c cumulative
	a, b := &workerProc{index: 0}, &workerProc{index: 1}
	c.update([]*workerProc{a, b}, []map[string]*dto.MetricFamily{parse(old), parse(old)})
	// Worker a dies and is replaced; its counts are kept.
	a2 := &workerProc{index: 0}
	c.update([]*workerProc{a2, b}, []map[string]*dto.MetricFamily{parse(after), parse(old)})
	// A reload removes site "old".
	c.retain(nil, metrics.ConfigNames{Sites: []string{"kept"}, Routes: []string{"/"}})
	var sb strings.Builder
	writeFamilies(&sb, mergeFamilies(c.update([]*workerProc{a2, b}, []map[string]*dto.MetricFamily{parse(after), parse(after)})))
	got := sb.String()
	if strings.Contains(got, `site="old"`) {
		t.Errorf("a site removed by a reload still exported by the supervisor:\n%s", got)
	}
	// kept: 3 + 3 from the live workers, 1 from the dead one.
	if !strings.Contains(got, `gmproxy_http_requests_total{site="kept",route="/",method="GET",code="2xx"} 7`) {
		t.Errorf("the kept site's sum lost the dead worker's count:\n%s", got)
	}
}

// TestDeadWorkerCountsClearedAtDeath: a worker that dies has no
// connections left: its per-client counts leave the shared table when its
// death is seen, not when its replacement starts (up to restartMax later),
// so other workers do not refuse a client for connections that are gone.
func TestDeadWorkerCountsClearedAtDeath(t *testing.T) {
	if !clientshare.Supported {
		t.Skip("no shared client table here")
	}
	f, err := clientshare.Create(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := clientshare.Map(f)
	if err != nil {
		t.Fatal(err)
	}
	w0, _ := tab.Worker(0)
	w1, _ := tab.Worker(1)
	client := netip.MustParseAddr("192.0.2.7")
	if _, v := w0.Admit("l", client, 1, 0); v != clientshare.Admitted {
		t.Fatalf("first admit: %v", v)
	}
	if _, v := w1.Admit("l", client, 1, 0); v != clientshare.TooManyConns {
		t.Fatalf("second connection of a client with max 1 on another worker: %v, want refused", v)
	}
	dead := &workerProc{index: 0, cmd: &exec.Cmd{Process: &os.Process{Pid: 1}}, started: time.Now().Add(-time.Hour), exited: make(chan struct{})}
	close(dead.exited)
	rates := &clearRecorder{}
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), clientsTable: tab, ratesTable: rates, procs: []*workerProc{dead, {index: 1}}}
	var due time.Duration
	if !s.died(dead, func(i int, after time.Duration) { due = after }) {
		t.Fatal("supervisor gave up")
	}
	if !slices.Equal(rates.cleared, []int{0}) {
		t.Errorf("rate_limit buckets released for workers %v at worker 0's death, want [0] (a bucket it held locked stays busy for every worker)", rates.cleared)
	}
	// Also while the others drain at a stop.
	stopping := &clearRecorder{}
	s = &supervisor{log: s.log, ratesTable: stopping, procs: []*workerProc{dead, {index: 1}}, stopping: true}
	s.died(dead, func(int, time.Duration) { t.Error("a worker restarted during a stop") })
	if !slices.Equal(stopping.cleared, []int{0}) {
		t.Errorf("rate_limit buckets released for workers %v at a death during a stop, want [0]", stopping.cleared)
	}
	if _, v := w1.Admit("l", client, 1, 0); v != clientshare.Admitted {
		t.Fatalf("after worker 0 died (restart due in %v), worker 1 refuses the client (%v): the dead worker's connection still counts", due, v)
	}
}

// TestWorkersReloadDropsRetiredSeries: the supervisor's /metrics keeps a
// dead worker's counts (totals do not go down), but a reload that removes
// a route drops that route's series from them too, as the live workers
// drop their own.
func TestWorkersReloadDropsRetiredSeries(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	writeConfig(t, cfgPath, "workers: 2\n", listen, admin, "[{name: gone, path_prefix: /, respond: {status: 200, body: a}}]", "shutdown_grace: 5s\n")
	r := startWorkerRun(t, cfgPath, admin)
	roots := testRoots(t)
	for i := 0; r.workerCounter(0, "gmproxy_http_requests_total", `route="gone"`) == 0; i++ {
		if i == 40 {
			t.Fatal("40 requests, none served by worker 0")
		}
		_, read, err := tlcpGet(plainTLCP(roots), listen, "/")
		if err != nil {
			t.Fatal(err)
		}
		if code, _, err := read(); err != nil || code != 200 {
			t.Fatalf("GET /: %d %v", code, err)
		}
	}
	merged := func() string {
		code, body := r.get("/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		return body
	}
	merged() // the supervisor sees worker 0's count
	old := r.workers()[0].PID
	syscall.Kill(old, syscall.SIGKILL)
	r.waitFor("worker 0 started again and ready", func() bool {
		ws := r.workers()
		return len(ws) == 2 && ws[0].PID != old && ws[0].Ready
	})
	if !strings.Contains(merged(), `route="gone"`) {
		t.Fatal("the dead worker's requests of route gone are not in the supervisor's /metrics")
	}
	writeConfig(t, cfgPath, "workers: 2\n", listen, admin, "[{name: kept, path_prefix: /, respond: {status: 200, body: b}}]", "shutdown_grace: 5s\n")
	res, err := r.hc.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("reload: %d", res.StatusCode)
	}
	if m := merged(); strings.Contains(m, `route="gone"`) {
		t.Errorf("route gone, removed by the reload, still in the supervisor's /metrics:\n%s", grepLines(m, `route="gone"`))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWorkerAnswerTooLong: an answer from a worker longer than
// maxWorkerAnswer is refused, not cut and taken for a whole one (a cut
// metrics text would be summed as if complete).
func TestWorkerAnswerTooLong(t *testing.T) {
	defer func(n int) { maxWorkerAnswer = n }(maxWorkerAnswer)
	maxWorkerAnswer = 1000
	s := sleeperSupervisor(t)
	ln, err := net.Listen("unix", workerSocket(s.dir, 0))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Write(bytes.Repeat([]byte("x"), n))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	for _, tc := range []struct {
		n  int
		ok bool
	}{{999, true}, {1000, true}, {1001, false}, {100000, false}} {
		body, err := s.call(t.Context(), 0, http.MethodGet, "/metrics?n="+strconv.Itoa(tc.n), 10*time.Second)
		if tc.ok && (err != nil || len(body) != tc.n) {
			t.Errorf("answer of %d bytes: %d bytes, %v", tc.n, len(body), err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "longer than 1000 bytes")) {
			t.Errorf("answer of %d bytes: %d bytes, error %v, want refused", tc.n, len(body), err)
		}
	}
}

// TestWorkerFailingStartGivesUp: a worker that never gets ready (its start
// hangs until the supervisor kills it after startTimeout, longer than
// restartReset) is a failed start every time: after maxQuickDeaths of them
// the supervisor gives up, as for workers that crash at once, instead of
// restarting it for ever with /readyz 503. A worker that served and ran
// past restartReset starts the count over. While another worker serves,
// the supervisor does not give up (stopping it would make one worker's
// fault, such as a certificate file broken on disk that only a worker
// started again reads, an outage): it retries every restartMax.
func TestWorkerFailingStartGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name        string
		served      bool
		otherServes bool
		want        bool
	}{
		{"never ready", false, false, false},
		{"never ready, the other worker not ready either", false, false, false},
		{"served for an hour", true, false, true},
		{"never ready, the other worker serving", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dead := &workerProc{index: 0, cmd: &exec.Cmd{Process: &os.Process{Pid: 1}}, started: time.Now().Add(-time.Hour),
				exited: make(chan struct{}), quick: maxQuickDeaths - 1, served: tc.served}
			close(dead.exited)
			other := &workerProc{index: 1, ready: tc.otherServes, served: true}
			s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), procs: []*workerProc{dead, other}}
			after := time.Duration(-1)
			if got := s.died(dead, func(_ int, d time.Duration) { after = d }); got != tc.want {
				t.Errorf("after %d deaths in a row, the last an hour after its start: restarts %v, want %v", maxQuickDeaths, got, tc.want)
			}
			if tc.want && !tc.served && after != restartMax {
				t.Errorf("a worker that keeps dying while another serves restarted after %v, want restartMax (%v)", after, restartMax)
			}
		})
	}
}

// TestGiveUpDuringReloadAbandonsIt: the death after which the supervisor
// gives up, seen while a reload waits on a worker hung in it, abandons the
// reload at once (its calls to the workers cut, the request answered) and
// stops with status 1, rather than waiting up to workerReloadTimeout for
// the hung worker.
func TestGiveUpDuringReloadAbandonsIt(t *testing.T) {
	dead := &workerProc{index: 0, cmd: &exec.Cmd{Process: &os.Process{Pid: 1}}, started: time.Now(),
		exited: make(chan struct{}), quick: maxQuickDeaths - 1}
	close(dead.exited)
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), procs: []*workerProc{dead}}
	s.reloadCtx, s.abandonReloads = context.WithCancel(context.Background())
	reload := func() error {
		select {
		case <-s.reloadCtx.Done(): // what s.call does with it
			return s.reloadCtx.Err()
		case <-time.After(testwait.Bound(10 * time.Second)):
			return errors.New("the reload was never abandoned")
		}
	}
	exits := make(chan workerExit, 1)
	exits <- workerExit{p: dead}
	res := make(chan error, 1)
	asked := askReload(res)
	code, stop := s.reloading([]os.Signal{asked}, make(chan os.Signal), reload, exits, func(int, time.Duration) {})
	if code != 1 || !stop {
		t.Errorf("reloading returned %d, %v: want 1, true (given up)", code, stop)
	}
	if err := <-res; !errors.Is(err, errReloadAbandoned) {
		t.Errorf("the reload request got %v, want %v", err, errReloadAbandoned)
	}
}

// clearRecorder records the workers a table was told to clear.
type clearRecorder struct{ cleared []int }

func (c *clearRecorder) ClearWorker(w int) { c.cleared = append(c.cleared, w) }

// TestWorkerKeepsDyingBacksOff: a worker that keeps dying while another
// serves is retried every restartMax however many times it died: the
// doubling of restartMin, which went on past maxQuickDeaths once the
// supervisor no longer gave up there, overflowed after some 40 deaths
// (about 6 minutes of them) into a delay of zero or less, restarting the
// worker at once, for ever: processes started back to back and a log
// line each.
func TestWorkerKeepsDyingBacksOff(t *testing.T) {
	dead := &workerProc{index: 0, cmd: &exec.Cmd{Process: &os.Process{Pid: 1}}, started: time.Now(), exited: make(chan struct{})}
	close(dead.exited)
	other := &workerProc{index: 1, ready: true, served: true}
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), procs: []*workerProc{dead, other}}
	for n := 1; n <= 200; n++ {
		after := time.Duration(-1)
		if !s.died(dead, func(_ int, d time.Duration) { after = d }) {
			t.Fatalf("death %d, another worker serving: gave up", n)
		}
		if after < restartMin || after > restartMax || n > maxQuickDeaths && after != restartMax {
			t.Fatalf("death %d in a row, another worker serving: restarted after %v, want between restartMin and restartMax, restartMax after %d deaths", n, after, maxQuickDeaths)
		}
	}
}

// TestReloadChecksHeldPortOnOtherIP: a reload that adds an address on a
// port the workers hold on another IP is checked as at start: the workers'
// SO_REUSEPORT bind would otherwise succeed beside another program of the
// same user that holds that IP and port (a second gmproxy), and take a
// share of its connections. A wildcard on a held port, or the same IP
// written another way, is still the workers' own.
func TestReloadChecksHeldPortOnOtherIP(t *testing.T) {
	running := []string{"127.0.0.1:8443", ":9443"}
	next := []string{"127.0.0.1:8443", "localhost:8443", "0.0.0.0:8443", ":8443", "10.0.0.2:8443", "10.0.0.2:9443", "127.0.0.1:7443"}
	got := newPorts(running, next)
	want := []string{"10.0.0.2:8443", "127.0.0.1:7443"}
	if !slices.Equal(got, want) {
		t.Fatalf("newPorts(%q, %q) = %q, want %q", running, next, got, want)
	}
}

// TestSupervisorRefusesPortZero: workers left unset start one per CPU,
// which conf cannot refuse port 0 for: the supervisor does, rather than
// have each worker listen on a port the kernel chose for it alone.
func TestSupervisorRefusesPortZero(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	cfg := &conf.Config{Listeners: []conf.Listener{{Address: "127.0.0.1:8443"}, {Address: "127.0.0.1:0"}}}
	s, err := newSupervisor("gmproxy.yaml", nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err == nil {
		os.RemoveAll(s.dir)
		t.Fatal("supervisor made for a listener on port 0")
	}
	if msg := err.Error(); !strings.Contains(msg, "gmproxy.yaml: listeners[1].address 127.0.0.1:0") || !strings.Contains(msg, "set workers: 1") {
		t.Errorf("error %q: want the file, the listener and the fix", msg)
	}
	// Nor is such a listener added by a reload.
	rs, data, _ := reloadTestSupervisor(t)
	writeConfig(t, rs.file, "", "127.0.0.1:0", "127.0.0.1:2", "[{respond: {status: 200}}]", "")
	if _, err := rs.reload(); err == nil || !strings.Contains(err.Error(), "listeners[0].address 127.0.0.1:0: port 0") {
		t.Errorf("reload to a listener on port 0: %v, want it refused", err)
	}
	if b, _ := os.ReadFile(filepath.Join(rs.dir, workerConfigFile)); string(b) != string(data) {
		t.Errorf("the workers' copy of the configuration changed by a refused reload")
	}
}

// TestStaleWorkerDirsRemoved: a supervisor killed (SIGKILL, a crash) left
// its private folder, with the ticket wrap key, in the temporary folder
// for good. A later start removes such a folder once its supervisor is
// provably gone, and keeps a live one's: one whose lock is held (a
// supervisor in another PID namespace sharing the folder), one whose
// PID runs this program (a supervisor not yet locked), another user's,
// and a folder of another naming.
func TestStaleWorkerDirsRemoved(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(done.Process.Pid)
	// A live process of this program's name (/proc/PID/comm): sleep
	// copied under the test binary's name.
	src, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip("no /bin/sleep")
	}
	named := filepath.Join(t.TempDir(), filepath.Base(os.Args[0]))
	if err := os.WriteFile(named, src, 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command(named, "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	live := strconv.Itoa(sleeper.Process.Pid)
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, wrapKeyFile), []byte("k"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk(workerDirPrefix + dead + "-1")
	locked := mk(workerDirPrefix + dead + "-2")
	lf, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	starting := mk(workerDirPrefix + live + "-3")
	other := mk(workerDirPrefix + dead + "-4")
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Skip("cannot give a folder to another user:", err)
	}
	if os.Getuid() != 0 {
		t.Skip("another user's folder needs root")
	}
	foreign := mk("other-" + dead + "-5")

	first, err := newSupervisor("gmproxy.yaml", nil, &conf.Config{Workers: "2"}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer first.removeDir()
	s, err := newSupervisor("gmproxy.yaml", nil, &conf.Config{Workers: "2"}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.removeDir()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folder of a supervisor gone is still there (%v)", err)
	}
	for what, dir := range map[string]string{"locked": locked, "of a live supervisor not yet locked": starting, "of another user": other, "of another naming": foreign, "of a running supervisor": first.dir} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the folder %s was removed: %v", what, err)
		}
	}
}

// TestLongTmpdirRefused: under a TMPDIR of more than about 60 characters
// the workers' admin sockets had paths longer than a Unix socket's 107
// bytes, and the workers failed their start with only a bind error
// (invalid argument). The supervisor refuses it at start, naming TMPDIR,
// the limit and the fix, and leaves no folder in it.
func TestLongTmpdirRefused(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	base := t.TempDir()
	long := filepath.Join(base, strings.Repeat("t", 100-len(base)))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	s, err := newSupervisor("gmproxy.yaml", nil, &conf.Config{Workers: "2"}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err == nil {
		s.removeDir()
		t.Fatalf("supervisor made under a TMPDIR of %d characters", len(long))
	}
	if msg := err.Error(); !strings.Contains(msg, "TMPDIR") || !strings.Contains(msg, "107") || !strings.Contains(msg, "set TMPDIR") {
		t.Errorf("error %q: want TMPDIR, the limit and the fix", msg)
	}
	if left, _ := os.ReadDir(long); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
	// A TMPDIR short enough works.
	t.Setenv("TMPDIR", base)
	s, err = newSupervisor("gmproxy.yaml", nil, &conf.Config{Workers: "2"}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s.removeDir()
}
