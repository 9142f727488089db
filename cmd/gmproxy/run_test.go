package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer = testpeer.SyncBuffer

type running struct {
	addr, admin string
	sigs        chan os.Signal
	exit        chan int
	stdout      *syncBuffer
	stderr      *syncBuffer
}

// startRun runs `gmproxy run args...` in-process until stopped.
func startRun(t *testing.T, args ...string) *running {
	t.Helper()
	r := &running{sigs: make(chan os.Signal, 4), exit: make(chan int, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	ready := make(chan struct{})
	go func() {
		r.exit <- runMain(args, r.stdout, r.stderr, r.sigs, &runHooks{ready: func(_ *daemon.Daemon, addr, admin string) {
			r.addr, r.admin = addr, admin
			close(ready)
		}})
	}()
	select {
	case <-ready:
	case code := <-r.exit:
		t.Fatalf("run exited with %d before serving:\n%s", code, r.stderr.String())
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("run did not start")
	}
	t.Cleanup(func() {
		select {
		case r.sigs <- syscall.SIGTERM:
		default:
		}
	})
	return r
}

func (r *running) stop(t *testing.T) int {
	r.sigs <- syscall.SIGTERM
	select {
	case code := <-r.exit:
		return code
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("run did not stop")
	}
	return -1
}

func getOut(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runGet(args, &out, &errb); code != 0 {
		t.Fatalf("get %v: exit %d: %s", args, code, errb.String())
	}
	return out.String(), errb.String()
}

// TestEmbeddedDefault: `gmproxy run` without -c starts the development
// setup, prints how to connect, and answers TLCP, TLS 1.3-SM and TLS on one
// port; the admin endpoint reloads; SIGTERM exits 0.
func TestEmbeddedDefault(t *testing.T) {
	dir := t.TempDir()
	r := startRun(t, "-dev-dir", dir, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	if out := r.stdout.String(); !strings.Contains(out, "-enable_ntls -ntls") || !strings.Contains(out, filepath.Join(dir, "ca.crt")) {
		t.Errorf("instructions missing:\n%s", out)
	}
	ca := filepath.Join(dir, devpki.FileCACert)
	followInstructions(t, r.stdout.String())
	for _, tc := range []struct{ flag, ca, want string }{
		{"-ntls", ca, "protocol: NTLSv1.1\ncipher: ECC-SM2-SM4-GCM-SM3\n"},
		{"-tls13sm", ca, "protocol: TLSv1.3-SM\ncipher: TLS_SM4_GCM_SM3\n"},
		{"-tls", filepath.Join(dir, devpki.FileECDSACACert), "protocol: TLSv1.3\n"},
		// TLS 1.2 with the ECDSA certificate (every TLS 1.2 client once failed on it).
		{"-tls1_2", filepath.Join(dir, devpki.FileECDSACACert), "protocol: TLSv1.2\n"},
		{"-tls1_3", filepath.Join(dir, devpki.FileECDSACACert), "protocol: TLSv1.3\n"},
		{"-tls -cipher TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", filepath.Join(dir, devpki.FileECDSACACert),
			"protocol: TLSv1.2\ncipher: TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256\n"},
	} {
		args := append(strings.Fields(tc.flag), "-CAfile", tc.ca, "-connect", r.addr, "https://localhost/hello")
		out, summary := getOut(t, args...)
		if !strings.Contains(out, tc.want) || !strings.Contains(out, "path: /hello") {
			t.Errorf("%s: body %q", tc.flag, out)
		}
		if !strings.HasPrefix(summary, "* ") || !strings.Contains(summary, "status=200") {
			t.Errorf("%s: summary %q", tc.flag, summary)
		}
	}
	// s_time over TLS 1.2 with the ECDSA certificate, one suite chosen.
	var stOut, stErr bytes.Buffer
	if code := dispatch([]string{"s_time", "-json", "-tls1_2", "-new", "-n", "2", "-connect", r.addr, "-servername", "localhost",
		"-CAfile", filepath.Join(dir, devpki.FileECDSACACert), "-cipher", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, &stOut, &stErr); code != 0 {
		t.Errorf("s_time -tls1_2: exit %d: %s", code, stErr.String())
	} else if !strings.Contains(stOut.String(), `"TLS 1.2": 2`) || !strings.Contains(stOut.String(), `"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 2`) {
		t.Errorf("s_time -tls1_2: %s", stOut.String())
	}
	// HTTP/2 over TLCP and TLS 1.3-SM.
	for _, flag := range []string{"-ntls", "-tls13sm"} {
		if _, summary := getOut(t, flag, "-h2", "-CAfile", ca, "-connect", r.addr, "https://localhost/"); !strings.Contains(summary, "alpn=h2") || !strings.Contains(summary, "status=200") {
			t.Errorf("%s -h2: %q", flag, summary)
		}
	}
	// ECDHE with the development client certificates.
	out, _ := getOut(t, "-ntls", "-cipher", "ECDHE-SM2-SM4-CBC-SM3", "-CAfile", ca, "-connect", r.addr,
		"-sign_cert", filepath.Join(dir, devpki.FileClientSignCert), "-sign_key", filepath.Join(dir, devpki.FileClientSignKey),
		"-enc_cert", filepath.Join(dir, devpki.FileClientEncCert), "-enc_key", filepath.Join(dir, devpki.FileClientEncKey),
		"https://localhost/")
	if !strings.Contains(out, "cipher: ECDHE-SM2-SM4-CBC-SM3") {
		t.Errorf("ECDHE: %q", out)
	}

	resp, err := http.Post("http://"+r.admin+"/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("admin reload: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + r.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `gmproxy_handshakes_total{`) {
		t.Errorf("metrics lack handshake counters")
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, r.stderr.String())
	}
	// The PKI is reused on the next start.
	before, _ := os.ReadFile(ca)
	r = startRun(t, "-dev-dir", dir, "-listen", "127.0.0.1:0", "-admin", "off")
	after, _ := os.ReadFile(ca)
	if !bytes.Equal(before, after) {
		t.Error("the development CA was regenerated on the second start")
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("second run exit code %d", code)
	}
}

// TestRunConfigFileReload: `gmproxy run -c FILE` serves the file's config;
// SIGHUP with a broken file keeps the old config; SIGHUP with a good change
// applies it.
func TestRunConfigFileReload(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend %s %s\n", r.URL.Path, r.Header.Get("X-Ssl-Protocol"))
	}))
	defer backend.Close()
	file := filepath.Join(dir, "gmproxy.yaml")
	write := func(body string) {
		cfg := fmt.Sprintf(`listeners:
  - address: 127.0.0.1:0
sites:
  - name: s
    server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    tls13sm: {}
    routes:
      - {path: /fixed, respond: {body: "%s"}}
      - {path_prefix: /, upstream: app, tls_info_headers: true}
upstreams:
  - {name: app, targets: [%s]}
admin: {address: "off"}
access_log: {path: "off"}
`, body, backend.Listener.Addr().String())
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("v1")
	r := startRun(t, "-c", file)
	ca := filepath.Join(dir, devpki.FileCACert)
	check := func(want string) {
		t.Helper()
		out, _ := getOut(t, "-ntls", "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/fixed")
		if out != want {
			t.Errorf("got %q, want %q", out, want)
		}
	}
	check("v1")
	out, _ := getOut(t, "-tls13sm", "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/up")
	if out != "backend /up TLSv1.3-SM\n" {
		t.Errorf("forwarded: %q", out)
	}

	// A broken file: refused, v1 keeps running.
	os.WriteFile(file, []byte("listeners: [{address: 127.0.0.1:0}]\nsites: [{name: s, routes: [{upstream: nowhere}]}]\nbogus_key: 1\n"), 0o600)
	r.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "reload refused") })
	check("v1")

	write("v2")
	r.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "reload succeeded") })
	check("v2")
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); time.Now().Before(deadline); {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not reached")
}

// TestRunReopenAccessLog: SIGUSR1 reopens the access log file after it was
// moved away (log rotation).
func TestRunReopenAccessLog(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "access.log")
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := fmt.Sprintf(`listeners: [{address: 127.0.0.1:0}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes: [{path_prefix: /, respond: {body: "hi\n"}}]
admin: {address: "off"}
access_log: {path: %q, format: combined}
`, logFile)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)
	ca := filepath.Join(dir, devpki.FileCACert)
	getOut(t, "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/before")
	waitFor(t, func() bool { b, _ := os.ReadFile(logFile); return strings.Contains(string(b), "/before") })
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	r.sigs <- syscall.SIGUSR1
	// The reopen completes in the log's writer after the new file
	// appears: a line logged in between still goes to the old file, as
	// in nginx, whose workers reopen in their own time. Requests until
	// one lands in the new file (none ever does if the reopen fails).
	n := 0
	waitFor(t, func() bool {
		n++
		getOut(t, "-CAfile", ca, "-connect", r.addr, "-q", fmt.Sprintf("https://localhost/after%d", n))
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "/after")
	})
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	now, _ := os.ReadFile(logFile)
	old, _ := os.ReadFile(logFile + ".1")
	if !strings.Contains(string(now), "/after") || strings.Contains(string(now), "/before") || !strings.Contains(string(old), "/before") {
		t.Errorf("after rotation:\nnew: %s\nold: %s", now, old)
	}
}

// checkLines returns the problem lines `gmproxy check -c file` prints.
func checkLines(t *testing.T, file string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := checkMain([]string{"-c", file}, &out, &errb); code == 0 {
		t.Fatalf("check accepted %s", file)
	}
	var lines []string
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.HasPrefix(l, file+":") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("want several problems from check, got:\n%s", errb.String())
	}
	return lines
}

// brokenConfig has several problems at known places.
const brokenConfig = "listeners: [{address: 127.0.0.1:0}]\nsites: [{name: s, routes: [{upstream: nowhere}]}]\nbogus_key: 1\n"

// TestRunConfigErrors: `gmproxy run -c FILE` with a broken file prints every
// problem as `gmproxy check` does (file:line:column), starts nothing and
// exits non-zero; a missing file is reported with its name.
func TestRunConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(file, []byte(brokenConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	want := checkLines(t, file)
	pos := regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `:\d+:\d+: error: `)
	var out, errb syncBuffer
	code := runMain([]string{"-c", file}, &out, &errb, make(chan os.Signal), &runHooks{ready: func(*daemon.Daemon, string, string) {
		t.Error("the daemon started with a broken configuration")
	}})
	if code == 0 {
		t.Fatal("run exited 0 with a broken configuration")
	}
	got := errb.String()
	for _, l := range want {
		if !strings.Contains(got, l+"\n") {
			t.Errorf("run does not print the problem\n  %s\ngot:\n%s", l, got)
		}
	}
	n := 0
	for _, l := range strings.Split(got, "\n") {
		if pos.MatchString(l) {
			n++
		}
	}
	if n < 2 {
		t.Errorf("want every error as file:line:column, got:\n%s", got)
	}
	if !strings.Contains(got, "nothing started") {
		t.Errorf("no summary line:\n%s", got)
	}

	// A listener address already in use: reported, non-zero exit.
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := filepath.Join(dir, "busy.yaml")
	os.WriteFile(inUse, []byte(fmt.Sprintf(`listeners: [{address: %s}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes: [{path_prefix: /, respond: {body: "x"}}]
admin: {address: "off"}
`, busy.Addr())), 0o600)
	errb = syncBuffer{}
	if code := runMain([]string{"-c", inUse}, &out, &errb, make(chan os.Signal), nil); code == 0 || !strings.Contains(errb.String(), busy.Addr().String()) {
		t.Errorf("busy address: exit %d, stderr %q", code, errb.String())
	}

	missing := filepath.Join(dir, "missing.yaml")
	errb = syncBuffer{}
	if code := runMain([]string{"-c", missing}, &out, &errb, make(chan os.Signal), nil); code == 0 || !strings.Contains(errb.String(), missing) {
		t.Errorf("missing file: exit %d, stderr %q", code, errb.String())
	}
}

// metricValue returns the value of the sample series (name with labels) in
// a Prometheus text exposition, 0 when absent.
func metricValue(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	return 0
}

// logProblems returns the "problem" fields of the JSON log lines in s.
func logProblems(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if p, ok := rec["problem"].(string); ok {
			out = append(out, p)
		}
	}
	return out
}

// TestRunReloadResult: a SIGHUP (or admin POST /reload) with a broken file
// logs every problem as file:line:column, keeps the running configuration,
// and counts gmproxy_config_reloads_total{result="failure"}; a good file is
// applied and counted as success.
func TestRunReloadResult(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	write := func(body string) {
		level := "info"
		if body == "v2" {
			level = "debug"
		}
		cfg := fmt.Sprintf(`listeners: [{address: 127.0.0.1:0}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes: [{path_prefix: /, respond: {body: %q}}]
admin: {address: 127.0.0.1:0}
access_log: {path: "off"}
log: {level: %s}
`, body, level)
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("v1")
	r := startRun(t, "-c", file, "-log-format", "json")
	ca := filepath.Join(dir, devpki.FileCACert)
	check := func(want string) {
		t.Helper()
		if out, _ := getOut(t, "-ntls", "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/"); out != want {
			t.Errorf("served %q, want %q", out, want)
		}
	}
	check("v1")
	const ok, fail = `gmproxy_config_reloads_total{result="success"}`, `gmproxy_config_reloads_total{result="failure"}`
	ok0, fail0 := metricValue(t, r.admin, ok), metricValue(t, r.admin, fail)

	if err := os.WriteFile(file, []byte(brokenConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	want := checkLines(t, file)
	r.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "reload refused") })
	waitFor(t, func() bool { return len(logProblems(t, r.stderr.String())) >= len(want) })
	got := logProblems(t, r.stderr.String())
	for _, l := range want {
		if !slices.Contains(got, l) {
			t.Errorf("reload log lacks the problem\n  %s\nlogged: %q", l, got)
		}
	}
	check("v1")
	waitFor(t, func() bool { return metricValue(t, r.admin, fail) == fail0+1 })
	if v := metricValue(t, r.admin, "gmproxy_config_last_reload_successful"); v != 0 {
		t.Errorf("last_reload_successful = %v after a refused reload", v)
	}

	// The admin endpoint answers the problems too.
	resp, err := http.Post("http://"+r.admin+"/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), want[0]) {
		t.Errorf("admin reload of a broken file: %d %s", resp.StatusCode, body)
	}
	if v := metricValue(t, r.admin, fail); v != fail0+2 {
		t.Errorf("failures counted: %v, want %v", v, fail0+2)
	}

	// A failed handshake is logged at debug level only.
	plain := func() {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
		io.Copy(io.Discard, c)
		c.Close()
	}
	plain()
	if strings.Contains(r.stderr.String(), "handshake failed") {
		t.Error("debug line logged at level info")
	}

	write("v2")
	r.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "reload succeeded") })
	check("v2")
	if !strings.Contains(r.stderr.String(), `"msg":"log level changed","level":"DEBUG"`) {
		t.Errorf("log level change not logged:\n%s", r.stderr.String())
	}
	plain()
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "handshake failed") })
	if v := metricValue(t, r.admin, ok); v != ok0+1 {
		t.Errorf("successes counted: %v, want %v", v, ok0+1)
	}
	if v := metricValue(t, r.admin, "gmproxy_config_last_reload_successful"); v != 1 {
		t.Errorf("last_reload_successful = %v after a good reload", v)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// heldBackend answers "slow done" to each request once release is
// closed; started gets a value as each arrives (n may wait unread).
func heldBackend(n int) (backend *httptest.Server, started, release chan struct{}) {
	started, release = make(chan struct{}, n), make(chan struct{})
	backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "slow done\n")
	}))
	return backend, started, release
}

// TestRunConfigFileShutdown: SIGTERM stops accepting, lets an in-flight
// request finish and exits 0; when the grace period ends first, the exit
// status is non-zero.
func TestRunConfigFileShutdown(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	backend, started, release := heldBackend(4)
	defer backend.Close()
	defer close(release)
	ca := filepath.Join(dir, devpki.FileCACert)
	for _, tc := range []struct {
		name, grace string
		drained     bool
		twice       bool // a second signal during the drain
	}{{"drained", "30s", true, false}, {"grace-over", "200ms", false, false}, {"second-signal", "30s", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, "gmproxy.yaml")
			cfg := fmt.Sprintf(`listeners: [{address: 127.0.0.1:0}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes: [{path_prefix: /, upstream: app}]
upstreams: [{name: app, targets: [%s]}]
shutdown_grace: %s
admin: {address: "off"}
access_log: {path: "off"}
`, backend.Listener.Addr().String(), tc.grace)
			if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			r := startRun(t, "-c", file)
			type result struct {
				code int
				out  string
			}
			res := make(chan result, 1)
			go func() {
				var out, errb bytes.Buffer
				code := runGet([]string{"-ntls", "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/slow"}, &out, &errb)
				res <- result{code, out.String()}
			}()
			<-started
			r.sigs <- syscall.SIGTERM
			for i := 0; ; i++ { // new connections are refused
				c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
				if err != nil {
					break
				}
				c.Close()
				if i > 1000 {
					t.Fatal("still accepting after SIGTERM")
				}
				time.Sleep(time.Millisecond)
			}
			var code int
			if tc.drained {
				release <- struct{}{}
				if got := <-res; got.code != 0 || got.out != "slow done\n" {
					t.Errorf("in-flight request: exit %d, %q", got.code, got.out)
				}
				code = <-r.exit
				if code != 0 {
					t.Errorf("exit %d after a drained shutdown\n%s", code, r.stderr.String())
				}
				if !strings.Contains(r.stderr.String(), "shutdown complete") {
					t.Errorf("no completion log:\n%s", r.stderr.String())
				}
			} else {
				if tc.twice {
					r.sigs <- syscall.SIGINT
				}
				code = <-r.exit
				if code == 0 {
					t.Errorf("exit 0 although a request was cut")
				}
				if tc.twice && !strings.Contains(r.stderr.String(), "second signal") {
					t.Errorf("no log of the forced close:\n%s", r.stderr.String())
				}
				if got := <-res; got.code == 0 {
					t.Errorf("the cut request succeeded: %q", got.out)
				}
				release <- struct{}{} // let the backend handler return
			}
		})
	}
}

// followInstructions runs the commands the development setup printed,
// exactly as printed: gmproxy's own client (`go run ./cmd/gmproxy get ...`,
// run in-process), curl (done with crypto/tls and the named CA file) and
// Tongsuo's s_client (when GMPROXY_TONGSUO_BIN is set).
func followInstructions(t *testing.T, out string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "go run ./cmd/gmproxy get "):
			args := strings.Fields(strings.TrimPrefix(line, "go run ./cmd/gmproxy get "))
			var o, e bytes.Buffer
			if code := runGet(args, &o, &e); code != 0 {
				t.Errorf("printed command %q: exit %d: %s", line, code, e.String())
				continue
			}
			want := map[string]string{"-ntls": "protocol: NTLSv1.1\n", "-tls13sm": "protocol: TLSv1.3-SM\n"}[args[0]]
			if want == "" || !strings.Contains(o.String(), want) {
				t.Errorf("printed command %q answered %q", line, o.String())
			}
			seen[args[0]] = true
		case strings.HasPrefix(line, "curl "):
			f := strings.Fields(line)
			if len(f) != 4 || f[1] != "--cacert" {
				t.Errorf("unexpected curl line %q", line)
				continue
			}
			pem, err := os.ReadFile(f[2])
			if err != nil {
				t.Errorf("curl line names %s: %v", f[2], err)
				continue
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				t.Errorf("%s holds no certificate", f[2])
			}
			c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			resp, err := c.Get(f[3])
			if err != nil {
				t.Errorf("curl line %q: %v", line, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "protocol: TLSv1.") {
				t.Errorf("curl line %q: %d %q", line, resp.StatusCode, body)
			}
			seen["curl"] = true
		case strings.Contains(line, "s_client -enable_ntls -ntls"):
			seen["tongsuo"] = true
			bin := os.Getenv("GMPROXY_TONGSUO_BIN")
			if bin == "" {
				t.Log("GMPROXY_TONGSUO_BIN not set: the printed Tongsuo command is not run")
				continue
			}
			cmd := strings.Replace(line, "openssl s_client", bin+" s_client", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			o, err := exec.CommandContext(ctx, "sh", "-c", cmd).CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(o), "protocol: NTLSv1.1") {
				t.Errorf("printed Tongsuo command %q: %v\n%s", cmd, err, o)
			}
		}
	}
	for _, k := range []string{"-ntls", "-tls13sm", "curl", "tongsuo"} {
		if !seen[k] {
			t.Errorf("the instructions lack the %s command:\n%s", k, out)
		}
	}
}

// TestRunReloadCertificates: certificates renewed in place (same file
// names, new contents) are served to new handshakes after SIGHUP, without a
// restart, for TLCP and TLS 1.3-SM.
func TestRunReloadCertificates(t *testing.T) {
	dir, next := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, next} {
		if _, err := devpki.LoadOrCreate(d, devpki.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := `listeners: [{address: 127.0.0.1:0}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    tls13sm: {cert: server_sign.crt, key: server_sign.key}
    routes: [{path_prefix: /, respond: {body: "ok"}}]
admin: {address: "off"}
access_log: {path: "off"}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)
	oldCA, newCA := filepath.Join(dir, devpki.FileCACert), filepath.Join(next, devpki.FileCACert)
	try := func(flag, ca string) int {
		var out, errb bytes.Buffer
		return runGet([]string{flag, "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/"}, &out, &errb)
	}
	for _, flag := range []string{"-ntls", "-tls13sm"} {
		if try(flag, oldCA) != 0 || try(flag, newCA) == 0 {
			t.Fatalf("%s: before renewal the old CA must verify and the new one not", flag)
		}
	}
	// Renew in place: the next PKI's server certificates and keys.
	for _, f := range []string{devpki.FileServerSignCert, devpki.FileServerSignKey, devpki.FileServerEncCert, devpki.FileServerEncKey} {
		b, err := os.ReadFile(filepath.Join(next, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "reload succeeded") })
	for _, flag := range []string{"-ntls", "-tls13sm"} {
		if try(flag, newCA) != 0 {
			t.Errorf("%s: the renewed certificate is not served after SIGHUP", flag)
		}
		if try(flag, oldCA) == 0 {
			t.Errorf("%s: the old certificate is still served after SIGHUP", flag)
		}
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestEmbeddedDefaultRefusesUnusableFolder: a development folder whose
// files devpki accepts but the embedded configuration refuses (here the
// signing and encryption pairs swapped by hand) stops `gmproxy run` with
// what is wrong and how to fix it; no other configuration is served in its
// place.
func TestEmbeddedDefaultRefusesUnusableFolder(t *testing.T) {
	dir := t.TempDir()
	swapSignAndEnc(t, dir)
	var out, errb syncBuffer
	sigs := make(chan os.Signal, 1)
	code := runMain([]string{"-dev-dir", dir, "-listen", "127.0.0.1:0", "-admin", "off"}, &out, &errb, sigs, &runHooks{ready: func(*daemon.Daemon, string, string) {
		t.Error("served a folder the embedded configuration refuses")
		sigs <- syscall.SIGTERM
	}})
	if code == 0 {
		t.Fatalf("exit 0:\n%s", errb.String())
	}
	if msg := errb.String(); !strings.Contains(msg, dir) || !strings.Contains(msg, "remove the folder") || !strings.Contains(msg, "sign_cert") {
		t.Errorf("the refusal does not say what is wrong and how to fix it:\n%s", msg)
	}
}

// TestEmbeddedDefaultRefusesUnusableDefaultFolder: the same refusal for
// the default folder (no -dev-dir). ./gmproxy-dev stands in for a default
// folder that cannot be created (a read-only home), not for one whose
// files the configuration refuses: run stops with the problem, and no
// other PKI is made in the working directory and served in its place.
func TestEmbeddedDefaultRefusesUnusableDefaultFolder(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	dir := daemon.DefaultDevDir()
	swapSignAndEnc(t, dir)
	cwd := t.TempDir()
	t.Chdir(cwd)
	var out, errb syncBuffer
	sigs := make(chan os.Signal, 1)
	code := runMain([]string{"-listen", "127.0.0.1:0", "-admin", "off"}, &out, &errb, sigs, &runHooks{ready: func(*daemon.Daemon, string, string) {
		t.Error("served another folder in place of the default one the embedded configuration refuses")
		sigs <- syscall.SIGTERM
	}})
	if code == 0 {
		t.Errorf("exit 0:\n%s", errb.String())
	}
	if msg := errb.String(); !strings.Contains(msg, dir) || !strings.Contains(msg, "remove the folder") {
		t.Errorf("the refusal does not say what is wrong and how to fix it:\n%s", msg)
	}
	if _, err := os.Stat(filepath.Join(cwd, "gmproxy-dev")); err == nil {
		t.Error("a development PKI was made in ./gmproxy-dev in place of the refused default folder")
	}
}

// swapSignAndEnc makes a development PKI in dir and swaps its signing and
// encryption pairs: files devpki accepts and the embedded configuration
// refuses.
func swapSignAndEnc(t *testing.T, dir string) {
	t.Helper()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".crt", ".key"} {
		sign, enc := filepath.Join(dir, "server_sign"+ext), filepath.Join(dir, "server_enc"+ext)
		tmp := sign + ".tmp"
		if err := os.Rename(sign, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(enc, sign); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, enc); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJSONLogPrintable: the JSON program log writes what a client sent
// (a request's URI, an error naming it) without the characters slog's
// JSON handler lets through raw that a terminal or viewer takes for
// something other than text: a C1 CSI (U+009B), a right-to-left override
// (U+202E), DEL; they come out as \uXXXX text. Other text, Chinese
// included, is written as it is, and the text format is left to slog's
// quoting.
func TestJSONLogPrintable(t *testing.T) {
	var buf bytes.Buffer
	log, _ := newLogger(&buf, "json", "info", conf.Log{})
	log.Warn("request failed", "uri", "/a\u009b2J\u202eb\x7f", "err", errors.New("bad \u009b[31m"), "site", "门户")
	out := buf.String()
	for _, raw := range []string{"\u009b", "\u202e", "\x7f"} {
		if strings.Contains(out, raw) {
			t.Errorf("the JSON log line holds %q raw:\n%s", raw, out)
		}
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rec["uri"] != `/a\u009b2J\u202eb\u007f` || rec["err"] != `bad \u009b[31m` || rec["site"] != "门户" {
		t.Errorf("uri %q, err %q, site %q; want the unprintable characters as \\uXXXX text, the rest as sent", rec["uri"], rec["err"], rec["site"])
	}
}
