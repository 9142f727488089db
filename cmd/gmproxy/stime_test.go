package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/stime"
	"github.com/gmproxy/gmproxy/internal/transcript"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// stimeServer is an in-process TLCP or TLS 1.3-SM HTTP server on loopback
// that counts the handshakes it completed.
type stimeServer struct {
	addr                string
	handshakes, resumed atomic.Int64
	ticketsAccepted     atomic.Int64 // TLCP only
}

func pkiPath(t *testing.T, name string) string {
	t.Helper()
	dir, err := transcript.PKIDir()
	if err != nil {
		t.Fatalf("test PKI: %v", err)
	}
	return filepath.Join(dir, name)
}

func serveHTTP(t *testing.T, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("/1k", func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("s"), 1024)) })
	srv := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func newTLCPServer(t *testing.T, clientAuth bool) *stimeServer {
	t.Helper()
	cert, err := tlcp.LoadX509KeyPair(pkiPath(t, "server_sign.crt"), pkiPath(t, "server_sign.key"),
		pkiPath(t, "server_enc.crt"), pkiPath(t, "server_enc.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &stimeServer{}
	cfg := &tlcp.Config{Certificates: []tlcp.Certificate{cert}, OnHandshake: func(r tlcp.HandshakeResult) {
		if r.Err == nil {
			s.handshakes.Add(1)
			if r.State.DidResume {
				s.resumed.Add(1)
			}
		}
	}, OnTicket: func(e tlcp.TicketEvent) {
		if e.Kind == tlcp.TicketAccepted {
			s.ticketsAccepted.Add(1)
		}
	}}
	if clientAuth {
		cfg.ClientAuth = tlcp.RequireAndVerifyClientCert
		cfg.ClientCAs = caPool(t)
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	serveHTTP(t, ln)
	return s
}

func newTLS13SMServer(t *testing.T) *stimeServer {
	t.Helper()
	cert, err := tls13sm.LoadX509KeyPair(pkiPath(t, "server_sign.crt"), pkiPath(t, "server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &stimeServer{}
	cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{cert}, OnHandshake: func(r tls13sm.HandshakeResult) {
		if r.Err == nil {
			s.handshakes.Add(1)
			if r.State.DidResume {
				s.resumed.Add(1)
			}
		}
	}}
	ln, err := tls13sm.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	serveHTTP(t, ln)
	return s
}

func caPool(t *testing.T) *smx509.CertPool {
	certs, err := smkey.LoadCertificatesFile(pkiPath(t, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	p := smx509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// runSTimeJSON runs `gmproxy s_time ... -json` and decodes its runs.
func runSTimeJSON(t *testing.T, args ...string) []stime.Result {
	t.Helper()
	return runSTimeJSONExit(t, 0, "", args...)
}

// runSTimeJSONExit is runSTimeJSON for a run that exits with code, its
// standard error saying why (containing why) when code is not 0.
func runSTimeJSONExit(t *testing.T, code int, why string, args ...string) []stime.Result {
	t.Helper()
	var out, errb bytes.Buffer
	got := dispatch(append([]string{"s_time", "-json"}, args...), &out, &errb)
	var doc struct{ Runs []stime.Result }
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("exit %d, bad JSON %v\nstdout: %s\nstderr: %s", got, err, out.String(), errb.String())
	}
	if got != code || !strings.Contains(errb.String(), why) {
		t.Errorf("exit %d, want %d; stderr: %s (want %q in it)", got, code, errb.String(), why)
	}
	return doc.Runs
}

func TestSTimeTLCPAndTLS13SM(t *testing.T) {
	tlcpSrv := newTLCPServer(t, false)
	tlcpAuth := newTLCPServer(t, true)
	tls13Srv := newTLS13SMServer(t)
	ca := pkiPath(t, "ca.crt")
	clientCerts := []string{"-sign_cert", pkiPath(t, "client_sign.crt"), "-sign_key", pkiPath(t, "client_sign.key"),
		"-enc_cert", pkiPath(t, "client_enc.crt"), "-enc_key", pkiPath(t, "client_enc.key")}

	tests := []struct {
		name    string
		srv     *stimeServer
		args    []string
		cipher  string
		resumed int64 // in the measured phase(s), summed
		phases  int
	}{
		{"tlcp-ecc-gcm-new", tlcpSrv, []string{"-ntls", "-new", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, "ECC-SM2-SM4-GCM-SM3", 0, 1},
		{"tlcp-ecc-cbc-reuse", tlcpSrv, []string{"-ntls", "-reuse", "-cipher", "ECC_SM4_CBC_SM3"}, "ECC-SM2-SM4-CBC-SM3", 6, 1},
		{"tlcp-ecc-both-phases-gmssl", tlcpSrv, []string{"-ntls", "-gmssl"}, "", 6, 2},
		{"tlcp-ecdhe-clientauth", tlcpAuth, append([]string{"-ntls", "-new", "-cipher", "ECDHE-SM2-SM4-GCM-SM3"}, clientCerts...), "ECDHE-SM2-SM4-GCM-SM3", 0, 1},
		{"tlcp-ecdhe-cbc-gmssl-reuse", tlcpAuth, append([]string{"-ntls", "-reuse", "-gmssl", "-cipher", "ECDHE_SM4_CBC_SM3"}, clientCerts...), "ECDHE-SM2-SM4-CBC-SM3", 6, 1},
		{"tls13sm-gcm-new", tls13Srv, []string{"-tls13sm", "-new", "-cipher", "TLS_SM4_GCM_SM3"}, "TLS_SM4_GCM_SM3", 0, 1},
		{"tls13sm-ccm-reuse", tls13Srv, []string{"-tls13sm", "-reuse", "-cipher", "TLS_SM4_CCM_SM3"}, "TLS_SM4_CCM_SM3", 6, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, beforeResumed := tt.srv.handshakes.Load(), tt.srv.resumed.Load()
			args := append([]string{"-connect", tt.srv.addr, "-servername", "localhost", "-CAfile", ca,
				"-n", "6", "-c", "2", "-www", "/1k"}, tt.args...)
			runs := runSTimeJSON(t, args...)
			if len(runs) != tt.phases {
				t.Fatalf("%d runs, want %d", len(runs), tt.phases)
			}
			var conns, resumed int64
			for _, r := range runs {
				if r.Connections != 6 || r.Requests != 6 || r.Bytes != 6*1024 || r.ErrorCount != 0 {
					t.Errorf("%s: conns %d requests %d bytes %d errors %v (%s)", r.Mode, r.Connections, r.Requests, r.Bytes, r.Errors, r.FirstError)
				}
				if tt.cipher != "" && r.Ciphers[tt.cipher] != r.Connections {
					t.Errorf("ciphers %v, want %s", r.Ciphers, tt.cipher)
				}
				conns += r.Connections
				resumed += r.Resumed
			}
			if resumed != tt.resumed {
				t.Errorf("resumed %d, want %d", resumed, tt.resumed)
			}
			// Every measured connection made a request, so the server finished
			// its handshake; -reuse adds one priming connection.
			priming := int64(0)
			for _, r := range runs {
				if r.Mode == "reuse" {
					priming++
				}
			}
			if got := tt.srv.handshakes.Load() - before; got != conns+priming {
				t.Errorf("server handshakes %d, client connections %d + %d priming", got, conns, priming)
			}
			if got := tt.srv.resumed.Load() - beforeResumed; got != resumed {
				t.Errorf("server resumed %d, client resumed %d", got, resumed)
			}
		})
	}
}

// TestSTimeNoTicket: TLCP -reuse resumes with tickets by default and by
// session ID with -no_ticket.
func TestSTimeNoTicket(t *testing.T) {
	srv := newTLCPServer(t, false)
	for _, tt := range []struct {
		flags   []string
		tickets int64
	}{{nil, 4}, {[]string{"-no_ticket"}, 0}} {
		before, beforeResumed := srv.ticketsAccepted.Load(), srv.resumed.Load()
		args := append([]string{"-ntls", "-reuse", "-connect", srv.addr, "-servername", "localhost",
			"-CAfile", pkiPath(t, "ca.crt"), "-n", "4", "-c", "1", "-www", "/1k"}, tt.flags...)
		runs := runSTimeJSON(t, args...)
		if len(runs) != 1 || runs[0].Resumed != 4 {
			t.Fatalf("%v: runs %+v, want 4 resumed", tt.flags, runs)
		}
		if got := srv.resumed.Load() - beforeResumed; got != 4 {
			t.Errorf("%v: server resumed %d, want 4", tt.flags, got)
		}
		if got := srv.ticketsAccepted.Load() - before; got != tt.tickets {
			t.Errorf("%v: server accepted %d tickets, want %d", tt.flags, got, tt.tickets)
		}
	}
}

func TestSTimeKeepAlive(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flag  string
		start func(*testing.T) *stimeServer
	}{
		{"tlcp", "-ntls", func(t *testing.T) *stimeServer { return newTLCPServer(t, false) }},
		// net/http aborts its background read with a past read deadline; the
		// connection must stay usable after that timeout.
		{"tls13sm", "-tls13sm", newTLS13SMServer},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.start(t)
			runs := runSTimeJSON(t, tt.flag, "-connect", srv.addr, "-servername", "localhost", "-CAfile", pkiPath(t, "ca.crt"),
				"-new", "-keepalive", "-www", "/1k", "-n", "40", "-c", "2")
			r := runs[0]
			if r.Requests != 40 || r.Bytes != 40*1024 || r.Connections < 1 || r.Connections > 2 || r.ErrorCount != 0 {
				t.Errorf("requests %d bytes %d conns %d errors %v (%s)", r.Requests, r.Bytes, r.Connections, r.Errors, r.FirstError)
			}
			if got := srv.handshakes.Load(); got != r.Connections {
				t.Errorf("server handshakes %d, client connections %d", got, r.Connections)
			}
		})
	}
}

// TestSTimeLoadGen: -loadgen completes real handshakes and requests with
// both SM protocols (the load-generator client itself is tested in tlcp
// and tls13sm).
func TestSTimeLoadGen(t *testing.T) {
	for _, tt := range []struct {
		srv   *stimeServer
		proto string
	}{{newTLCPServer(t, false), "-ntls"}, {newTLS13SMServer(t), "-tls13sm"}} {
		before := tt.srv.handshakes.Load()
		runs := runSTimeJSON(t, "-connect", tt.srv.addr, "-servername", "localhost", tt.proto, "-new", "-loadgen",
			"-n", "6", "-c", "2", "-www", "/1k")
		if r := runs[0]; len(runs) != 1 || r.Connections != 6 || r.Requests != 6 || r.ErrorCount != 0 {
			t.Errorf("%s: %d runs; conns %d requests %d errors %v (%s)", tt.proto, len(runs), r.Connections, r.Requests, r.Errors, r.FirstError)
		}
		if got := tt.srv.handshakes.Load() - before; got != 6 {
			t.Errorf("%s: server handshakes %d, want 6", tt.proto, got)
		}
	}
}

func TestSTimeErrorsAndFlags(t *testing.T) {
	srv := newTLCPServer(t, false)
	// Wrong CA: every handshake fails with a certificate error; exit status 1.
	var out, errb bytes.Buffer
	code := dispatch([]string{"s_time", "-json", "-ntls", "-new", "-connect", srv.addr, "-servername", "localhost",
		"-CAfile", pkiPath(t, "client_sign.crt"), "-n", "3"}, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d with an untrusted server", code)
	}
	var doc struct{ Runs []stime.Result }
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r := doc.Runs[0]; r.ErrorCount != 3 || r.Errors["handshake/certificate"]+r.Errors["handshake/alert"] != 3 {
		t.Errorf("errors %v (%s)", r.Errors, r.FirstError)
	}
	// Each is refused for what is wrong with it, as a usage error (exit
	// 2, as get and speed; 1 is a run that failed), before any
	// connection: 127.0.0.1:1 is never dialled (a dial error would say
	// something else).
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-ntls", "-tls"}, "choose one of -ntls, -tls13sm, -tls"},
		{[]string{"-new", "-reuse"}, "choose -new or -reuse"},
		{[]string{"-keepalive"}, "need -www PATH"},
		{[]string{"-www", "noslash"}, "-www must be an absolute path"},
		{[]string{"-cipher", "RC4-MD5"}, `unknown cipher suite "RC4-MD5"`},
		{[]string{"-tls13sm", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, `ECC-SM2-SM4-GCM-SM3`},
		{[]string{"-c", "0"}, "-c must be in [1, 10000]"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-tls", "-loadgen"}, "-loadgen is for -ntls and -tls13sm"},
		{[]string{"-loadgen", "-CAfile", "ca.crt"}, "drop -CAfile"},
		{[]string{"-time", "1e12"}, "-time and -timeout must be numbers of at most 1e9 seconds"},
		{[]string{"-timeout", "NaN"}, "-time and -timeout must be numbers of at most 1e9 seconds"},
		{[]string{"-timeout", "1e-10"}, "-timeout must be at least 0.001 seconds"},
		{[]string{"-rate", "NaN", "-new", "-time", "1"}, "-rate must be a finite number"},
		{[]string{"-rate", "+Inf", "-new", "-time", "1"}, "-rate must be a finite number"},
	} {
		var o, e bytes.Buffer
		if code := dispatch(append([]string{"s_time", "-connect", "127.0.0.1:1", "-n", "1"}, tt.args...), &o, &e); code != 2 || !strings.Contains(e.String(), tt.want) {
			t.Errorf("%v: exit %d, %q; want an error with %q", tt.args, code, e.String(), tt.want)
		}
	}
}

func TestSTimeTableOutput(t *testing.T) {
	srv := newTLS13SMServer(t)
	var out, errb bytes.Buffer
	code := dispatch([]string{"s_time", "-tls13sm", "-connect", srv.addr, "-servername", "localhost", "-n", "3"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// Both phases (no -new/-reuse), without -CAfile (no verification).
	if got := strings.Count(out.String(), "connections/s"); got != 4 {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestSTimeTongsuo runs s_time against Tongsuo's s_server (NTLS and TLS 1.3-SM)
// when GMPROXY_TONGSUO_BIN is set.
func TestSTimeTongsuo(t *testing.T) {
	bin := os.Getenv("GMPROXY_TONGSUO_BIN")
	if bin == "" {
		t.Skip("GMPROXY_TONGSUO_BIN not set")
	}
	docroot := t.TempDir()
	if err := os.WriteFile(filepath.Join(docroot, "1k"), bytes.Repeat([]byte("t"), 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	ntls := []string{"-enable_ntls", "-sign_cert", pkiPath(t, "server_sign.crt"), "-sign_key", pkiPath(t, "server_sign.key"),
		"-enc_cert", pkiPath(t, "server_enc.crt"), "-enc_key", pkiPath(t, "server_enc.key")}
	tls13 := []string{"-tls1_3", "-enable_sm_tls13_strict", "-ciphersuites", "TLS_SM4_GCM_SM3:TLS_SM4_CCM_SM3",
		"-cert", pkiPath(t, "server_sign.crt"), "-key", pkiPath(t, "server_sign.key")}
	tests := []struct {
		name       string
		serverArgs []string
		clientArgs []string
	}{
		{"ntls-ecc-gcm", ntls, []string{"-ntls", "-cipher", "ECC-SM2-SM4-GCM-SM3"}},
		{"ntls-ecc-cbc", ntls, []string{"-ntls", "-cipher", "ECC-SM2-SM4-CBC-SM3"}},
		{"tls13sm-gcm", tls13, []string{"-tls13sm", "-cipher", "TLS_SM4_GCM_SM3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"s_server", "-accept", addr, "-quiet", "-WWW"}, tt.serverArgs...)...)
			cmd.Dir = docroot
			var serr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &serr, &serr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); cmd.Wait() }()
			for i := 0; i < 100; i++ {
				if c, err := net.Dial("tcp", addr); err == nil {
					c.Close()
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			args := append([]string{"-connect", addr, "-servername", "localhost", "-CAfile", pkiPath(t, "ca.crt"),
				"-n", "5", "-www", "/1k"}, tt.clientArgs...)
			runs := runSTimeJSON(t, args...)
			if len(runs) != 2 {
				t.Fatalf("%d runs; server output: %s", len(runs), serr.String())
			}
			for _, r := range runs {
				wantResumed := int64(0)
				if r.Mode == "reuse" {
					wantResumed = 5
				}
				if r.Connections != 5 || r.Requests != 5 || r.Bytes != 5*1024 || r.Resumed != wantResumed || r.ErrorCount != 0 {
					t.Errorf("%s: conns %d requests %d bytes %d resumed %d errors %v (%s); server: %s",
						r.Mode, r.Connections, r.Requests, r.Bytes, r.Resumed, r.Errors, r.FirstError, serr.String())
				}
			}
		})
	}
}

// TestSTimeErrorBodiesNotThroughput: the bodies of 4xx and 5xx responses
// (a path mistyped, a backend down behind the proxy) were added to the
// bytes read, so -download reported the error pages' MiB/s as the
// throughput of requests that all failed.
func TestSTimeErrorBodiesNotThroughput(t *testing.T) {
	srv := newTLCPServer(t, false)
	for _, mode := range [][]string{{"-download"}, nil} {
		var out, errb bytes.Buffer
		dispatch(append([]string{"s_time", "-json", "-ntls", "-new", "-connect", srv.addr, "-servername", "localhost",
			"-www", "/missing", "-n", "4"}, mode...), &out, &errb)
		var doc struct{ Runs []stime.Result }
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Runs) != 1 {
			t.Fatalf("%v: %v: %s %s", mode, err, out.String(), errb.String())
		}
		r := doc.Runs[0]
		if r.Errors["request/http_4xx"] != 4 || r.Requests != 0 {
			t.Fatalf("%v: errors %v, requests %d; want 4 request/http_4xx and none done", mode, r.Errors, r.Requests)
		}
		if r.Bytes != 0 || r.BytesPerSec != 0 {
			t.Errorf("%v: %d bytes (%.0f/s) counted from 404 pages", mode, r.Bytes, r.BytesPerSec)
		}
	}
}

// TestSTimeFailsWhenNothingMeasured: a run whose requests all failed, or
// a -reuse run against a server that resumes nothing, exited 0 like a
// good measurement, its rate being of handshakes followed by error pages,
// or of full handshakes.
func TestSTimeFailsWhenNothingMeasured(t *testing.T) {
	tlcpSrv := newTLCPServer(t, false)
	cert, err := tls13sm.LoadX509KeyPair(pkiPath(t, "server_sign.crt"), pkiPath(t, "server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls13sm.Listen("tcp", "127.0.0.1:0", &tls13sm.Config{Certificates: []tls13sm.Certificate{cert}, SessionTicketsDisabled: true})
	if err != nil {
		t.Fatal(err)
	}
	serveHTTP(t, ln)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-ntls", "-connect", tlcpSrv.addr, "-new", "-www", "/missing"}, "new phase: no request for /missing succeeded"},
		{[]string{"-ntls", "-connect", tlcpSrv.addr, "-new", "-keepalive", "-www", "/missing"}, "new phase: no request for /missing succeeded"},
		{[]string{"-tls13sm", "-connect", ln.Addr().String(), "-reuse"}, "reuse phase: the server resumed no session"},
	} {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"s_time", "-servername", "localhost", "-n", "3"}, tt.args...), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q\n%s", tt.args, code, errb.String(), tt.want, out.String())
		}
		if !strings.Contains(out.String(), "connections/s") {
			t.Errorf("%v: no table printed:\n%s", tt.args, out.String())
		}
	}
	// The same runs where the server does what was asked succeed.
	for _, args := range [][]string{
		{"-ntls", "-connect", tlcpSrv.addr, "-new", "-www", "/1k"},
		{"-ntls", "-connect", tlcpSrv.addr, "-reuse"},
	} {
		var out, errb bytes.Buffer
		if code := dispatch(append([]string{"s_time", "-servername", "localhost", "-n", "3"}, args...), &out, &errb); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errb.String())
		}
	}
}
