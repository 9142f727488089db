package main

import (
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
		h := controlHandler(&conf.Config{}, "127.0.0.1:9", func() error { return tc.err })
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
	if _, ok := r.startAdmin(io.Discard, func() error { reloads++; return nil }); !ok || r.admin == nil {
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
