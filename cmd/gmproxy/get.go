package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

func init() {
	register("get", "fetch a URL over TLCP, TLS 1.3-SM or TLS and print the response and the connection", runGet)
}

type getOptions struct {
	ntls, tls13, std bool
	tlsVersion       tlsVersionFlags
	caFile           string
	clientCertFlags
	serverName, cipher, connect    string
	insecure, head, include, quiet bool
	verbose, h2                    bool
	timeout                        time.Duration
	method, data, output           string
	headers                        multiFlag
	resolve                        string
}

const getUsage = "usage: gmproxy get [-ntls|-tls13sm|-tls|-tls1_2|-tls1_3] [--cacert FILE] [-sign_cert F -sign_key F -enc_cert F -enc_key F | -cert F -key F] [-pass SRC]\n" +
	"                  [-servername NAME] [-cipher NAME] [-connect HOST:PORT | --resolve HOST:PORT:ADDR] [-h2] [-k] [-i] [-I] [-v]\n" +
	"                  [-X METHOD] [-H 'Name: value'] [-d DATA|@FILE] [-o FILE] [-q] [-timeout DURATION] URL   (flags may also follow the URL)"

func runGet(args []string, stdout, stderr io.Writer) int {
	var o getOptions
	fs := newFlags("get", stderr, getUsage)
	fs.BoolVar(&o.ntls, "ntls", false, "use TLCP (NTLS 1.1); the default")
	fs.BoolVar(&o.tls13, "tls13sm", false, "use TLS 1.3 with the RFC 8998 SM suites")
	fs.BoolVar(&o.std, "tls", false, "use ordinary TLS (crypto/tls)")
	o.tlsVersion.register(fs)
	fs.StringVar(&o.caFile, "cacert", "", "PEM `file` of CA certificates that verify the server (curl's spelling)")
	fs.StringVar(&o.caFile, "CAfile", "", "the same as --cacert (openssl's spelling)")
	o.clientCertFlags.register(fs)
	fs.StringVar(&o.serverName, "servername", "", "SNI and the name verified (default: the URL's host)")
	fs.StringVar(&o.cipher, "cipher", "", "offer only these suites, comma or colon separated (e.g. ECC-SM2-SM4-GCM-SM3, TLS_SM4_CCM_SM3; TLS: Go names of TLS 1.2 suites, which limit the connection to TLS 1.2)")
	fs.StringVar(&o.connect, "connect", "", "connect to this `host:port` instead of the URL's")
	fs.StringVar(&o.resolve, "resolve", "", "`host:port:addr`: connect to addr when the URL names host:port (curl's spelling)")
	fs.BoolVar(&o.insecure, "k", false, "do not verify the server certificate")
	fs.BoolVar(&o.head, "I", false, "send HEAD instead of GET")
	fs.BoolVar(&o.include, "i", false, "print the response status line and headers")
	fs.BoolVar(&o.verbose, "v", false, "print the request and response headers on stderr (> and < lines)")
	fs.BoolVar(&o.quiet, "q", false, "do not print the connection summary")
	fs.BoolVar(&o.h2, "h2", false, "use HTTP/2 (ALPN h2) instead of HTTP/1.1")
	fs.StringVar(&o.method, "X", "", "request `method` (default GET, POST with -d)")
	fs.Var(&o.headers, "H", "extra request `header` 'Name: value' (repeatable)")
	fs.StringVar(&o.data, "d", "", "request body `data`, or @FILE to send a file's content")
	fs.StringVar(&o.output, "o", "", "write the body to `file` instead of standard output")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound for the whole exchange")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	if o.timeout <= 0 {
		// A context that has already expired would fail the dial as
		// "i/o timeout", which reads as an unreachable server.
		fmt.Fprintln(stderr, "gmproxy get: -timeout must be positive")
		return 2
	}
	if err := o.checkConflicts(); err != nil {
		fmt.Fprintf(stderr, "gmproxy get: %s\n", err)
		return 2
	}
	if err := o.chooseProtocol(); err != nil {
		fmt.Fprintf(stderr, "gmproxy get: %s\n", err)
		return 2
	}
	if err := doGet(&o, fs.Arg(0), stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "gmproxy get: %s\n", printable(err.Error()))
		return 1
	}
	return 0
}

// printable escapes the control characters (C0, DEL, C1; tab aside) and the
// bytes that are not UTF-8 in s, which holds text a server chose: a reason
// phrase, a header value, or the names of its certificate in a
// verification error. Printed raw, they would be escape sequences to the
// operator's terminal (a lone 0x9b is CSI to an 8-bit terminal).
func printable(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\t' || !unicode.IsControl(r):
			b.WriteString(s[:size])
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		s = s[size:]
	}
	return b.String()
}

// checkConflicts refuses flags that contradict each other, one of which
// would otherwise be dropped without a word: -connect beside --resolve
// (either says where to connect), and -I (HEAD) beside a body or another
// method, as curl refuses them.
func (o *getOptions) checkConflicts() error {
	switch {
	case o.connect != "" && o.resolve != "":
		return errors.New("give -connect or --resolve, not both: each says where to connect")
	case o.head && o.data != "":
		return errors.New("-I sends HEAD, which carries no body: drop -d or -I")
	case o.head && o.method != "" && o.method != http.MethodHead:
		return fmt.Errorf("-I sends HEAD, -X %s another method: drop one", o.method)
	}
	return nil
}

// chooseProtocol settles on one of -ntls (the default), -tls13sm and -tls
// (which -tls1_2 and -tls1_3 imply).
func (o *getOptions) chooseProtocol() error {
	std, err := o.tlsVersion.check(o.ntls, o.tls13)
	if err != nil {
		return err
	}
	o.std = o.std || std
	n := 0
	for _, b := range []bool{o.ntls, o.tls13, o.std} {
		if b {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("choose one of -ntls, -tls13sm, -tls")
	case n == 0:
		o.ntls = true
	}
	if err := o.clientCertFlags.check(o.ntls); err != nil {
		return err
	}
	// -cipher is checked before any dial: checked only when the client
	// was built, a name no protocol knows was hidden behind the dial's
	// error and exited 1, as a failed fetch.
	switch {
	case o.std:
		err = o.tlsVersion.apply(&tls.Config{}, o.cipher)
	case o.tls13:
		_, err = parseSuites(o.cipher, tls13sm.ParseCipherSuite)
	default:
		_, err = parseSuites(o.cipher, tlcp.ParseCipherSuite)
	}
	return err
}

// clientCertFlags are the client certificate flags shared by get and
// s_time.
type clientCertFlags struct {
	signCert, signKey, encCert, encKey string // TLCP signing and encryption pairs
	cert, key                          string // TLS 1.3-SM or TLS
	pass                               string // password source of encrypted keys
}

func (f *clientCertFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.signCert, "sign_cert", "", "TLCP client signing certificate `file` (PEM)")
	fs.StringVar(&f.signKey, "sign_key", "", "TLCP client signing key `file` (PEM)")
	fs.StringVar(&f.encCert, "enc_cert", "", "TLCP client encryption certificate `file` (PEM)")
	fs.StringVar(&f.encKey, "enc_key", "", "TLCP client encryption key `file` (PEM)")
	fs.StringVar(&f.cert, "cert", "", "TLS 1.3-SM / TLS client certificate `file` (PEM)")
	fs.StringVar(&f.key, "key", "", "TLS 1.3-SM / TLS client key `file` (PEM)")
	fs.StringVar(&f.pass, "pass", "", "password of encrypted client keys, as openssl takes it: pass:TEXT, env:VARIABLE or file:PATH (`source`)")
}

// check refuses client certificate flags the chosen protocol would not
// use (TLCP's four files with -tls13sm or -tls, -cert and -key with TLCP)
// and half a set: the client would send no certificate, and the server's
// "certificate required" would not say why.
func (f *clientCertFlags) check(tlcpChosen bool) error {
	tlcpFiles := []string{f.signCert, f.signKey, f.encCert, f.encKey}
	someTLCP, allTLCP := slices.ContainsFunc(tlcpFiles, func(s string) bool { return s != "" }), !slices.Contains(tlcpFiles, "")
	switch {
	case tlcpChosen && (f.cert != "" || f.key != ""):
		return errors.New("-cert and -key are for -tls13sm and -tls; TLCP's client certificates are -sign_cert, -sign_key, -enc_cert and -enc_key")
	case tlcpChosen && someTLCP && !allTLCP:
		return errors.New("TLCP client authentication needs -sign_cert, -sign_key, -enc_cert and -enc_key (the signing pair and the encryption pair)")
	case !tlcpChosen && someTLCP:
		return errors.New("-sign_cert, -sign_key, -enc_cert and -enc_key are for TLCP (-ntls); -tls13sm and -tls take -cert and -key")
	case f.cert != "" && f.key == "":
		return errors.New("-cert needs -key, the file of its private key")
	case f.key != "" && f.cert == "":
		return errors.New("-key needs -cert, the file of its certificate")
	}
	return nil
}

// stateConn is a client connection with a handshake and a state.
type stateConn interface {
	net.Conn
	HandshakeContext(context.Context) error
}

func doGet(o *getOptions, rawURL string, stdout, stderr io.Writer) error {
	u, addr, sni, err := o.target(rawURL)
	if err != nil {
		return err
	}
	pass, err := passwordSource(o.pass)
	if err != nil {
		return err
	}
	defer clear(pass)

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	c, state, err := o.clientConn(raw, sni, pass)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	hsTime := time.Since(start)

	req, err := o.request(ctx, u)
	if err != nil {
		return err
	}
	if o.verbose {
		proto := "HTTP/1.1"
		if o.h2 {
			proto = "HTTP/2"
		}
		writeHeaderLines(stderr, "> ", fmt.Sprintf("%s %s %s", req.Method, req.URL.RequestURI(), proto), "Host: "+req.Host, req.Header)
	}
	resp, err := o.exchange(c, state, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := o.writeResponse(resp, stdout, stderr)
	if err != nil {
		return err
	}
	if !o.quiet || o.verbose {
		writeGetSummary(stderr, state(), hsTime, resp.StatusCode, n, addr)
	}
	return nil
}

// target parses the https URL and returns it with the address to connect
// to and the server name to send.
func (o *getOptions) target(rawURL string) (u *url.URL, addr, sni string, err error) {
	u, err = url.Parse(rawURL)
	if err != nil {
		return nil, "", "", err
	}
	if u.Scheme != "https" {
		return nil, "", "", fmt.Errorf("URL %q: only https:// is supported", rawURL)
	}
	addr, err = o.address(u)
	if err != nil {
		return nil, "", "", err
	}
	sni = o.serverName
	if sni == "" {
		sni = u.Hostname()
	}
	return u, addr, sni, nil
}

// writeResponse writes the response head where -v and -i ask for it, and
// the body to -o or stdout. It returns the body's length.
func (o *getOptions) writeResponse(resp *http.Response, stdout, stderr io.Writer) (int64, error) {
	if o.verbose {
		writeHeaderLines(stderr, "< ", resp.Proto+" "+resp.Status, "", resp.Header)
	}
	if o.include {
		fmt.Fprintf(stdout, "%s %s\r\n", resp.Proto, printable(resp.Status))
		for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
			for _, v := range resp.Header[k] {
				fmt.Fprintf(stdout, "%s: %s\r\n", k, printable(v))
			}
		}
		fmt.Fprint(stdout, "\r\n")
	}
	body := stdout
	if o.output != "" {
		f, err := os.Create(o.output)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		body = f
	}
	n, err := io.Copy(body, resp.Body)
	if err != nil {
		return n, fmt.Errorf("reading the body: %w", err)
	}
	return n, nil
}

// writeGetSummary writes the one-line summary of a fetch: protocol, cipher,
// resumption, ALPN, handshake time, status, body bytes and server.
func writeGetSummary(w io.Writer, st frontdoor.ConnState, hsTime time.Duration, status int, n int64, addr string) {
	peer := "-"
	if len(st.PeerCertificates) > 0 {
		peer = st.PeerCertificates[0].Subject.String()
	}
	fmt.Fprintf(w, "* %s %s resumed=%v alpn=%s handshake=%s status=%d bytes=%d server=%q addr=%s\n",
		st.Protocol, st.Cipher, st.Resumed, orDash(st.ALPN), hsTime.Round(10*time.Microsecond), status, n, peer, addr)
}

// address is where to connect: -connect, the --resolve entry for the
// URL's host:port, else the URL's host:port.
func (o *getOptions) address(u *url.URL) (string, error) {
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	if o.connect != "" {
		return o.connect, nil
	}
	if o.resolve == "" {
		return addr, nil
	}
	host, rest, ok1 := strings.Cut(o.resolve, ":")
	port, to, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || to == "" {
		return "", fmt.Errorf("--resolve %q: want host:port:addr", o.resolve)
	}
	if strings.EqualFold(net.JoinHostPort(host, port), addr) {
		return net.JoinHostPort(strings.Trim(to, "[]"), port), nil
	}
	return addr, nil
}

// clientConn wraps raw in the chosen protocol's client and returns a
// function that describes the connection once the handshake is done.
func (o *getOptions) clientConn(raw net.Conn, sni string, pass []byte) (stateConn, func() frontdoor.ConnState, error) {
	alpn := []string{"http/1.1"}
	if o.h2 {
		alpn = []string{"h2"}
	}
	switch {
	case o.ntls:
		return o.tlcpConn(raw, sni, alpn, pass)
	case o.tls13:
		return o.tls13smConn(raw, sni, alpn, pass)
	}
	return o.tlsConn(raw, sni, alpn, pass)
}

func (o *getOptions) tlcpConn(raw net.Conn, sni string, alpn []string, pass []byte) (stateConn, func() frontdoor.ConnState, error) {
	cfg := &tlcp.Config{ServerName: sni, InsecureSkipVerify: o.insecure, NextProtos: alpn}
	var err error
	if cfg.RootCAs, err = smPool(o.caFile); err != nil {
		return nil, nil, err
	}
	if cfg.CipherSuites, err = parseSuites(o.cipher, tlcp.ParseCipherSuite); err != nil {
		return nil, nil, err
	}
	if o.signCert != "" || o.encCert != "" {
		cert, err := tlcp.LoadX509KeyPair(o.signCert, o.signKey, o.encCert, o.encKey, pass)
		if err != nil {
			return nil, nil, err
		}
		cfg.Certificates = []tlcp.Certificate{cert}
	}
	tc := tlcp.Client(raw, cfg)
	return tc, func() frontdoor.ConnState {
		cs := tc.ConnectionState()
		return frontdoor.ConnState{Protocol: frontdoor.ProtoTLCP, Cipher: tlcp.CipherSuiteName(cs.CipherSuite), Resumed: cs.DidResume, ALPN: cs.NegotiatedProtocol, PeerCertificates: cs.PeerCertificates}
	}, nil
}

func (o *getOptions) tls13smConn(raw net.Conn, sni string, alpn []string, pass []byte) (stateConn, func() frontdoor.ConnState, error) {
	cfg := &tls13sm.Config{ServerName: sni, InsecureSkipVerify: o.insecure, NextProtos: alpn}
	var err error
	if cfg.RootCAs, err = smPool(o.caFile); err != nil {
		return nil, nil, err
	}
	if cfg.CipherSuites, err = parseSuites(o.cipher, tls13sm.ParseCipherSuite); err != nil {
		return nil, nil, err
	}
	if o.cert != "" {
		cert, err := tls13sm.LoadX509KeyPair(o.cert, o.key, pass)
		if err != nil {
			return nil, nil, err
		}
		cfg.Certificates = []tls13sm.Certificate{cert}
	}
	tc := tls13sm.Client(raw, cfg)
	return tc, func() frontdoor.ConnState {
		cs := tc.ConnectionState()
		return frontdoor.ConnState{Protocol: frontdoor.ProtoTLS13SM, Cipher: tls13sm.CipherSuiteName(cs.CipherSuite), Resumed: cs.DidResume, ALPN: cs.NegotiatedProtocol, PeerCertificates: cs.PeerCertificates}
	}, nil
}

func (o *getOptions) tlsConn(raw net.Conn, sni string, alpn []string, pass []byte) (stateConn, func() frontdoor.ConnState, error) {
	cfg := &tls.Config{ServerName: sni, InsecureSkipVerify: o.insecure, NextProtos: alpn}
	if err := o.tlsVersion.apply(cfg, o.cipher); err != nil {
		return nil, nil, err
	}
	if o.caFile != "" {
		pool, err := x509Pool(o.caFile)
		if err != nil {
			return nil, nil, err
		}
		cfg.RootCAs = pool
	}
	if o.cert != "" {
		cert, err := loadTLSKeyPair(o.cert, o.key, pass)
		if err != nil {
			return nil, nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tc := tls.Client(raw, cfg)
	return tc, func() frontdoor.ConnState {
		cs := tc.ConnectionState()
		st := frontdoor.ConnState{Protocol: strings.Replace(tls.VersionName(cs.Version), "TLS ", "TLSv", 1), Cipher: tls.CipherSuiteName(cs.CipherSuite), Resumed: cs.DidResume, ALPN: cs.NegotiatedProtocol}
		for _, pc := range cs.PeerCertificates {
			if sc, err := smx509.ParseCertificate(pc.Raw); err == nil {
				st.PeerCertificates = append(st.PeerCertificates, sc)
			}
		}
		return st
	}, nil
}

// loadTLSKeyPair loads a client certificate chain and its key for ordinary
// TLS. Unlike tls.LoadX509KeyPair it takes the key encrypted in PKCS #8
// too, with the -pass password, as the TLCP and TLS 1.3-SM clients do.
func loadTLSKeyPair(certFile, keyFile string, pass []byte) (tls.Certificate, error) {
	certs, err := smkey.LoadCertificatesFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := smkey.LoadPrivateKeyFile(keyFile, pass)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", keyFile, err)
	}
	if !smkey.PublicKeysEqual(key, certs[0].PublicKey) {
		return tls.Certificate{}, fmt.Errorf("%s does not hold the key of %s", keyFile, certFile)
	}
	var chain [][]byte
	for _, c := range certs {
		chain = append(chain, c.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key}, nil
}

// x509Pool reads a CA file for ordinary TLS. A file of SM2 certificates
// (the one -ntls and -tls13sm use) gets advice rather than "no
// certificates".
func x509Pool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if pool.AppendCertsFromPEM(b) {
		return pool, nil
	}
	if certs, err := smkey.LoadCertificatesFile(file); err == nil && len(certs) > 0 {
		return nil, fmt.Errorf("%s holds SM2 certificates, which ordinary TLS cannot use; for -tls give the CA of the site's RSA/ECDSA certificate (the development setup writes ecdsa_ca.crt)", file)
	}
	return nil, fmt.Errorf("%s: no PEM certificates", file)
}

// request builds the request: -X, -I, -d (POST unless -X says otherwise)
// and -H headers.
func (o *getOptions) request(ctx context.Context, u *url.URL) (*http.Request, error) {
	method := http.MethodGet
	var body io.Reader
	var length int64
	if o.data != "" {
		b := []byte(o.data)
		if f, ok := strings.CutPrefix(o.data, "@"); ok {
			var err error
			if b, err = os.ReadFile(f); err != nil {
				return nil, err
			}
		}
		method, body, length = http.MethodPost, bytes.NewReader(b), int64(len(b))
	}
	if o.head {
		method = http.MethodHead
	}
	if o.method != "" {
		method = o.method
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = length
	req.Header.Set("User-Agent", "gmproxy-get/"+version)
	if u.User != nil {
		// As curl does: the URL's user and password as Basic
		// credentials (req.Write and the h2 transport send neither).
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}
	if o.data != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range o.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("-H %q: want 'Name: value'", h)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Host") {
			req.Host = strings.TrimSpace(value)
			continue
		}
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return req, nil
}

// maxResponseHeaderBytes bounds the HTTP/1.1 response heads (status lines
// and header fields, informational responses included), as net/http's
// Transport bounds them with MaxResponseHeaderBytes: without it a server
// that never ends a line would have get buffer it until the timeout.
// (HTTP/2 heads are bounded by http2.Transport's MaxHeaderListSize.)
const maxResponseHeaderBytes = 1 << 20

// exchange sends req over c (HTTP/1.1, or h2 when asked and agreed).
func (o *getOptions) exchange(c stateConn, state func() frontdoor.ConnState, req *http.Request) (*http.Response, error) {
	if o.h2 {
		if st := state(); st.ALPN != "h2" {
			return nil, fmt.Errorf("the server did not agree to h2 (ALPN %q)", st.ALPN)
		}
		cc, err := (&http2.Transport{}).NewClientConn(c)
		if err != nil {
			return nil, fmt.Errorf("h2: %w", err)
		}
		resp, err := cc.RoundTrip(req)
		if err != nil {
			return nil, fmt.Errorf("h2 request: %w", err)
		}
		return resp, nil
	}
	req.Close = true
	if err := req.Write(c); err != nil {
		return nil, fmt.Errorf("writing the request: %w", err)
	}
	lr := &headLimitReader{r: c, n: maxResponseHeaderBytes}
	br := bufio.NewReader(lr)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			if lr.n <= 0 {
				return nil, fmt.Errorf("reading the response: response head larger than %d bytes", maxResponseHeaderBytes)
			}
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		// Informational (1xx) responses precede the final one (RFC 9110,
		// section 15.2), for example 103 Early Hints passed on by a
		// reverse proxy; they are skipped as net/http's Transport skips
		// them, and count against the same head limit, so that endless
		// ones end too. 101 would be final, but get asks for no upgrade.
		if resp.StatusCode >= 100 && resp.StatusCode <= 199 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		lr.n = math.MaxInt64 // the body is bounded by -o or the terminal, and by -timeout
		return resp, nil
	}
}

// headLimitReader reads at most n bytes from r, then fails. It counts what
// the bufio.Reader above it fetched, which may include the start of the
// body; the caller lifts the limit once the head is parsed.
type headLimitReader struct {
	r io.Reader
	n int64
}

func (l *headLimitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("response head too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// writeHeaderLines prints a request or response head as curl -v does, the
// server's text made printable (header names are tokens, but a reason
// phrase can hold any byte and a value any obs-text byte).
func writeHeaderLines(w io.Writer, prefix, first, host string, h http.Header) {
	fmt.Fprintf(w, "%s%s\n", prefix, printable(first))
	if host != "" && host != "Host: " {
		fmt.Fprintf(w, "%s%s\n", prefix, printable(host))
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			fmt.Fprintf(w, "%s%s: %s\n", prefix, k, printable(v))
		}
	}
	fmt.Fprintf(w, "%s\n", prefix)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// smPool reads a PEM CA file into an SM-capable pool (nil for "").
func smPool(file string) (*smx509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	certs, err := smkey.LoadCertificatesFile(file)
	if err != nil {
		return nil, err
	}
	p := smx509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p, nil
}
