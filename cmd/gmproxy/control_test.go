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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/daemon"
	"github.com/gmproxy/gmproxy/internal/devpki"
)

// TestRunControlAddress: with admin.control_address, POST /reload is served
// there only (not on the admin address that Prometheus scrapes), on a Unix
// socket only its owner may open, and with token_file only with the token.
func TestRunControlAddress(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "control.sock")
	const token = "0123456789abcdef-token"
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := fmt.Sprintf(`listeners:
  - address: 127.0.0.1:0
sites:
  - name: s
    server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes:
      - {path: /, respond: {body: "ok"}}
admin: {address: "127.0.0.1:0", control_address: "unix:%s", token_file: admin.token}
access_log: {path: "off"}
`, sock)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)

	res, err := http.Post("http://"+r.admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusOK {
		t.Errorf("POST /reload on the metrics address: %d, want it not served there", res.StatusCode)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("control socket %v (%v): want it private to its owner", fi.Mode(), err)
	}
	unix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, "unix", sock)
	}}}
	post := func(auth string) (int, string) {
		req, _ := http.NewRequest("POST", "http://gmproxy/reload", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := unix.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := post(""); code != http.StatusUnauthorized {
		t.Errorf("without token: %d %q", code, body)
	}
	if code, body := post("Bearer " + token); code != http.StatusOK || !strings.Contains(body, "reloaded") {
		t.Errorf("with token: %d %q", code, body)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr.String())
	}
}

// TestControlReloadOutcome: POST /reload says what became of the
// configuration: refused (the running one is kept, 422), made in part (a
// worker refused to commit what the others switched to: the new one is in
// force, 500), abandoned by a shutdown (503), or made (200).
func TestControlReloadOutcome(t *testing.T) {
	for _, tc := range []struct {
		err        error
		wantStatus int
		wantBody   string
	}{
		{nil, http.StatusOK, "reloaded"},
		{errors.New("gmproxy.yaml:3:5: bad"), http.StatusUnprocessableEntity, "the running configuration is kept"},
		{&splitReloadError{errors.New("worker 1: stopping")}, http.StatusInternalServerError, "the new configuration is in force"},
		{errReloadAbandoned, http.StatusServiceUnavailable, "shutting down"},
	} {
		h := controlHandler(new(adminState), "127.0.0.1:9", func(context.Context) error { return tc.err })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/reload", nil))
		if rec.Code != tc.wantStatus || !strings.Contains(rec.Body.String(), tc.wantBody) {
			t.Errorf("reload error %v: %d %q, want %d and %q", tc.err, rec.Code, rec.Body.String(), tc.wantStatus, tc.wantBody)
		}
		if strings.Contains(rec.Body.String(), "kept") != (tc.wantStatus == http.StatusUnprocessableEntity) {
			t.Errorf("reload error %v: %q says the running configuration is kept only when it is", tc.err, rec.Body.String())
		}
	}
}

// TestListenControlKeepsALiveSocket: a control socket left by a process
// that ended is replaced, one another process still listens on is not:
// a second gmproxy started by mistake fails instead of silently taking
// the running one's POST /reload.
func TestListenControlKeepsALiveSocket(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	again, err := listenControl(conf.UnixPrefix + stale)
	if err != nil {
		t.Fatalf("a stale socket not replaced: %v", err)
	}
	again.Close()

	live := filepath.Join(dir, "live.sock")
	running, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	if second, err := listenControl(conf.UnixPrefix + live); err == nil {
		second.Close()
		t.Fatal("a socket another process listens on was taken over")
	}
	c, err := net.Dial("unix", live)
	if err != nil {
		t.Fatalf("the running process's socket after the refused takeover: %v", err)
	}
	c.Close()
}

// TestWorkerRefusesLoneReload: a worker's admin socket serves the steps of
// the reload its supervisor makes in every worker, not a reload of its
// own (which it refuses, as it ignores SIGHUP): one worker would serve a
// configuration the others do not, and one taken between a prepare and
// its commit replaced the prepared generation behind the supervisor's
// back (a refused one left it pending, and the commit after it served it
// while the worker took the old configuration for the one in force).
func TestWorkerRefusesLoneReload(t *testing.T) {
	if newTelemetry == nil {
		t.Skip("no telemetry in this build")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "w.sock")
	cfg := &conf.Config{}
	cfg.Admin.Address = conf.UnixPrefix + sock
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &runner{wk: &worker{dir: dir}, cfg: cfg, log: log, env: &daemon.Env{Logger: log}}
	r.tel = newTelemetry(log, r.env)
	reloads := 0
	if _, ok := r.startAdmin(io.Discard, func(context.Context) error { reloads++; return nil }); !ok || r.admin == nil {
		t.Fatal("admin socket not started")
	}
	defer r.admin.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	res, err := c.Post("http://localhost/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK || reloads != 0 {
		t.Errorf("POST /reload on a worker's socket: %d %q, %d reloads; want it refused", res.StatusCode, body, reloads)
	}
	if !strings.Contains(string(body), "supervisor") {
		t.Errorf("the refusal does not say where to reload: %q", body)
	}
}

// postReload posts /reload to the admin listener at addr with the bearer
// token tok ("" for none) and returns the status.
func postReload(t *testing.T, addr, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/reload", nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// rotateTokenByReload checks that a token rotated (the old one leaked)
// applies with the reload that reads it: token_file holds oldTok, in
// force; it is rewritten with a new token and a reload made with the old
// one; from then on the old token is refused and the new one accepted.
func rotateTokenByReload(t *testing.T, admin, tokenFile, oldTok string) {
	t.Helper()
	if code := postReload(t, admin, oldTok); code != http.StatusOK {
		t.Fatalf("reload with the token in force: %d", code)
	}
	const newTok = "rotated-token-fedcba9876543210"
	if err := os.WriteFile(tokenFile, []byte(newTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := postReload(t, admin, oldTok); code != http.StatusOK {
		t.Fatalf("the reload that reads the new token, made with the old one: %d", code)
	}
	if code := postReload(t, admin, oldTok); code != http.StatusUnauthorized {
		t.Errorf("the old token after the reload that replaced it: %d, want 401", code)
	}
	if code := postReload(t, admin, newTok); code != http.StatusOK {
		t.Errorf("the new token after the reload that read it: %d, want 200", code)
	}
	if code := postReload(t, admin, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
}

// TestAdminTokenTakenByReload: a new admin token (one rotated because the
// old one leaked) applies with the reload that reads it, not at the next
// restart: the old token is refused from then on.
func TestAdminTokenTakenByReload(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	const oldTok = "first-token-0123456789abcdef"
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(oldTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := `listeners:
  - address: 127.0.0.1:0
sites:
  - name: s
    server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes:
      - {path: /, respond: {body: "ok"}}
admin: {address: "127.0.0.1:0", token_file: admin.token}
access_log: {path: "off"}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)
	rotateTokenByReload(t, r.admin, tokenFile, oldTok)
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr.String())
	}
}

// TestWorkersAdminTokenTakenByReload: as TestAdminTokenTakenByReload, on
// the supervisor's admin listener in worker mode.
func TestWorkersAdminTokenTakenByReload(t *testing.T) {
	cfgPath, listen, admin := workersTestPaths(t)
	const oldTok = "first-token-0123456789abcdef"
	tokenFile := filepath.Join(filepath.Dir(cfgPath), "admin.token")
	if err := os.WriteFile(tokenFile, []byte(oldTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, cfgPath, "workers: 2\n", listen, admin+"\n  token_file: "+tokenFile, "[{respond: {status: 200}}]", "")
	r := startWorkerRun(t, cfgPath, admin)
	rotateTokenByReload(t, admin, tokenFile, oldTok)
	if strings.Contains(r.logs.String(), "restart gmproxy to apply it") {
		t.Error("a reload that changed the token alone warned of a restart")
	}
}

// TestAdminReloadAppliesPprofWarnsAddress: a reload applies admin.pprof at
// once and warns of no restart for it; a changed admin.address, which
// needs one, is warned about on that reload and on every later one while
// the process still listens on the old address, not only on the reload
// that made the change.
func TestAdminReloadAppliesPprofWarnsAddress(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	write := func(admin string) {
		t.Helper()
		cfg := `listeners:
  - address: 127.0.0.1:0
sites:
  - name: s
    server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes:
      - {path: /, respond: {body: "ok"}}
admin: ` + admin + `
access_log: {path: "off"}
`
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{address: "127.0.0.1:0"}`)
	r := startRun(t, "-c", file)
	pprof := func() int {
		t.Helper()
		res, err := http.Get("http://" + r.admin + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	restarts := func() int { return strings.Count(r.stderr.String(), "restart gmproxy to apply it") }
	if code := pprof(); code != http.StatusNotFound {
		t.Fatalf("pprof off: /debug/pprof/ %d", code)
	}
	write(`{address: "127.0.0.1:0", pprof: true}`)
	if code := postReload(t, r.admin, ""); code != http.StatusOK {
		t.Fatalf("reload: %d\n%s", code, r.stderr.String())
	}
	if code := pprof(); code != http.StatusOK {
		t.Errorf("pprof turned on by a reload: /debug/pprof/ %d, want 200", code)
	}
	if n := restarts(); n != 0 {
		t.Errorf("a reload that changed admin.pprof alone: %d warnings of a restart, want 0:\n%s", n, r.stderr.String())
	}
	write(`{address: "127.0.0.1:1", pprof: true}`)
	for i := 1; i <= 2; i++ {
		if code := postReload(t, r.admin, ""); code != http.StatusOK {
			t.Fatalf("reload %d: %d\n%s", i, code, r.stderr.String())
		}
		if n := restarts(); n != i {
			t.Errorf("after reload %d with admin.address changed: %d restart warnings, want %d:\n%s", i, n, i, r.stderr.String())
		}
	}
	if !strings.Contains(r.stderr.String(), "admin.address") {
		t.Errorf("the warning does not name admin.address:\n%s", r.stderr.String())
	}
	write(`{address: "127.0.0.1:0", pprof: true}`)
	if code := postReload(t, r.admin, ""); code != http.StatusOK || restarts() != 2 {
		t.Errorf("admin.address back to the running one: reload %d, %d restart warnings, want 2", code, restarts())
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr.String())
	}
}

// TestRelativeControlSocket: a relative unix: control_address is resolved
// against the configuration file's folder, as every other path of the
// configuration is, not against the working directory (which differs
// between the service, e.g. / under systemd, and an operator's shell):
// gmproxy run listens there and gmproxy reload -c, run from elsewhere,
// finds it.
func TestRelativeControlSocket(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := `listeners:
  - address: 127.0.0.1:0
sites:
  - name: s
    server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes:
      - {path: /, respond: {body: "ok"}}
admin: {address: "127.0.0.1:0", control_address: "unix:ctl.sock"}
access_log: {path: "off"}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The test runs in the package's folder: a socket made there is
	// removed, and fails the test.
	t.Cleanup(func() { os.Remove("ctl.sock") })
	r := startRun(t, "-c", file)
	if _, err := os.Stat("ctl.sock"); err == nil {
		t.Error("the control socket was made in the working directory")
	}
	if fi, err := os.Stat(filepath.Join(dir, "ctl.sock")); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("no control socket next to the configuration file: %v", err)
	}
	var out, errb bytes.Buffer
	if code := dispatch([]string{"reload", "-c", file}, &out, &errb); code != 0 || !strings.Contains(out.String(), "reloaded") {
		t.Errorf("reload -c: exit %d: %s%s", code, out.String(), errb.String())
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr.String())
	}
}
