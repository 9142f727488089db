package frontdoor

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// testCert makes a self-signed ECDSA certificate for names.
func testCert(t testing.TB, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(12345678),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// recObserver records events.
type recObserver struct {
	NopObserver
	mu       sync.Mutex
	started  int
	done     []HandshakeEvent
	refused  []string
	accepted int
	closed   int
	startCh  chan struct{}
	doneCh   chan HandshakeEvent
}

func newRecObserver() *recObserver {
	return &recObserver{startCh: make(chan struct{}, 100), doneCh: make(chan HandshakeEvent, 100)}
}

func (o *recObserver) ConnAccepted(string) { o.mu.Lock(); o.accepted++; o.mu.Unlock() }
func (o *recObserver) ConnClosed(string)   { o.mu.Lock(); o.closed++; o.mu.Unlock() }
func (o *recObserver) ConnRefused(_, why string) {
	o.mu.Lock()
	o.refused = append(o.refused, why)
	o.mu.Unlock()
}
func (o *recObserver) HandshakeStarted(string) {
	o.mu.Lock()
	o.started++
	o.mu.Unlock()
	o.startCh <- struct{}{}
}
func (o *recObserver) HandshakeDone(ev HandshakeEvent) {
	o.mu.Lock()
	o.done = append(o.done, ev)
	o.mu.Unlock()
	o.doneCh <- ev
}

func (o *recObserver) next(t *testing.T) HandshakeEvent {
	t.Helper()
	select {
	case ev := <-o.doneCh:
		return ev
	case <-time.After(testwait.Bound(20 * time.Second)):
		t.Fatal("no handshake event")
	}
	return HandshakeEvent{}
}

// startServer serves cfg on a loopback port with an echo-state handler that
// writes "site family protocol alpn\n" and closes.
func startServer(t *testing.T, cfg *ListenerConfig, obs Observer) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg, obs, func(c *Conn) {
		st := c.ConnState()
		io.WriteString(c, st.Site+" "+st.Family+" "+st.Protocol+" "+st.ALPN+"\n")
		c.Close()
	})
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// startHoldingServer serves cfg on a loopback port with a handler that
// writes "hi\n" and holds the connection open until release is called
// (release waits for the handlers to close their connections).
func startHoldingServer(t *testing.T, cfg *ListenerConfig, obs Observer) (s *Server, addr string, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	rel := make(chan struct{})
	s = NewServer(cfg, obs, func(c *Conn) {
		held.Add(1)
		defer held.Done()
		io.WriteString(c, "hi\n")
		<-rel
		c.Close()
	})
	go s.Serve(ln)
	var once sync.Once
	release = func() { once.Do(func() { close(rel); held.Wait() }) }
	t.Cleanup(func() { release(); s.Close() })
	return s, ln.Addr().String(), release
}

func tlsSites(t *testing.T) (*Sites, *x509.CertPool) {
	certA, _ := testCert(t, "a.example.cn")
	certB, _ := testCert(t, "*.b.example.cn")
	certD, _ := testCert(t, "default.example.cn")
	pool := x509.NewCertPool()
	pool.AddCert(certA.Leaf)
	pool.AddCert(certB.Leaf)
	pool.AddCert(certD.Leaf)
	mk := func(name string, c tls.Certificate, names ...string) *Site {
		return &Site{Name: name, ServerNames: names, TLS: TLSHandshaker(&tls.Config{Certificates: []tls.Certificate{c}, NextProtos: []string{"h2", "http/1.1"}}),
			ClientAuthPolicy: "policy of " + name}
	}
	def := mk("default", certD, "default.example.cn")
	return NewSites([]*Site{mk("a", certA, "a.example.cn"), mk("b", certB, "*.b.example.cn"), def}, def), pool
}

func TestServerTLSBySNI(t *testing.T) {
	sites, pool := tlsSites(t)
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, TLCP: true, TLS13SM: true, Sites: sites}, obs)
	tests := []struct{ sni, want, certName string }{
		{"a.example.cn", "a", "a.example.cn"},
		{"A.Example.CN.", "a", "a.example.cn"},
		{"x.b.example.cn", "b", "x.b.example.cn"},
		{"other.example.cn", "default", "default.example.cn"},
		{"", "default", "default.example.cn"},
	}
	for _, tt := range tests {
		t.Run(tt.sni, func(t *testing.T) {
			c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: tt.sni, RootCAs: pool, NextProtos: []string{"h2"},
				VerifyConnection: func(cs tls.ConnectionState) error {
					return cs.PeerCertificates[0].VerifyHostname(tt.certName)
				}, InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want + " tls TLSv1.3 h2\n"; line != want {
				t.Errorf("got %q, want %q", line, want)
			}
			ev := obs.next(t)
			if ev.Err != nil || ev.State.Site != tt.want || ev.State.Cipher == "" {
				t.Errorf("event %+v", ev)
			}
			// The connection carries its site's client authentication.
			if ev.State.ClientAuthPolicy != "policy of "+tt.want {
				t.Errorf("ClientAuthPolicy %q, want that of site %s", ev.State.ClientAuthPolicy, tt.want)
			}
		})
	}
}

// TestServer360Pattern: a TLS hello with only TLCP suites gets
// handshake_failure under the default policy (protocol-notes §10.2).
func TestServer360Pattern(t *testing.T) {
	sites, _ := tlsSites(t)
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, TLCP: true, Sites: sites}, obs)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0xe013, 0xe053, 0x00ff}, sni: "a.example.cn"}.flight())
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	got, _ := io.ReadAll(c)
	if want := string(alertRecord(0x0303, alertHandshakeFailure)); string(got) != want {
		t.Fatalf("got % x, want handshake_failure alert", got)
	}
	ev := obs.next(t)
	if ev.Reason != ReasonNoSharedCipher || ev.State.Family != FamilyTLCP {
		t.Errorf("event reason %q family %q", ev.Reason, ev.State.Family)
	}
}

func TestServerRejectsUnknownAndRedirectsHTTP(t *testing.T) {
	sites, _ := tlsSites(t)
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, RedirectHTTP: true, Sites: sites}, obs)

	resp := func(in string) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		io.WriteString(c, in)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	got := resp("GET /p?q=1 HTTP/1.1\r\nHost: a.example.cn:8443\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 308") || !strings.Contains(got, "Location: https://a.example.cn:8443/p?q=1\r\n") {
		t.Errorf("redirect: %q", got)
	}
	if ev := obs.next(t); ev.Reason != ReasonUnknownProto {
		t.Errorf("reason %q", ev.Reason)
	}
	// A Host that is no host a site could have is not made into a
	// Location: with userinfo it would send the client elsewhere.
	for _, host := range []string{"a.example.cn@evil.example", "a.example.cn:1:1", "a.example.cn,evil.example", `a"b`, ""} {
		got := resp("GET /p HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 400") || strings.Contains(got, "Location") {
			t.Errorf("Host %q: %q, want 400 without a Location", host, got)
		}
		obs.next(t)
	}
	if got := resp("\x00\x01\x02\x03\x04\x05"); got != "" {
		t.Errorf("garbage answered with %q", got)
	}
	if ev := obs.next(t); ev.Reason != ReasonUnknownProto {
		t.Errorf("reason %q", ev.Reason)
	}
	// An http.Client sees the redirect as a response.
	r, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("status %d", r.StatusCode)
	}
}

// TestServerRedirectHTTPHeadBounded: the plain-HTTP redirect on a TLS
// port reads at most 8 KiB of request head (as nginx's default
// large_client_header_buffers): a longer head gets no redirect, so that
// one connection cannot make the listener buffer a header line for as
// long as its handshake deadline lets it send.
func TestServerRedirectHTTPHeadBounded(t *testing.T) {
	sites, _ := tlsSites(t)
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, RedirectHTTP: true, Sites: sites}, nil)
	answer := func(pad int) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		// Written whole before the server answers or closes (it fits the
		// loopback socket buffers); a reset may then fail the read.
		io.WriteString(c, "GET /p HTTP/1.1\r\nHost: a.example.cn\r\nX-Pad: "+strings.Repeat("a", pad)+"\r\n\r\n")
		b, _ := io.ReadAll(c)
		return string(b)
	}
	if got := answer(1 << 10); !strings.HasPrefix(got, "HTTP/1.1 308") {
		t.Fatalf("a 1 KiB request head: %q, want a 308 (the test's request is wrong)", got)
	}
	if got := answer(16 << 10); strings.Contains(got, "308") {
		t.Errorf("a 16 KiB request head was read whole and redirected: %q", got)
	}
}

func TestServerHandshakeDeadline(t *testing.T) {
	sites, _ := tlsSites(t)
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, HandshakeTimeout: 100 * time.Millisecond, Sites: sites}, obs)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Send a partial hello and then nothing.
	c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x40})
	// 100 times the HandshakeTimeout (testwait): a mutant that drops the
	// timeout costs this wait.
	c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent connection: read err = %v, want EOF (closed by the server)", err)
	}
	if ev := obs.next(t); ev.Reason != ReasonTimeout {
		t.Errorf("reason %q, want timeout", ev.Reason)
	}
}

func TestServerMaxHandshakes(t *testing.T) {
	sites, _ := tlsSites(t)
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, MaxHandshakes: 1, Sites: sites}, obs)
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	select {
	case <-obs.startCh:
	case <-time.After(testwait.Bound(20 * time.Second)):
		t.Fatal("first handshake not started")
	}
	// The refusal (close with linger 0) may even reset the connect.
	if second, err := net.Dial("tcp", addr); err == nil {
		defer second.Close()
		second.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		if _, err := second.Read(make([]byte, 1)); err == nil {
			t.Fatal("second connection was not refused")
		}
	}
	for i := 0; i < 10000; i++ {
		obs.mu.Lock()
		n := len(obs.refused)
		obs.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	obs.mu.Lock()
	refused := append([]string(nil), obs.refused...)
	obs.mu.Unlock()
	if len(refused) != 1 || refused[0] != "max_handshakes" {
		t.Fatalf("refused = %v", refused)
	}
}

func TestServerMaxConns(t *testing.T) {
	sites, pool := tlsSites(t)
	s, addr, release := startHoldingServer(t, &ListenerConfig{Name: "l", TLS: true, MaxConns: 1, Sites: sites}, newRecObserver())
	defer release()
	c1, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if _, err := bufio.NewReader(c1).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c2, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.example.cn", RootCAs: pool})
	if err == nil {
		c2.Close()
		t.Fatal("second connection over MaxConns completed a handshake")
	}
	// The refused connection is closed before its count is released: the
	// client may see the close first. Wait (bounded) for the count.
	for deadline := time.Now().Add(testwait.Bound(5 * time.Second)); s.Conns() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Conns() != 1 {
		t.Errorf("Conns() = %d, want 1", s.Conns())
	}
}

// TestWaitHandshakesUntilSettled: a connection whose handshake ended is
// still waited for until its handler has taken it (Settled), so that a
// shutdown does not stop the handler's servers in between; a handler that
// returns without settling lets go of it too.
func TestWaitHandshakesUntilSettled(t *testing.T) {
	sites, pool := tlsSites(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan string, 2)
	settleA, endA, endB := make(chan struct{}), make(chan struct{}), make(chan struct{})
	s := NewServer(&ListenerConfig{Name: "l", TLS: true, Sites: sites}, nil, func(c *Conn) {
		defer c.Close()
		if c.ConnState().Site == "b" { // returns without settling
			entered <- "b"
			<-endB
			return
		}
		entered <- "a"
		<-settleA
		c.Settled()
		c.Settled() // a second call does nothing
		<-endA
	})
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	for _, name := range []string{"a.example.cn", "x.b.example.cn"} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: name, RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		testpeer.Recv(t, entered, "handler of "+name)
	}
	// As a shutdown does: nothing new is accepted while WaitHandshakes
	// waits (its WaitGroup is not added to while waited on).
	s.StopAccepting()
	wait := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return s.WaitHandshakes(ctx)
	}
	if err := wait(100 * time.Millisecond); err == nil {
		t.Fatal("WaitHandshakes returned while two handlers had not taken their connections")
	}
	close(settleA)
	if err := wait(100 * time.Millisecond); err == nil {
		t.Fatal("WaitHandshakes returned while a handler had neither settled nor returned")
	}
	close(endB) // b's handler returns; the Server settles its connection
	if err := wait(20 * time.Second); err != nil {
		t.Fatalf("WaitHandshakes with a settled connection still held: %v", err)
	}
	close(endA)
}

// TestServerTLS13SMHelloWithoutSM2Signatures: a TLS 1.3 hello that offers
// RFC 8998 suites beside AES ones but no sm2sig_sm3 among its signature
// algorithms goes to ordinary TLS on a site that has a TLS certificate:
// TLS 1.3-SM cannot sign for it with the site's SM2 certificate and
// failed the handshake ("client does not offer sm2sig_sm3"), while
// crypto/tls could answer it. With sm2sig_sm3, without signature
// algorithms (a PSK-only hello), or with SM suites only, it still goes to
// TLS 1.3-SM.
func TestServerTLS13SMHelloWithoutSM2Signatures(t *testing.T) {
	stub := func(family string) Handshaker {
		return HandshakerFunc(func(context.Context, net.Conn, *ClientHello) (*Established, error) {
			return nil, Reasoned(ReasonNoSharedCipher, errors.New(family+" stub"))
		})
	}
	site := &Site{Name: "s", ServerNames: []string{"a.example.cn"}, TLS13SM: stub(FamilyTLS13SM), TLS: stub(FamilyTLS)}
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, TLS13SM: true, TLCP: true, Sites: NewSites([]*Site{site}, nil)}, obs)
	const ecdsaP256, rsaPSS, sm2sig = 0x0403, 0x0804, 0x0708
	for _, tc := range []struct {
		name    string
		suites  []uint16
		sigAlgs []uint16
		want    string
	}{
		{"SM and AES suites, no sm2sig_sm3", []uint16{0x00c6, 0x1301, 0x1302}, []uint16{ecdsaP256, rsaPSS}, FamilyTLS},
		{"SM and AES suites, sm2sig_sm3", []uint16{0x00c6, 0x1301}, []uint16{ecdsaP256, sm2sig}, FamilyTLS13SM},
		{"SM and AES suites, no signature_algorithms", []uint16{0x00c6, 0x1301}, nil, FamilyTLS13SM},
		{"SM suites only, no sm2sig_sm3", []uint16{0x00c6, 0x00c7}, []uint16{ecdsaP256}, FamilyTLS13SM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			c.Write(helloSpec{recVers: 0x0301, vers: 0x0303, suites: tc.suites, sni: "a.example.cn", supVers: []uint16{0x0304, 0x0303}, sigAlgs: tc.sigAlgs}.flight())
			io.Copy(io.Discard, c)
			ev := obs.next(t)
			if ev.State.Family != tc.want || ev.Err == nil || !strings.Contains(ev.Err.Error(), tc.want+" stub") {
				t.Errorf("hello went to %s (%v), want %s", ev.State.Family, ev.Err, tc.want)
			}
		})
	}
}

// TestServerNameNoHostNameRefused: a server_name that can be no DNS host
// name (over 255 bytes, RFC 1035 §2.3.4, or holding a NUL) gets
// unrecognized_name from the front door, in every family, as OpenSSL's
// and Tongsuo's servers answer it (RFC 6066 §3 allows it): crypto/tls took
// it, up to the extension's 64 KiB, and the connection kept it for its
// life (ConnState.SNI, ConnectionState.ServerName). A 255-byte name is
// served.
func TestServerNameNoHostNameRefused(t *testing.T) {
	sites, _ := tlsSites(t)
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, TLCP: true, TLS13SM: true, Sites: sites}, nil)
	dial := func(name string) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: testwait.Bound(20 * time.Second)}, "tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			return err
		}
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "default tls TLSv1.3 h2\n" {
			err = errors.New("served as " + line)
		}
		return err
	}
	if err := dial(strings.Repeat("a", 255)); err != nil {
		t.Errorf("a server_name of 255 bytes: %v, want it served by the default site", err)
	}
	if err := dial(strings.Repeat("a", 256)); err == nil || !strings.Contains(err.Error(), "remote error: tls: unrecognized name") {
		t.Errorf("a server_name of 256 bytes: %v, want unrecognized_name", err)
	}
	for _, tc := range []struct {
		name string
		h    helloSpec
		want []byte
	}{
		{"tls_nul", helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0x1301}, sni: "a.example.cn\x00.evil"}, alertRecord(0x0303, alertUnrecognizedName)},
		{"tls_60000", helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0x1301}, sni: strings.Repeat("a", 60000), fragment: 16000}, alertRecord(0x0303, alertUnrecognizedName)},
		{"tlcp_256", helloSpec{recVers: versionTLCP, vers: versionTLCP, suites: []uint16{0xe013}, sni: strings.Repeat("a", 256)}, alertRecord(versionTLCP, alertUnrecognizedName)},
	} {
		c := dialFrom(t, "127.0.0.1", addr)
		if _, err := c.Write(tc.h.flight()); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		got, _ := io.ReadAll(io.LimitReader(c, 64))
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: server answered %x before closing, want the alert %x", tc.name, got, tc.want)
		}
	}
}
