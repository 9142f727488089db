package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/handshake"
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
	keyPassEnv                     string
	serverName, cipher, connect    string
	insecure, head, include, quiet bool
	h2                             bool
	timeout                        time.Duration
}

func runGet(args []string, stdout, stderr io.Writer) int {
	var o getOptions
	fs := newFlags("get", stderr, "usage: gmproxy get [-ntls|-tls13sm|-tls|-tls1_2|-tls1_3] [-CAfile FILE] [-sign_cert F -sign_key F -enc_cert F -enc_key F | -cert F -key F] [-servername NAME] [-cipher NAME] [-h2] [-k] URL")
	fs.BoolVar(&o.ntls, "ntls", false, "use TLCP (NTLS 1.1); the default")
	fs.BoolVar(&o.tls13, "tls13sm", false, "use TLS 1.3 with the RFC 8998 SM suites")
	fs.BoolVar(&o.std, "tls", false, "use ordinary TLS (crypto/tls)")
	o.tlsVersion.register(fs)
	fs.StringVar(&o.caFile, "CAfile", "", "PEM `file` of CA certificates that verify the server")
	o.clientCertFlags.register(fs)
	fs.StringVar(&o.keyPassEnv, "pass_env", "", "environment `variable` holding the password of encrypted keys")
	fs.StringVar(&o.serverName, "servername", "", "SNI and the name verified (default: the URL's host)")
	fs.StringVar(&o.cipher, "cipher", "", "offer only these suites, comma or colon separated (e.g. ECC-SM2-SM4-GCM-SM3, TLS_SM4_CCM_SM3; TLS: Go names of TLS 1.2 suites, which limit the connection to TLS 1.2)")
	fs.StringVar(&o.connect, "connect", "", "connect to this host:port instead of the URL's")
	fs.BoolVar(&o.insecure, "k", false, "do not verify the server certificate")
	fs.BoolVar(&o.head, "I", false, "send HEAD instead of GET")
	fs.BoolVar(&o.include, "i", false, "print the response status line and headers")
	fs.BoolVar(&o.quiet, "q", false, "do not print the connection summary")
	fs.BoolVar(&o.h2, "h2", false, "use HTTP/2 (ALPN h2) instead of HTTP/1.1")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound for the whole exchange")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	std, err := o.tlsVersion.check(o.ntls, o.tls13)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy get: %s\n", err)
		return 2
	}
	o.std = o.std || std
	n := 0
	for _, b := range []bool{o.ntls, o.tls13, o.std} {
		if b {
			n++
		}
	}
	if n > 1 {
		fmt.Fprintln(stderr, "gmproxy get: choose one of -ntls, -tls13sm, -tls")
		return 2
	}
	if n == 0 {
		o.ntls = true
	}
	if o.std {
		if err := o.tlsVersion.apply(&tls.Config{}, o.cipher); err != nil {
			fmt.Fprintf(stderr, "gmproxy get: %s\n", err)
			return 2
		}
	}
	if err := doGet(&o, fs.Arg(0), stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "gmproxy get: %s\n", err)
		return 1
	}
	return 0
}

// clientCertFlags are the client certificate flags shared by get and
// s_time.
type clientCertFlags struct {
	signCert, signKey, encCert, encKey string // TLCP signing and encryption pairs
	cert, key                          string // TLS 1.3-SM or TLS
}

func (f *clientCertFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.signCert, "sign_cert", "", "TLCP client signing certificate `file` (PEM)")
	fs.StringVar(&f.signKey, "sign_key", "", "TLCP client signing key `file` (PEM)")
	fs.StringVar(&f.encCert, "enc_cert", "", "TLCP client encryption certificate `file` (PEM)")
	fs.StringVar(&f.encKey, "enc_key", "", "TLCP client encryption key `file` (PEM)")
	fs.StringVar(&f.cert, "cert", "", "TLS 1.3-SM / TLS client certificate `file` (PEM)")
	fs.StringVar(&f.key, "key", "", "TLS 1.3-SM / TLS client key `file` (PEM)")
}

// stateConn is a client connection with a handshake and a state.
type stateConn interface {
	net.Conn
	HandshakeContext(context.Context) error
}

func doGet(o *getOptions, rawURL string, stdout, stderr io.Writer) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	if u.Scheme != "https" {
		return fmt.Errorf("URL %q: only https:// is supported", rawURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	if o.connect != "" {
		addr = o.connect
	}
	sni := o.serverName
	if sni == "" {
		sni = u.Hostname()
	}
	var pass []byte
	if o.keyPassEnv != "" {
		pass = []byte(os.Getenv(o.keyPassEnv))
	}

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

	alpn := []string{"http/1.1"}
	if o.h2 {
		alpn = []string{"h2"}
	}
	var c stateConn
	var state func() handshake.ConnState
	switch {
	case o.ntls:
		cfg := &tlcp.Config{ServerName: sni, InsecureSkipVerify: o.insecure, NextProtos: alpn}
		if cfg.RootCAs, err = smPool(o.caFile); err != nil {
			return err
		}
		if o.cipher != "" {
			id, err := tlcp.ParseCipherSuite(o.cipher)
			if err != nil {
				return err
			}
			cfg.CipherSuites = []uint16{id}
		}
		if o.signCert != "" || o.encCert != "" {
			cert, err := tlcp.LoadX509KeyPair(o.signCert, o.signKey, o.encCert, o.encKey, pass)
			if err != nil {
				return err
			}
			cfg.Certificates = []tlcp.Certificate{cert}
		}
		tc := tlcp.Client(raw, cfg)
		c = tc
		state = func() handshake.ConnState {
			cs := tc.ConnectionState()
			return handshake.ConnState{Protocol: handshake.ProtoTLCP, Cipher: tlcp.CipherSuiteName(cs.CipherSuite), Resumed: cs.DidResume, ALPN: cs.NegotiatedProtocol, PeerCertificates: cs.PeerCertificates}
		}
	case o.tls13:
		cfg := &tls13sm.Config{ServerName: sni, InsecureSkipVerify: o.insecure, NextProtos: alpn}
		if cfg.RootCAs, err = smPool(o.caFile); err != nil {
			return err
		}
		if o.cipher != "" {
			id, err := tls13sm.ParseCipherSuite(o.cipher)
			if err != nil {
				return err
			}
			cfg.CipherSuites = []uint16{id}
		}
		if o.cert != "" {
			cert, err := tls13sm.LoadX509KeyPair(o.cert, o.key, pass)
			if err != nil {
				return err
			}
			cfg.Certificates = []tls13sm.Certificate{cert}
		}
		tc := tls13sm.Client(raw, cfg)
		c = tc
		state = func() handshake.ConnState {
			cs := tc.ConnectionState()
			return handshake.ConnState{Protocol: handshake.ProtoTLS13SM, Cipher: tls13sm.CipherSuiteName(cs.CipherSuite), Resumed: cs.DidResume, ALPN: cs.NegotiatedProtocol, PeerCertificates: cs.PeerCertificates}
		}
	default:
		cfg := &tls.Config{ServerName: sni, InsecureSkipVerify: o.insecure, NextProtos: alpn}
		if err := o.tlsVersion.apply(cfg, o.cipher); err != nil {
			return err
		}
		if o.caFile != "" {
			b, err := os.ReadFile(o.caFile)
			if err != nil {
				return err
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(b) {
				return fmt.Errorf("%s: no certificates", o.caFile)
			}
		}
		if o.cert != "" {
			cert, err := tls.LoadX509KeyPair(o.cert, o.key)
			if err != nil {
				return err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		tc := tls.Client(raw, cfg)
		c = tc
		state = func() handshake.ConnState {
			cs := tc.ConnectionState()
			st := handshake.ConnState{Protocol: strings.Replace(tls.VersionName(cs.Version), "TLS ", "TLSv", 1), Cipher: tls.CipherSuiteName(cs.CipherSuite), Resumed: cs.DidResume, ALPN: cs.NegotiatedProtocol}
			for _, pc := range cs.PeerCertificates {
				if sc, err := smx509.ParseCertificate(pc.Raw); err == nil {
					st.PeerCertificates = append(st.PeerCertificates, sc)
				}
			}
			return st
		}
	}
	start := time.Now()
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	hsTime := time.Since(start)

	method := http.MethodGet
	if o.head {
		method = http.MethodHead
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "gmproxy-get/"+version)
	var resp *http.Response
	if o.h2 {
		if st := state(); st.ALPN != "h2" {
			return fmt.Errorf("the server did not agree to h2 (ALPN %q)", st.ALPN)
		}
		cc, err := (&http2.Transport{}).NewClientConn(c)
		if err != nil {
			return fmt.Errorf("h2: %w", err)
		}
		defer cc.Close()
		if resp, err = cc.RoundTrip(req); err != nil {
			return fmt.Errorf("h2 request: %w", err)
		}
	} else {
		req.Close = true
		if err := req.Write(c); err != nil {
			return fmt.Errorf("writing the request: %w", err)
		}
		if resp, err = http.ReadResponse(bufio.NewReader(c), req); err != nil {
			return fmt.Errorf("reading the response: %w", err)
		}
	}
	defer resp.Body.Close()
	if o.include {
		fmt.Fprintf(stdout, "%s %s\r\n", resp.Proto, resp.Status)
		resp.Header.Write(stdout)
		fmt.Fprint(stdout, "\r\n")
	}
	n, err := io.Copy(stdout, resp.Body)
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if !o.quiet {
		st := state()
		peer := "-"
		if len(st.PeerCertificates) > 0 {
			peer = st.PeerCertificates[0].Subject.String()
		}
		fmt.Fprintf(stderr, "* %s %s resumed=%v alpn=%s handshake=%s status=%d bytes=%d server=%q addr=%s\n",
			st.Protocol, st.Cipher, st.Resumed, orDash(st.ALPN), hsTime.Round(10*time.Microsecond), resp.StatusCode, n, peer, addr)
	}
	return nil
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
