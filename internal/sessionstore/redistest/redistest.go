// Package redistest runs a real redis-server on a loopback port for tests
// and benchmarks, and skips them when redis-server is not installed
// (.ci/run installs it).
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a redis-server process without persistence, bound to
// 127.0.0.1, stopped when the test ends.
type Server struct {
	// Addr is 127.0.0.1:port.
	Addr string
	tb   testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	args []string // more server arguments (a Cluster node's)
	conf string   // a configuration file (a Sentinel's), the first argument
}

// Start starts a server, or skips tb when redis-server is not installed.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), port: FreePort(tb)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// StartCluster starts a Redis Cluster of n masters (no replicas) on
// loopback, the 16384 hash slots split evenly between them, and waits
// until every node reports the cluster ok; it skips tb as Start does.
func StartCluster(tb testing.TB, n int) []*Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	nodes := make([]*Server, n)
	for i := range nodes {
		s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), port: FreePort(tb)}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		// The bus port is chosen too: port+10000, Redis's default,
		// may lie past 65535.
		s.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(FreePort(tb)), "--cluster-node-timeout", "2000"}
		s.Restart()
		tb.Cleanup(s.Stop)
		nodes[i] = s
	}
	const slots = 16384
	for i, s := range nodes {
		first, last := i*slots/n, (i+1)*slots/n-1
		if r, err := s.Command(fmt.Sprintf("CLUSTER ADDSLOTSRANGE %d %d", first, last)); err != nil || r != "+OK" {
			tb.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %q %v", s.Addr, r, err)
		}
		if i > 0 {
			bus := s.args[5]
			if r, err := nodes[0].Command(fmt.Sprintf("CLUSTER MEET 127.0.0.1 %d %s", s.port, bus)); err != nil || r != "+OK" {
				tb.Fatalf("CLUSTER MEET %s: %q %v", s.Addr, r, err)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range nodes {
		for {
			info, err := s.Command("CLUSTER INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("the cluster did not come up: %s: %q %v", s.Addr, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// StartTLS starts a server that also serves TLS, with the PEM
// certificate and key files given, on the port it returns as TLSAddr
// (clients are not asked for certificates); it skips tb as Start does.
func StartTLS(tb testing.TB, certFile, keyFile string) (s *Server, tlsAddr string) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	s = &Server{tb: tb, bin: bin, dir: tb.TempDir(), port: FreePort(tb)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	tlsPort := FreePort(tb)
	s.args = []string{"--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-auth-clients", "no"}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s, net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
}

// StartReplica starts a server replicating master (no persistence, as
// Start) and waits until its link to master is up; it skips tb as Start
// does.
func StartReplica(tb testing.TB, master *Server) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: master.bin, dir: tb.TempDir(), port: FreePort(tb)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.args = []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.port)}
	s.Restart()
	tb.Cleanup(s.Stop)
	s.waitFor("INFO replication", "master_link_status:up")
	return s
}

// StartSentinel starts a Redis Sentinel that watches master under name
// with a quorum of one, takes it for down after 500 ms without a valid
// answer, and waits until it knows of replicas replicas of it.
func StartSentinel(tb testing.TB, name string, master *Server, replicas int) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: master.bin, dir: tb.TempDir(), port: FreePort(tb)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	// Sentinel rewrites its file with what it learns.
	s.conf = filepath.Join(s.dir, "sentinel.conf")
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s 500\n"+
		"sentinel failover-timeout %s 5000\n", name, master.port, name, name)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	s.args = []string{"--sentinel"}
	s.Restart()
	tb.Cleanup(s.Stop)
	s.waitFor("SENTINEL replicas "+name, fmt.Sprintf("*%d", replicas))
	return s
}

// waitFor waits (at most 20 s) until cmd's reply contains want.
func (s *Server) waitFor(cmd, want string) {
	s.tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := s.Command(cmd)
		if err == nil && strings.Contains(r, want) {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("%s on %s: %q %v, want %q in it", cmd, s.Addr, r, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Restart starts the server again on the same port after Stop (empty: no
// persistence), and waits until it answers PING.
func (s *Server) Restart() {
	s.tb.Helper()
	var conf []string
	if s.conf != "" {
		conf = []string{s.conf}
	}
	cmd := exec.Command(s.bin, append(conf, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning", "--protected-mode", "yes")...)
	cmd.Args = append(cmd.Args, s.args...)
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	s.cmd = cmd
	if err := waitPing(s.Addr); err != nil {
		s.Stop()
		s.tb.Fatal(err)
	}
}

// Stop kills the server (SIGKILL: nothing is saved) and waits for it.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// Command sends one inline command and returns the reply's first line
// (bulk replies: the whole payload).
func (s *Server) Command(cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line, nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 1<<20 {
		return "", fmt.Errorf("bad bulk reply %q", line)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// waitPing waits (at most 10 s, 200 tries) until addr answers PING.
func waitPing(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for i := 0; i < 200 && time.Now().Before(deadline); i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			io.WriteString(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
			err = fmt.Errorf("answered %q", line)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server at %s did not come up: %v", addr, last)
}
