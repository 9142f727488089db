package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func ccRun(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = dispatch(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckGood(t *testing.T) {
	code, out, errs := ccRun("check", "-c", "../../conf/testdata/good/full.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if want := "gmproxy: configuration file ../../conf/testdata/good/full.yaml test is successful\n"; out != want || errs != "" {
		t.Errorf("stdout %q stderr %q", out, errs)
	}
}

func TestCheckWarningsOnly(t *testing.T) {
	// minimal.yaml is valid; add a warning (unused upstream) in a copy.
	b, err := os.ReadFile("../../conf/testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../../conf/testdata/pki")
	yaml := strings.ReplaceAll(string(b), "../pki", abs) + "  - {name: spare, targets: [127.0.0.1:9]}\n"
	f := filepath.Join(t.TempDir(), "warn.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := ccRun("check", "-c", f)
	if code != 0 {
		t.Fatalf("exit %d with warnings only\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "warning: upstreams[1].name: upstream \"spare\" is not used") || !strings.Contains(out, "test is successful (1 warning)") {
		t.Errorf("stdout %q stderr %q", out, errs)
	}
	code, out, errs = ccRun("check", "-q", "-dump", f)
	if code != 0 || errs != "" || out == "" || !strings.Contains(out, "cache_size: 20480") || strings.Contains(out, "successful") {
		t.Errorf("-q -dump: exit %d stdout %q stderr %q", code, out, errs)
	}
}

// TestCheckDumpShowsWorkers: -dump, "defaults filled in", shows the worker
// processes an unset workers runs with on this platform (auto where the
// worker mode exists, else 1), and a set one as written.
func TestCheckDumpShowsWorkers(t *testing.T) {
	b, err := os.ReadFile("../../conf/testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../../conf/testdata/pki")
	text := strings.ReplaceAll(string(b), "../pki", abs)
	want := "\nworkers: 1\n"
	if workersSupported {
		want = "\nworkers: auto\n"
	}
	for _, tc := range []struct{ extra, want string }{{"", want}, {"workers: 3\n", "\nworkers: \"3\"\n"}} {
		f := filepath.Join(t.TempDir(), "w.yaml")
		if err := os.WriteFile(f, []byte(text+tc.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := ccRun("check", "-q", "-no-bind", "-dump", "-c", f)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, stdout lacks %q:\n%s%s", tc.extra, code, tc.want, out, errs)
		}
	}
}

func TestCheckBad(t *testing.T) {
	files, _ := filepath.Glob("../../conf/testdata/bad/*.yaml")
	if len(files) == 0 {
		t.Fatal("no bad configs")
	}
	for _, f := range files {
		code, out, errs := ccRun("check", "-c", f)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", f, code)
		}
		if out != "" {
			t.Errorf("%s: stdout %q", f, out)
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "gmproxy: configuration file "+f+" test failed (") {
			t.Errorf("%s: last line %q", f, last)
		}
		if !strings.HasPrefix(lines[0], f+":") || !strings.Contains(lines[0], "error") && !strings.Contains(lines[0], "warning") {
			t.Errorf("%s: first line %q", f, lines[0])
		}
	}
	// A known message, with position.
	_, _, errs := ccRun("check", "-c", "../../conf/testdata/bad/typos.yaml")
	if !strings.Contains(errs, "typos.yaml:5:5: error: sites[0].sever_names: unknown key \"sever_names\"; did you mean \"server_names\"?") {
		t.Errorf("typo message missing:\n%s", errs)
	}
}

func TestCheckUsage(t *testing.T) {
	if code, _, _ := ccRun("check"); code != 2 {
		t.Errorf("no -c: exit %d", code)
	}
	if code, _, errs := ccRun("check", "-c", filepath.Join(t.TempDir(), "none.yaml")); code != 1 || !strings.Contains(errs, "cannot read the configuration") {
		t.Errorf("missing file: exit %d %q", code, errs)
	}
	if code, _, _ := ccRun("check", "-c", "a", "b"); code != 2 {
		t.Errorf("extra args: exit %d", code)
	}
}
