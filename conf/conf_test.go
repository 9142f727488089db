package conf

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

var update = flag.Bool("update", false, "rewrite the .golden files")

func TestMain(m *testing.M) {
	flag.Parse()
	now = func() time.Time { return testNow }
	for _, dir := range []string{"testdata", "../testdata/pki-tongsuo"} {
		if err := testpeer.SecretModes(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	// Messages name files by absolute path too: make them machine independent.
	if wd, err := os.Getwd(); err == nil {
		got = bytes.ReplaceAll(got, []byte(wd), []byte("$PWD"))
	}
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestBadConfigs checks the messages for broken configurations.
func TestBadConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad configs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, probs := Check(f)
			if cfg != nil || !probs.HasErrors() {
				t.Errorf("want errors, got cfg=%v problems=%v", cfg != nil, probs)
			}
			var b strings.Builder
			for _, p := range probs {
				b.WriteString(p.String())
				b.WriteByte('\n')
			}
			golden(t, strings.TrimSuffix(f, ".yaml")+".golden", []byte(b.String()))
			if _, err := Load(f); err == nil {
				t.Error("Load accepted it")
			} else if _, ok := err.(Problems); !ok {
				t.Errorf("Load error is %T, want Problems", err)
			}
		})
	}
}

// TestGoodConfigs checks good configurations against their normalised form
// (defaults filled) and that the normalised form loads to the same result.
func TestGoodConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good configs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			norm, err := cfg.Normalized()
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			for _, w := range cfg.Warnings {
				b.WriteString("# " + w.String() + "\n")
			}
			b.Write(norm)
			golden(t, strings.TrimSuffix(f, ".yaml")+".golden", b.Bytes())

			// Round trip: the normalised form is a valid configuration
			// that normalises to itself (written beside the original so
			// relative paths still resolve).
			again, err := Parse(f, norm)
			if err != nil {
				t.Fatalf("normalised form does not load: %v", err)
			}
			norm2, err := again.Normalized()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(norm, norm2) {
				t.Errorf("normalised form is not stable:\n%s\n---\n%s", norm, norm2)
			}
		})
	}
}

// siteHead starts the configurations of the merge-key tests: a listener
// and a TLCP site whose routes the test lists next.
const siteHead = `
listeners: [{address: "127.0.0.1:0"}]
sites:
  - server_names: [portal.example.cn]
    tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes:`

// TestMergeKeyListEarlierWins holds a merge key's list of mappings to the
// YAML merge type (yaml.org/type/merge.html) as yaml.v3 reads it: a key in
// a mapping earlier in the list overrides the same key in a later one, and
// the mapping's own keys override both.
func TestMergeKeyListEarlierWins(t *testing.T) {
	const text = siteHead + `
      - {path_prefix: /a, upstream: a}
      - {path_prefix: /b, upstream: b}
      - {path_prefix: /, upstream: c}
upstreams:
  - {name: a, targets: [127.0.0.1:8080], timeouts: &a {connect: 1s, read: 10s}}
  - {name: b, targets: [127.0.0.1:8080], timeouts: &b {connect: 2s, read: 20s, idle: 30s}}
  - name: c
    targets: [127.0.0.1:8080]
    timeouts:
      <<: [*a, *b]
      read: 3s
`
	cfg, err := Parse("testdata/good/merge.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Upstreams[2].Timeouts
	if got.Connect != time.Second || got.Read != 3*time.Second || got.Idle != 30*time.Second {
		t.Errorf("connect %v, read %v, idle %v; want 1s (the first merged mapping's), 3s (its own), 30s (the second's)", got.Connect, got.Read, got.Idle)
	}
}

// TestSecondMergeKeyRefused: two merge keys in one mapping (a section,
// or a mapping of header names) are a key given twice: refused at the
// second, with the one-key form as the fix, instead of both applied in an
// order no other YAML tool shares.
func TestSecondMergeKeyRefused(t *testing.T) {
	const text = siteHead + `
      - path_prefix: /
        upstream: c
        request_headers:
          set:
            <<: &h1 {X-A: a}
            <<: &h2 {X-B: b}
upstreams:
  - {name: a, targets: [127.0.0.1:8080], timeouts: &a {connect: 1s}}
  - {name: b, targets: [127.0.0.1:8080], timeouts: &b {connect: 2s}}
  - name: c
    targets: [127.0.0.1:8080]
    timeouts:
      <<: *a
      <<: *b
`
	_, err := Parse("testdata/good/merge.yaml", []byte(text))
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("two merge keys in a mapping: %v, want problems", err)
	}
	var lines []int
	for _, p := range probs {
		if strings.Contains(p.String(), "second merge key") {
			lines = append(lines, p.Line)
		}
	}
	if !slices.Equal(lines, []int{16, 24}) {
		t.Errorf("second merge keys reported at lines %v, want 16 and 24:\n%v", lines, err)
	}
}

// TestShadowedRouteWarned: routes are tried in order, not by the longest
// prefix as nginx's locations are, so a route written after one whose
// path_prefix its path starts with, and that matches on nothing else,
// never gets a request. An nginx configuration carried over in its order
// (location /api, then location /api/v1) does that.
func TestShadowedRouteWarned(t *testing.T) {
	const text = siteHead + `
      - {path_prefix: /api, upstream: app}
      - {path_prefix: /api/v1, upstream: app}
      - {path: /api/health, respond: {status: 200}}
      - {path: /login, upstream: app}
      - {path: /login, host: [a.example.cn], upstream: app}
      - {path_prefix: /login, upstream: app}
      - {path_prefix: /static, host: [a.example.cn], upstream: app}
      - {path_prefix: /static/img, upstream: app}
      - {path_prefix: /ap, upstream: app}
      - {path_prefix: /, upstream: app}
upstreams:
  - {name: app, targets: [127.0.0.1:8080]}
`
	expectWarnings(t, "testdata/good/shadow.yaml", text, "never matches", []string{
		"12:9 sites[0].routes[1]: route never matches: routes[0] before it (path_prefix /api) matches every request it would",
		"13:9 sites[0].routes[2]: route never matches: routes[0] before it (path_prefix /api) matches every request it would",
		"15:9 sites[0].routes[4]: route never matches: routes[3] before it (path /login) matches every request it would",
	})
}

// TestMergeKeyInNameValueMapping: a merge key works in the mappings of
// header names as in sections (one set of headers shared by routes), the
// mapping's own names overriding merged ones whatever their letter case,
// and an earlier merged mapping overriding a later one.
func TestMergeKeyInNameValueMapping(t *testing.T) {
	const text = siteHead + `
      - path_prefix: /a
        upstream: app
        request_headers: {set: &h {X-A: "1", X-B: "1"}, add: &g {X-A: "2", X-C: "2"}}
      - path_prefix: /
        upstream: app
        request_headers:
          set: {<<: [*h, *g], x-b: "3"}
upstreams:
  - {name: app, targets: [127.0.0.1:8080]}
`
	cfg, err := Parse("testdata/good/merge.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Sites[0].Routes[1].RequestHeaders.Set
	want := map[string]string{"X-A": "1", "x-b": "3", "X-C": "2"}
	if !maps.Equal(got, want) {
		t.Errorf("set %v, want %v", got, want)
	}
}

// TestMergedSectionReplacedWhole: a key of a mapping replaces the value a
// merge key (<<) gave the same key wholly, nested sections included, as
// YAML's merge type and yaml.v3's Unmarshal have it: passive: {max_fails:
// 2} after a merged passive: {max_fails: 7, fail_window: 30s} leaves
// fail_window at its default (as without the merge), not at 30s; and of
// a merge key's list, the earlier mapping's section wins wholly too.
func TestMergedSectionReplacedWhole(t *testing.T) {
	const text = siteHead + `
      - {path_prefix: /a, upstream: a}
      - {path_prefix: /b, upstream: b}
      - {path_prefix: /c, upstream: c}
      - {path_prefix: /, upstream: d}
upstreams:
  - {name: a, targets: [127.0.0.1:8080], health_checks: &hc {passive: {max_fails: 7, fail_window: 30s}}}
  - name: b
    targets: [127.0.0.1:8080]
    health_checks:
      <<: *hc
      passive: {max_fails: 2}
  - {name: c, targets: [127.0.0.1:8080], health_checks: {passive: {max_fails: 2}}}
  - name: d
    targets: [127.0.0.1:8080]
    health_checks:
      <<: [{passive: {max_fails: 3}}, *hc]
`
	cfg, err := Parse("testdata/good/merge.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	merged, plain, list := cfg.Upstreams[1].HealthChecks.Passive, cfg.Upstreams[2].HealthChecks.Passive, cfg.Upstreams[3].HealthChecks.Passive
	if merged.MaxFails != 2 || merged.FailWindow != plain.FailWindow {
		t.Errorf("passive after a merge: max_fails %d, fail_window %v; want 2 and %v (the default), the merged section replaced", merged.MaxFails, merged.FailWindow, plain.FailWindow)
	}
	if list.MaxFails != 3 || list.FailWindow != plain.FailWindow {
		t.Errorf("passive from a merge list: max_fails %d, fail_window %v; want 3 and %v: the earlier mapping's section whole", list.MaxFails, list.FailWindow, plain.FailWindow)
	}
}

// TestNormalizedKeepsEmptyLists: gmproxy check -dump prints the effective
// configuration, which an operator may load in place of the file: a list
// written empty on purpose (upgrades: [], tunnel nothing) stays empty in
// it, instead of vanishing and coming back as its default (WebSocket
// tunnelled again), and a route that leaves upgrades out shows the default
// it gets.
func TestNormalizedKeepsEmptyLists(t *testing.T) {
	const text = siteHead + `
      - {path_prefix: /ws, upstream: a}
      - {path_prefix: /, upstream: a, upgrades: []}
upstreams:
  - {name: a, targets: [127.0.0.1:8080]}
`
	cfg, err := Parse("testdata/good/upgrades.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	norm, err := cfg.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("testdata/good/upgrades.yaml", norm)
	if err != nil {
		t.Fatalf("the normalised form does not load: %v\n%s", err, norm)
	}
	for i, want := range [][]string{{"websocket"}, {}} {
		got := again.Sites[0].Routes[i].Upgrades
		if fmt.Sprint(got) != fmt.Sprint(want) || got == nil {
			t.Errorf("route %d: upgrades %#v after the normalised form, want %q\n%s", i+1, got, want, norm)
		}
	}
}

// warningsAbout lists cfg's warnings whose message holds about, each as
// "line:column path: message".
func warningsAbout(cfg *Config, about string) []string {
	var got []string
	for _, w := range cfg.Warnings {
		if strings.Contains(w.Message, about) {
			got = append(got, fmt.Sprintf("%d:%d %s: %s", w.Line, w.Column, w.Path, w.Message))
		}
	}
	return got
}

// expectWarnings parses text as file and checks that its warnings whose
// message holds about are want ("line:column path: message"), in sorted
// order.
func expectWarnings(t *testing.T, file, text, about string, want []string) {
	t.Helper()
	cfg, err := Parse(file, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	got := warningsAbout(cfg, about)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("warnings about %q:\n%s\nwant:\n%s\nall: %v", about, strings.Join(got, "\n"), strings.Join(want, "\n"), cfg.Warnings)
	}
}
