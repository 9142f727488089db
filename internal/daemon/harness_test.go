package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

var (
	pkiOnce sync.Once
	pkiVal  *devpki.PKI
	pkiErr  error
)

// testPKI is one development PKI shared by the package's tests.
func testPKI(t testing.TB) *devpki.PKI {
	t.Helper()
	pkiOnce.Do(func() {
		pkiVal, pkiErr = devpki.Generate(devpki.Options{Hosts: []string{"localhost", "127.0.0.1", "a.example.cn", "*.b.example.cn"}})
	})
	if pkiErr != nil {
		t.Fatal(pkiErr)
	}
	return pkiVal
}

func pair(c devpki.Cert, chain ...devpki.Cert) *conf.KeyPair {
	kp := &conf.KeyPair{Chain: []*smxCertificate{c.Cert}, Key: c.Key}
	for _, x := range chain {
		kp.Chain = append(kp.Chain, x.Cert)
	}
	return kp
}

// testBackend answers with the request's path, the TLS info headers the
// proxy adds, and /slow waits for release.
type testBackend struct {
	*httptest.Server
	slowStarted chan struct{}
	release     chan struct{}
}

func newBackend(t testing.TB) *testBackend {
	b := &testBackend{slowStarted: make(chan struct{}, 16), release: make(chan struct{})}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			b.slowStarted <- struct{}{}
			<-b.release
		}
		if r.URL.Path == "/xff" {
			fmt.Fprintf(w, "xff=%s\n", r.Header.Get("X-Forwarded-For"))
			return
		}
		if r.URL.Path == "/1k" {
			w.Write(make([]byte, 1024))
			return
		}
		fmt.Fprintf(w, "path=%s proto=%s cipher=%s\n", r.URL.Path, r.Header.Get("X-Ssl-Protocol"), r.Header.Get("X-Ssl-Cipher"))
	}))
	t.Cleanup(b.Close)
	return b
}

// testConfig serves every protocol on one loopback port for two sites:
// "main" (default, all certificates) and "other" (other.example.cn, ECDSA
// only, answering a fixed body).
func testConfig(t testing.TB, backend string) *conf.Config {
	p := testPKI(t)
	cfg := conf.Default()
	cfg.Listeners = []conf.Listener{{
		Address:              "127.0.0.1:0",
		Protocols:            []string{family.TLCP, family.TLS13SM, family.TLS},
		TLCPSuitesInTLSHello: "reject",
		HandshakeTimeout:     10 * time.Second,
		MaxHandshakes:        1024,
		PlainHTTP:            "close",
	}}
	cfg.Upstreams = []conf.Upstream{{Name: "app", Targets: []conf.Target{{Address: backend, Weight: 1}}}}
	cfg.Sites = []conf.Site{
		{
			Name:        "main",
			ServerNames: []string{"localhost", "a.example.cn"},
			Routes:      []conf.Route{{Name: "all", PathPrefix: "/", Upstream: "app", TLSInfoHeaders: true}},
			Material: conf.SiteMaterial{
				TLCPSign: pair(p.ServerSign), TLCPEnc: pair(p.ServerEnc),
				TLS13SM: pair(p.ServerSign),
				TLS:     pair(*p.ECDSAServer),
			},
		},
		{
			Name:        "other",
			ServerNames: []string{"*.b.example.cn"},
			Routes:      []conf.Route{{Name: "fixed", PathPrefix: "/", Respond: &conf.Respond{Status: 200, Body: "other site\n"}}},
			Material:    conf.SiteMaterial{TLS: pair(*p.ECDSAServer), TLCPSign: pair(p.ServerSign), TLCPEnc: pair(p.ServerEnc), TLS13SM: pair(p.ServerSign)},
		},
	}
	for i := range cfg.Sites {
		cfg.Sites[i].TLS13SM = &conf.SiteTLS13SM{}
		cfg.Sites[i].TLCP = &conf.SiteTLCP{AcceptRawCertificateVerify: conf.DefaultAcceptRawCertificateVerify}
		cfg.Sites[i].TLS = &conf.SiteTLS{}
	}
	cfg.ShutdownGrace = 20 * time.Second
	cfg.AccessLog.Path = "off"
	return cfg
}

type testDaemon struct {
	*Daemon
	env  *Env
	addr string
	mu   sync.Mutex
	cfg  *conf.Config
	obs  *countObserver
}

// countObserver counts handshake outcomes.
type countObserver struct {
	frontdoor.NopObserver
	mu       sync.Mutex
	ok, fail map[string]int
	reasons  []string
	started  map[string]int // handshakes begun, by listener
	certWhy  map[string]int // client certificates refused, by reason
	cut      map[string]int // connections cut at a grace period's end, by listener
}

func (o *countObserver) ConnsCut(listener string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cut == nil {
		o.cut = map[string]int{}
	}
	o.cut[listener] += n
}

// cutOn is a copy of the connections cut, by listener.
func (o *countObserver) cutOn() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.cut)
}

// clientCertRefusals waits until n client certificates were refused for
// why (the server reports a handshake after the client saw its alert), at
// most a few seconds, and returns how many were.
func (o *countObserver) clientCertRefusals(why string, n int) int {
	deadline := time.Now().Add(testwait.Bound(5 * time.Second))
	for {
		o.mu.Lock()
		got := o.certWhy[why]
		o.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (o *countObserver) HandshakeStarted(listener string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started == nil {
		o.started = map[string]int{}
	}
	o.started[listener]++
}

// startedOn is the number of handshakes begun on listener.
func (o *countObserver) startedOn(listener string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started[listener]
}

func (o *countObserver) HandshakeDone(ev frontdoor.HandshakeEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ok == nil {
		o.ok, o.fail = map[string]int{}, map[string]int{}
	}
	if ev.Err == nil {
		o.ok[ev.State.Family]++
	} else {
		o.fail[ev.State.Family]++
		o.reasons = append(o.reasons, ev.Reason)
		if ev.ClientCert != "" {
			if o.certWhy == nil {
				o.certWhy = map[string]int{}
			}
			o.certWhy[ev.ClientCert]++
		}
	}
}

// startDaemon starts a daemon on cfg; opts adjust its Env (observers).
func startDaemon(t testing.TB, cfg *conf.Config, opts ...func(*Env)) *testDaemon {
	t.Helper()
	td := &testDaemon{cfg: cfg, obs: &countObserver{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	td.env = &Env{Logger: log, Observer: td.obs}
	for _, o := range opts {
		o(td.env)
	}
	d, err := New(func() (*Generation, error) {
		td.mu.Lock()
		c := td.cfg
		td.mu.Unlock()
		return Build(c, td.env)
	}, Options{Logger: log, Observer: td.obs})
	if err != nil {
		t.Fatal(err)
	}
	td.Daemon = d
	td.addr = d.Addr(cfg.Listeners[0].Address)
	t.Cleanup(func() { d.Close(); td.env.Close() })
	return td
}

// setConfig makes cfg the configuration of the next reload.
func (td *testDaemon) setConfig(cfg *conf.Config) {
	td.mu.Lock()
	td.cfg = cfg
	td.mu.Unlock()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ecdsaRoots is a pool of the test PKI's ECDSA CA, the root of the sites'
// TLS certificates.
func ecdsaRoots(t testing.TB) *x509.CertPool {
	pool := x509.NewCertPool()
	ca, err := x509.ParseCertificate(testPKI(t).ECDSACA.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	pool.AddCert(ca)
	return pool
}

// tlsClient returns an HTTP client speaking crypto/tls to the daemon.
func tlsClient(t testing.TB, addr, sni string, h2 bool) *http.Client {
	tc := &tls.Config{RootCAs: ecdsaRoots(t), ServerName: sni}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if h2 {
		tc.NextProtos = []string{"h2"}
		return &http.Client{Timeout: 20 * time.Second, Transport: &http2.Transport{TLSClientConfig: tc,
			DialTLSContext: func(ctx context.Context, network, a string, cfg *tls.Config) (net.Conn, error) {
				c, err := dial(ctx, network, a)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(c, cfg)
				return tc, tc.HandshakeContext(ctx)
			}}}
	}
	tc.NextProtos = []string{"http/1.1"}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DialContext: dial, ForceAttemptHTTP2: false}}
}

func get(t testing.TB, c *http.Client, url string) (string, *http.Response) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp
}

// testRoots is a pool holding the test PKI's SM2 CA.
func testRoots(t testing.TB) *smx509.CertPool {
	roots := smx509.NewCertPool()
	roots.AddCert(testPKI(t).CA.Cert)
	return roots
}

// tls13smResumer returns a fetchOver connection function: a TLS 1.3-SM
// client handshake sharing one session cache, reporting whether each
// connection resumed.
func tls13smResumer(t testing.TB) func(net.Conn) (net.Conn, func() bool) {
	ccfg := &tls13sm.Config{RootCAs: testRoots(t), ServerName: "localhost", ClientSessionCache: tls13sm.NewLRUClientSessionCache(4)}
	return func(raw net.Conn) (net.Conn, func() bool) {
		c := tls13sm.Client(raw, ccfg)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, func() bool { return c.ConnectionState().DidResume }
	}
}

// dialTLCP dials addr with a 20 s deadline and returns a TLCP client with
// cfg over it (trusting the test CA when cfg.RootCAs is nil), to be
// handshaken by the caller; the connection is closed when the test ends.
func dialTLCP(t testing.TB, addr string, cfg *tlcp.Config) *tlcp.Conn {
	t.Helper()
	if cfg.RootCAs == nil {
		cfg.RootCAs = testRoots(t)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	return tlcp.Client(raw, cfg)
}

// smClient returns an HTTP client that dials the daemon with our TLCP
// ("tlcp") or TLS 1.3-SM ("tls13sm") client and the given suite.
func smClient(t testing.TB, addr, proto string, suite uint16, h2 bool) *http.Client {
	p := testPKI(t)
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	alpn := []string{"http/1.1"}
	if h2 {
		alpn = []string{"h2"}
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		var c interface {
			net.Conn
			HandshakeContext(context.Context) error
		}
		switch proto {
		case "tlcp":
			cfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", NextProtos: alpn, CipherSuites: []uint16{suite}}
			cfg.Certificates = []tlcp.Certificate{{
				SignCertificate: [][]byte{p.ClientSign.Cert.Raw}, SignKey: p.ClientSign.Key,
				EncCertificate: p.ClientEnc.Cert.Raw, EncKey: p.ClientEnc.Key,
			}}
			c = tlcp.Client(raw, cfg)
		case "tls13sm":
			c = tls13sm.Client(raw, &tls13sm.Config{RootCAs: roots, ServerName: "localhost", NextProtos: alpn, CipherSuites: []uint16{suite}})
		default:
			t.Fatalf("unknown protocol %q", proto)
		}
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return c, nil
	}
	if h2 {
		return &http.Client{Timeout: 20 * time.Second, Transport: &http2.Transport{
			DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) { return dial(ctx) }}}
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
}
