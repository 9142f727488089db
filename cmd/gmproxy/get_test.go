package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/pkcs8"

	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// echoServer answers with the method, Host, X-Test header and body it got.
func echoServer(t *testing.T) (host, port string) {
	t.Helper()
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", "1")
		fmt.Fprintf(w, "method=%s host=%s x-test=%s type=%s body=%s", r.Method, r.Host, r.Header.Get("X-Test"), r.Header.Get("Content-Type"), b)
	}))
	t.Cleanup(ts.Close)
	h, p, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return h, p
}

// TestGetCurlSpellings: get takes curl's spellings, with flags before or
// after the URL.
func TestGetCurlSpellings(t *testing.T) {
	ip, port := echoServer(t)
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body")
	os.WriteFile(bodyFile, []byte("from a file"), 0o600)
	outFile := filepath.Join(dir, "out")
	url := "https://echo.test:" + port + "/p?q=1"
	resolve := "echo.test:" + port + ":" + ip

	var out, errb bytes.Buffer
	args := []string{url, "-tls", "-k", "--resolve", resolve, "-X", "PUT", "-d", "@" + bodyFile, "-H", "X-Test: yes", "-o", outFile, "-v"}
	if code := runGet(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got, _ := os.ReadFile(outFile)
	if want := "method=PUT host=echo.test:" + port + " x-test=yes type=application/x-www-form-urlencoded body=from a file"; string(got) != want {
		t.Errorf("-o file holds %q, want %q", got, want)
	}
	if out.Len() != 0 {
		t.Errorf("body also went to stdout: %q", out.String())
	}
	for _, want := range []string{"> PUT /p?q=1 HTTP/1.1\n", "> X-Test: yes\n", "< HTTP/1.1 200 OK\n", "< X-Echo: 1\n", "* TLSv1.3"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("-v output lacks %q:\n%s", want, errb.String())
		}
	}

	// -d alone means POST; -H Host: sets the Host header; flags first.
	out.Reset()
	errb.Reset()
	if code := runGet([]string{"-tls", "-k", "-q", "--resolve", resolve, "-d", "a=1", "-H", "Host: other.test", url}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if want := "method=POST host=other.test x-test= type=application/x-www-form-urlencoded body=a=1"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	// A --resolve for another name is not used (the name does not
	// resolve, so the dial fails).
	errb.Reset()
	if code := runGet([]string{"-tls", "-k", "--resolve", "other.invalid:" + port + ":" + ip, url}, &out, &errb); code == 0 {
		t.Error("a --resolve entry for another host was used")
	}
}

// TestGetSM2CAFileForTLS: the SM2 CA file given to -tls gets advice.
func TestGetSM2CAFileForTLS(t *testing.T) {
	_, port := echoServer(t)
	var out, errb bytes.Buffer
	code := runGet([]string{"-tls", "--cacert", filepath.Join("..", "..", "conf", "testdata", "pki", "ca.crt"), "-connect", "127.0.0.1:" + port, "https://localhost/"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "SM2 certificates") || !strings.Contains(errb.String(), "ecdsa_ca.crt") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}

func TestPasswordSource(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pw")
	os.WriteFile(f, []byte("from-file\nsecond line\n"), 0o600)
	t.Setenv("GMPROXY_TEST_PW", "from-env")
	for _, tc := range []struct{ spec, want, err string }{
		{"", "", ""},
		{"pass:literal", "literal", ""},
		{"env:GMPROXY_TEST_PW", "from-env", ""},
		{"file:" + f, "from-file", ""},
		{"secret", "", "pass:TEXT"},
		{"env:GMPROXY_TEST_UNSET_PW", "", "not set"},
		{"stdin:", "", "want pass:"},
	} {
		got, err := passwordSource(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one with %q", tc.spec, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), tc.spec) && tc.spec == "secret" {
				t.Errorf("the error repeats the password: %v", err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
}

// TestEveryCommandHelp: -help prints the synopsis ("usage: gmproxy NAME
// ...", as README.md promises) and exits 0 for every command.
func TestEveryCommandHelp(t *testing.T) {
	for name := range commands {
		for _, h := range []string{"-help", "-h", "--help"} {
			var out, errb bytes.Buffer
			if code := dispatch([]string{name, h}, &out, &errb); code != 0 {
				t.Errorf("%s %s: exit %d", name, h, code)
			}
			if !strings.HasPrefix(errb.String()+out.String(), "usage: gmproxy "+name) {
				t.Errorf("%s %s: no synopsis:\n%s%s", name, h, out.String(), errb.String())
			}
		}
	}
}

// TestSynopsisNamesEveryFlag: the synopsis that -help prints first names
// every flag the command takes (as -name or curl's --name), unless it says
// "[flags]" or the flag is another spelling of one it names ("the same
// as"): a flag left out of the synopsis is one an operator reading it does
// not know of.
func TestSynopsisNamesEveryFlag(t *testing.T) {
	flagLine := regexp.MustCompile(`^  -([A-Za-z0-9_-]+)`)
	for name := range commands {
		var out, errb bytes.Buffer
		dispatch([]string{name, "-help"}, &out, &errb)
		help := errb.String() + out.String()
		var synopsis strings.Builder
		lines := strings.Split(help, "\n")
		i := 0
		for ; i < len(lines) && !flagLine.MatchString(lines[i]); i++ {
			synopsis.WriteString(lines[i] + "\n")
		}
		if strings.Contains(synopsis.String(), "[flags]") {
			continue
		}
		for ; i < len(lines); i++ {
			m := flagLine.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			usage := ""
			if i+1 < len(lines) && !flagLine.MatchString(lines[i+1]) {
				usage = lines[i+1]
			}
			if strings.Contains(usage, "the same as") {
				continue
			}
			if !regexp.MustCompile(`(^|[\s\[|])--?` + regexp.QuoteMeta(m[1]) + `($|[\s\]|])`).MatchString(synopsis.String()) {
				t.Errorf("gmproxy %s: the synopsis does not name -%s:\n%s", name, m[1], synopsis.String())
			}
		}
	}
}

// rawServer is a TLS server on loopback that reads each request's head and
// answers with whatever respond writes, then closes the connection: a
// hostile or broken server.
func rawServer(t *testing.T, respond func(w io.Writer)) (port string) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	cfg := ts.TLS.Clone()
	ts.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := testpeer.ServeConns(t, ln, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		bw := bufio.NewWriter(c)
		respond(bw)
		bw.Flush()
	})
	_, port, _ = net.SplitHostPort(addr)
	return port
}

// TestGetResponseHeadBounded: a response head larger than
// maxResponseHeaderBytes is refused, not read into memory however long
// the server keeps sending it.
func TestGetResponseHeadBounded(t *testing.T) {
	port := rawServer(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Big: ")
		io.WriteString(w, strings.Repeat("a", 2*maxResponseHeaderBytes))
		io.WriteString(w, "\r\nContent-Length: 2\r\n\r\nok")
	})
	var out, errb bytes.Buffer
	code := runGet([]string{"-tls", "-k", "-q", "https://127.0.0.1:" + port + "/"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "response head larger than") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and the head refused", code, out.String(), errb.String())
	}
}

// TestGetSkipsInformationalResponses: 1xx heads (103 Early Hints, which a
// reverse proxy passes on) come before the response; get prints the final
// response, and endless 1xx heads are bounded like one large head.
func TestGetSkipsInformationalResponses(t *testing.T) {
	port := rawServer(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
		io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n")
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	})
	var out, errb bytes.Buffer
	if code := runGet([]string{"-tls", "-k", "https://127.0.0.1:" + port + "/"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != "hello" || !strings.Contains(errb.String(), " status=200 ") {
		t.Errorf("stdout %q, stderr %q; want the 200 response's body and status", out.String(), errb.String())
	}

	endless := rawServer(t, func(w io.Writer) {
		for range maxResponseHeaderBytes / 10 {
			if _, err := io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
		}
	})
	out.Reset()
	errb.Reset()
	code := runGet([]string{"-tls", "-k", "https://127.0.0.1:" + endless + "/"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "response head larger than") {
		t.Errorf("endless 1xx: exit %d, stderr %q", code, errb.String())
	}
}

// TestGetEscapesServerText: text a server chooses (the reason phrase, the
// names in its certificate) reaches the terminal with its control
// characters escaped, so that it cannot send escape sequences to it.
func TestGetEscapesServerText(t *testing.T) {
	port := rawServer(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1 200 OK\x1b]0;owned\x07\x9b2J\r\nX-Obs-Text: a\x9bb\r\nContent-Length: 2\r\n\r\nok")
	})
	var out, errb bytes.Buffer
	if code := runGet([]string{"-tls", "-k", "-v", "-i", "https://127.0.0.1:" + port + "/"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	head, _, _ := strings.Cut(out.String(), "\r\n\r\n")
	for name, s := range map[string]string{"-v": errb.String(), "-i": head} {
		for _, c := range []byte{0x1b, 0x07, 0x9b} {
			if strings.IndexByte(s, c) >= 0 {
				t.Errorf("%s printed the server's control character %#x: %q", name, c, s)
			}
		}
		if !strings.Contains(s, `200 OK\x1b]0;owned\x07\x9b2J`) || !strings.Contains(s, `X-Obs-Text: a\x9bb`) {
			t.Errorf("%s lacks the escaped reason phrase or header: %q", name, s)
		}
	}

	// A certificate for a name with an escape sequence, refused for
	// another name: the error names it.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"evil\x1b[2J.test"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	errb.Reset()
	code := runGet([]string{"-tls", "--cacert", caFile, "-connect", ln.Addr().String(), "https://victim.test/"}, &out, &errb)
	if code != 1 || strings.Contains(errb.String(), "\x1b") || !strings.Contains(errb.String(), `evil\x1b[2J.test`) {
		t.Errorf("exit %d, stderr %q; want exit 1 and the name escaped", code, errb.String())
	}
}

// TestGetCipherList: -cipher takes a list, comma or colon separated, for
// -ntls and -tls13sm as its help says; the server picks one of them.
func TestGetCipherList(t *testing.T) {
	for _, tc := range []struct {
		flag, list string
		srv        func(*testing.T) *stimeServer
	}{
		{"-ntls", "ECC-SM2-SM4-CBC-SM3,ECC-SM2-SM4-GCM-SM3", func(t *testing.T) *stimeServer { return newTLCPServer(t, false) }},
		{"-ntls", "ECC-SM2-SM4-CBC-SM3", func(t *testing.T) *stimeServer { return newTLCPServer(t, false) }},
		{"-tls13sm", "TLS_SM4_CCM_SM3:TLS_SM4_GCM_SM3", newTLS13SMServer},
		{"-tls13sm", "TLS_SM4_CCM_SM3", newTLS13SMServer},
	} {
		s := tc.srv(t)
		var out, errb bytes.Buffer
		code := runGet([]string{tc.flag, "-cipher", tc.list, "--cacert", pkiPath(t, "ca.crt"), "-connect", s.addr, "https://localhost/1k"}, &out, &errb)
		fields := strings.Fields(errb.String())
		if code != 0 || len(fields) < 3 || !slices.Contains(strings.FieldsFunc(tc.list, func(r rune) bool { return r == ',' || r == ':' }), fields[2]) {
			t.Errorf("%s -cipher %s: exit %d: %s", tc.flag, tc.list, code, errb.String())
		}
	}
}

// TestGetTLSEncryptedClientKey: -pass decrypts the -key of -tls too, as
// its help says ("password of encrypted client keys"), for get and s_time.
func TestGetTLSEncryptedClientKey(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "client certificates: %d", len(r.TLS.PeerCertificates))
	}))
	ts.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	defer ts.Close()
	pki := filepath.Join("..", "..", "conf", "testdata", "pki")
	key, err := smkey.LoadPrivateKeyFile(filepath.Join(pki, "server_ecdsa.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	der, err := pkcs8.MarshalPrivateKey(key, []byte("pw"), pkcs8.DefaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	encKey := filepath.Join(t.TempDir(), "client.key")
	os.WriteFile(encKey, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), 0o600)
	var out, errb bytes.Buffer
	code := runGet([]string{"-tls", "-k", "-q", "-cert", filepath.Join(pki, "server_ecdsa.crt"), "-key", encKey, "-pass", "pass:pw", ts.URL + "/"}, &out, &errb)
	if code != 0 || out.String() != "client certificates: 1" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	// s_time -tls takes it the same way.
	out.Reset()
	errb.Reset()
	code = runSTime([]string{"-tls", "-new", "-n", "1", "-www", "/", "-connect", ts.Listener.Addr().String(),
		"-cert", filepath.Join(pki, "server_ecdsa.crt"), "-key", encKey, "-pass", "pass:pw"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "1 connections") || !strings.Contains(out.String(), "errors                 0") {
		t.Errorf("s_time: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestGetTimeoutMustBePositive: -timeout 0 is a usage error, not a
// connection that "timed out" before it was tried.
func TestGetTimeoutMustBePositive(t *testing.T) {
	_, port := echoServer(t)
	for _, v := range []string{"0", "-1s"} {
		var out, errb bytes.Buffer
		code := runGet([]string{"-tls", "-k", "-timeout", v, "https://127.0.0.1:" + port + "/"}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "-timeout must be positive") {
			t.Errorf("-timeout %s: exit %d, stderr %q", v, code, errb.String())
		}
	}
}

// TestGetConflictingFlags: flags one of which would be dropped are a usage
// error that names them.
func TestGetConflictingFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-connect", "127.0.0.1:1", "--resolve", "a.test:443:127.0.0.1"}, "give -connect or --resolve, not both"},
		{[]string{"-I", "-d", "x=1"}, "-I sends HEAD, which carries no body"},
		{[]string{"-I", "-X", "POST"}, "-I sends HEAD, -X POST another method"},
		// A suite of another protocol, refused before the dial (whose
		// error, exit 1, hid it).
		{[]string{"-cipher", "TLS_SM4_GCM_SM3"}, `unknown cipher suite "TLS_SM4_GCM_SM3"`},
		{[]string{"-tls13sm", "-cipher", "ECC-SM2-SM4-GCM-SM3"}, `unknown cipher suite "ECC-SM2-SM4-GCM-SM3"`},
	} {
		var out, errb bytes.Buffer
		if !slices.Contains(tt.args, "-cipher") {
			tt.args = append(tt.args, "-tls")
		}
		code := runGet(append(tt.args, "-k", "-connect", "127.0.0.1:1", "https://a.test/"), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errb.String(), tt.want)
		}
	}
	// -I -X HEAD says the same twice.
	_, port := echoServer(t)
	var out, errb bytes.Buffer
	if code := runGet([]string{"-tls", "-k", "-q", "-I", "-X", "HEAD", "https://127.0.0.1:" + port + "/"}, &out, &errb); code != 0 {
		t.Errorf("-I -X HEAD: exit %d, stderr %q", code, errb.String())
	}
}

// TestGetURLCredentials: a user and password in the URL are sent as Basic
// credentials, as curl sends them (they were dropped); -v -h2 shows the
// request as HTTP/2.
func TestGetURLCredentials(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, ok := r.BasicAuth()
		fmt.Fprintf(w, "%v %s %s %s", ok, user, pw, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	u := strings.Replace(srv.URL, "https://", "https://ops:p%40ss@", 1) + "/"
	for _, c := range []struct {
		args       []string
		body, line string
	}{
		{[]string{"-tls", "-k", "-v"}, "true ops p@ss HTTP/1.1", "> GET / HTTP/1.1"},
		{[]string{"-tls", "-k", "-v", "-h2"}, "true ops p@ss HTTP/2.0", "> GET / HTTP/2"},
	} {
		var out, errb bytes.Buffer
		if code := runGet(append(c.args, u), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errb.String())
		}
		if out.String() != c.body || !strings.Contains(errb.String(), c.line+"\n") {
			t.Errorf("%v: server saw %q, want %q; -v request line %q in:\n%s", c.args, out.String(), c.body, c.line, errb.String())
		}
	}
}

// TestClientCertFlagsOfAnotherProtocolRefused: get and s_time took the
// client certificate flags of the protocol not chosen (-cert with TLCP,
// -sign_cert with TLS 1.3-SM or TLS) and half a pair, and sent no
// certificate at all; the server's "certificate required" then said
// nothing of why. They are refused before any connection (127.0.0.1:1
// is never dialled: a dial error would say something else).
func TestClientCertFlagsOfAnotherProtocolRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-cert", "c.crt", "-key", "c.key"}, "-cert and -key are for -tls13sm and -tls"},
		{[]string{"-ntls", "-sign_key", "s.key"}, "TLCP client authentication needs -sign_cert, -sign_key, -enc_cert and -enc_key"},
		{[]string{"-sign_cert", "s.crt", "-sign_key", "s.key"}, "TLCP client authentication needs -sign_cert, -sign_key, -enc_cert and -enc_key"},
		{[]string{"-tls13sm", "-sign_cert", "s.crt", "-sign_key", "s.key"}, "-sign_cert, -sign_key, -enc_cert and -enc_key are for TLCP (-ntls)"},
		{[]string{"-tls", "-enc_key", "e.key"}, "-sign_cert, -sign_key, -enc_cert and -enc_key are for TLCP (-ntls)"},
		{[]string{"-tls13sm", "-cert", "c.crt"}, "-cert needs -key"},
		{[]string{"-tls", "-key", "c.key"}, "-key needs -cert"},
	} {
		var out, errb bytes.Buffer
		if code := runGet(append(tt.args, "https://127.0.0.1:1/"), &out, &errb); code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("get %q: exit %d, %q; want exit 2 with %q", tt.args, code, errb.String(), tt.want)
		}
		errb.Reset()
		if code := dispatch(append([]string{"s_time", "-connect", "127.0.0.1:1", "-new", "-n", "1", "-time", "1"}, tt.args...), &out, &errb); code == 0 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("s_time %q: exit %d, %q; want an error with %q", tt.args, code, errb.String(), tt.want)
		}
	}
}
