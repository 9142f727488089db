package proxy

import (
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

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// startTongsuoServer runs Tongsuo's s_server on a free loopback port (it
// binds 127.0.0.1 explicitly) and returns its address. Skips without
// GMPROXY_TONGSUO_BIN.
func startTongsuoServer(t *testing.T, args ...string) string {
	bin := os.Getenv("GMPROXY_TONGSUO_BIN")
	if bin == "" {
		t.Skip("GMPROXY_TONGSUO_BIN not set")
	}
	dir := filepath.Dir(pkiPath(t, "ca.crt"))
	addr := testpeer.FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"s_server", "-accept", addr, "-quiet"}, args...)...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe() // s_server exits at EOF on stdin
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		stdin.Close()
		cmd.Wait()
	})
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("s_server did not listen on %s", addr)
	return ""
}

// TestUpstreamTLCPToTongsuo re-encrypts to Tongsuo's NTLS s_server (with
// mutual authentication) for every TLCP suite, with and without
// NoClientExtensions. (ClientECDHEParamsAsVector is for GmSSL servers only:
// Tongsuo answers it with decode_error.)
func TestUpstreamTLCPToTongsuo(t *testing.T) {
	addr := startTongsuoServer(t, "-enable_ntls",
		"-sign_cert", "server_sign.crt", "-sign_key", "server_sign.key", "-enc_cert", "server_enc.crt", "-enc_key", "server_enc.key",
		"-CAfile", "ca.crt", "-Verify", "1", "-verify_return_error", "-www")
	p := func(n string) string { return pkiPath(t, n) }
	for _, suite := range []string{"ECC-SM2-SM4-GCM-SM3", "ECC-SM2-SM4-CBC-SM3", "ECDHE-SM2-SM4-GCM-SM3", "ECDHE-SM2-SM4-CBC-SM3"} {
		for _, gmssl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gmssl_options=%v", suite, gmssl), func(t *testing.T) {
				tls := tlcpClientTLS(p)
				tls.Ciphers, tls.NoClientExtensions = []string{suite}, gmssl
				getSuite(t, smProxyTo("tongsuo", "tlcp", addr, tls), suite)
			})
		}
	}
}

// getSuite proxies one GET with cfg and fails unless the answer (Tongsuo's
// -www status page) names suite.
func getSuite(t *testing.T, cfg Config, suite string) {
	t.Helper()
	f := newFront(t, cfg, frontOpts{})
	code, body, _ := get(t, testClient(t), f.url+"/")
	if code != 200 || !strings.Contains(body, suite) {
		t.Fatalf("%d %.300q", code, body)
	}
}

// TestUpstreamTLS13SMToTongsuo re-encrypts to Tongsuo's strict RFC 8998
// server with client authentication.
func TestUpstreamTLS13SMToTongsuo(t *testing.T) {
	addr := startTongsuoServer(t, "-tls1_3", "-ciphersuites", "TLS_SM4_GCM_SM3:TLS_SM4_CCM_SM3",
		"-cert", "server_sign.crt", "-key", "server_sign.key", "-sigalgs", "sm2sig_sm3", "-groups", "curveSM2",
		"-enable_sm_tls13_strict", "-CAfile", "ca.crt", "-Verify", "1", "-verify_return_error", "-www")
	p := func(n string) string { return pkiPath(t, n) }
	for _, suite := range []string{"TLS_SM4_GCM_SM3", "TLS_SM4_CCM_SM3"} {
		t.Run(suite, func(t *testing.T) {
			getSuite(t, smProxyTo("tongsuo", "tls13sm", addr, tls13smClientTLS(p, suite)), suite)
		})
	}
}

// TestUpstreamTLCPToGmSSL splices TCP stream mode through our TLCP client
// to GmSSL's tlcp_server (an echo server). GmSSL servers bind 0.0.0.0, so
// this runs only inside a private network namespace:
//
//	GMPROXY_NETNS=1 GMPROXY_GMSSL_BIN=... /work/peers/bin/netns-run go test -run ToGmSSL ./proxy/
func TestUpstreamTLCPToGmSSL(t *testing.T) {
	bin := os.Getenv("GMPROXY_GMSSL_BIN")
	if bin == "" || os.Getenv("GMPROXY_NETNS") != "1" {
		t.Skip("needs GMPROXY_GMSSL_BIN and GMPROXY_NETNS=1 (run under netns-run)")
	}
	v31 := testpeer.GmSSL31(t, bin)
	p := func(n string) string { return pkiPath(t, n) }
	cases := []struct {
		suite, gmsslSuite string
		mutual            bool
	}{
		{"ECC-SM2-SM4-CBC-SM3", "TLS_ECC_SM4_CBC_SM3", false},
		{"ECC-SM2-SM4-GCM-SM3", "TLS_ECC_SM4_GCM_SM3", false},
		{"ECDHE-SM2-SM4-CBC-SM3", "TLS_ECDHE_SM4_CBC_SM3", true},
		{"ECDHE-SM2-SM4-GCM-SM3", "TLS_ECDHE_SM4_GCM_SM3", true},
	}
	for _, tc := range cases {
		t.Run(tc.suite, func(t *testing.T) {
			addr := testpeer.FreeAddr(t)
			_, port, _ := net.SplitHostPort(addr)
			args := []string{"tlcp_server", "-port", port, "-cert", "server_sign_enc_chain.pem", "-key", "server_sign_enc_keys.gmssl.pem",
				"-pass", "P@ssw0rd", "-cipher_suite", tc.gmsslSuite}
			if tc.mutual {
				args = append(args, "-cert_request", "-cacert", "ca.crt")
			}
			if v31 { // testpeer.GmSSL31: one suite, the enc key apart, its own key format
				if tc.gmsslSuite != "TLS_ECC_SM4_CBC_SM3" {
					t.Skip("GmSSL 3.1's tlcp_server offers TLS_ECC_SM4_CBC_SM3 only")
				}
				args = []string{"tlcp_server", "-port", port, "-cert", "server_sign_enc_chain.pem", "-key", "server_sign.gmssl311.key.pem",
					"-pass", "P@ssw0rd", "-ex_key", "server_enc.gmssl311.key.pem", "-ex_pass", "P@ssw0rd"}
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = filepath.Dir(p("ca.crt"))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			// Wait without a probe connection: GmSSL 3.1's tlcp_server exits
			// when a connection ends before its handshake.
			pn, _ := strconv.Atoi(port)
			if !testpeer.WaitListening(pn, 10*time.Second) {
				t.Fatal("gmssl tlcp_server did not start listening")
			}
			tls := &UpstreamTLSConfig{CA: p("ca.crt"), ServerName: "localhost", Ciphers: []string{tc.suite},
				NoClientExtensions: true, ClientECDHEParamsAsVector: true, ClientSignCertOnly: true, ClientRawCertificateVerify: true}
			if tc.mutual {
				tls.SignCert, tls.SignKey, tls.EncCert, tls.EncKey = p("client_sign.crt"), p("client_sign.key"), p("client_enc.crt"), p("client_enc.key")
			}
			cfg := Config{
				Upstreams: []UpstreamConfig{{Name: "gmssl", Protocol: "tlcp", Targets: []TargetConfig{{Address: addr}}, TLS: tls,
					HealthCheck: HealthCheckConfig{Passive: PassiveHealthConfig{MaxFails: -1}}}},
				Sites: []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "gmssl"}}},
			}
			f := newFront(t, cfg, frontOpts{})
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			msg := "TLCP/TLS transcript test line 0123456789\n"
			c.Write([]byte(msg))
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
				t.Fatalf("echo %q %v", got, err)
			}
		})
	}
}
