package keyserver

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
	"log/slog"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

// testPKI is a throwaway ECDSA CA for the key server's mutual TLS.
type testPKI struct {
	caKey  *ecdsa.PrivateKey
	ca     *x509.Certificate
	pool   *x509.CertPool
	server *tls.Config
}

func newTestPKI(t testing.TB) *testPKI {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "key server CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	p := &testPKI{caKey: caKey, ca: ca, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	srv := p.leaf(t, "keyserver", x509.ExtKeyUsageServerAuth)
	p.server = &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	return p
}

func (p *testPKI) leaf(t testing.TB, cn string, eku x509.ExtKeyUsage) tls.Certificate {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"test"}}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k, Leaf: leaf}
}

// client returns the tls.Config of a client identity with common name cn
// (subject "CN=cn,O=test") and its certificate.
func (p *testPKI) client(t testing.TB, cn string) (*tls.Config, *x509.Certificate) {
	c := p.leaf(t, cn, x509.ExtKeyUsageClientAuth)
	return &tls.Config{Certificates: []tls.Certificate{c}, RootCAs: p.pool, ServerName: "keyserver", MinVersion: tls.VersionTLS13}, c.Leaf
}

// grantAll allows the client with common name cn every key of keys.
func grantAll(cn string, keys []Key) Grant {
	g := Grant{Name: cn, Subject: "CN=" + cn + ",O=test"}
	for _, k := range keys {
		g.Keys = append(g.Keys, k.Name)
	}
	return g
}

// testKeys returns a signing key "sign" and an encryption key "enc" with
// their TLCP roles.
func testKeys(t testing.TB) []Key {
	s, _ := sm2.GenerateKey(rand.Reader)
	e, _ := sm2.GenerateKey(rand.Reader)
	return []Key{{Name: "sign", Private: s, Roles: RoleSign}, {Name: "enc", Private: e, Roles: RoleDecrypt | RoleKeyAgreement}}
}

// devKeys returns the TLCP keys of a devpki PKI with their roles.
func devKeys(p *devpki.PKI) []Key {
	return []Key{{Name: "sign", Private: p.ServerSign.Key.(*sm2.PrivateKey), Roles: RoleSign},
		{Name: "enc", Private: p.ServerEnc.Key.(*sm2.PrivateKey), Roles: RoleDecrypt | RoleKeyAgreement}}
}

// tlcpHandshake runs one TLCP handshake of cli against srv over
// net.Pipe and returns the client's and the server's errors.
func tlcpHandshake(srv, cli *tlcp.Config) (cerr, serr error) {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	errc := make(chan error, 1)
	go func() { errc <- tlcp.Server(s, srv).Handshake() }()
	cerr = tlcp.Client(c, cli).Handshake()
	return cerr, <-errc
}

// running is a Server on loopback.
type running struct {
	s    *Server
	addr string
	ln   net.Listener
}

// startServer serves pol over mutual TLS with pki; setup, when set,
// adjusts the Server before it starts.
func startServer(t testing.TB, pki *testPKI, pol *Policy, setup func(*Server)) *running {
	t.Helper()
	s := &Server{}
	if setup != nil {
		setup(s)
	}
	if err := s.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(tls.NewListener(ln, pki.server)) }()
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &running{s: s, addr: ln.Addr().String(), ln: ln}
}

func tlsEndpoint(cfg *tls.Config, addr string) Endpoint {
	return Endpoint{Address: addr, Dial: func(ctx context.Context) (net.Conn, error) {
		return (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	}}
}

// newClient returns a client of the key server at addrs, closed with the
// test.
func newClient(t testing.TB, cfg *tls.Config, addrs ...string) *Client {
	c := &Client{Timeout: 10 * time.Second}
	for _, a := range addrs {
		c.Endpoints = append(c.Endpoints, tlsEndpoint(cfg, a))
	}
	t.Cleanup(c.Close)
	return c
}

func remote(t testing.TB, c *Client, k Key) *RemoteKey {
	rk, err := NewRemoteKey(c, &k.Private.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return rk
}

func bufLogger(b *testpeer.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// recObserver records the server's events.
type recObserver struct {
	mu       sync.Mutex
	ops      map[string]int // client/key/op/result
	inFlight map[string]int
	maxIn    map[string]int
	conns    int
	refused  map[string]int
}

func newRecObserver() *recObserver {
	return &recObserver{ops: map[string]int{}, inFlight: map[string]int{}, maxIn: map[string]int{}, refused: map[string]int{}}
}

func (r *recObserver) Operation(client, key, op, result string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[client+"/"+key+"/"+op+"/"+result]++
}

func (r *recObserver) InFlight(client string, d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight[client] += d
	r.maxIn[client] = max(r.maxIn[client], r.inFlight[client])
}

func (r *recObserver) Conns(d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns += d
}

func (r *recObserver) Refused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[reason]++
}

func (r *recObserver) get(f func(r *recObserver) int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// eventually polls cond every 10ms for up to 10s (testwait).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); time.Now().Before(deadline); {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not reached in %v", what, testwait.Bound(10*time.Second))
}

// greetedConn opens a TLS connection to addr with cfg and greets; it
// returns the connection and the reader of the server's frames.
func greetedConn(t testing.TB, addr string, cfg *tls.Config) (net.Conn, *frameReader) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	c, fr, err := greetOn(raw, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, fr
}

// greetOn runs the TLS handshake with cfg and the greeting on raw, an
// open TCP connection to the key server.
func greetOn(raw net.Conn, cfg *tls.Config) (net.Conn, *frameReader, error) {
	c := tls.Client(raw, cfg)
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if _, err := c.Write(appendHello(nil, Version)); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(c)
	if _, _, err := readHello(br); err != nil {
		return nil, nil, err
	}
	return c, &frameReader{br: br}, nil
}

// served reports whether c is open and served: a ping is answered.
func served(c net.Conn, fr *frameReader) bool {
	if err := newFrameWriter(c, time.Second).write(1, byte(OpPing), nil, nil); err != nil {
		return false
	}
	id, code, _, err := fr.next()
	return err == nil && id == 1 && code == byte(CodeOK)
}

// quarantine reloads ks's policy with cert (say, of a compromised edge)
// pinned to a grant of the signing key only, "edge-quarantined" with
// maxConns, ahead of the subject grant of "edge".
func quarantine(t *testing.T, ks *running, keys []Key, cert *x509.Certificate, maxConns int) {
	t.Helper()
	h := SPKIHash(cert)
	q := Grant{Name: "edge-quarantined", SPKISHA256: h[:], Keys: []string{"sign"}}
	q.MaxConns = maxConns
	if err := ks.s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{q, grantAll("edge", keys)}}); err != nil {
		t.Fatal(err)
	}
}

// testMsg is a message the key server signs, the content of a TLS 1.3
// server CertificateVerify (with a zero transcript hash), and testOpts
// the options a stack passes with it (RFC 8998's ID), for tests that need
// any signature.
var (
	testMsg  = append(append(bytes.Repeat([]byte{0x20}, 64), "TLS 1.3, server CertificateVerify\x00"...), make([]byte, 32)...)
	testOpts = smkey.NewSM2SignerOpts([]byte("TLSv1.3+GM+Cipher+Suite"))
)

// cvMsg returns the content of a TLS 1.3 server CertificateVerify with
// transcript hash th (32 bytes), which a runHook finds at
// payload[len(payload)-32:].
func cvMsg(th []byte) []byte {
	return append(bytes.Repeat([]byte{0x20}, 64), append([]byte("TLS 1.3, server CertificateVerify\x00"), th...)...)
}
