package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/internal/devpki"
)

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	case <-time.After(60 * time.Second):
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
	case <-time.After(60 * time.Second):
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
	for _, tc := range []struct{ flag, ca, want string }{
		{"-ntls", ca, "protocol: NTLSv1.1\ncipher: ECC-SM2-SM4-GCM-SM3\n"},
		{"-tls13sm", ca, "protocol: TLSv1.3-SM\ncipher: TLS_SM4_GCM_SM3\n"},
		{"-tls", filepath.Join(dir, devpki.FileECDSACACert), "protocol: TLSv1.3\n"},
	} {
		out, summary := getOut(t, tc.flag, "-CAfile", tc.ca, "-connect", r.addr, "https://localhost/hello")
		if !strings.Contains(out, tc.want) || !strings.Contains(out, "path: /hello") {
			t.Errorf("%s: body %q", tc.flag, out)
		}
		if !strings.HasPrefix(summary, "* ") || !strings.Contains(summary, "status=200") {
			t.Errorf("%s: summary %q", tc.flag, summary)
		}
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
	for i := 0; i < 20000; i++ {
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
	waitFor(t, func() bool { _, err := os.Stat(logFile); return err == nil })
	getOut(t, "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/after")
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	now, _ := os.ReadFile(logFile)
	old, _ := os.ReadFile(logFile + ".1")
	if !strings.Contains(string(now), "/after") || strings.Contains(string(now), "/before") || !strings.Contains(string(old), "/before") {
		t.Errorf("after rotation:\nnew: %s\nold: %s", now, old)
	}
}
