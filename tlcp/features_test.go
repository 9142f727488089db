package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// echoListener listens on loopback with cfg (through Listen) and echoes
// every accepted connection until the test ends.
func echoListener(t *testing.T, cfg *Config) net.Listener {
	t.Helper()
	l, err := Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l
}

func TestListenDial(t *testing.T) {
	p := loadPKI(t)
	l := echoListener(t, p.serverConfig())
	ccfg := p.clientConfig()
	ccfg.ServerName = ""
	d := &net.Dialer{Timeout: 10 * time.Second}
	// ServerName defaults to the host: "127.0.0.1" is in the test cert's SANs.
	c, err := DialWithDialer(d, "tcp", l.Addr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("%q %v", buf, err)
	}
	st := c.Stats()
	if st.BytesOut != 4 || st.BytesIn != 4 || st.RecordsOut != 1 || st.RecordsIn != 1 {
		t.Fatalf("stats %+v", st)
	}
	if c.NetConn() == nil {
		t.Fatal("NetConn")
	}
}

func TestCloseWrite(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, p.clientConfig()), Server(c2, p.serverConfig())
	defer cli.Close()
	defer srv.Close()
	go func() {
		srv.Write([]byte("bye"))
		srv.CloseWrite()
	}()
	b, err := io.ReadAll(cli)
	if err != nil || string(b) != "bye" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := srv.Write([]byte("x")); err == nil {
		t.Fatal("write after CloseWrite succeeded")
	}
}

func TestGetCertificateBySNI(t *testing.T) {
	p := loadPKI(t)
	ca, caKey := genCA(t, "Other CA")
	other := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	scfg := &Config{GetCertificate: func(hi *ClientHelloInfo) (*Certificate, error) {
		if hi.ServerName == "localhost" {
			return &p.server, nil
		}
		if hi.ServerName == "" {
			return nil, errors.New("no SNI")
		}
		return &other, nil
	}}
	cerr, serr := handshakePair(t, scfg, p.clientConfig())
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	// "localhost" again but trusting only the other CA: the first pair is served.
	cerr, _ = handshakePair(t, scfg, &Config{ServerName: "localhost", RootCAs: pool})
	if a, _ := alertOf(cerr); a != AlertUnknownCA {
		t.Fatalf("got %v", cerr)
	}
	// GetConfigForClient swaps the whole config.
	scfg2 := &Config{GetConfigForClient: func(hi *ClientHelloInfo) (*Config, error) {
		return p.serverConfig(), nil
	}}
	if cerr, serr := handshakePair(t, scfg2, p.clientConfig()); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
}

func TestGmSSLStyleOptionsInProcess(t *testing.T) {
	p := loadPKI(t)
	for _, suite := range defaultCipherSuites {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			scfg := p.serverConfig()
			scfg.CipherSuites = []uint16{suite}
			scfg.ClientAuth = RequireAndVerifyClientCert
			scfg.AcceptRawCertificateVerify = true
			ccfg := p.clientConfig()
			ccfg.NoClientExtensions = true
			ccfg.ClientECDHEParamsAsVector = true
			ccfg.ClientRawCertificateVerify = true
			ccfg.ClientSignCertOnly = true
			r := runPair(t, scfg, ccfg, []byte("gmssl style"))
			if r.cerr != nil || r.serr != nil {
				t.Fatal(r.cerr, r.serr)
			}
			wantCerts := 1
			if cipherSuiteByID(suite).ecdhe {
				wantCerts = 2
			}
			if len(r.ss.PeerCertificates) != wantCerts || r.ss.ServerName != "" {
				t.Fatalf("server saw %d client certs, SNI %q", len(r.ss.PeerCertificates), r.ss.ServerName)
			}
			// Without AcceptRawCertificateVerify the raw form is refused.
			scfg.AcceptRawCertificateVerify = false
			cerr, serr := handshakePair(t, scfg, ccfg)
			if a, _ := alertOf(serr); a != AlertDecryptError || cerr == nil {
				t.Fatalf("raw CertificateVerify accepted: %v / %v", serr, cerr)
			}
		})
	}
}

// TestTLSRecordHello: a 360-browser-style first ClientHello in a 03 03
// record with client_version 03 03 is answered in TLCP when allowed.
func TestTLSRecordHello(t *testing.T) {
	p := loadPKI(t)
	for _, allow := range []bool{false, true} {
		c1, c2 := tcpPair(t)
		scfg := p.serverConfig()
		scfg.AllowTLSRecordHello = allow
		srv := Server(c2, scfg)
		errc := make(chan error, 1)
		go func() { errc <- srv.Handshake(); srv.Close() }()
		hello := &clientHelloMsg{vers: 0x0303, random: make([]byte, 32), cipherSuites: []uint16{0xc02f, ECC_SM4_GCM_SM3}, compressionMethods: []byte{0}}
		b, _ := hello.marshal()
		c1.Write(rawRecord(recordTypeHandshake, 0x0301, b))
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c1, hdr); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		io.ReadFull(c1, body)
		c1.Close()
		err := testpeer.Recv(t, errc, "server result")
		if allow {
			if hdr[0] != byte(recordTypeHandshake) || hdr[1] != 1 || hdr[2] != 1 || body[0] != typeServerHello {
				t.Fatalf("allowed: got record %x body %x", hdr, body[:4])
			}
			var sh serverHelloMsg
			if !sh.unmarshal(body[:4+int(body[3])|int(body[2])<<8]) || sh.vers != VersionTLCP || sh.cipherSuite != ECC_SM4_GCM_SM3 {
				t.Fatalf("ServerHello %+v", sh)
			}
		} else if a, _ := alertOf(err); a != AlertProtocolVersion || hdr[0] != byte(recordTypeAlert) {
			t.Fatalf("not allowed: %v %x", err, hdr)
		}
	}
}

func TestHandshakeContextCancel(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	defer c1.Close()
	srv := Server(c2, p.serverConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var res HandshakeResult
	srv.config.OnHandshake = func(r HandshakeResult) { res = r }
	err := srv.HandshakeContext(ctx) // the client never speaks
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if res.Reason != "timeout" {
		t.Fatalf("reason %q", res.Reason)
	}
	// A read deadline on the connection works too.
	c3, c4 := tcpPair(t)
	defer c3.Close()
	srv2 := Server(c4, p.serverConfig())
	srv2.SetDeadline(time.Now().Add(30 * time.Millisecond))
	var ne net.Error
	if err := srv2.Handshake(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("got %v", err)
	}
}

func TestTicketKeyRotation(t *testing.T) {
	p := loadPKI(t)
	k1, k2, k3 := testTicketKey(t, 1), testTicketKey(t, 2), testTicketKey(t, 3)
	scfg := p.serverConfig()
	scfg.TicketKeys = ticket.Static{k1}
	ccfg := p.clientConfig()
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	if r := runPair(t, scfg, ccfg, []byte("a")); r.cerr != nil || r.serr != nil {
		t.Fatal(r.cerr, r.serr)
	}
	// Another instance with a newer key that still decrypts k1 resumes.
	scfg2 := p.serverConfig()
	scfg2.TicketKeys = ticket.Static{k2, k1}
	if r := runPair(t, scfg2, ccfg, []byte("a")); r.cerr != nil || r.serr != nil || !r.ss.DidResume {
		t.Fatalf("rotation: %v %v resumed=%v", r.cerr, r.serr, r.ss.DidResume)
	}
	// The client now holds a k2 ticket; an instance without k2 does a full handshake.
	scfg3 := p.serverConfig()
	scfg3.TicketKeys = ticket.Static{k3}
	if r := runPair(t, scfg3, ccfg, []byte("a")); r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("unknown key: %v %v resumed=%v", r.cerr, r.serr, r.ss.DidResume)
	}
}

func TestSessionExpiry(t *testing.T) {
	p := loadPKI(t)
	now := time.Now()
	clock := func() time.Time { return now }
	scfg := p.serverConfig()
	scfg.Time = clock
	scfg.SessionLifetime = time.Minute
	scfg.SessionStore = NewLRUSessionStore(10, time.Hour)
	scfg.SessionTicketsDisabled = true
	ccfg := p.clientConfig()
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	runPair(t, scfg, ccfg, []byte("a"))
	now = now.Add(2 * time.Minute)
	r := runPair(t, scfg, ccfg, []byte("a"))
	if r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("expired session resumed: %v %v %v", r.cerr, r.serr, r.ss.DidResume)
	}
	// A mutual-auth server does not resume a session without a client certificate.
	scfg.ClientAuth = RequireAndVerifyClientCert
	r = runPair(t, scfg, ccfg, []byte("a"))
	if r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("certless session resumed under client auth: %v %v %v", r.cerr, r.serr, r.ss.DidResume)
	}
}

// readIdle reads one 16 KiB message, answers one byte, then blocks in Read
// with a 1-byte buffer (the big buffer is dead by then, so it is not
// counted as connection memory).
func readIdle(srv *Conn, done chan<- struct{}) {
	func() {
		buf := make([]byte, 16384)
		io.ReadFull(srv, buf)
		srv.Write(buf[:1])
	}()
	done <- struct{}{}
	var one [1]byte
	srv.Read(one[:])
}

// TestIdleConnHeap measures the heap held by 1,000 established idle
// connections (server and client sides, each blocked or idle in Read).
func TestIdleConnHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	p := loadPKI(t)
	const n = 1000
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3} {
		scfg.CipherSuites = []uint16{suite}
		var servers, clients []*Conn
		var raws []net.Conn
		var before, after, serverOnly runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		for i := 0; i < n; i++ {
			a, b := net.Pipe()
			cli, srv := Client(a, ccfg), Server(b, scfg)
			go func() {
				srv.Handshake()
				// Exchange one 16 KiB record so buffers were in use, then idle in Read.
				readIdle(srv, done)
			}()
			if err := cli.Handshake(); err != nil {
				t.Fatal(err)
			}
			cli.Write(make([]byte, 16384))
			cli.Read(make([]byte, 1))
			<-done
			servers, clients, raws = append(servers, srv), append(clients, cli), append(raws, a)
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(clients) // live until here
		per := float64(after.HeapAlloc-before.HeapAlloc) / float64(2*n)
		// Drop the client Conns (their pipe ends stay open): what remains is
		// the server side, as a proxy holds it.
		clients = nil
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&serverOnly)
		perServer := float64(serverOnly.HeapAlloc-before.HeapAlloc) / float64(n)
		t.Logf("%s: %d idle connections: %.0f bytes of heap per connection (client and server sides averaged), %.0f per server connection", CipherSuiteName(suite), n, per, perServer)
		if per > 32*1024 || perServer > 32*1024 {
			t.Errorf("idle connection holds %.0f / %.0f bytes of heap, want <= 32 KiB", per, perServer)
		}
		for _, r := range raws {
			r.Close() // first, so the servers' close_notify fails fast
		}
		for _, c := range servers {
			c.Close()
		}
	}
}

// TestSessionBoundToIdentity: a store and ticket keys shared by two sites
// never resume a session of one site on the other.
func TestSessionBoundToIdentity(t *testing.T) {
	p := loadPKI(t)
	ca, caKey := genCA(t, "Second CA")
	other := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	store := NewLRUSessionStore(10, time.Hour)
	keys := ticket.NewRotator(time.Hour, 0)
	for _, tickets := range []bool{false, true} {
		siteA := &Config{Certificates: []Certificate{p.server}, SessionStore: store, TicketKeys: keys, SessionTicketsDisabled: !tickets}
		siteB := &Config{Certificates: []Certificate{other}, SessionStore: store, TicketKeys: keys, SessionTicketsDisabled: !tickets}
		ccfg := &Config{ServerName: "localhost", InsecureSkipVerify: true, ClientSessionCache: NewLRUClientSessionCache(2), SessionTicketsDisabled: !tickets}
		if r := runPair(t, siteA, ccfg, []byte("a")); r.cerr != nil || r.serr != nil {
			t.Fatal(r.cerr, r.serr)
		}
		r := runPair(t, siteB, ccfg, []byte("a"))
		if r.cerr != nil || r.serr != nil || r.ss.DidResume {
			t.Fatalf("tickets=%v: cross-site resumption: %v %v resumed=%v", tickets, r.cerr, r.serr, r.ss.DidResume)
		}
	}
}

// TestConcurrent runs parallel handshakes on one Config and full-duplex
// traffic on each connection (run with -race).
func TestConcurrent(t *testing.T) {
	p := loadPKI(t)
	l := echoListener(t, p.serverConfig())
	ccfg := p.clientConfig()
	ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
	errc := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			c, err := Dial("tcp", l.Addr().String(), ccfg)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			data := bytes.Repeat([]byte{byte(i)}, 200000)
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(data)
				werr <- err
			}()
			got := make([]byte, len(data))
			if _, err := io.ReadFull(c, got); err != nil {
				errc <- err
				return
			}
			if err := <-werr; err != nil {
				errc <- err
				return
			}
			if !bytes.Equal(got, data) {
				errc <- errors.New("echo mismatch")
				return
			}
			errc <- nil
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

type ctxKey struct{}

// offloadKey stands for an offload engine: it records the contexts its
// operations were given.
type offloadKey struct {
	signer crypto.Signer
	dec    crypto.Decrypter
	seen   chan any
}

func (k *offloadKey) Public() crypto.PublicKey { return k.signer.Public() }
func (k *offloadKey) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("Sign without context")
}
func (k *offloadKey) SignContext(ctx context.Context, r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	k.seen <- ctx.Value(ctxKey{})
	return smkey.Sign(ctx, k.signer, r, d, o) // gmproxy's SM2 option becomes gmsm's
}
func (k *offloadKey) Decrypt(r io.Reader, m []byte, o crypto.DecrypterOpts) ([]byte, error) {
	return nil, errors.New("Decrypt without context")
}
func (k *offloadKey) DecryptContext(ctx context.Context, r io.Reader, m []byte, o crypto.DecrypterOpts) ([]byte, error) {
	k.seen <- ctx.Value(ctxKey{})
	return k.dec.Decrypt(r, m, o)
}

type offloadKA struct {
	smkey.KeyAgreement
	seen chan any
}

func (k offloadKA) SM2KeyAgree(ctx context.Context, e *ecdh.PrivateKey, ps, pe *ecdh.PublicKey, resp bool, n int, u, pu []byte) ([]byte, error) {
	k.seen <- ctx.Value(ctxKey{})
	return k.KeyAgreement.SM2KeyAgree(ctx, e, ps, pe, resp, n, u, pu)
}

// TestPrivateKeyInterfaces: every server private-key operation goes through
// the context-aware interfaces with the handshake's context.
func TestPrivateKeyInterfaces(t *testing.T) {
	p := loadPKI(t)
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3} {
		seen := make(chan any, 8)
		cert := p.server
		cert.SignKey = &offloadKey{signer: p.server.SignKey, seen: seen}
		if cipherSuiteByID(suite).ecdhe {
			cert.EncKey = offloadKA{KeyAgreement: smkey.AsKeyAgreement(p.server.EncKey), seen: seen}
		} else {
			sk := p.server.EncKey.(crypto.Signer)
			cert.EncKey = &offloadKey{signer: sk, dec: p.server.EncKey.(crypto.Decrypter), seen: seen}
		}
		scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{suite}}
		c1, c2 := tcpPair(t)
		cli, srv := Client(c1, p.clientConfig()), Server(c2, scfg)
		errc := make(chan error, 1)
		go func() { errc <- cli.Handshake() }()
		ctx := context.WithValue(context.Background(), ctxKey{}, "hs-ctx")
		if err := srv.HandshakeContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		cli.Close()
		srv.Close()
		close(seen)
		n := 0
		for v := range seen {
			if v != "hs-ctx" {
				t.Fatalf("key operation got context value %v", v)
			}
			n++
		}
		if n != 2 {
			t.Fatalf("%d private-key operations, want 2 (sign + decrypt/agree)", n)
		}
	}
}

// TestLoadKeyFormats: PKCS#8 (the test PKI), GmSSL's encrypted PKCS#8 with a
// password, and SEC 1 keys load; wrong passwords and mismatched pairs fail.
func TestLoadKeyFormats(t *testing.T) {
	p := loadPKI(t)
	f := func(n string) string { return filepath.Join(p.dir, n) }
	c, err := LoadX509KeyPair(f("server_sign.crt"), f("server_sign.gmssl.key.pem"), f("server_enc.crt"), f("server_enc.gmssl.key.pem"), []byte("P@ssw0rd"))
	if err != nil {
		t.Fatalf("GmSSL encrypted keys: %v", err)
	}
	if cerr, serr := handshakePair(t, &Config{Certificates: []Certificate{c}}, p.clientConfig()); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if _, err := LoadX509KeyPair(f("server_sign.crt"), f("server_sign.gmssl.key.pem"), f("server_enc.crt"), f("server_enc.gmssl.key.pem"), []byte("wrong")); err == nil {
		t.Fatal("wrong password accepted")
	}
	// Keys swapped between the certificates.
	if _, err := LoadX509KeyPair(f("server_sign.crt"), f("server_enc.key"), f("server_enc.crt"), f("server_sign.key"), nil); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("swapped keys: %v", err)
	}
	// SEC 1 "EC PRIVATE KEY" PEM.
	sec1 := func(k crypto.PrivateKey) []byte {
		der, err := smx509.MarshalSM2PrivateKey(k.(*sm2.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	certPEM := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
	if _, err := X509KeyPair(certPEM(p.server.SignCertificate[0]), sec1(p.server.SignKey), certPEM(p.server.EncCertificate), sec1(p.server.EncKey), nil); err != nil {
		t.Fatalf("SEC 1 keys: %v", err)
	}
}

// TestSuiteNeedsKeyCapability: an encryption key that can only decrypt
// (an ECC-only offload key) never gets an ECDHE suite selected.
func TestSuiteNeedsKeyCapability(t *testing.T) {
	p := loadPKI(t)
	cert := p.server
	cert.EncKey = &offloadKey{signer: p.server.EncKey.(crypto.Signer), dec: p.server.EncKey.(crypto.Decrypter), seen: make(chan any, 4)}
	cert.SignKey = &offloadKey{signer: p.server.SignKey, seen: make(chan any, 4)}
	scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{ECDHE_SM4_GCM_SM3, ECC_SM4_GCM_SM3}}
	r := runPair(t, scfg, p.clientConfig(), []byte("x"))
	if r.cerr != nil || r.serr != nil || r.ss.CipherSuite != ECC_SM4_GCM_SM3 {
		t.Fatalf("%v %v suite %x", r.cerr, r.serr, r.ss.CipherSuite)
	}
}

// TestClientServerNameAsSNI: the client's server_name is its ServerName
// without trailing dots, and none for an IP literal, an IPv6 one with a
// zone included (RFC 6066 §3), as the server's GetConfigForClient sees it.
func TestClientServerNameAsSNI(t *testing.T) {
	p := loadPKI(t)
	for name, want := range map[string]string{
		"localhost": "localhost", "localhost.": "localhost", "127.0.0.1": "", "fe80::1%eth0": "", "[::1]": "",
	} {
		seen := make(chan string, 1)
		scfg := &Config{GetConfigForClient: func(hi *ClientHelloInfo) (*Config, error) {
			seen <- hi.ServerName
			return p.serverConfig(), nil
		}}
		handshakePair(t, scfg, &Config{ServerName: name, InsecureSkipVerify: true})
		select {
		case got := <-seen:
			if got != want {
				t.Errorf("ServerName %q sent as SNI %q, want %q", name, got, want)
			}
		default:
			t.Errorf("ServerName %q: no ClientHello reached the server", name)
		}
	}
}
