package daemon

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/transcript"
)

// peerDaemon serves the shared Tongsuo-made test PKI (server_sign/enc, CA
// for client certificates) on a loopback port for third-party clients.
func peerDaemon(t *testing.T) (*testDaemon, string) {
	pki, err := transcript.PKIDir()
	if err != nil {
		t.Fatalf("test PKI: %v", err)
	}
	load := func(cert, key string) *conf.KeyPair {
		certs, err := smkey.LoadCertificatesFile(filepath.Join(pki, cert))
		if err != nil {
			t.Fatal(err)
		}
		k, err := smkey.LoadPrivateKeyFile(filepath.Join(pki, key), nil)
		if err != nil {
			t.Fatal(err)
		}
		return &conf.KeyPair{Chain: certs, Key: k}
	}
	cas, err := smkey.LoadCertificatesFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sites = cfg.Sites[:1]
	s := &cfg.Sites[0]
	s.Material = conf.SiteMaterial{
		TLCPSign:  load("server_sign.crt", "server_sign.key"),
		TLCPEnc:   load("server_enc.crt", "server_enc.key"),
		TLS13SM:   load("server_sign.crt", "server_sign.key"),
		ClientCAs: cas,
	}
	s.TLS = nil
	// GmSSL clients sign CertificateVerify over the raw messages (protocol-notes §5.9).
	s.TLCP = &conf.SiteTLCP{AcceptRawCertificateVerify: true}
	return startDaemon(t, cfg), pki
}

// runPeer runs a peer client in dir (bounded) and returns its output; a
// failed run is logged, the output decides.
func runPeer(t *testing.T, dir, stdin, bin string, args ...string) string {
	t.Helper()
	out, err := testpeer.Run(t, dir, stdin, bin, args...)
	if err != nil {
		t.Logf("%s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return out
}

// TestPeerTongsuoClients: Tongsuo's s_client through the daemon, every TLCP
// suite, both TLS 1.3-SM suites, HelloRetryRequest, and resumption.
func TestPeerTongsuoClients(t *testing.T) {
	bin := testpeer.Bin(t, testpeer.TongsuoEnv)
	d, pki := peerDaemon(t)
	req := "GET /peer HTTP/1.0\r\nHost: localhost\r\n\r\n"
	cc := []string{"-sign_cert", "client_sign.crt", "-sign_key", "client_sign.key", "-enc_cert", "client_enc.crt", "-enc_key", "client_enc.key"}
	for _, suite := range []string{"ECC-SM2-SM4-GCM-SM3", "ECC-SM2-SM4-CBC-SM3", "ECDHE-SM2-SM4-GCM-SM3", "ECDHE-SM2-SM4-CBC-SM3"} {
		t.Run("tlcp/"+suite, func(t *testing.T) {
			args := []string{"s_client", "-connect", d.addr, "-enable_ntls", "-ntls", "-cipher", suite, "-CAfile", "ca.crt",
				"-verify_return_error", "-ign_eof", "-servername", "localhost"}
			if strings.HasPrefix(suite, "ECDHE") {
				args = append(args, cc...)
			}
			out := runPeer(t, pki, req, bin, args...)
			if !strings.Contains(out, "path=/peer proto=NTLSv1.1 cipher="+suite) {
				t.Errorf("no answer through the daemon:\n%s", tail(out))
			}
		})
	}
	for _, tc := range []struct {
		name, suite string
		extra       []string
	}{
		{"GCM", "TLS_SM4_GCM_SM3", []string{"-groups", "curveSM2", "-enable_sm_tls13_strict"}},
		{"CCM", "TLS_SM4_CCM_SM3", []string{"-groups", "curveSM2", "-enable_sm_tls13_strict"}},
		// No curveSM2 share in the first hello: the server must answer with
		// HelloRetryRequest (-msg shows two ServerHello lines).
		{"HRR", "TLS_SM4_GCM_SM3", []string{"-msg"}},
	} {
		t.Run("tls13sm/"+tc.name, func(t *testing.T) {
			args := append([]string{"s_client", "-connect", d.addr, "-tls1_3", "-ciphersuites", tc.suite, "-sigalgs", "sm2sig_sm3",
				"-CAfile", "ca.crt", "-verify_return_error", "-ign_eof", "-servername", "localhost"}, tc.extra...)
			out := runPeer(t, pki, req, bin, args...)
			if !strings.Contains(out, "path=/peer proto=TLSv1.3-SM cipher="+tc.suite) {
				t.Errorf("no answer through the daemon:\n%s", tail(out))
			}
			if tc.name == "HRR" && strings.Count(out, "ServerHello") < 2 {
				t.Errorf("no HelloRetryRequest seen:\n%s", tail(out))
			}
		})
	}
	t.Run("resumption", func(t *testing.T) {
		sess := filepath.Join(t.TempDir(), "s.pem")
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"tlcp-ticket", []string{"-enable_ntls", "-ntls", "-cipher", "ECC-SM2-SM4-GCM-SM3"}},
			{"tlcp-session-id", []string{"-enable_ntls", "-ntls", "-cipher", "ECC-SM2-SM4-CBC-SM3", "-no_ticket"}},
			{"tls13sm-psk", []string{"-tls1_3", "-ciphersuites", "TLS_SM4_GCM_SM3", "-sigalgs", "sm2sig_sm3", "-groups", "curveSM2", "-enable_sm_tls13_strict"}},
		} {
			base := append([]string{"s_client", "-connect", d.addr, "-CAfile", "ca.crt", "-verify_return_error", "-ign_eof", "-servername", "localhost"}, tc.args...)
			runPeer(t, pki, req, bin, append(base, "-sess_out", sess)...)
			out := runPeer(t, pki, req, bin, append(base, "-sess_in", sess)...)
			if !strings.Contains(out, "Reused,") {
				t.Errorf("%s: second connection not resumed:\n%s", tc.name, tail(out))
			}
		}
	})
}

// TestPeerGmSSLClients: GmSSL's tlcp_client (every suite; ECDHE with its
// client certificates) and tls13_client through the daemon.
func TestPeerGmSSLClients(t *testing.T) {
	bin := testpeer.Bin(t, testpeer.GmSSLEnv)
	d, pki := peerDaemon(t)
	host, port := splitAddr(t, d.addr)
	if testpeer.GmSSL31(t, bin) {
		peerGmSSL31Clients(t, bin, pki, host, port)
		return
	}
	for _, suite := range []string{"TLS_ECC_SM4_CBC_SM3", "TLS_ECC_SM4_GCM_SM3", "TLS_ECDHE_SM4_CBC_SM3", "TLS_ECDHE_SM4_GCM_SM3"} {
		t.Run("tlcp/"+suite, func(t *testing.T) {
			args := []string{"tlcp_client", "-host", host, "-port", port, "-server_name", "localhost", "-cacert", "ca.crt", "-cipher_suite", suite, "-get", "/peer"}
			if strings.Contains(suite, "ECDHE") {
				args = append(args, "-cert", "client_sign_enc_chain.pem", "-key", "client_sign_enc_keys.gmssl.pem", "-pass", "P@ssw0rd")
			}
			out := runPeer(t, pki, "", bin, args...)
			want := "path=/peer proto=NTLSv1.1 cipher=" + strings.ReplaceAll(strings.Replace(strings.TrimPrefix(suite, "TLS_"), "_SM4", "-SM2-SM4", 1), "_", "-")
			if !strings.Contains(out, want) {
				t.Errorf("want %q:\n%s", want, tail(out))
			}
		})
	}
	for _, suite := range []string{"TLS_SM4_GCM_SM3", "TLS_SM4_CCM_SM3"} {
		t.Run("tls13sm/"+suite, func(t *testing.T) {
			out := runPeer(t, pki, "", bin, "tls13_client", "-host", host, "-port", port, "-server_name", "localhost", "-cacert", "ca.crt",
				"-cipher_suite", suite, "-supported_group", "sm2p256v1", "-sig_alg", "sm2sig_sm3", "-get", "/peer")
			if !strings.Contains(out, "path=/peer proto=TLSv1.3-SM cipher="+suite) {
				t.Errorf("no answer through the daemon:\n%s", tail(out))
			}
		})
	}
}

// peerGmSSL31Clients: GmSSL 3.1's clients (one suite each: TLCP
// ECC-SM4-CBC-SM3, TLS 1.3 SM4-GCM-SM3; no -get) through the daemon. They
// send stdin line by line, so the request goes in three lines (an odd
// number, see testpeer.RunLines).
func peerGmSSL31Clients(t *testing.T, bin, pki, host, port string) {
	request := []string{"GET /peer HTTP/1.1\r\n", "Host: localhost\r\n", "\r\n"}
	for _, tc := range []struct{ name, tool, want string }{
		{"tlcp/TLS_ECC_SM4_CBC_SM3", "tlcp_client", "path=/peer proto=NTLSv1.1 cipher=ECC-SM2-SM4-CBC-SM3"},
		{"tls13sm/TLS_SM4_GCM_SM3", "tls13_client", "path=/peer proto=TLSv1.3-SM cipher=TLS_SM4_GCM_SM3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := testpeer.RunLines(t, pki, request, tc.want, bin, tc.tool, "-host", host, "-port", port, "-cacert", "ca.crt")
			if !strings.Contains(out, tc.want) {
				t.Errorf("want %q: %v\n%s", tc.want, err, tail(out))
			}
		})
	}
}

func splitAddr(t *testing.T, addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("bad address %q", addr)
	}
	return addr[:i], addr[i+1:]
}

func tail(s string) string { return fmt.Sprintln(testpeer.Tail(s, 25)) }
