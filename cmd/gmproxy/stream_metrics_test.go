package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gmproxy/gmproxy/internal/devpki"
)

// seriesWith returns the value of the first series of family name whose
// labels hold every one of labels (`site="s"`), and whether there is one.
func seriesWith(t *testing.T, admin, name string, labels ...string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
lines:
	for _, l := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(l, name+"{")
		if !ok {
			continue
		}
		set, value, _ := strings.Cut(rest, "} ")
		for _, want := range labels {
			if !strings.Contains(set, want) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		return v, true
	}
	return 0, false
}

// TestRunStreamTargetSeriesKeptOnReload: a stream site with a single
// target (stream.target) gets an upstream of its own, which no entry of
// upstreams names. A reload keeps what the new configuration still has:
// that upstream too, its bytes counted and its target's health, not
// deleted at every reload as an upstream the configuration removed.
func TestRunStreamTargetSeriesKeptOnReload(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "spliced\n")
	}))
	defer backend.Close()
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := fmt.Sprintf(`listeners: [{address: 127.0.0.1:0}]
sites:
  - name: s
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    stream: {target: %s}
admin: {address: 127.0.0.1:0}
access_log: {path: "off"}
`, backend.Listener.Addr().String())
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)
	ca := filepath.Join(dir, devpki.FileCACert)
	if out, _ := getOut(t, "-ntls", "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/"); out != "spliced\n" {
		t.Fatalf("through the stream: %q", out)
	}
	const bytes, healthy = "gmproxy_stream_bytes_total", "gmproxy_upstream_target_healthy"
	target := `target="` + backend.Listener.Addr().String() + `"`
	var before float64
	waitFor(t, func() bool {
		before, _ = seriesWith(t, r.admin, bytes, `site="s"`, `direction="tx"`)
		return before > 0
	})
	if v, ok := seriesWith(t, r.admin, healthy, target); !ok || v != 1 {
		t.Fatalf("%s{%s}: %v (exported %v), want 1", healthy, target, v, ok)
	}

	// Logged once the reload is applied, metrics included.
	r.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(r.stderr.String(), "reload succeeded") })
	if v, ok := seriesWith(t, r.admin, bytes, `site="s"`, `direction="tx"`); !ok || v < before {
		t.Errorf("after a reload that kept the site: %s{site=\"s\",direction=\"tx\"} %v (exported %v), want at least %v", bytes, v, ok, before)
	}
	if v, ok := seriesWith(t, r.admin, healthy, target); !ok || v != 1 {
		t.Errorf("after a reload that kept the target: %s{%s} %v (exported %v), want 1", healthy, target, v, ok)
	}
}
