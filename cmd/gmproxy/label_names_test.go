package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/metrics"
)

// TestRunChineseNamesInMetrics: a site and a route named in Chinese, with
// a space, appear as they are in /metrics, not as "other", and a name
// with a quote and a backslash is escaped as the text format wants.
func TestRunChineseNamesInMetrics(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gmproxy.yaml")
	cfg := `listeners: [{address: 127.0.0.1:0}]
sites:
  - name: 网上银行
    tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: server_enc.crt, enc_key: server_enc.key}
    routes:
      - {name: "账户 查询 \"v2\" \\ 旧", respond: {status: 204}}
      - {name: "a\tb", path: /other, respond: {status: 204}}
admin: {address: 127.0.0.1:0}
access_log: {path: "off"}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", file)
	ca := filepath.Join(dir, devpki.FileCACert)
	getOut(t, "-ntls", "-CAfile", ca, "-connect", r.addr, "-q", "https://localhost/")
	site, route := `site="网上银行"`, `route="账户 查询 \"v2\" \\ 旧"`
	waitFor(t, func() bool {
		v, _ := seriesWith(t, r.admin, "gmproxy_http_requests_total", site, route, `code="2xx"`)
		return v == 1
	})
	if _, ok := seriesWith(t, r.admin, "gmproxy_cert_not_after_timestamp_seconds", site, `role="sign"`); !ok {
		t.Errorf("no gmproxy_cert_not_after_timestamp_seconds{%s,role=\"sign\"}", site)
	}
	if _, ok := seriesWith(t, r.admin, "gmproxy_http_requests_total", `site="other"`); ok {
		t.Error(`a request counted under site="other"`)
	}
	// run warns of the names shown as "other" as check does, at their
	// place in the file, and of those only.
	if log := r.stderr.String(); !strings.Contains(log, "sites[0].routes[1].name") || strings.Contains(log, "sites[0].routes[0].name") || strings.Contains(log, "sites[0].name") {
		t.Errorf("run's warnings of names shown as other:\n%s", log)
	}
}

// TestCheckWarnsOfNamesShownAsOther: gmproxy check warns, at the name's
// place in the file, of a name the metrics show as "other" (too long, a
// control character); a Chinese name gets no warning. A name that is
// "other" or "none" itself is refused (conf: testdata/bad/reserved_names).
func TestCheckWarnsOfNamesShownAsOther(t *testing.T) {
	dir := t.TempDir()
	pki, _ := filepath.Abs(filepath.Join("..", "..", "conf", "testdata", "pki"))
	tls := "    tls: {cert: " + filepath.Join(pki, "server_ecdsa.crt") + ", key: " + filepath.Join(pki, "server_ecdsa.key") + "}\n"
	long := strings.Repeat("银", 43) // 129 bytes
	cfg := filepath.Join(dir, "gmproxy.yaml")
	os.WriteFile(cfg, []byte("listeners:\n  - address: 127.0.0.1:0\n    protocols: [tls]\nsites:\n"+
		"  - name: 网上银行\n"+tls+"    routes: [{name: 查询 v2, respond: {status: 204}}]\n"+
		"  - name: b\n    server_names: [b.example]\n"+tls+"    routes: [{respond: {status: 204}}]\n"+
		"  - name: "+long+"\n    server_names: [c.example]\n"+tls+"    routes:\n      - {name: \"a\\tb\", respond: {status: 204}}\n"+
		"      - {name: c, respond: {status: 204}}\n"), 0o644)
	var out, errb bytes.Buffer
	if code := dispatch([]string{"check", "-no-bind", "-c", cfg}, &out, &errb); code != 0 {
		t.Fatalf("check: exit %d, want 0 (warnings only)\n%s", code, errb.String())
	}
	for _, want := range []string{
		fmt.Sprintf(`%s:12:11: warning: sites[2].name: name %q is 129 bytes long`, cfg, long),
		cfg + `:16:16: warning: sites[2].routes[0].name: name "a\tb" has the control or format character U+0009`,
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("check output lacks %q", want)
		}
	}
	if strings.Contains(errb.String(), "网上银行") || strings.Contains(errb.String(), "查询") {
		t.Errorf("a Chinese name warned of:\n%s", errb.String())
	}
	if t.Failed() {
		t.Logf("check output:\n%s", errb.String())
	}
}

// TestCheckWarnsOfNamesPastLabelCaps: gmproxy check warns, once and at
// its place in the file, of the first site, route and upstream name past
// the metrics' cap of the label (whose series would show as "other"); a
// route name repeated in another site is one name, and a configuration
// at the caps gets no warning.
func TestCheckWarnsOfNamesPastLabelCaps(t *testing.T) {
	dir := t.TempDir()
	pki, _ := filepath.Abs(filepath.Join("..", "..", "conf", "testdata", "pki"))
	tls := "    tls: {cert: " + filepath.Join(pki, "server_ecdsa.crt") + ", key: " + filepath.Join(pki, "server_ecdsa.key") + "}\n"
	write := func(extra int) (string, map[string]int) {
		var b strings.Builder
		line := func(s string) int { b.WriteString(s); return strings.Count(b.String(), "\n") }
		at := make(map[string]int) // the lines of the first site, route and upstream past the caps
		line("listeners:\n  - address: 127.0.0.1:0\n    protocols: [tls]\nsites:\n")
		for i := range metrics.MaxSites + extra {
			n := line(fmt.Sprintf("  - name: s%d\n", i))
			if i == metrics.MaxSites {
				at["site"] = n
			}
			line(fmt.Sprintf("    server_names: [s%d.example]\n", i) + tls + "    routes:\n")
			// Sites 0 and 1 name the same routes (one name each), site
			// 2 two more and then the extra ones, the others none; the
			// catch-all route of each is one more: the cap at extra 0.
			var names []string
			switch i {
			case 0, 1:
				for j := range metrics.MaxRoutes - 3 {
					names = append(names, fmt.Sprintf("r%d", j))
				}
			case 2:
				for j := range 2 + extra {
					names = append(names, fmt.Sprintf("x%d", j))
				}
			}
			for j, name := range names {
				n := line(fmt.Sprintf("      - {name: %s, path_prefix: /%s/, upstream: u0}\n", name, name))
				if i == 2 && j == 2 {
					at["route"] = n
				}
			}
			line("      - {name: all, upstream: u0}\n")
		}
		line("upstreams:\n")
		for i := range metrics.MaxUpstreams + extra {
			n := line(fmt.Sprintf("  - {name: u%d, targets: [127.0.0.1:9]}\n", i))
			if i == metrics.MaxUpstreams {
				at["upstream"] = n
			}
		}
		cfg := filepath.Join(dir, fmt.Sprintf("gmproxy%d.yaml", extra))
		os.WriteFile(cfg, []byte(b.String()), 0o644)
		return cfg, at
	}
	for _, extra := range []int{0, 1} {
		cfg, at := write(extra)
		var out, errb bytes.Buffer
		if code := dispatch([]string{"check", "-no-bind", "-c", cfg}, &out, &errb); code != 0 {
			t.Fatalf("check: exit %d, want 0 (warnings only)\n%s", code, errb.String())
		}
		got := strings.Count(errb.String(), "names the metrics tell apart")
		if extra == 0 {
			if got != 0 {
				t.Errorf("at the caps: %d warnings of names past them, want none", got)
			}
			continue
		}
		for k, want := range []string{
			fmt.Sprintf(`%s:%d:11: warning: sites[%d].name: name "s%d" is past the %d site names the metrics tell apart`, cfg, at["site"], metrics.MaxSites, metrics.MaxSites, metrics.MaxSites),
			fmt.Sprintf(`%s:%d:16: warning: sites[2].routes[2].name: name "x2" is past the %d route names the metrics tell apart`, cfg, at["route"], metrics.MaxRoutes),
			fmt.Sprintf(`%s:%d:12: warning: upstreams[%d].name: name "u%d" is past the %d upstream names the metrics tell apart`, cfg, at["upstream"], metrics.MaxUpstreams, metrics.MaxUpstreams, metrics.MaxUpstreams),
		} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("check output lacks %q (%d)", want, k)
			}
		}
		if got != 3 {
			t.Errorf("%d warnings of names past the caps, want 3 (the first of each label)", got)
		}
		if t.Failed() {
			t.Logf("check output:\n%s", errb.String())
		}
	}
}

// TestKeyServerWarnsOfNamesShownAsOther: gmproxy keyserver warns, at its
// place in the file, of a key or client name its metrics will not show as
// it is (too long: shown as "other"); an unnamed key is named after its
// file. It is a warning: -check passes and the server starts, saying it
// in its log too. A name that is "other" or "none" itself, the label
// values of the names past the cap and of an empty value, is refused:
// its series would mix with theirs (an unnamed key's from its file too).
func TestKeyServerWarnsOfNamesShownAsOther(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-hosts", "localhost,127.0.0.1", "-keyserver", "127.0.0.1"); code != 0 {
		t.Fatalf("certs: exit %d: %s", code, errs)
	}
	enc, err := os.ReadFile(filepath.Join(dir, "server_enc.key"))
	if err != nil {
		t.Fatal(err)
	}
	keyName, fileName, clientName := strings.Repeat("k", 129), strings.Repeat("f", 129), strings.Repeat("c", 129)
	for _, f := range []string{fileName, "none"} {
		if err := os.WriteFile(filepath.Join(dir, f+".key"), enc, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ksFile := filepath.Join(dir, "keyserver.yaml")
	file := func(encFile string) string {
		return `listen: 127.0.0.1:0
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys:
  - {name: ` + keyName + `, key: server_sign.key, roles: [sign]}
  - {key: ` + encFile + `.key, roles: [decrypt, key_agreement]}
clients:
  - {name: edge, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [` + keyName + `, ` + encFile + `]}
  - {name: ` + clientName + `, subject: "CN=other,O=gmproxy test PKI", keys: [` + keyName + `]}
`
	}
	if err := os.WriteFile(ksFile, []byte(file("none")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := ccRun("keyserver", "-c", ksFile, "-check", "-no-bind")
	if refused := ksFile + `:5:11: error: keys[1].key: key name "none" is the label value "none"`; code == 0 || !strings.Contains(errs, refused) {
		t.Errorf("keyserver -check of a key named none after its file: exit %d, want the error %q\n%s%s", code, refused, out, errs)
	}
	if err := os.WriteFile(ksFile, []byte(file(fileName)), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		ksFile + `:4:12: warning: keys[0].name: name "` + keyName + `" is 129 bytes long`,
		ksFile + `:5:11: warning: keys[1].key: name "` + fileName + `" is 129 bytes long`,
		ksFile + `:8:12: warning: clients[1].name: name "` + clientName + `" is 129 bytes long`,
	}
	code, out, errs = ccRun("keyserver", "-c", ksFile, "-check", "-no-bind")
	if code != 0 {
		t.Fatalf("keyserver -check: exit %d, want 0 (warnings only)\n%s%s", code, out, errs)
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Errorf("keyserver -check output lacks %q", w)
		}
	}
	if strings.Contains(errs, "edge") {
		t.Errorf("the client edge warned of")
	}
	if t.Failed() {
		t.Logf("keyserver -check output:\n%s", errs)
	}
	ks := startKeyServerCmd(t, "-c", ksFile)
	ks.stop(t)
	for _, w := range want {
		// The log's text format quotes the problem, escaping its quotes.
		_, msg, _ := strings.Cut(w, "warning: ")
		if msg = strings.ReplaceAll(msg, `"`, `\"`); !strings.Contains(ks.stderr.String(), msg) {
			t.Errorf("keyserver's log lacks %q:\n%s", msg, ks.stderr.String())
		}
	}
}
