package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore/shmstore"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// envTestMain makes the test binary act as gmproxy (TestWorkers runs it as
// the supervisor, which re-executes it as the workers; see TestMain).
const envTestMain = "GMPROXY_TEST_AS_MAIN"

// envTestKillMargin, with envTestMain, sets the supervisor's
// workerKillMargin (a duration): the test of the kill of a hung worker
// need not wait the production margin.
const envTestKillMargin = "GMPROXY_TEST_KILL_MARGIN"

// envTestExitPause, with envTestMain, makes a worker wait that long (a
// duration) between the end of its gmproxy run and its exit, after it
// printed "GMPROXY_TEST_EXIT_PAUSE: worker N done" on stderr.
const envTestExitPause = "GMPROXY_TEST_EXIT_PAUSE"

// lockedBuffer collects a child's output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// workersConfig writes a TLCP site answering body, served by 2 workers.
func workersConfig(t *testing.T, path, listen, admin, body string) {
	t.Helper()
	writeSiteConfig(t, path, "workers: 2\n", listen, admin, body)
}

// writeSiteConfig writes a TLCP site answering body, with the top-level
// settings head.
func writeSiteConfig(t *testing.T, path, head, listen, admin, body string) {
	t.Helper()
	writeConfig(t, path, head, listen, admin, "[{respond: {status: 200, body: "+body+"}}]", "shutdown_grace: 5s\n")
}

// writeConfig writes a TLCP site on listen with routes (a YAML flow
// list), the top-level settings head before and tail after.
func writeConfig(t *testing.T, path, head, listen, admin, routes, tail string) {
	t.Helper()
	pki, _ := filepath.Abs(filepath.Join("..", "..", "conf", "testdata", "pki"))
	y := head + fmt.Sprintf(`listeners:
  - address: %[1]s
    protocols: [tlcp]
sites:
  - name: s
    server_names: [localhost]
    tlcp:
      sign_cert: %[3]s/server_sign.crt
      sign_key: %[3]s/server_sign.key
      enc_cert: %[3]s/server_enc.crt
      enc_key: %[3]s/server_enc.key
    routes: %[2]s
admin:
  address: %[4]s
access_log: {path: "off"}
`, listen, routes, pki, admin) + tail
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// workersTestPaths skips a test of the worker mode where it does not run;
// else it returns a configuration file's path and two free loopback
// addresses for the listener and the admin listener.
func workersTestPaths(t *testing.T) (cfgPath, listen, admin string) {
	t.Helper()
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	return filepath.Join(t.TempDir(), "gmproxy.yaml"), freePort(t), freePort(t)
}

// startGmproxy starts this test binary as `gmproxy run -c cfgPath` with
// the extra environment env, its output going to logs.
func startGmproxy(t *testing.T, logs *lockedBuffer, cfgPath string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run", "-c", cfgPath)
	// The supervisor's private folder goes in a folder of the test's:
	// a gmproxy the test kills (SIGKILL) cannot remove it itself.
	cmd.Env = append(append(os.Environ(), envTestMain+"=1", "TMPDIR="+t.TempDir()), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = 10 * time.Second // the workers hold the output pipe too
	// gmproxy and its workers get a process group of their own, led by a
	// process whose parent (this test) is outside it: the group is never
	// orphaned while gmproxy runs, so the kernel's SIGHUP and SIGCONT to an
	// orphaned group with a stopped member (POSIX; here when whatever
	// started go test exits or is reparented) cannot wake a worker a test
	// stopped on purpose. Pdeathsig ends gmproxy with a test killed
	// before its clean-ups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// frozenSession is a client session cache that keeps the first session
// it is given and offers it on every connection.
type frozenSession struct {
	mu sync.Mutex
	cs *tlcp.ClientSessionState
}

func (f *frozenSession) Get(string) (*tlcp.ClientSessionState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cs, f.cs != nil
}

func (f *frozenSession) Put(_ string, cs *tlcp.ClientSessionState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cs == nil && cs != nil {
		f.cs = cs
	}
}

// TestWorkers runs gmproxy with workers: 2 as separate processes: both
// workers serve; the supervisor's /metrics sums their handshakes; a
// TLCP ticket and a TLCP session ID made on one worker resume on the
// other; SIGHUP reaches both; a refused reload is reported; a killed
// worker is restarted and service continues; SIGTERM exits 0.
func TestWorkers(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	workersConfig(t, cfgPath, listen, admin, "one")
	r := startWorkerRun(t, cfgPath, admin)
	cmd, hc, get, waitFor, workers := r.cmd, r.hc, r.get, r.waitFor, r.workers

	ws := workers()
	if len(ws) != 2 || ws[0].PID == ws[1].PID || ws[0].PID == cmd.Process.Pid || !ws[0].Ready || !ws[1].Ready {
		t.Fatalf("workers = %+v, want 2 ready worker processes other than the supervisor %d", ws, cmd.Process.Pid)
	}
	// A worker's handshakes and successful reloads, from its own metrics.
	counts := func(i int) (handshakes, reloads float64) {
		return r.workerCounter(i, "gmproxy_handshakes_total", ""), r.workerCounter(i, "gmproxy_config_reloads_total", `result="success"`)
	}
	roots := testRoots(t)
	made := 0
	// fetch makes one TLCP connection with cfg and one GET; it returns the
	// worker that served it and whether the handshake resumed.
	fetch := func(cfg *tlcp.Config, wantBody string) (int, bool) {
		t.Helper()
		before := [2]float64{}
		for i := range before {
			before[i], _ = counts(i)
		}
		c, read, err := tlcpGet(cfg, listen, "/")
		if err != nil {
			t.Fatalf("TLCP GET: %v", err)
		}
		made++
		if code, body, err := read(); code != 200 || body != wantBody || err != nil {
			t.Errorf("GET: %d %q %v, want %q", code, body, err, wantBody)
		}
		served := -1
		for i := range before {
			if h, _ := counts(i); h > before[i] {
				served = i
			}
		}
		if served < 0 {
			t.Fatal("no worker counted the handshake")
		}
		return served, c.ConnectionState().DidResume
	}
	// resumeAcross makes a full handshake, then reconnects with its
	// session until another worker answers, which must resume it.
	resumeAcross := func(name string, cfg *tlcp.Config) {
		t.Helper()
		first, resumed := fetch(cfg, "one")
		if resumed {
			t.Fatalf("%s: the first connection resumed", name)
		}
		for try := 0; try < 40; try++ {
			w, resumed := fetch(cfg, "one")
			if !resumed {
				t.Errorf("%s: worker %d did not resume the session of worker %d", name, w, first)
			}
			if w != first {
				return
			}
		}
		t.Fatalf("%s: 40 connections all went to worker %d", name, first)
	}
	resumeAcross("ticket", &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		ClientSessionCache: tlcp.NewLRUClientSessionCache(4)})
	resumeAcross("session ID", &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		SessionTicketsDisabled: true, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)})

	// A session that both workers hold in their own caches ends with a
	// fatal alert on one of them (a record failing its MAC; RFC 5246 §7.2:
	// it must not be resumed): no worker resumes it afterwards, the other
	// one included (the worker that ended it tells it through the memory
	// they share). The client offers the same session every time.
	frozen := &frozenSession{}
	endCfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		SessionTicketsDisabled: true, ClientSessionCache: frozen}
	first, _ := fetch(endCfg, "one")
	held := map[int]bool{first: true}
	for try := 0; len(held) < 2; try++ {
		if try == 40 {
			t.Fatalf("40 connections all went to worker %d", first)
		}
		w, resumed := fetch(endCfg, "one")
		if !resumed {
			t.Fatalf("worker %d did not resume the session", w)
		}
		held[w] = true
	}
	raw, err := net.DialTimeout("tcp", listen, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(testwait.Bound(30 * time.Second)))
	bad := &testpeer.CorruptWrites{Conn: raw}
	c := tlcp.Client(bad, endCfg)
	if err := c.Handshake(); err != nil || !c.ConnectionState().DidResume {
		t.Fatalf("the connection to end the session: resumed=%v err=%v", c.ConnectionState().DidResume, err)
	}
	made++
	bad.On.Store(true)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if _, err := io.ReadAll(c); err == nil || !strings.Contains(err.Error(), "bad record MAC") {
		t.Fatalf("a record failing its MAC: err=%v, want the worker's bad_record_mac alert", err)
	}
	raw.Close()
	time.Sleep(500 * time.Millisecond) // the workers look for news every 50 ms
	served := map[int]bool{}
	for try := 0; len(served) < 2; try++ {
		if try == 40 {
			t.Fatalf("40 connections all went to one worker: %v", served)
		}
		w, resumed := fetch(endCfg, "one")
		if resumed {
			t.Fatalf("worker %d resumed a session that had ended with a fatal alert", w)
		}
		served[w] = true
	}

	_, merged := get("/metrics")
	// The session ID went through the store the workers share: memory
	// they all map, on Linux, with no error.
	if !strings.Contains(r.logs.String(), "type="+shmstore.Type) {
		t.Error("the supervisor did not make a shared memory session store")
	}
	if got := sumSeries(t, merged, "gmproxy_session_store_operations_total", `op="set",result="ok"`); got < 1 {
		t.Errorf("%v session store writes succeeded", got)
	}
	if got := sumSeries(t, merged, "gmproxy_session_store_operations_total", `op="get",result="hit"`); got < 1 {
		t.Errorf("%v session store reads hit", got)
	}
	if got := sumSeries(t, merged, "gmproxy_session_store_operations_total", `result="error"`) +
		sumSeries(t, merged, "gmproxy_session_store_operations_total", `result="timeout"`); got != 0 {
		t.Errorf("%v session store calls failed", got)
	}
	if got := sumSeries(t, merged, "gmproxy_handshakes_total", ""); got != float64(made) {
		t.Errorf("supervisor /metrics: %v handshakes, made %d", got, made)
	}
	if got := sumSeries(t, merged, "gmproxy_workers", ""); got != 2 {
		t.Errorf("gmproxy_workers = %v", got)
	}

	// SIGHUP: both workers reload the changed file.
	workersConfig(t, cfgPath, listen, admin, "two")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("both workers reloaded", func() bool {
		_, r0 := counts(0)
		_, r1 := counts(1)
		return r0 == 2 && r1 == 2
	})
	plain := plainTLCP(roots)
	fetch(plain, "two")

	// A configuration the workers would refuse is refused by POST /reload,
	// and the running one is kept.
	if err := os.WriteFile(cfgPath, []byte("workers: 2\nlisteners: [{address: "+listen+"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("POST /reload of a bad file: %d %s", resp.StatusCode, b)
	}
	workersConfig(t, cfgPath, listen, admin, "two")
	resp, err = hc.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST /reload: %d %s", resp.StatusCode, b)
	}

	// A killed worker is restarted; service goes on.
	old := ws[0].PID
	syscall.Kill(old, syscall.SIGKILL)
	waitFor("worker 0 restarted", func() bool {
		ws := workers()
		return len(ws) == 2 && ws[0].PID != old && ws[0].Ready && ws[0].Restarts == 1
	})
	for i := 0; i < 4; i++ {
		fetch(plain, "two")
	}
	_, merged = get("/metrics")
	if got := sumSeries(t, merged, "gmproxy_worker_restarts_total", ""); got != 1 {
		t.Errorf("gmproxy_worker_restarts_total = %v", got)
	}

	last := workers()
	cmd.Process.Signal(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
	for _, w := range last {
		if syscall.Kill(w.PID, 0) == nil {
			t.Errorf("worker %d (pid %d) still runs", w.Index, w.PID)
		}
	}
}

// TestWorkerCountUnset: an unset workers is one worker per CPU where the
// worker mode runs, one process elsewhere; a number set is kept.
func TestWorkerCountUnset(t *testing.T) {
	defer func(v bool) { unsetWorkersIsOne = v }(unsetWorkersIsOne)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	unsetWorkersIsOne = !workersSupported
	want := 1
	if workersSupported {
		want = 3
	}
	if got := workerCount(&conf.Config{}); got != want {
		t.Errorf("unset workers, 3 CPUs: %d, want %d", got, want)
	}
	unsetWorkersIsOne = true
	if got := workerCount(&conf.Config{}); got != 1 {
		t.Errorf("unset workers where it means one process: %d", got)
	}
	if got := workerCount(&conf.Config{Workers: "2"}); got != 2 {
		t.Errorf("workers 2: %d", got)
	}
}

// TestWorkersByDefault: gmproxy run with no workers setting, on a process
// that may use 2 CPUs, is a supervisor of 2 worker processes.
func TestWorkersByDefault(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	writeSiteConfig(t, cfgPath, "", listen, admin, "one")
	// Ready (a supervisor is ready when every worker is), then the workers.
	r := startWorkerRun(t, cfgPath, admin, "GOMAXPROCS=2")
	ws := r.workers()
	if len(ws) != 2 || !ws[0].Ready || !ws[1].Ready {
		t.Fatalf("GET /workers: %+v, want 2 ready workers", ws)
	}
	if ws[0].PID == ws[1].PID || ws[0].PID == r.cmd.Process.Pid {
		t.Errorf("workers = %+v, want 2 processes other than the supervisor %d", ws, r.cmd.Process.Pid)
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.exitCode(testwait.Bound(30 * time.Second)); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
}

// sumSeries sums the samples of name (whose labels contain match) in a
// text exposition.
func sumSeries(t *testing.T, exposition, name, match string) float64 {
	t.Helper()
	fams, err := parseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
		}
		if !strings.Contains(strings.Join(labels, ","), match) {
			continue
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum
}

// TestWorkerSignals: a worker acts on a stop request once however many
// copies reach it (SIGTERM and SIGINT alike), ignores SIGHUP (reloads come
// from its supervisor), SIGUSR1 and SIGUSR2 (sent to the whole group, its
// supervisor passes on the one it takes), reopens its access log on
// workerReopenSignal, and takes forceSignal for the second request.
func TestWorkerSignals(t *testing.T) {
	if !workersSupported {
		t.Skip("worker mode needs Linux")
	}
	in := make(chan os.Signal, 8)
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGTERM, reopenSignal} {
		in <- sig
	}
	var logs lockedBuffer
	out := workerSignals(in, slog.New(slog.NewTextHandler(&logs, nil)))
	next := func() os.Signal {
		select {
		case sig := <-out:
			return sig
		case <-time.After(200 * time.Millisecond):
			return nil
		}
	}
	if got := []os.Signal{next(), next()}; got[0] != syscall.SIGTERM || got[1] != nil {
		t.Fatalf("worker acted on %v, want one SIGTERM, then nothing", got)
	}
	for _, sig := range []syscall.Signal{syscall.SIGUSR2, workerReopenSignal.(syscall.Signal)} {
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	if got := []os.Signal{next(), next()}; got[0] != reopenSignal || got[1] != nil {
		t.Fatalf("after SIGUSR2 and workerReopenSignal: %v, want %v, then nothing", got, reopenSignal)
	}
	if n := strings.Count(logs.String(), " ignored: "); n != 3 {
		t.Errorf("%d signals logged as ignored, want 3 (SIGHUP, SIGUSR1, SIGUSR2):\n%s", n, logs.String())
	}
	if err := syscall.Kill(os.Getpid(), forceSignal.(syscall.Signal)); err != nil {
		t.Fatal(err)
	}
	if sig := next(); sig != syscall.SIGTERM {
		t.Fatalf("after forceSignal: %v, want the second SIGTERM", sig)
	}
	close(in)
	if _, ok := <-out; ok {
		t.Fatal("output open after the input closed")
	}
}

// TestWorkerEnvSharesMemoryLimit: under GOMEMLIMIT (the Kubernetes
// manifests set it from the container's memory limit) each of n workers
// gets an nth of it, so that the collectors keep the workers together under
// the limit; passed on unchanged, n workers could each grow to all of it.
// Without a limit the environment is passed on as it is, less the
// variables the supervisor sets for each worker.
func TestWorkerEnvSharesMemoryLimit(t *testing.T) {
	environ := []string{"PATH=/bin", "GOMEMLIMIT=512MiB", "GOMAXPROCS=8", envWorker + "=3"}
	got := workerEnv(environ, 512<<20, 4)
	want := []string{"PATH=/bin", "GOMEMLIMIT=134217728"}
	if !slices.Equal(got, want) {
		t.Errorf("512 MiB over 4 workers: %q, want %q", got, want)
	}
	got = workerEnv([]string{"PATH=/bin", "GOMAXPROCS=8"}, math.MaxInt64, 4)
	if want := []string{"PATH=/bin"}; !slices.Equal(got, want) {
		t.Errorf("no limit: %q, want %q", got, want)
	}
}

// TestWorkerMemoryLimitLeavesSharedTables: the workers' session table
// and per-client counts are shared memory, charged to the container's
// memory like a heap but outside every worker's GOMEMLIMIT (which counts
// only the Go runtime's memory). Under a limit, the workers' shares are
// what is left of it once those tables are taken out: split whole, the
// heaps could together reach the limit with the tables on top of it.
func TestWorkerMemoryLimitLeavesSharedTables(t *testing.T) {
	if !shmstore.Supported {
		t.Skip("no shared memory session store here")
	}
	s := scriptSupervisor(t, `echo "$GOMEMLIMIT" > "$0.$`+envWorker+`"`)
	f, err := shmstore.Create(2*conf.DefaultSessionCacheSize + 64)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.shm = f
	const limit = 512 << 20
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	exits := make(chan workerExit, 1)
	if _, err := s.spawn(0, exits); err != nil {
		t.Fatal(err)
	}
	<-exits
	out, err := os.ReadFile(s.exe + ".0")
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("worker's GOMEMLIMIT %q: %v", out, err)
	}
	if want := (limit - st.Size()) / 2; got != want {
		t.Errorf("worker's GOMEMLIMIT %d (%d MiB) under a 512 MiB limit with a %d MiB shared table, want %d: the table is outside every heap limit",
			got, got>>20, st.Size()>>20, want)
	}
}
