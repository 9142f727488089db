package tls13sm

// Interop with Tongsuo and GmSSL binaries (GMPROXY_TONGSUO_BIN,
// GMPROXY_GMSSL_BIN; skipped when unset). GmSSL servers bind 0.0.0.0, so
// the GmSSL-server cases also need GMPROXY_NETNS=1 (run the test binary
// under a private network namespace, e.g. /work/peers/bin/netns-run).

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/transcript"
)

func peerBin(t *testing.T, env string) string {
	t.Helper()
	p := testpeer.Bin(t, env)
	if testing.Short() {
		t.Skip("interop skipped in -short mode")
	}
	return p
}

// helloResponse is httpishServer's answer.
const helloResponse = "HTTP/1.0 200 OK\r\nContent-Length: 13\r\n\r\nhello tls13sm"

// httpishServer serves connections on l: reads a request (up to a blank
// line or 4 KiB), answers with a fixed response (helloResponse, or what
// respond writes) and closes. States of completed handshakes go to the
// returned channel.
func httpishServer(t *testing.T, cfg *Config, respond ...func(*Conn)) (string, <-chan ConnectionState, func()) {
	l, err := Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	states := make(chan ConnectionState, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c *Conn) {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if err := c.Handshake(); err != nil {
					t.Logf("server handshake: %v", err)
					return
				}
				states <- c.ConnectionState()
				br := bufio.NewReader(io.LimitReader(c, 4096))
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" || line == "\n" || strings.HasPrefix(line, "TLCP/TLS") {
						break
					}
				}
				if len(respond) > 0 {
					respond[0](c)
					return
				}
				io.WriteString(c, helloResponse)
			}(c.(*Conn))
		}
	}()
	return l.Addr().String(), states, func() { l.Close() }
}

// runPeer runs a peer command in dir (bounded) and returns its output.
var runPeer = testpeer.Run

func interopConfigs(t *testing.T) (*Config, *Config, string) {
	srv, cli := testConfigs(t)
	srv.TicketKeys = nil // default rotator
	dir, err := transcript.PKIDir()
	if err != nil {
		t.Fatal(err)
	}
	return srv, cli, dir
}

func TestInteropTongsuoClient(t *testing.T) {
	bin := peerBin(t, "GMPROXY_TONGSUO_BIN")
	for _, tc := range []struct {
		name      string
		suite     string
		mutual    bool
		hrr       bool
		resume    bool
		strictSrv bool
	}{
		{name: "GCM", suite: "TLS_SM4_GCM_SM3", strictSrv: true},
		{name: "CCM", suite: "TLS_SM4_CCM_SM3", strictSrv: true},
		{name: "GCM-mutual", suite: "TLS_SM4_GCM_SM3", mutual: true},
		{name: "CCM-mutual", suite: "TLS_SM4_CCM_SM3", mutual: true},
		{name: "GCM-resume", suite: "TLS_SM4_GCM_SM3", resume: true},
		{name: "CCM-mutual-resume", suite: "TLS_SM4_CCM_SM3", mutual: true, resume: true},
		{name: "GCM-HRR", suite: "TLS_SM4_GCM_SM3", hrr: true},
		{name: "GCM-HRR-strict-server", suite: "TLS_SM4_GCM_SM3", hrr: true, strictSrv: true},
		{name: "CCM-HRR-resume", suite: "TLS_SM4_CCM_SM3", hrr: true, resume: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, dir := interopConfigs(t)
			srv.Strict = tc.strictSrv
			if tc.mutual {
				srv.ClientAuth = RequireAndVerifyClientCert
			}
			addr, states, stop := httpishServer(t, srv)
			defer stop()
			args := []string{"s_client", "-connect", addr, "-servername", "localhost", "-tls1_3", "-ciphersuites", tc.suite,
				"-sigalgs", "sm2sig_sm3", "-CAfile", "ca.crt", "-verify_return_error", "-ign_eof"}
			if !tc.hrr {
				args = append(args, "-groups", "curveSM2", "-enable_sm_tls13_strict")
			}
			if tc.mutual {
				args = append(args, "-cert", "client_sign.crt", "-key", "client_sign.key")
			}
			sess := filepath.Join(t.TempDir(), "sess.pem")
			conns := 1
			if tc.resume {
				conns = 2
			}
			for i := 0; i < conns; i++ {
				a := append([]string(nil), args...)
				if tc.resume && i == 0 {
					a = append(a, "-sess_out", sess)
				} else if tc.resume {
					a = append(a, "-sess_in", sess)
				}
				out, err := runPeer(t, dir, "GET / HTTP/1.0\r\n\r\n", bin, a...)
				if err != nil || !strings.Contains(out, "hello tls13sm") || !strings.Contains(out, "Cipher is "+tc.suite) {
					t.Fatalf("s_client (conn %d): %v\n%s", i+1, err, out)
				}
				var st ConnectionState
				select {
				case st = <-states:
				case <-time.After(10 * time.Second):
					t.Fatal("no server state")
				}
				if CipherSuiteName(st.CipherSuite) != tc.suite || st.Group != CurveSM2 {
					t.Fatalf("server state %+v", st)
				}
				if tc.hrr != st.HelloRetry {
					t.Fatalf("HelloRetry = %v", st.HelloRetry)
				}
				if tc.mutual && len(st.PeerCertificates) == 0 && !st.DidResume {
					t.Fatal("no client certificate")
				}
				if i == 1 {
					if !st.DidResume || !strings.Contains(out, "Reused, TLSv1.3") {
						t.Fatalf("not resumed (server %v)\n%s", st.DidResume, out)
					}
				}
			}
		})
	}
}

// freePort returns a loopback address whose port was free a moment ago.
var freePort = testpeer.FreeAddr

// startPeerServer starts a server process and waits (bounded) until addr accepts.
var startPeerServer = testpeer.StartServer

func TestInteropClientToTongsuoServer(t *testing.T) {
	bin := peerBin(t, "GMPROXY_TONGSUO_BIN")
	for _, tc := range []struct {
		name   string
		suite  uint16
		mutual bool
		hrr    bool
	}{
		{"GCM", TLS_SM4_GCM_SM3, false, false},
		{"CCM", TLS_SM4_CCM_SM3, false, false},
		{"GCM-mutual", TLS_SM4_GCM_SM3, true, false},
		{"CCM-HRR", TLS_SM4_CCM_SM3, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cli, dir := interopConfigs(t)
			addr := freePort(t)
			args := []string{"s_server", "-accept", addr, "-tls1_3", "-ciphersuites", "TLS_SM4_GCM_SM3:TLS_SM4_CCM_SM3",
				"-cert", "server_sign.crt", "-key", "server_sign.key", "-sigalgs", "sm2sig_sm3", "-groups", "curveSM2", "-www"}
			if !tc.hrr {
				args = append(args, "-enable_sm_tls13_strict")
			}
			if tc.mutual {
				args = append(args, "-CAfile", "ca.crt", "-Verify", "1", "-verify_return_error")
			}
			stop := startPeerServer(t, dir, addr, bin, args...)
			defer stop()
			cli.CipherSuites = []uint16{tc.suite}
			keyUpdate := tc.name == "GCM"
			cli.Strict = !tc.hrr
			cli.testShareX25519 = tc.hrr
			if !tc.mutual {
				cli.Certificates = nil
			}
			for i := 0; i < 2; i++ {
				c, err := DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cli)
				if err != nil {
					t.Fatalf("conn %d: %v", i+1, err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				readKey := c.in.secret
				if keyUpdate {
					if err := c.SendKeyUpdate(true); err != nil {
						t.Fatal(err)
					}
				}
				io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
				body, err := io.ReadAll(c)
				if err != nil || !bytes.Contains(body, []byte("HTTP/1.0 200 ok")) {
					t.Fatalf("conn %d: response %v %q", i+1, err, body[:min(len(body), 80)])
				}
				st := c.ConnectionState()
				if keyUpdate && c.in.secret == readKey {
					t.Fatal("Tongsuo did not answer KeyUpdate(update_requested)")
				}
				c.Close()
				if st.CipherSuite != tc.suite || (i == 1) != st.DidResume || tc.hrr != st.HelloRetry {
					t.Fatalf("conn %d: state %+v", i+1, st)
				}
			}
		})
	}
}

// TestInteropGmSSLClient: GmSSL's tls13_client against our server. GmSSL 3.1
// (testpeer.GmSSL31) offers SM4-GCM-SM3 only and sends stdin line by line.
func TestInteropGmSSLClient(t *testing.T) {
	bin := peerBin(t, "GMPROXY_GMSSL_BIN")
	v31 := testpeer.GmSSL31(t, bin)
	for _, tc := range []struct {
		name, suite string
		mutual      bool
	}{
		{"GCM", "TLS_SM4_GCM_SM3", false},
		{"CCM", "TLS_SM4_CCM_SM3", false},
		{"GCM-mutual", "TLS_SM4_GCM_SM3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v31 && tc.suite != "TLS_SM4_GCM_SM3" {
				t.Skip("GmSSL 3.1's tls13_client offers TLS_SM4_GCM_SM3 only")
			}
			srv, _, dir := interopConfigs(t)
			if tc.mutual {
				srv.ClientAuth = RequireAndVerifyClientCert
			}
			addr, states, stop := httpishServer(t, srv)
			defer stop()
			_, port, _ := net.SplitHostPort(addr)
			var out string
			var err error
			if v31 {
				args := []string{"tls13_client", "-host", "127.0.0.1", "-port", port, "-cacert", "ca.crt"}
				if tc.mutual {
					args = append(args, "-cert", "client_sign.crt", "-key", "client_sign.gmssl311.key.pem", "-pass", "P@ssw0rd")
				}
				// One line ends httpishServer's request (prefix "TLCP/TLS").
				out, err = testpeer.RunLines(t, dir, []string{"TLCP/TLS interop line\n"}, "hello tls13sm", bin, args...)
			} else {
				args := []string{"tls13_client", "-host", "127.0.0.1", "-port", port, "-server_name", "localhost", "-cacert", "ca.crt",
					"-cipher_suite", tc.suite, "-supported_group", "sm2p256v1", "-sig_alg", "sm2sig_sm3", "-get", "/"}
				if tc.mutual {
					args = append(args, "-cert", "client_sign.crt", "-key", "client_sign.gmssl.key.pem", "-pass", "P@ssw0rd")
				}
				out, err = runPeer(t, dir, "", bin, args...)
			}
			if !strings.Contains(out, "hello tls13sm") {
				t.Fatalf("gmssl tls13_client: %v\n%s", err, out)
			}
			select {
			case st := <-states:
				if CipherSuiteName(st.CipherSuite) != tc.suite || (tc.mutual && len(st.PeerCertificates) == 0) {
					t.Fatalf("state %+v", st)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no server state")
			}
		})
	}
}

func TestInteropClientToGmSSLServer(t *testing.T) {
	bin := peerBin(t, "GMPROXY_GMSSL_BIN")
	testpeer.RequirePrivateNetns(t)
	_, cli, dir := interopConfigs(t)
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	// tls13_server serves one connection and exits, so no readiness probe:
	// the client retries while the port is refused (key decryption is slow).
	args := []string{"tls13_server", "-port", port, "-cert", "server_sign.crt",
		"-key", "server_sign.gmssl.key.pem", "-pass", "P@ssw0rd", "-cipher_suite", "TLS_SM4_GCM_SM3",
		"-supported_group", "sm2p256v1", "-sig_alg", "sm2sig_sm3"}
	if testpeer.GmSSL31(t, bin) { // one suite, group and signature algorithm; its own key format
		args = []string{"tls13_server", "-port", port, "-cert", "server_sign.crt", "-key", "server_sign.gmssl311.key.pem", "-pass", "P@ssw0rd"}
	}
	peer := testpeer.Start(t, dir, bin, args...)
	defer peer.Stop()
	cli.DisableMiddleboxCompat = true
	cli.Certificates = nil
	var c *Conn
	var err error
	for i := 0; i < 100; i++ { // wait for the key decryption (PBKDF2) to finish
		c, err = DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cli)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "refused") {
			t.Fatalf("dial: %v\n%s", err, peer.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := "TLCP/TLS transcript test line 0123456789\n"
	io.WriteString(c, msg)
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %v %q\n%s", err, buf, peer.Output())
	}
	if st := c.ConnectionState(); st.CipherSuite != TLS_SM4_GCM_SM3 || st.Group != CurveSM2 {
		t.Fatalf("state %+v", st)
	}
}

// TestInteropPeerClientsFollowKeyUpdate: Tongsuo's s_client and GmSSL's
// tls13_client (master) read a response whose records cross the
// server's automatic key updates (keyUpdateAfterRecords lowered to 2, the
// response written a few bytes per record): a KeyUpdate they did not ask
// for (RFC 8446 §4.6.3) is followed, not refused. GmSSL 3.1 cannot: the
// test skips it.
func TestInteropPeerClientsFollowKeyUpdate(t *testing.T) {
	for _, env := range []string{"GMPROXY_TONGSUO_BIN", "GMPROXY_GMSSL_BIN"} {
		t.Run(env, func(t *testing.T) {
			bin := peerBin(t, env)
			v31 := env == "GMPROXY_GMSSL_BIN" && testpeer.GmSSL31(t, bin)
			if v31 {
				// Its tls13_recv takes application data only: any other
				// record after the handshake (a KeyUpdate, a
				// NewSessionTicket) is an error (src/tls13.c, observed).
				t.Skip("GmSSL 3.1 cannot follow a KeyUpdate: a connection to it ends after keyUpdateAfterRecords records (docs/protocol-notes.md §9)")
			}
			defer func(n uint64) { keyUpdateAfterRecords = n }(keyUpdateAfterRecords)
			keyUpdateAfterRecords = 2
			const chunk = 6
			srv, _, dir := interopConfigs(t)
			updated := make(chan bool, 1)
			addr, _, stop := httpishServer(t, srv, func(c *Conn) {
				c.out.Lock()
				first := c.out.secret
				c.out.Unlock()
				for rest := helloResponse; rest != ""; rest = rest[min(len(rest), chunk):] {
					if _, err := io.WriteString(c, rest[:min(len(rest), chunk)]); err != nil {
						break
					}
				}
				c.out.Lock()
				updated <- c.out.secret != first
				c.out.Unlock()
			})
			defer stop()
			_, port, _ := net.SplitHostPort(addr)
			var out string
			var err error
			switch {
			case env == "GMPROXY_TONGSUO_BIN":
				out, err = runPeer(t, dir, "GET / HTTP/1.0\r\n\r\n", bin, "s_client", "-connect", addr, "-servername", "localhost",
					"-tls1_3", "-ciphersuites", "TLS_SM4_GCM_SM3", "-sigalgs", "sm2sig_sm3", "-groups", "curveSM2", "-enable_sm_tls13_strict",
					"-CAfile", "ca.crt", "-verify_return_error", "-ign_eof")
			default:
				out, err = runPeer(t, dir, "", bin, "tls13_client", "-host", "127.0.0.1", "-port", port, "-server_name", "localhost",
					"-cacert", "ca.crt", "-cipher_suite", "TLS_SM4_GCM_SM3", "-supported_group", "sm2p256v1", "-sig_alg", "sm2sig_sm3", "-get", "/")
			}
			if !strings.Contains(out, "hello tls13sm") {
				t.Fatalf("the peer did not read the response across key updates: %v\n%s", err, out)
			}
			select {
			case u := <-updated:
				if !u {
					t.Fatal("the server's write key never changed")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server never answered")
			}
		})
	}
}
