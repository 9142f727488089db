// Package testpeer is test support shared by the tlcp, tls13sm and daemon
// tests: loopback TCP pairs, the Tongsuo-made test PKI (testdata/pki-tongsuo), and running
// the Tongsuo and GmSSL peer binaries (GMPROXY_TONGSUO_BIN,
// GMPROXY_GMSSL_BIN) as bounded child processes. It is imported only by
// _test.go files.
package testpeer

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// Environment variables naming the peer binaries.
const (
	TongsuoEnv = "GMPROXY_TONGSUO_BIN" // Tongsuo's openssl
	GmSSLEnv   = "GMPROXY_GMSSL_BIN"   // gmssl
)

// RunTimeout bounds every peer process started by Run.
const RunTimeout = 30 * time.Second

// Bin returns the peer binary named by the environment variable env and
// skips the test when it is unset.
func Bin(t testing.TB, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Skipf("%s not set", env)
	}
	return p
}

// GmSSL31 reports whether the gmssl binary bin is a GmSSL 3.1 release
// (`gmssl version` prints "GmSSL 3.1.x"). Its tool command line differs from
// 3.3's: one cipher suite each (TLCP ECC-SM4-CBC-SM3, TLS 1.3 SM4-GCM-SM3),
// no -cipher_suite, -server_name, -get, -in or -cert_request; clients send
// stdin line by line (see RunLines); tlcp_server takes the enc key with
// -ex_key; keys in 3.1's own format (testdata/pki-tongsuo/*.gmssl311.*).
func GmSSL31(t testing.TB, bin string) bool {
	t.Helper()
	if v, ok := gmsslVersions.Load(bin); ok {
		return v.(bool)
	}
	out, err := Run(t, "", "", bin, "version")
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	v := strings.Contains(out, "GmSSL 3.1.")
	gmsslVersions.Store(bin, v)
	return v
}

var gmsslVersions sync.Map // binary path → GmSSL31's answer

// RequirePrivateNetns skips the test unless it runs inside its own network
// namespace, which the caller declares with GMPROXY_NETNS=1 (or the older
// GMPROXY_NETNS_PRIVATE=1), for example under /work/peers/bin/netns-run.
// GmSSL's tool servers bind every interface, so tests that start one must
// call it first.
func RequirePrivateNetns(t testing.TB) {
	t.Helper()
	if os.Getenv("GMPROXY_NETNS") != "1" && os.Getenv("GMPROXY_NETNS_PRIVATE") != "1" {
		t.Skip("GmSSL servers bind 0.0.0.0: run inside a private network namespace with GMPROXY_NETNS=1")
	}
}

// Run runs bin with args in dir (the working directory when dir is ""),
// feeding stdin, bounded by RunTimeout, and returns its combined output.
func Run(t testing.TB, dir, stdin, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// RunLines runs a client that sends what it reads from stdin line by line
// and prints what it receives (GmSSL 3.1's tlcp_client and tls13_client).
// It writes each line to the client's stdin only when the client has read
// the one before (so that each read gets one line: a line the client's
// stdio buffered early would wait unsent), and keeps stdin open until the
// output contains want or the client exits (closing it earlier makes the
// client shut the connection down before the answer arrives). Such a client
// reads the socket only after a line read at the top of its loop, which
// takes turns with the line read while waiting: give it an odd number of
// lines. More than one line needs Linux (the test skips elsewhere). Bounded
// by RunTimeout; returns the combined output.
func RunLines(t testing.TB, dir string, lines []string, want, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if len(lines) > 1 {
		if _, ok := pipeDrained(w); !ok {
			r.Close()
			t.Skip("feeding stdin line by line needs FIONREAD on a pipe (Linux)")
		}
	}
	cmd.Stdin = r
	err = cmd.Start()
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; { // ends by RunTimeout at the latest: the context kills the client
		if drained, _ := pipeDrained(w); i < len(lines) && (i == 0 || drained) {
			io.WriteString(w, lines[i])
			i++
		}
		select {
		case err := <-done:
			return out.String(), err
		case <-tick.C:
			if strings.Contains(out.String(), want) {
				w.Close()
				return out.String(), <-done
			}
		}
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Process is a running peer process (see Start).
type Process struct {
	t     testing.TB
	name  string
	cmd   *exec.Cmd
	stdin io.Closer
	out   SyncBuffer
}

// Start starts bin with args in dir (the working directory when dir is "")
// with a stdin that stays open until Stop: Tongsuo's s_server exits on stdin
// EOF. Its combined output is collected for Output.
func Start(t testing.TB, dir, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, name: filepath.Base(bin), cmd: exec.Command(bin, args...)}
	p.cmd.Dir = dir
	p.stdin, _ = p.cmd.StdinPipe()
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Output returns what the process has written so far.
func (p *Process) Output() string { return p.out.String() }

// Stop closes stdin, kills the process and waits for it; when the test has
// failed it logs the process output.
func (p *Process) Stop() {
	if p.stdin != nil {
		p.stdin.Close()
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	if p.t.Failed() {
		p.t.Logf("%s output:\n%s", p.name, p.out.String())
	}
}

// StartServer starts a server process as Start does and waits, at most
// about 10 s, until addr accepts a connection; the test fails with the
// process output if it never does. stop is Process.Stop.
func StartServer(t testing.TB, dir, addr, bin string, args ...string) (stop func()) {
	t.Helper()
	p := Start(t, dir, bin, args...)
	for i := 0; i < 200; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p.Stop
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Stop()
	t.Fatalf("%s did not start listening on %s:\n%s", p.name, addr, p.Output())
	return nil
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output goroutines, a logger) and a concurrent String. Its zero value is
// ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitListening polls /proc/net/tcp{,6} until a socket listens on port or d
// has passed. Unlike a probe connection it does not use up the accept of a
// server that serves one connection at a time (GmSSL's tlcp_server).
func WaitListening(port int, d time.Duration) bool {
	want := fmt.Sprintf(":%04X ", port)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n") {
				fs := strings.Fields(line)
				if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
					return true
				}
			}
		}
	}
	return false
}

// TCPPair returns the two ends of a loopback TCP connection, the dialled
// end first, both with a 20 s deadline.
func TCPPair(t testing.TB) (dialed, accepted net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	dialed, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted = <-ch
	if accepted == nil {
		t.Fatal("accept failed")
	}
	deadline := time.Now().Add(testwait.Bound(20 * time.Second))
	dialed.SetDeadline(deadline)
	accepted.SetDeadline(deadline)
	return dialed, accepted
}

// CAPool returns a pool holding the certificates of dir/ca.crt.
func CAPool(dir string) (*smx509.CertPool, error) {
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := smx509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", filepath.Join(dir, "ca.crt"))
	}
	return pool, nil
}

// Unhex decodes a hexadecimal test vector, failing the test on bad input.
func Unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Tail returns the last n lines of s (all of s when it has fewer).
func Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ReadRecorder is a net.Conn that keeps a copy of everything read through
// it (for recording a peer's flights to replay later).
type ReadRecorder struct {
	net.Conn
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *ReadRecorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.mu.Lock()
	r.buf.Write(b[:n])
	r.mu.Unlock()
	return n, err
}

// Recorded returns a copy of what has been read so far.
func (r *ReadRecorder) Recorded() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// WaitLimit bounds every wait of a test on another goroutine (Recv): 30 s,
// scaled by testwait.
var WaitLimit = testwait.Bound(30 * time.Second)

// Recv receives from ch and fails the test when nothing arrives within
// WaitLimit; what names the awaited event in the failure.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(WaitLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("no %s within %v", what, WaitLimit)
		panic("unreachable")
	}
}

// SecretModes sets the permission bits of the test PKI files under dir the
// way a deployment keeps them: private keys and password files (names with
// "key", *.pass, password*) readable by their owner only (0600), every other
// file 0644. conf warns about secret files that others can read; with this
// the warnings tests see do not depend on the umask of the checkout.
func SecretModes(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		mode := os.FileMode(0o644)
		if name := d.Name(); strings.Contains(name, "key") || strings.HasSuffix(name, ".pass") || strings.HasSuffix(name, ".htpasswd") || strings.HasPrefix(name, "password") {
			mode = 0o600
		}
		return os.Chmod(p, mode)
	})
}
