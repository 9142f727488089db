package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// ksRunning is gmproxy keyserver running in-process.
type ksRunning struct {
	addr   string
	sigs   chan os.Signal
	exit   chan int
	stderr *syncBuffer
}

func startKeyServerCmd(t *testing.T, args ...string) *ksRunning {
	t.Helper()
	r := &ksRunning{sigs: make(chan os.Signal, 4), exit: make(chan int, 1), stderr: &syncBuffer{}}
	ready := make(chan struct{})
	go func() {
		r.exit <- keyserverMain(args, &syncBuffer{}, r.stderr, r.sigs, func(addr string) { r.addr = addr; close(ready) })
	}()
	select {
	case <-ready:
	case code := <-r.exit:
		t.Fatalf("keyserver exited with %d before serving:\n%s", code, r.stderr.String())
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("keyserver did not start")
	}
	t.Cleanup(func() {
		select {
		case r.sigs <- syscall.SIGTERM:
		default:
		}
	})
	return r
}

func (r *ksRunning) stop(t *testing.T) int {
	t.Helper()
	r.sigs <- syscall.SIGTERM
	select {
	case code := <-r.exit:
		return code
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("keyserver did not stop")
	}
	return -1
}

// TestKeyServerCommand: gmproxy certs -keyserver writes the mutual-TLS
// certificates; gmproxy keyserver serves the TLCP sign/enc keys; gmproxy
// run with key_servers answers TLCP (ECC and ECDHE) and TLS 1.3-SM through
// it; SIGTERM stops the key server with exit code 0, after which
// handshakes fail without hanging.
func TestKeyServerCommand(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-hosts", "localhost,127.0.0.1", "-keyserver", "127.0.0.1"); code != 0 {
		t.Fatalf("certs: exit %d: %s", code, errs)
	}
	ksFile := filepath.Join(dir, "keyserver.yaml")
	write := func(name, text string) {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ksFile, `listen: 127.0.0.1:0
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys:
  - {key: server_sign.key, cert: server_sign.crt}
  - {key: server_enc.key, cert: server_enc.crt}
clients:
  - {name: edge, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [server_sign, server_enc]}
metrics_address: 127.0.0.1:0
`)
	if code, out, errs := ccRun("keyserver", "-c", ksFile, "-check"); code != 0 || !strings.Contains(out, "2 keys") {
		t.Fatalf("keyserver -check: exit %d: %s%s", code, out, errs)
	}
	ks := startKeyServerCmd(t, "-c", ksFile)

	// A TLS client without a certificate is refused in the handshake: it
	// never reads the key server's greeting.
	pool, _ := keyServerClientPKI(t, dir)
	anon, err := tls.Dial("tcp", ks.addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	if err == nil {
		anon.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		var b [1]byte
		_, err = anon.Read(b[:])
		anon.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a client without a certificate: %v, want the handshake refused (certificate required)", err)
	}

	cfgFile := filepath.Join(dir, "gmproxy.yaml")
	write(cfgFile, `listeners: [{address: "127.0.0.1:0"}]
key_servers:
  - {name: keys, address: "`+ks.addr+`", cert: keyserver_client.crt, key: keyserver_client.key, ca: keyserver_ca.crt, timeout: 1s}
sites:
  - server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key_server: keys, enc_cert: server_enc.crt, enc_key_server: keys}
    tls13sm: {}
    routes: [{path_prefix: /, respond: {body: "remote keys\n"}}]
admin: {address: "off"}
access_log: {path: "off"}
`)
	if code, out, errs := ccRun("check", "-c", cfgFile); code != 0 {
		t.Fatalf("check: exit %d: %s%s", code, out, errs)
	}
	r := startRun(t, "-c", cfgFile)
	ca := filepath.Join(dir, devpki.FileCACert)
	client := []string{"-sign_cert", filepath.Join(dir, devpki.FileClientSignCert), "-sign_key", filepath.Join(dir, devpki.FileClientSignKey),
		"-enc_cert", filepath.Join(dir, devpki.FileClientEncCert), "-enc_key", filepath.Join(dir, devpki.FileClientEncKey)}
	for _, args := range [][]string{
		{"-ntls", "-cipher", "ECC-SM2-SM4-GCM-SM3"},
		append([]string{"-ntls", "-cipher", "ECDHE-SM2-SM4-GCM-SM3"}, client...),
		{"-tls13sm"},
	} {
		out, _ := getOut(t, append(args, "-CAfile", ca, "-connect", r.addr, "https://localhost/")...)
		if out != "remote keys\n" {
			t.Errorf("get %v: body %q", args, out)
		}
	}
	// The key server's metrics: operations by client, key and result.
	m := regexp.MustCompile(`key server metrics listening.*address=(\S+)`).FindStringSubmatch(ks.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", ks.stderr.String())
	}
	// Its probes: alive, and ready while it serves.
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		resp, err := http.Get("http://" + m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, resp.StatusCode, b, want)
		}
	}
	wants := []string{
		`gmproxy_keyserver_operations_total{client="edge",key="server_sign",op="sign",result="ok"}`,
		`gmproxy_keyserver_operations_total{client="edge",key="server_enc",op="decrypt",result="ok"}`,
		`gmproxy_keyserver_operations_total{client="edge",key="server_enc",op="key_agreement",result="ok"}`,
		`gmproxy_keyserver_operation_duration_seconds_count{op="sign"}`,
		`gmproxy_keyserver_operations_in_flight{client="edge"} 0`,
		`gmproxy_keyserver_connections_active`,
	}
	// An operation leaves the in-flight gauge just after its answer is
	// written, so the client may see the answer first: read the metrics
	// again for up to 5 s before calling a line missing.
	var body []byte
	for try := 0; try < 50; try++ {
		resp, err := http.Get("http://" + m[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(string(body), w) }) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}

	// SIGHUP reloads the keys: without the encryption key, TLCP fails and
	// TLS 1.3-SM (signing key only) still works.
	write(ksFile, `listen: 127.0.0.1:0
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys: [{key: server_sign.key, roles: [sign]}]
clients: [{name: edge, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [server_sign]}]
`)
	ks.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(ks.stderr.String(), "keys reloaded") })
	var out, errb bytes.Buffer
	if code := runGet([]string{"-ntls", "-CAfile", ca, "-connect", r.addr, "https://localhost/"}, &out, &errb); code == 0 {
		t.Errorf("TLCP get succeeded after the enc key was removed: %s", out.String())
	}
	if body, _ := getOut(t, "-tls13sm", "-CAfile", ca, "-connect", r.addr, "https://localhost/"); body != "remote keys\n" {
		t.Errorf("tls13sm after reload: body %q", body)
	}
	// The removed key's series are gone from the metrics; the kept
	// key's remain.
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), `key="server_enc"`) || !strings.Contains(string(body), `client="edge",key="server_sign"`) {
		t.Errorf("metrics after the enc key's removal:\n%s", body)
	}

	if code := ks.stop(t); code != 0 {
		t.Errorf("keyserver exit %d after SIGTERM:\n%s", code, ks.stderr.String())
	}
	if log := ks.stderr.String(); !strings.Contains(log, "shutdown complete") || !strings.Contains(log, `msg="key server audit" client=edge key=server_sign`) {
		t.Errorf("keyserver log:\n%s", ks.stderr.String())
	}
	if code := runGet([]string{"-tls13sm", "-CAfile", ca, "-connect", r.addr, "https://localhost/"}, &out, &errb); code == 0 {
		t.Errorf("get succeeded with the key server stopped: %s", out.String())
	}
	if code := r.stop(t); code != 0 {
		t.Errorf("run exit %d", code)
	}
}

func TestKeyServerCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "ks.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:7443\nkeys:\n  - {key: nope.key}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := ccRun("keyserver", "-c", bad)
	if code != 1 || !strings.Contains(errs, bad+":3:") || !strings.Contains(errs, "tls.client_ca") || !strings.Contains(errs, "nothing started") {
		t.Errorf("bad config: exit %d:\n%s", code, errs)
	}
	if code, _, _ := ccRun("keyserver"); code != 2 {
		t.Errorf("no -c: exit %d, want 2", code)
	}
}

// TestKeyServerUnixSocket: gmproxy keyserver on a Unix socket (mode 0600,
// no TLS) serves gmproxy's TLCP keys; the socket file is removed on exit.
func TestKeyServerUnixSocket(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-hosts", "localhost", "-no-ecdsa"); code != 0 {
		t.Fatalf("certs: exit %d: %s", code, errs)
	}
	sock := filepath.Join(dir, "ks.sock")
	ksFile := filepath.Join(dir, "keyserver.yaml")
	if err := os.WriteFile(ksFile, []byte("listen: unix:"+sock+"\nkeys: [{key: server_sign.key, roles: [sign]}, {key: server_enc.key, roles: [decrypt, key_agreement]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ks := startKeyServerCmd(t, "-c", ksFile)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %v mode %v", err, fi.Mode())
	}
	cfgFile := filepath.Join(dir, "gmproxy.yaml")
	if err := os.WriteFile(cfgFile, []byte(`listeners: [{address: "127.0.0.1:0", protocols: [tlcp]}]
key_servers: [{name: local, address: "unix:`+sock+`"}]
sites:
  - tlcp: {sign_cert: server_sign.crt, sign_key_server: local, enc_cert: server_enc.crt, enc_key_server: local}
    routes: [{respond: {body: "unix\n"}}]
admin: {address: "off"}
access_log: {path: "off"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-c", cfgFile)
	if out, _ := getOut(t, "-ntls", "-CAfile", filepath.Join(dir, devpki.FileCACert), "-connect", r.addr, "https://localhost/"); out != "unix\n" {
		t.Errorf("body %q", out)
	}
	if code := ks.stop(t); code != 0 {
		t.Errorf("keyserver exit %d", code)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("socket file left behind")
	}
	r.stop(t)
}

// TestKeyServerSocketGroup: with listen_group the key server's Unix socket
// gets the group and mode 0660, so that a gmproxy of another user in the
// group (the systemd units' separate users) may connect.
func TestKeyServerSocketGroup(t *testing.T) {
	gid := os.Getgid()
	sock := filepath.Join(t.TempDir(), "ks.sock")
	ln, err := keyServerListen(&conf.KeyServerFileMaterial{Network: "unix", Addr: sock, SocketGID: &gid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o660 || st == nil || int(st.Gid) != gid {
		t.Errorf("socket mode %v, group %v; want 0660 and group %d", fi.Mode().Perm(), st, gid)
	}
}

// TestKeyServerQuitIsGraceful: SIGQUIT (nginx's graceful stop, which
// units written for it send) stops gmproxy keyserver as SIGTERM does,
// exit 0 after its graceful shutdown, as gmproxy run takes it: left to
// Go's default it ended the process at once with a goroutine dump and
// status 2.
func TestKeyServerQuitIsGraceful(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-hosts", "localhost,127.0.0.1", "-keyserver", "127.0.0.1"); code != 0 {
		t.Fatalf("certs: exit %d: %s", code, errs)
	}
	ksFile := filepath.Join(dir, "keyserver.yaml")
	if err := os.WriteFile(ksFile, []byte(`listen: 127.0.0.1:0
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys:
  - {key: server_sign.key, cert: server_sign.crt}
clients:
  - {name: edge, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [server_sign]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd := exec.Command(os.Args[0], "keyserver", "-c", ksFile)
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	deadline := time.Now().Add(testwait.Bound(30 * time.Second))
	for !strings.Contains(logs.String(), "key server listening") {
		if time.Now().After(deadline) {
			t.Fatalf("keyserver not listening:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(logs.String(), "graceful shutdown") {
			t.Fatalf("keyserver after SIGQUIT: %v; want exit 0 after a graceful shutdown:\n%s", err, logs.String())
		}
	case <-time.After(testwait.Bound(30 * time.Second)):
		t.Fatalf("keyserver still running after SIGQUIT:\n%s", logs.String())
	}
}

// TestKeyServerCheckBinds: gmproxy keyserver -check binds listen and
// metrics_address as the server would, as gmproxy check does for run: an
// address of no interface of this machine fails the check (exit 1, at its
// place in the file), an address in use is a warning (it may be the
// running key server), and -no-bind skips the test. Before, the check
// passed and the start failed.
func TestKeyServerCheckBinds(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-hosts", "localhost,127.0.0.1", "-keyserver", "127.0.0.1"); code != 0 {
		t.Fatalf("certs: exit %d: %s", code, errs)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ksFile := filepath.Join(dir, "keyserver.yaml")
	write := func(listen, metrics string) {
		t.Helper()
		text := "listen: " + listen + `
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys: [{key: server_sign.key, roles: [sign]}]
clients: [{name: edge, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [server_sign]}]
metrics_address: ` + metrics + "\n"
		if err := os.WriteFile(ksFile, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// 192.0.2.1 (TEST-NET-1) is an address of no interface here.
	write("192.0.2.1:7443", "127.0.0.1:0")
	if code, out, errs := ccRun("keyserver", "-c", ksFile, "-check"); code != 1 || !strings.Contains(errs, ksFile+":1:9") || !strings.Contains(errs, "cannot listen on 192.0.2.1:7443") {
		t.Errorf("listen on an address this machine lacks: exit %d, %s%s; want 1 and the address at 1:9", code, out, errs)
	}
	if code, out, errs := ccRun("keyserver", "-c", ksFile, "-check", "-no-bind"); code != 0 {
		t.Errorf("-no-bind: exit %d, %s%s; want 0", code, out, errs)
	}
	write("127.0.0.1:0", held.Addr().String())
	if code, out, errs := ccRun("keyserver", "-c", ksFile, "-check"); code != 0 || !strings.Contains(errs, "metrics_address") || !strings.Contains(errs, "another process listens there") {
		t.Errorf("metrics_address in use: exit %d, %s%s; want 0 and a warning", code, out, errs)
	}
	if code, _, errs := ccRun("keyserver", "-c", ksFile, "-no-bind"); code != 2 {
		t.Errorf("-no-bind without -check: exit %d, %s; want 2", code, errs)
	}
}
