package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/stime"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

func init() {
	register("s_time", "TLCP / TLS 1.3-SM / TLS handshake and request load client (like openssl s_time)", runSTime)
}

// stimeOptions are the parsed s_time flags.
type stimeOptions struct {
	connect, cipher, www, caFile, serverName string
	newOnly, reuseOnly                       bool
	seconds                                  float64
	ntls, tls13, tlsStd                      bool
	tlsVersion                               tlsVersionFlags
	clientCertFlags
	concurrency                     int
	total                           int64
	keepalive, download, asJSON     bool
	noExt, ecdheVector, gmsslCompat bool
	noMiddlebox, strict             bool
	noTicket                        bool
	timeout, rate                   float64
	alpn                            string
	hist                            bool
	loadgen                         bool
}

func runSTime(args []string, stdout, stderr io.Writer) int {
	var o stimeOptions
	fs := newFlags("s_time", stderr, "usage: gmproxy s_time [-ntls|-tls13sm|-tls|-tls1_2|-tls1_3] -connect host:port [-new|-reuse] [-time s] [-n N] [-c N] [-www path [-keepalive|-download]] [flags]")
	fs.StringVar(&o.connect, "connect", "127.0.0.1:8443", "`host:port` to connect to")
	fs.BoolVar(&o.newOnly, "new", false, "new sessions only (full handshakes)")
	fs.BoolVar(&o.reuseOnly, "reuse", false, "resumed sessions only (one uncounted priming connection first)")
	fs.Float64Var(&o.seconds, "time", 0, "`seconds` per phase (default 30, or no limit but 10 min with -n)")
	fs.StringVar(&o.cipher, "cipher", "", "cipher suite `names`, comma or colon separated (TLCP: ECC-SM2-SM4-GCM-SM3 ...; TLS 1.3-SM: TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3; TLS: Go names of TLS 1.2 suites, which limit the connection to TLS 1.2)")
	fs.StringVar(&o.www, "www", "", "GET `path` after each handshake (with -keepalive: over kept-alive connections)")
	fs.StringVar(&o.caFile, "CAfile", "", "PEM `file` of CA certificates to verify the server with (default: no verification, like openssl s_time)")
	fs.StringVar(&o.serverName, "servername", "", "SNI and certificate `name` (default: host of -connect)")
	fs.BoolVar(&o.ntls, "ntls", false, "TLCP, GB/T 38636-2020 (the default)")
	fs.BoolVar(&o.tls13, "tls13sm", false, "TLS 1.3 with the RFC 8998 SM suites")
	fs.BoolVar(&o.tlsStd, "tls", false, "ordinary TLS (crypto/tls)")
	o.tlsVersion.register(fs)
	o.clientCertFlags.register(fs)
	fs.IntVar(&o.concurrency, "c", 1, "concurrent `workers`")
	fs.Int64Var(&o.total, "n", 0, "stop after `N` connections (with -keepalive: N requests) per phase")
	fs.BoolVar(&o.keepalive, "keepalive", false, "send HTTP/1.1 requests for -www over kept-alive connections and report requests/s")
	fs.BoolVar(&o.download, "download", false, "throughput mode: -keepalive downloads of -www, report bytes/s")
	fs.BoolVar(&o.asJSON, "json", false, "print results as JSON")
	fs.BoolVar(&o.noExt, "no_ext", false, "TLCP: send no ClientHello extensions (GmSSL servers)")
	fs.BoolVar(&o.ecdheVector, "ecdhe_vector", false, "TLCP: GmSSL ECDHE ClientKeyExchange framing (u16 length vector)")
	fs.BoolVar(&o.gmsslCompat, "gmssl", false, "TLCP: GmSSL compatibility (-no_ext and -ecdhe_vector); TLS 1.3-SM: no middlebox compatibility")
	fs.BoolVar(&o.noMiddlebox, "no_middlebox", false, "TLS 1.3-SM: no legacy session ID or dummy ChangeCipherSpec")
	fs.BoolVar(&o.noTicket, "no_ticket", false, "TLCP: offer no session ticket, so -reuse resumes by session ID")
	fs.BoolVar(&o.strict, "strict", false, "TLS 1.3-SM: Tongsuo strict mode (SM algorithms only)")
	fs.Float64Var(&o.timeout, "timeout", 10, "`seconds` allowed for each dial, handshake and request")
	fs.Float64Var(&o.rate, "rate", 0, "pace to at most `R` connections/s (requests/s with -keepalive), to measure latency below the peak")
	fs.StringVar(&o.alpn, "alpn", "", "ALPN protocols, comma separated (e.g. http/1.1; h2 only without -www: requests are HTTP/1.1)")
	fs.BoolVar(&o.hist, "hist", false, "print a latency histogram (handshakes; requests with -keepalive)")
	fs.BoolVar(&o.loadgen, "loadgen", false, "TLCP and TLS 1.3-SM: a cheaper, insecure client, so that one client core can load a server to its peak: the server's signature is not checked, and one encrypted pre-master (TLCP ECC) or one key share (TLS 1.3-SM) is sent on every connection; not with -CAfile")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "s_time: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if o.www != "" && slices.Contains(strings.Split(o.alpn, ","), "h2") {
		fmt.Fprintln(stderr, "s_time: -alpn h2 with -www is not supported: s_time sends HTTP/1.1 requests (use -alpn http/1.1, or drop -www to time h2 handshakes)")
		return 2
	}
	// What the flags say is checked before any connection, and a
	// contradiction is a usage error (exit 2), as with get and speed;
	// exit 1 is left for a run that failed.
	proto, phases, err := o.check()
	if err != nil {
		fmt.Fprintln(stderr, "s_time:", err)
		return 2
	}
	res, err := stimeMain(context.Background(), o, proto, phases, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "s_time:", err)
		return 1
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Runs []*stime.Result `json:"runs"`
		}{res}); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	} else {
		for i, r := range res {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			r.WriteTable(stdout, o.hist)
		}
	}
	code := 0
	for _, r := range res {
		if why := measuredNothing(r); why != "" {
			fmt.Fprintf(stderr, "s_time: %s phase: %s\n", r.Mode, why)
			code = 1
		}
	}
	return code
}

// measuredNothing says why a phase measured none of what it was asked to,
// so that s_time fails (exit 1) rather than report a rate of something
// else: no handshake completed; -www without one successful request (the
// rate would be of handshakes followed by error pages); or -reuse without
// one resumption (the rate would be of full handshakes).
func measuredNothing(r *stime.Result) string {
	switch {
	case r.Connections == 0:
		return "no handshake completed"
	case r.Path != "" && r.Requests == 0:
		return fmt.Sprintf("no request for %s succeeded", r.Path)
	case r.Mode == "reuse" && r.Resumed == 0:
		return "the server resumed no session (its session cache and tickets may be off): the rate is of full handshakes"
	}
	return ""
}

// stimeMain runs the phases o.check chose (-new, -reuse, or both like
// openssl s_time) with protocol proto.
func stimeMain(ctx context.Context, o stimeOptions, proto string, phases []bool, stderr io.Writer) ([]*stime.Result, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	var results []*stime.Result
	for _, reuse := range phases {
		res, err := stimePhase(ctx, proto, o, reuse, stderr)
		if err != nil {
			return nil, err
		}
		results = append(results, res)
		if ctx.Err() != nil {
			break
		}
	}
	return results, nil
}

// check validates the options and fills in the ones implied by others. It
// returns the protocol ("ntls", "tls13sm" or "tls") and the phases to run
// (whether each reuses sessions).
func (o *stimeOptions) check() (proto string, phases []bool, err error) {
	std, err := o.tlsVersion.check(o.ntls, o.tls13)
	if err != nil {
		return "", nil, err
	}
	o.tlsStd = o.tlsStd || std
	nproto := 0
	for _, b := range []bool{o.ntls, o.tls13, o.tlsStd} {
		if b {
			nproto++
		}
	}
	if nproto > 1 {
		return "", nil, errors.New("choose one of -ntls, -tls13sm, -tls")
	}
	// -cipher is checked here, not only when the client is built, so
	// that a suite name no protocol knows is a usage error too.
	switch {
	case o.tlsStd:
		err = o.tlsVersion.apply(&tls.Config{}, o.cipher)
	case o.tls13:
		_, err = parseSuites(o.cipher, tls13sm.ParseCipherSuite)
	default:
		_, err = parseSuites(o.cipher, tlcp.ParseCipherSuite)
	}
	if err != nil {
		return "", nil, err
	}
	if o.concurrency < 1 || o.concurrency > 10000 {
		return "", nil, errors.New("-c must be in [1, 10000]")
	}
	if o.seconds < 0 || o.total < 0 || o.timeout <= 0 || o.rate < 0 {
		return "", nil, errors.New("-time, -n, -rate and -timeout must be positive")
	}
	if !(o.seconds <= maxStimeSeconds && o.timeout <= maxStimeSeconds) { // NaN too
		return "", nil, errors.New("-time and -timeout must be numbers of at most 1e9 seconds")
	}
	if o.timeout < minStimeTimeout {
		// A smaller one rounded to no time at all, which the runner
		// took for unset: 10 s.
		return "", nil, errors.New("-timeout must be at least 0.001 seconds")
	}
	if math.IsNaN(o.rate) || math.IsInf(o.rate, 0) {
		// NaN passes every comparison above and paced nothing; +Inf
		// paced nothing either, and neither can be written as JSON.
		return "", nil, errors.New("-rate must be a finite number of connections/s (0: as fast as possible)")
	}
	if o.download {
		o.keepalive = true
	}
	if o.keepalive && o.www == "" {
		return "", nil, errors.New("-keepalive and -download need -www PATH")
	}
	if o.www != "" && !strings.HasPrefix(o.www, "/") {
		return "", nil, errors.New("-www must be an absolute path such as /index.html")
	}
	if _, _, err := net.SplitHostPort(o.connect); err != nil {
		return "", nil, fmt.Errorf("-connect: %w", err)
	}
	if o.serverName == "" {
		o.serverName, _, _ = net.SplitHostPort(o.connect)
	}
	proto = "ntls"
	switch {
	case o.tls13:
		proto = "tls13sm"
	case o.tlsStd:
		proto = "tls"
	}
	if err := o.clientCertFlags.check(proto == "ntls"); err != nil {
		return "", nil, err
	}
	if o.loadgen && o.tlsStd {
		return "", nil, errors.New("-loadgen is for -ntls and -tls13sm")
	}
	if o.loadgen && o.caFile != "" {
		return "", nil, errors.New("-loadgen does not verify the server: drop -CAfile")
	}
	phases = []bool{false, true} // reuse?
	switch {
	case o.newOnly && o.reuseOnly:
		return "", nil, errors.New("choose -new or -reuse (neither: both phases)")
	case o.newOnly:
		phases = []bool{false}
	case o.reuseOnly:
		phases = []bool{true}
	}
	return proto, phases, nil
}

// stimePhase runs one phase: new sessions, or resumed ones with reuse. On a
// terminal it shows the progress on stderr.
// minStimeTimeout is the smallest -timeout taken, in seconds.
const minStimeTimeout = 0.001

// maxStimeSeconds bounds -time and -timeout: past it a number of
// seconds overflows a time.Duration, which read as no -time at all (the
// default phase).
const maxStimeSeconds = 1e9

func stimePhase(ctx context.Context, proto string, o stimeOptions, reuse bool, stderr io.Writer) (*stime.Result, error) {
	hs, name, err := stimeHandshaker(proto, o, reuse)
	if err != nil {
		return nil, err
	}
	cfg := stime.Config{
		Addr: o.connect, Handshake: hs, Reuse: reuse, Concurrency: o.concurrency,
		Duration: time.Duration(o.seconds * float64(time.Second)), Total: o.total,
		Path: o.www, Host: o.serverName, KeepAlive: o.keepalive, Rate: o.rate,
		OpTimeout: time.Duration(o.timeout * float64(time.Second)),
	}
	if strings.Contains(o.serverName, ":") {
		cfg.Host = "[" + o.serverName + "]"
	}
	if isTerminal(stderr) {
		cfg.Progress = func(el time.Duration, conns, reqs, errs int64) {
			fmt.Fprintf(stderr, "\r%s %s: %4.0fs %d connections %d requests %d errors ", name, mode(reuse), el.Seconds(), conns, reqs, errs)
		}
	}
	res, err := stime.Run(ctx, cfg)
	if cfg.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		return nil, err
	}
	res.Protocol = name
	return res, nil
}

// stimeHandshaker builds the client for proto; with reuse the client keeps a
// session cache shared by all connections of the phase.
func stimeHandshaker(proto string, o stimeOptions, reuse bool) (stime.Handshaker, string, error) {
	var alpn []string
	if o.alpn != "" {
		alpn = strings.Split(o.alpn, ",")
	}
	pass, err := passwordSource(o.pass)
	if err != nil {
		return nil, "", err
	}
	switch proto {
	case "ntls":
		hs, err := stimeTLCP(o, alpn, pass, reuse)
		return hs, "tlcp", err
	case "tls13sm":
		hs, err := stimeTLS13SM(o, alpn, pass, reuse)
		return hs, "tls13sm", err
	default:
		hs, err := stimeTLS(o, alpn, pass, reuse)
		return hs, "tls", err
	}
}

// stimeTLCP builds a TLCP client, with the double certificates of
// -sign_cert/-sign_key and -enc_cert/-enc_key when given.
func stimeTLCP(o stimeOptions, alpn []string, pass []byte, reuse bool) (stime.Handshaker, error) {
	cfg := &tlcp.Config{ServerName: o.serverName, NextProtos: alpn, SessionTicketsDisabled: o.noTicket,
		NoClientExtensions: o.noExt || o.gmsslCompat, ClientECDHEParamsAsVector: o.ecdheVector || o.gmsslCompat,
		InsecureLoadGenerator: o.loadgen}
	if err := smRoots(o.caFile, &cfg.RootCAs, &cfg.InsecureSkipVerify); err != nil {
		return nil, err
	}
	ids, err := parseSuites(o.cipher, tlcp.ParseCipherSuite)
	if err != nil {
		return nil, err
	}
	cfg.CipherSuites = ids
	if o.signCert != "" || o.signKey != "" || o.encCert != "" || o.encKey != "" {
		if o.signCert == "" || o.signKey == "" {
			return nil, errors.New("TLCP client authentication needs -sign_cert and -sign_key (and -enc_cert, -enc_key for ECDHE)")
		}
		encCert, encKey := o.encCert, o.encKey
		if encCert == "" || encKey == "" {
			return nil, errors.New("TLCP client certificates: give -enc_cert and -enc_key with -sign_cert and -sign_key")
		}
		c, err := tlcp.LoadX509KeyPair(o.signCert, o.signKey, encCert, encKey, pass)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tlcp.Certificate{c}
	}
	if reuse {
		cfg.ClientSessionCache = tlcp.NewLRUClientSessionCache(64)
	}
	return func(ctx context.Context, raw net.Conn) (net.Conn, stime.ConnInfo, error) {
		c := tlcp.Client(raw, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			return nil, stime.ConnInfo{}, err
		}
		st := c.ConnectionState()
		return c, stime.ConnInfo{Resumed: st.DidResume, Version: "NTLSv1.1", Cipher: tlcp.CipherSuiteName(st.CipherSuite)}, nil
	}, nil
}

// stimeTLS13SM builds a TLS 1.3 client with the RFC 8998 SM suites.
func stimeTLS13SM(o stimeOptions, alpn []string, pass []byte, reuse bool) (stime.Handshaker, error) {
	cfg := &tls13sm.Config{ServerName: o.serverName, NextProtos: alpn, Strict: o.strict,
		DisableMiddleboxCompat: o.noMiddlebox || o.gmsslCompat, InsecureLoadGenerator: o.loadgen}
	if err := smRoots(o.caFile, &cfg.RootCAs, &cfg.InsecureSkipVerify); err != nil {
		return nil, err
	}
	ids, err := parseSuites(o.cipher, tls13sm.ParseCipherSuite)
	if err != nil {
		return nil, err
	}
	cfg.CipherSuites = ids
	if o.cert != "" || o.key != "" {
		c, err := tls13sm.LoadX509KeyPair(o.cert, o.key, pass)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls13sm.Certificate{c}
	}
	if reuse {
		cfg.ClientSessionCache = tls13sm.NewLRUClientSessionCache(64)
	}
	return func(ctx context.Context, raw net.Conn) (net.Conn, stime.ConnInfo, error) {
		c := tls13sm.Client(raw, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			return nil, stime.ConnInfo{}, err
		}
		st := c.ConnectionState()
		return c, stime.ConnInfo{Resumed: st.DidResume, Version: "TLSv1.3-SM", Cipher: tls13sm.CipherSuiteName(st.CipherSuite)}, nil
	}, nil
}

// stimeTLS builds a crypto/tls client.
func stimeTLS(o stimeOptions, alpn []string, pass []byte, reuse bool) (stime.Handshaker, error) {
	cfg := &tls.Config{ServerName: o.serverName, NextProtos: alpn}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-CAfile %s: no certificates", o.caFile)
		}
	} else {
		cfg.InsecureSkipVerify = true
	}
	if err := o.tlsVersion.apply(cfg, o.cipher); err != nil {
		return nil, err
	}
	if o.cert != "" || o.key != "" {
		c, err := loadTLSKeyPair(o.cert, o.key, pass)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	if reuse {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	return stime.TLS(cfg), nil
}

// smRoots loads -CAfile into an smx509 pool, or turns verification off.
func smRoots(caFile string, pool **smx509.CertPool, insecure *bool) error {
	if caFile == "" {
		*insecure = true
		return nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	p := smx509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return fmt.Errorf("-CAfile %s: no certificates", caFile)
	}
	*pool = p
	return nil
}

// parseSuites splits a -cipher list (comma or colon separated).
func parseSuites(list string, parse func(string) (uint16, error)) ([]uint16, error) {
	if list == "" {
		return nil, nil
	}
	var ids []uint16
	for _, n := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ':' }) {
		id, err := parse(strings.TrimSpace(n))
		if err != nil {
			return nil, fmt.Errorf("-cipher: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func tlsSuiteByName(name string) (uint16, error) {
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if strings.EqualFold(s.Name, name) {
			return s.ID, nil
		}
	}
	return 0, fmt.Errorf("unknown TLS cipher suite %q", name)
}

func mode(reuse bool) string {
	if reuse {
		return "reuse"
	}
	return "new"
}

// isTerminal reports whether w is a terminal (progress lines go only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
