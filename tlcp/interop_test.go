package tlcp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// Interop with Tongsuo (GMPROXY_TONGSUO_BIN = its openssl) and GmSSL
// (GMPROXY_GMSSL_BIN = gmssl). Skipped when the variables are unset.
//
// GmSSL's tool servers listen on every interface, so the tests that start a
// GmSSL server run only when GMPROXY_NETNS=1 (or GMPROXY_NETNS_PRIVATE=1)
// says the test process runs inside its own network namespace, e.g.
//
//	GMPROXY_NETNS=1 GMPROXY_GMSSL_BIN=… /work/peers/bin/netns-run go test -run GmSSL ./tlcp/

const interopResponse = "HTTP/1.0 200 ok\r\nContent-Type: text/plain\r\n\r\nhello from gmproxy tlcp\n"

var interopSuites = []struct {
	id             uint16
	tongsuo, gmssl string
}{
	{ECC_SM4_CBC_SM3, "ECC-SM2-SM4-CBC-SM3", "TLS_ECC_SM4_CBC_SM3"},
	{ECC_SM4_GCM_SM3, "ECC-SM2-SM4-GCM-SM3", "TLS_ECC_SM4_GCM_SM3"},
	{ECDHE_SM4_CBC_SM3, "ECDHE-SM2-SM4-CBC-SM3", "TLS_ECDHE_SM4_CBC_SM3"},
	{ECDHE_SM4_GCM_SM3, "ECDHE-SM2-SM4-GCM-SM3", "TLS_ECDHE_SM4_GCM_SM3"},
}

// ourServer serves TLCP on loopback: it reads one chunk and answers with
// interopResponse (echoing the request after it), then closes.
func ourServer(t *testing.T, cfg *Config) (addr string, results chan HandshakeResult, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	results = make(chan HandshakeResult, 16)
	cfg.OnHandshake = func(r HandshakeResult) { results <- r }
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				tc := Server(c, cfg)
				buf := make([]byte, 4096)
				n, err := tc.Read(buf)
				if err != nil {
					return
				}
				tc.Write(append([]byte(interopResponse), buf[:n]...))
				tc.Close()
			}()
		}
	}()
	return l.Addr().String(), results, func() { l.Close() }
}

// runCmd runs a peer command in the working directory (bounded).
func runCmd(t *testing.T, stdin string, name string, args ...string) (string, error) {
	t.Helper()
	return testpeer.Run(t, "", stdin, name, args...)
}

func interopPKI(t *testing.T) (*testPKI, func(string) string) {
	p := loadPKI(t)
	return p, func(n string) string { return filepath.Join(p.dir, n) }
}

// TestTongsuoClient: Tongsuo s_client against our server.
func TestTongsuoClient(t *testing.T) {
	bin := testpeer.Bin(t, testpeer.TongsuoEnv)
	p, f := interopPKI(t)
	for _, s := range interopSuites {
		for _, mutual := range []bool{false, true} {
			for _, mode := range []string{"full", "sessionid", "ticket"} {
				ecdhe := cipherSuiteByID(s.id).ecdhe
				t.Run(fmt.Sprintf("%s/mutual=%v/%s", s.tongsuo, mutual, mode), func(t *testing.T) {
					cfg := p.serverConfig()
					cfg.SessionStore = NewLRUSessionStore(16, time.Hour)
					cfg.NextProtos = []string{"http/1.1"}
					if mutual {
						cfg.ClientAuth = RequireAndVerifyClientCert
					}
					tickets := &ticketLog{}
					cfg.OnTicket = tickets.hook
					addr, results, stop := ourServer(t, cfg)
					defer stop()
					sess := filepath.Join(t.TempDir(), "sess.pem")
					args := []string{"s_client", "-connect", addr, "-enable_ntls", "-ntls", "-cipher", s.tongsuo,
						"-CAfile", f("ca.crt"), "-verify_return_error", "-ign_eof", "-servername", "localhost", "-alpn", "h2,http/1.1"}
					if mutual || ecdhe {
						args = append(args, "-sign_cert", f("client_sign.crt"), "-sign_key", f("client_sign.key"),
							"-enc_cert", f("client_enc.crt"), "-enc_key", f("client_enc.key"))
					}
					if mode == "sessionid" {
						args = append(args, "-no_ticket")
					}
					runs := 1
					if mode != "full" {
						runs = 2
					}
					for i := 0; i < runs; i++ {
						a := append([]string(nil), args...)
						if i == 0 {
							a = append(a, "-sess_out", sess)
						} else {
							a = append(a, "-sess_in", sess)
						}
						out, err := runCmd(t, "GET / HTTP/1.0\r\n\r\n", bin, a...)
						var r HandshakeResult
						select {
						case r = <-results:
						case <-time.After(5 * time.Second):
							t.Fatalf("no handshake on our side; s_client: %v\n%s", err, out)
						}
						if r.Err != nil {
							t.Fatalf("our server: %v (reason %s)\n%s", r.Err, r.Reason, out)
						}
						if !strings.Contains(out, "hello from gmproxy tlcp") {
							t.Fatalf("s_client did not get our response: %v\n%s", err, out)
						}
						if r.State.CipherSuite != s.id {
							t.Fatalf("suite %x", r.State.CipherSuite)
						}
						if r.State.ServerName != "localhost" || r.State.NegotiatedProtocol != "http/1.1" || !strings.Contains(out, "ALPN protocol: http/1.1") {
							t.Fatalf("SNI %q ALPN %q\n%s", r.State.ServerName, r.State.NegotiatedProtocol, out)
						}
						if (mutual || ecdhe) && len(r.State.PeerCertificates) < 2 {
							t.Fatalf("client certificates: %d", len(r.State.PeerCertificates))
						}
						if i == 1 {
							if !r.State.DidResume || !strings.Contains(out, "Reused,") {
								t.Fatalf("not resumed (ours %v)\n%s", r.State.DidResume, out)
							}
						}
						// Tongsuo offers session_ticket unless -no_ticket:
						// a ticket on every full handshake, accepted on
						// reuse (and kept: it is sealed under the current
						// key).
						var want []TicketEvent
						switch {
						case mode == "sessionid":
						case mode == "ticket" && i == 1:
							want = []TicketEvent{evAccepted}
						default:
							want = []TicketEvent{evIssued}
						}
						if got := tickets.take(); !slices.Equal(got, want) {
							t.Fatalf("ticket events %v, want %v", got, want)
						}
					}
				})
			}
		}
	}
}

// startTongsuoServer starts s_server on a free loopback port.
func startTongsuoServer(t *testing.T, bin string, args ...string) (addr string, stop func()) {
	t.Helper()
	addr = testpeer.FreeAddr(t)
	return addr, testpeer.StartServer(t, "", addr, bin, append([]string{"s_server", "-accept", addr}, args...)...)
}

// TestTongsuoServer: our client against Tongsuo s_server -www.
func TestTongsuoServer(t *testing.T) {
	bin := testpeer.Bin(t, testpeer.TongsuoEnv)
	p, f := interopPKI(t)
	for _, s := range interopSuites {
		for _, mutual := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mutual=%v", s.tongsuo, mutual), func(t *testing.T) {
				args := []string{"-enable_ntls", "-sign_cert", f("server_sign.crt"), "-sign_key", f("server_sign.key"),
					"-enc_cert", f("server_enc.crt"), "-enc_key", f("server_enc.key"), "-CAfile", f("ca.crt"), "-www", "-cipher", s.tongsuo, "-alpn", "http/1.1"}
				if mutual {
					args = append(args, "-Verify", "1", "-verify_return_error")
				}
				addr, stop := startTongsuoServer(t, bin, args...)
				defer stop()
				for _, mode := range []string{"sessionid", "ticket"} {
					ccfg := p.clientConfig()
					ccfg.CipherSuites = []uint16{s.id}
					ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
					ccfg.SessionTicketsDisabled = mode == "sessionid"
					ccfg.NextProtos = []string{"h2", "http/1.1"}
					if !mutual && !cipherSuiteByID(s.id).ecdhe {
						ccfg.Certificates = nil
					}
					for i := 0; i < 2; i++ {
						c, err := Dial("tcp", addr, ccfg)
						if err != nil {
							t.Fatalf("%s #%d: dial: %v", mode, i, err)
						}
						c.SetDeadline(time.Now().Add(10 * time.Second))
						if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
							t.Fatal(err)
						}
						body, err := io.ReadAll(bufio.NewReader(c))
						if err != nil && err != io.EOF {
							t.Fatalf("%s #%d: read: %v (got %d bytes)", mode, i, err, len(body))
						}
						if !bytes.HasPrefix(body, []byte("HTTP/1.0 200 ok")) {
							t.Fatalf("%s #%d: response %.80q", mode, i, body)
						}
						st := c.ConnectionState()
						c.Close()
						if st.CipherSuite != s.id || (i == 1) != st.DidResume || st.NegotiatedProtocol != "http/1.1" {
							t.Fatalf("%s #%d: suite %x resumed %v ALPN %q", mode, i, st.CipherSuite, st.DidResume, st.NegotiatedProtocol)
						}
					}
				}
			})
		}
	}
}

// TestGmSSLClient: GmSSL tlcp_client against our server (GmSSL never resumes).
// GmSSL 3.1 (testpeer.GmSSL31) offers ECC-SM4-CBC-SM3 only and signs
// CertificateVerify over the hash, so with it the other suites skip and our
// server keeps the standard CertificateVerify check.
func TestGmSSLClient(t *testing.T) {
	bin := testpeer.Bin(t, testpeer.GmSSLEnv)
	v31 := testpeer.GmSSL31(t, bin)
	p, f := interopPKI(t)
	msg := "TLCP interop line 0123456789\n"
	for _, s := range interopSuites {
		for _, mutual := range []bool{false, true} {
			ecdhe := cipherSuiteByID(s.id).ecdhe
			t.Run(fmt.Sprintf("%s/mutual=%v", s.gmssl, mutual), func(t *testing.T) {
				if v31 && s.id != ECC_SM4_CBC_SM3 {
					t.Skip("GmSSL 3.1's tlcp_client offers TLS_ECC_SM4_CBC_SM3 only")
				}
				cfg := p.serverConfig()
				cfg.AcceptRawCertificateVerify = !v31 // GmSSL 3.3 signs the raw transcript
				if mutual {
					cfg.ClientAuth = RequireAndVerifyClientCert
				}
				addr, results, stop := ourServer(t, cfg)
				defer stop()
				host, port, _ := net.SplitHostPort(addr)
				var out string
				var err error
				if v31 {
					args := []string{"tlcp_client", "-host", host, "-port", port, "-cacert", f("ca.crt")}
					if mutual {
						args = append(args, "-cert", f("client_sign.crt"), "-key", f("client_sign.gmssl311.key.pem"), "-pass", "P@ssw0rd")
					}
					out, err = testpeer.RunLines(t, "", []string{msg}, msg, bin, args...)
				} else {
					args := []string{"tlcp_client", "-host", host, "-port", port, "-server_name", "localhost", "-cacert", f("ca.crt"), "-cipher_suite", s.gmssl}
					switch {
					case ecdhe:
						args = append(args, "-cert", f("client_sign_enc_chain.pem"), "-key", f("client_sign_enc_keys.gmssl.pem"), "-pass", "P@ssw0rd")
					case mutual:
						args = append(args, "-cert", f("client_sign.crt"), "-key", f("client_sign.gmssl.key.pem"), "-pass", "P@ssw0rd")
					}
					in := filepath.Join(t.TempDir(), "msg.txt")
					os.WriteFile(in, []byte(msg), 0o600)
					args = append(args, "-in", in)
					out, err = runCmd(t, "", bin, args...)
				}
				var r HandshakeResult
				select {
				case r = <-results:
				case <-time.After(5 * time.Second):
					t.Fatalf("no handshake on our side; gmssl: %v\n%s", err, out)
				}
				if r.Err != nil {
					t.Fatalf("our server: %v\n%s", r.Err, out)
				}
				if !strings.Contains(out, "hello from gmproxy tlcp") {
					t.Fatalf("gmssl did not get our response: %v\n%s", err, out)
				}
				if r.State.CipherSuite != s.id {
					t.Fatalf("suite %x", r.State.CipherSuite)
				}
				if (mutual || ecdhe) && len(r.State.PeerCertificates) == 0 {
					t.Fatal("no client certificate")
				}
			})
		}
	}
}

// TestGmSSLServer: our client against GmSSL tlcp_server, only inside a
// private network namespace (GMPROXY_NETNS=1). GmSSL 3.1's server offers
// ECC-SM4-CBC-SM3 only and verifies CertificateVerify over the hash.
func TestGmSSLServer(t *testing.T) {
	bin := testpeer.Bin(t, testpeer.GmSSLEnv)
	testpeer.RequirePrivateNetns(t)
	v31 := testpeer.GmSSL31(t, bin)
	p, f := interopPKI(t)
	port := 24433
	for _, s := range interopSuites {
		for _, mutual := range []bool{false, true} {
			ecdhe := cipherSuiteByID(s.id).ecdhe
			port++
			t.Run(fmt.Sprintf("%s/mutual=%v", s.gmssl, mutual), func(t *testing.T) {
				args := []string{"tlcp_server", "-port", fmt.Sprint(port), "-cert", f("server_sign_enc_chain.pem"),
					"-key", f("server_sign_enc_keys.gmssl.pem"), "-pass", "P@ssw0rd", "-cipher_suite", s.gmssl}
				if mutual || ecdhe {
					args = append(args, "-cert_request", "-cacert", f("ca.crt"))
				}
				if v31 {
					if s.id != ECC_SM4_CBC_SM3 {
						t.Skip("GmSSL 3.1's tlcp_server offers TLS_ECC_SM4_CBC_SM3 only")
					}
					args = []string{"tlcp_server", "-port", fmt.Sprint(port), "-cert", f("server_sign_enc_chain.pem"),
						"-key", f("server_sign.gmssl311.key.pem"), "-pass", "P@ssw0rd",
						"-ex_key", f("server_enc.gmssl311.key.pem"), "-ex_pass", "P@ssw0rd"}
					if mutual {
						args = append(args, "-cacert", f("ca.crt")) // asks for a client certificate
					}
				}
				defer testpeer.Start(t, "", bin, args...).Stop()
				addr := fmt.Sprintf("127.0.0.1:%d", port)
				// Wait for the listening socket without connecting (a probe
				// connection would use up the server's accept).
				if !testpeer.WaitListening(port, 10*time.Second) {
					t.Fatal("gmssl tlcp_server did not start listening")
				}
				ccfg := p.clientConfig()
				ccfg.CipherSuites = []uint16{s.id}
				ccfg.NoClientExtensions = true         // GmSSL drops unknown extensions
				ccfg.ClientECDHEParamsAsVector = true  // GmSSL's 71-byte framing
				ccfg.ClientSignCertOnly = true         // GmSSL rejects [sign, enc] under ECC
				ccfg.ClientRawCertificateVerify = !v31 // GmSSL 3.3 verifies the raw transcript
				if !mutual && !ecdhe {
					ccfg.Certificates = nil
				}
				c, err := Dial("tcp", addr, ccfg)
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				msg := []byte("TLCP interop line 0123456789\n")
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read echo: %v", err)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("echo %q", got)
				}
			})
		}
	}
}
