package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	code, out, errs := ccRun("certs", "-out", dir, "-hosts", "gm.example.test,127.0.0.1", "-days", "30")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{devpki.FileCACert, devpki.FileServerSignKey, devpki.FileServerEncCert, devpki.FileClientEncKey, devpki.FileECDSAServerCert} {
		if !strings.Contains(out, filepath.Join(dir, f)) {
			t.Errorf("output does not list %s", f)
		}
	}
	ca, err := smkey.LoadCertificatesFile(filepath.Join(dir, devpki.FileCACert))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := smkey.LoadCertificatesFile(filepath.Join(dir, devpki.FileServerEncCert))
	if err != nil {
		t.Fatal(err)
	}
	roots := smx509.NewCertPool()
	roots.AddCert(ca[0])
	if _, err := enc[0].Verify(smx509.VerifyOptions{Roots: roots, DNSName: "gm.example.test"}); err != nil {
		t.Errorf("enc cert: %v", err)
	}
	if days := enc[0].NotAfter.Sub(enc[0].NotBefore).Hours() / 24; days < 29 || days > 31 {
		t.Errorf("validity %.1f days", days)
	}

	// The printed snippet is a configuration that passes check.
	i := strings.Index(out, "\nlisteners:")
	j := strings.Index(out, "\nTry it")
	if i < 0 || j < i {
		t.Fatalf("no snippet in output:\n%s", out)
	}
	cfgFile := filepath.Join(t.TempDir(), "gmproxy.yaml")
	if err := os.WriteFile(cfgFile, []byte(out[i+1:j]), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, cout, cerr := ccRun("check", "-c", cfgFile); code != 0 {
		t.Errorf("snippet fails check: %s%s", cout, cerr)
	}

	// An existing PKI is kept unless -force.
	if code, _, errs := ccRun("certs", "-out", dir); code != 1 || !strings.Contains(errs, "-force") {
		t.Errorf("existing PKI: exit %d %q", code, errs)
	}
	if code, _, errs := ccRun("certs", "-out", dir, "-force", "-no-ecdsa"); code != 0 {
		t.Errorf("-force: exit %d %q", code, errs)
	}
}

func TestCertsUsage(t *testing.T) {
	for _, args := range [][]string{{"certs"}, {"certs", "-out", t.TempDir(), "-days", "0"}, {"certs", "-out", t.TempDir(), "-hosts", " , "}} {
		if code, _, _ := ccRun(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestCertsKeyServerKeysPrivate: -force -keyserver over a folder whose key
// server key is world-readable, or a symbolic link elsewhere, leaves a new
// key readable by its owner only, in the folder, and the link's target
// untouched.
func TestCertsKeyServerKeysPrivate(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-no-ecdsa", "-keyserver", "keys.test"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	caKey := filepath.Join(dir, fileKSCAKey)
	if err := os.Chmod(caKey, 0o644); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "not-a-key")
	if err := os.WriteFile(elsewhere, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	clientKey := filepath.Join(dir, fileKSClientKey)
	os.Remove(clientKey)
	if err := os.Symlink(elsewhere, clientKey); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ccRun("certs", "-out", dir, "-no-ecdsa", "-keyserver", "keys.test", "-force"); code != 0 {
		t.Fatalf("-force: exit %d: %s", code, errs)
	}
	for _, k := range []string{fileKSCAKey, fileKSServerKey, fileKSClientKey} {
		st, err := os.Lstat(filepath.Join(dir, k))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want a regular file with 0600", k, st.Mode())
		}
	}
	if b, _ := os.ReadFile(elsewhere); string(b) != "keep me" {
		t.Errorf("the symbolic link's target was overwritten: %q", b)
	}
}

// TestCertsKeepsOtherFiles: a folder that holds any file certs would write
// (not only ca.crt) is left alone without -force.
func TestCertsKeepsOtherFiles(t *testing.T) {
	for _, name := range []string{devpki.FileServerSignKey, devpki.FileECDSAServerKey, fileKSCAKey} {
		dir := t.TempDir()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("the operator's own key"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errs := ccRun("certs", "-out", dir, "-keyserver", "keys.test")
		if b, _ := os.ReadFile(p); string(b) != "the operator's own key" {
			t.Errorf("%s was replaced without -force (exit %d)", name, code)
		}
		if code != 1 || !strings.Contains(errs, name) || !strings.Contains(errs, "-force") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and advice to use -force", name, code, errs)
		}
	}
}

// TestCertsSnippetQuoted: the printed configuration passes check also
// for a wildcard first host and a folder whose name YAML would misread
// unquoted (" #" starts a comment, ": " a mapping).
func TestCertsSnippetQuoted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki #1: test")
	code, out, errs := ccRun("certs", "-out", dir, "-hosts", "*.example.test,localhost", "-days", "30")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	i := strings.Index(out, "\nlisteners:")
	j := strings.Index(out, "\nTry it")
	if i < 0 || j < i {
		t.Fatalf("no snippet in output:\n%s", out)
	}
	cfgFile := filepath.Join(t.TempDir(), "gmproxy.yaml")
	if err := os.WriteFile(cfgFile, []byte(out[i+1:j]), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, cout, cerr := ccRun("check", "-no-bind", "-c", cfgFile); code != 0 {
		t.Errorf("snippet fails check: %s%s\n%s", cout, cerr, out[i+1:j])
	}
}

// TestCertsRefusesBadHosts: a host that is neither an IP address nor a
// DNS name (brackets, a port, a URL) is refused instead of becoming a
// dNSName SAN no client can match.
func TestCertsRefusesBadHosts(t *testing.T) {
	for _, args := range [][]string{
		{"-hosts", "localhost,[::1]"},
		{"-hosts", "localhost:8443"},
		{"-hosts", "https://gm.example.test"},
		{"-hosts", "bad name.test"},
		{"-hosts", "localhost", "-keyserver", "keys.test:7443"},
	} {
		dir := t.TempDir()
		code, _, errs := ccRun(append([]string{"certs", "-out", dir}, args...)...)
		if code != 2 || !strings.Contains(errs, "neither a DNS name nor an IP address") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
		if _, err := os.Stat(filepath.Join(dir, devpki.FileCACert)); err == nil {
			t.Errorf("%v: a PKI was written", args)
		}
	}
	// Wildcards, IPv6 and IPv4 addresses are fine.
	if code, _, errs := ccRun("certs", "-out", t.TempDir(), "-no-ecdsa", "-hosts", "*.example.test,gm-1.example.test,::1,127.0.0.1", "-keyserver", "10.0.0.1"); code != 0 {
		t.Errorf("good hosts: exit %d: %s", code, errs)
	}
}
