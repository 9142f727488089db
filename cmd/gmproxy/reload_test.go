package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestNginxSpellings: gmproxy -t -c FILE tests a configuration, and a
// leading flag means run.
func TestNginxSpellings(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"-t", "-c", filepath.Join("..", "..", "conf", "testdata", "bad", "listeners.yaml")}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "test failed") {
		t.Errorf("-t on a bad file: exit %d\n%s", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := dispatch([]string{"-c", "/nonexistent/gmproxy.yaml"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "gmproxy run") {
		t.Errorf("-c FILE did not run: exit %d\n%s", code, errb.String())
	}
}

// TestCheckProbesListeners: check reports a listener address in use as a
// warning at its place in the file, and a bad one as an error.
func TestCheckProbesListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gmproxy.yaml")
	pki, _ := filepath.Abs(filepath.Join("..", "..", "conf", "testdata", "pki"))
	os.WriteFile(cfg, []byte("listeners:\n  - address: "+ln.Addr().String()+"\n    protocols: [tls]\nsites:\n  - name: s\n"+
		"    tls: {cert: "+filepath.Join(pki, "server_ecdsa.crt")+", key: "+filepath.Join(pki, "server_ecdsa.key")+"}\n"+
		"    routes: [{respond: {status: 204}}]\n"), 0o644)
	var out, errb bytes.Buffer
	dispatch([]string{"check", "-c", cfg}, &out, &errb)
	if want := cfg + ":2:14: warning: listeners[0].address: cannot listen on " + ln.Addr().String(); !strings.Contains(errb.String(), want) {
		t.Errorf("check output lacks %q:\n%s%s", want, errb.String(), out.String())
	}
	errb.Reset()
	dispatch([]string{"check", "-no-bind", "-c", cfg}, &out, &errb)
	if strings.Contains(errb.String(), "cannot listen") {
		t.Errorf("-no-bind still probed:\n%s", errb.String())
	}
}

// TestReloadCommand: gmproxy reload -pid signals the process in the pid
// file; -admin reports a refused configuration with exit 1.
func TestReloadCommand(t *testing.T) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	pidFile := filepath.Join(t.TempDir(), "gmproxy.pid")
	os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	var out, errb bytes.Buffer
	if code := dispatch([]string{"reload", "-pid", pidFile}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	select {
	case <-hup:
	case <-time.After(testwait.Bound(5 * time.Second)):
		t.Fatal("no SIGHUP arrived")
	}

	dir := t.TempDir()
	r := startRun(t, "-dev-dir", dir, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	out.Reset()
	errb.Reset()
	if code := dispatch([]string{"reload", "-admin", r.admin}, &out, &errb); code != 0 || !strings.Contains(out.String(), "reloaded") {
		t.Errorf("reload via admin: exit %d: %s%s", code, out.String(), errb.String())
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := closed.Addr().String()
	closed.Close()
	if code := dispatch([]string{"reload", "-admin", addr}, &out, &errb); code != 1 {
		t.Errorf("reload of nothing: exit %d", code)
	}
}

// TestReloadAdminWithoutHost: an admin address without a host (":9100",
// every address) is reached on loopback with a Host the control endpoint
// takes; sent as is, the Host ":9100" was refused with 403 and gmproxy
// reload -c FILE could not reload such a configuration.
func TestReloadAdminWithoutHost(t *testing.T) {
	r := startRun(t, "-dev-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-admin", ":0")
	_, port, err := net.SplitHostPort(r.admin)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := dispatch([]string{"reload", "-admin", ":" + port}, &out, &errb); code != 0 || !strings.Contains(out.String(), "reloaded") {
		t.Errorf("reload -admin :%s: exit %d: %s%s", port, code, out.String(), errb.String())
	}
}

func TestVersionRevision(t *testing.T) {
	got := vcsRevision([]debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}, "ffff")
	if got != "abc123 2026-12-01T00:00:00Z (modified)" {
		t.Errorf("got %q", got)
	}
	// A container build has no .git in its context: the revision comes in
	// through -ldflags "-X main.revision=..." (deploy/container/Containerfile).
	if got := vcsRevision([]debug.BuildSetting{{Key: "-trimpath", Value: "true"}}, "cafe01"); got != "cafe01 (from -ldflags)" {
		t.Errorf("without a VCS stamp, with main.revision: got %q", got)
	}
	if got := vcsRevision(nil, ""); !strings.HasPrefix(got, "unknown") {
		t.Errorf("without either: got %q", got)
	}
	var out bytes.Buffer
	dispatch([]string{"version"}, &out, &out)
	if !strings.Contains(out.String(), "revision: ") {
		t.Errorf("version output lacks the revision:\n%s", out.String())
	}
}

// TestReloadControlSocketAndToken: gmproxy reload -c FILE finds the control
// address (a Unix socket here) and the token file in the configuration;
// without the token the running gmproxy refuses.
func TestReloadControlSocketAndToken(t *testing.T) {
	dir := t.TempDir()
	pki, _ := filepath.Abs(filepath.Join("..", "..", "conf", "testdata", "pki"))
	os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret-token-value\n"), 0o600)
	cfg := filepath.Join(dir, "gmproxy.yaml")
	os.WriteFile(cfg, []byte("listeners:\n  - address: 127.0.0.1:0\n    protocols: [tls]\nsites:\n  - name: s\n"+
		"    tls: {cert: "+filepath.Join(pki, "server_ecdsa.crt")+", key: "+filepath.Join(pki, "server_ecdsa.key")+"}\n"+
		"    routes: [{respond: {status: 204}}]\n"+
		"admin: {address: 127.0.0.1:0, control_address: \"unix:"+filepath.Join(dir, "ctl.sock")+"\", token_file: token}\n"), 0o600)
	startRun(t, "-c", cfg)
	var out, errb bytes.Buffer
	if code := dispatch([]string{"reload", "-c", cfg}, &out, &errb); code != 0 || !strings.Contains(out.String(), "reloaded") {
		t.Fatalf("reload -c: exit %d: %s%s", code, out.String(), errb.String())
	}
	os.WriteFile(filepath.Join(dir, "wrong"), []byte("nope"), 0o600)
	errb.Reset()
	if code := dispatch([]string{"reload", "-admin", "unix:" + filepath.Join(dir, "ctl.sock"), "-token-file", filepath.Join(dir, "wrong")}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "401") || !strings.Contains(errb.String(), "previous token") {
		t.Errorf("wrong token: exit %d: %s; want the 401 and how to reload after a rotation", code, errb.String())
	}
}

// TestReloadUnusableFile: reload -c of a file with errors says that no
// reload was asked for, not that "nothing started" (the running gmproxy
// is untouched and keeps serving).
func TestReloadUnusableFile(t *testing.T) {
	bad := filepath.Join("..", "..", "conf", "testdata", "bad", "listeners.yaml")
	code, _, errs := ccRun("reload", "-c", bad)
	if code != 1 || strings.Contains(errs, "nothing started") || !strings.Contains(errs, "no reload was asked for") {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
}

// TestReloadStalePIDFile: a pid file naming a process that runs another
// program (gmproxy stopped, the ID reused) is refused: SIGHUP would end
// that process.
func TestReloadStalePIDFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the program of a process is read from /proc")
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Skip("no sleep program:", err)
	}
	defer other.Process.Kill()
	pidFile := filepath.Join(t.TempDir(), "gmproxy.pid")
	os.WriteFile(pidFile, []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644)
	var out, errb bytes.Buffer
	if code := dispatch([]string{"reload", "-pid", pidFile}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not gmproxy") {
		t.Errorf("pid file of a sleep process: exit %d, %s%s; want 1 and the stale file named", code, out.String(), errb.String())
	}
	done := make(chan error, 1)
	go func() { done <- other.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the other process ended (%v): it was signalled", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestAdminFlagExposureWarned: -admin replaces admin.address after the
// configuration's check, so it gets that check's warning itself: an
// address open to the network (every address here) with POST /reload and
// no token is warned about, a loopback one is not.
func TestAdminFlagExposureWarned(t *testing.T) {
	for _, tc := range []struct {
		admin string
		warn  bool
	}{{":0", true}, {"127.0.0.1:0", false}} {
		r := startRun(t, "-dev-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-admin", tc.admin)
		warned := strings.Contains(r.stderr.String(), "reachable from the network without a token")
		if warned != tc.warn {
			t.Errorf("-admin %s: warned %v, want %v:\n%s", tc.admin, warned, tc.warn, r.stderr.String())
		}
		if code := r.stop(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	if ws := adminFlagWarnings("0.0.0.0:9100", conf.Admin{Pprof: true, TokenFile: "t", Token: []byte("0123456789abcdef")}); len(ws) != 1 || !strings.Contains(ws[0], "pprof") {
		t.Errorf("exposed with a token and pprof: %q, want the pprof warning only", ws)
	}
}

// TestReloadWaitsForTheOutcome: gmproxy reload waits, by default, longer
// than the longest reload a supervisor makes (a starting worker waited
// for, then the prepare and commit steps), so that it does not report as
// failed a reload that then succeeds; when its -timeout passes first it
// says the reload may still be under way.
func TestReloadWaitsForTheOutcome(t *testing.T) {
	if longest := workerStartTimeout + 2*workerReloadTimeout; reloadTimeout <= longest {
		t.Errorf("gmproxy reload waits %v by default, a supervisor's reload may take %v", reloadTimeout, longest)
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	var out, errb bytes.Buffer
	code := dispatch([]string{"reload", "-admin", srv.Listener.Addr().String(), "-timeout", "200ms"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "may still be under way") {
		t.Errorf("a reload without an outcome within -timeout: exit %d, %q; want 1 and that it may still be under way", code, errb.String())
	}
}
