package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a moment
// ago (the listener is closed before the peer binds it).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startTengine writes a Tengine configuration into a temporary prefix and
// runs bin with it in the foreground as a single process (daemon off,
// master_process off), so that killing the one process stops the server. It
// serves 1 KiB at /1k on two NTLS listeners on loopback: plain, and with
// required client certificates. It returns both addresses.
func startTengine(t *testing.T, bin string) (plain, mutual string) {
	t.Helper()
	prefix := t.TempDir()
	for _, d := range []string{"conf", "logs", "html"} {
		if err := os.Mkdir(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(prefix, "html", "1k"), bytes.Repeat([]byte("n"), 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, mutual = freeLoopbackAddr(t), freeLoopbackAddr(t)
	ntls := fmt.Sprintf(`enable_ntls on;
        ssl_sign_certificate     %s;
        ssl_sign_certificate_key %s;
        ssl_enc_certificate      %s;
        ssl_enc_certificate_key  %s;
        root %s;
        location = /1k { default_type text/plain; }`,
		pkiPath(t, "server_sign.crt"), pkiPath(t, "server_sign.key"),
		pkiPath(t, "server_enc.crt"), pkiPath(t, "server_enc.key"), filepath.Join(prefix, "html"))
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/logs/tengine.pid;
error_log %[1]s/logs/error.log notice;
events { worker_connections 256; }
http {
    access_log off;
    keepalive_timeout 30;
    ssl_session_cache shared:NTLS:1m;
    server {
        listen %[2]s ssl;
        server_name localhost;
        %[4]s
    }
    server {
        listen %[3]s ssl;
        server_name localhost;
        ssl_verify_client on;
        ssl_client_certificate %[5]s;
        %[4]s
    }
}
`, prefix, plain, mutual, ntls, pkiPath(t, "ca.crt"))
	confFile := filepath.Join(prefix, "conf", "tengine.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, bin, "-p", prefix, "-c", confFile, "-e", filepath.Join(prefix, "logs", "error.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	errorLog := func() string {
		b, _ := os.ReadFile(filepath.Join(prefix, "logs", "error.log"))
		return out.String() + string(b)
	}
	t.Cleanup(func() {
		cancel() // SIGKILL to the single Tengine process
		<-exited
		if t.Failed() {
			t.Logf("tengine output and error log:\n%s", errorLog())
		}
	})
	for _, addr := range []string{plain, mutual} {
		for i := 0; ; i++ {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				exited <- err // for the cleanup
				t.Fatalf("tengine exited: %v\n%s", err, errorLog())
			default:
			}
			if i == 100 {
				t.Fatalf("tengine does not listen on %s: %v\n%s", addr, err, errorLog())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return plain, mutual
}

// TestSTimeTengine runs s_time against Tengine's NTLS module
// (ngx_tongsuo_ntls) when GMPROXY_TENGINE_BIN names a Tengine binary built
// with it: ECC and ECDHE suites, full and resumed handshakes (ticket and
// session ID), keep-alive requests and mutual authentication.
func TestSTimeTengine(t *testing.T) {
	bin := os.Getenv("GMPROXY_TENGINE_BIN")
	if bin == "" {
		t.Skip("GMPROXY_TENGINE_BIN not set")
	}
	plain, mutual := startTengine(t, bin)
	const n = 20
	clientCerts := []string{"-sign_cert", pkiPath(t, "client_sign.crt"), "-sign_key", pkiPath(t, "client_sign.key"),
		"-enc_cert", pkiPath(t, "client_enc.crt"), "-enc_key", pkiPath(t, "client_enc.key")}
	tests := []struct {
		name    string
		addr    string
		args    []string
		cipher  string
		conns   int64 // per run
		resumed int64
		errors  map[string]int64 // nil: none
	}{
		{"ecc-gcm-new", plain, []string{"-new", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, "ECC-SM2-SM4-GCM-SM3", n, 0, nil},
		{"ecc-cbc-new", plain, []string{"-new", "-cipher", "ECC-SM2-SM4-CBC-SM3"}, "ECC-SM2-SM4-CBC-SM3", n, 0, nil},
		// Tengine issues tickets: the default client resumes with them.
		{"ecc-gcm-reuse-ticket", plain, []string{"-reuse", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, "ECC-SM2-SM4-GCM-SM3", n, n, nil},
		// No extensions, so no ticket: session-ID resumption (ssl_session_cache).
		{"ecc-cbc-reuse-sessionid", plain, []string{"-reuse", "-no_ext", "-cipher", "ECC-SM2-SM4-CBC-SM3"}, "ECC-SM2-SM4-CBC-SM3", n, n, nil},
		{"ecc-gcm-keepalive", plain, []string{"-new", "-keepalive", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, "ECC-SM2-SM4-GCM-SM3", 1, 0, nil},
		{"ecdhe-gcm-mutual-new", mutual, append([]string{"-new", "-cipher", "ECDHE-SM2-SM4-GCM-SM3"}, clientCerts...), "ECDHE-SM2-SM4-GCM-SM3", n, 0, nil},
		{"ecdhe-cbc-mutual-reuse", mutual, append([]string{"-reuse", "-cipher", "ECDHE-SM2-SM4-CBC-SM3"}, clientCerts...), "ECDHE-SM2-SM4-CBC-SM3", n, n, nil},
		{"ecc-gcm-mutual-new", mutual, append([]string{"-new", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, clientCerts...), "ECC-SM2-SM4-GCM-SM3", n, 0, nil},
		// Without client certificates nginx completes the handshake and
		// answers 400 ("No required SSL certificate was sent"); s_time
		// then exits 1.
		{"ecc-mutual-no-client-cert", mutual, []string{"-new", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, "ECC-SM2-SM4-GCM-SM3", n, 0,
			map[string]int64{"request/http_4xx": n}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-ntls", "-connect", tt.addr, "-servername", "localhost", "-CAfile", pkiPath(t, "ca.crt"),
				"-n", fmt.Sprint(n), "-www", "/1k"}, tt.args...)
			// Every request refused: s_time measured no request and
			// says so (exit 1).
			code, why := 0, ""
			if tt.errors["request/http_4xx"] == int64(n) {
				code, why = 1, "no request for /1k succeeded"
			}
			runs := runSTimeJSONExit(t, code, why, args...)
			if len(runs) != 1 {
				t.Fatalf("%d runs, want 1", len(runs))
			}
			r := runs[0]
			wantRequests, wantErrors := int64(n), int64(0)
			for _, v := range tt.errors {
				wantErrors += v
			}
			wantRequests -= wantErrors
			// Bytes also counts the bodies of error responses, so it is
			// only checked when every request succeeded.
			if r.Connections != tt.conns || r.Resumed != tt.resumed || r.Requests != wantRequests ||
				(wantErrors == 0 && r.Bytes != wantRequests*1024) || r.ErrorCount != wantErrors {
				t.Errorf("conns %d (want %d) resumed %d (want %d) requests %d (want %d) bytes %d errors %d %v (want %d) first error %q",
					r.Connections, tt.conns, r.Resumed, tt.resumed, r.Requests, wantRequests, r.Bytes,
					r.ErrorCount, r.Errors, wantErrors, r.FirstError)
			}
			for k, v := range tt.errors {
				if r.Errors[k] != v {
					t.Errorf("errors %v, want %s=%d", r.Errors, k, v)
				}
			}
			if r.Ciphers[tt.cipher] != r.Connections || r.Versions["NTLSv1.1"] != r.Connections {
				t.Errorf("ciphers %v versions %v, want %s / NTLSv1.1 for all %d", r.Ciphers, r.Versions, tt.cipher, r.Connections)
			}
			if strings.Contains(tt.name, "keepalive") && r.Handshake.Count != 1 {
				t.Errorf("keep-alive: %d handshakes, want 1", r.Handshake.Count)
			}
		})
	}
}
