package tls13sm

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/internal/transcript"
)

// echoServer accepts one connection on a fresh listener, handshakes and
// echoes until EOF. It returns the address and a channel with the server's
// final error and state.
type serverResult struct {
	err   error
	state ConnectionState
	conn  *Conn
}

func echoServer(t *testing.T, cfg *Config) (string, <-chan serverResult) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan serverResult, 1)
	go func() {
		defer l.Close()
		raw, err := l.Accept()
		if err != nil {
			ch <- serverResult{err: err}
			return
		}
		raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		c := Server(raw, cfg)
		defer c.Close()
		if err := c.Handshake(); err != nil {
			ch <- serverResult{err: err, conn: c}
			return
		}
		_, err = io.Copy(c, c)
		ch <- serverResult{err: err, state: c.ConnectionState(), conn: c}
	}()
	return l.Addr().String(), ch
}

func dialTest(t *testing.T, addr string, cfg *Config) (*Conn, error) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	c := Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		raw.Close()
		return c, err
	}
	return c, nil
}

// pingClose writes, reads the echo (which also consumes tickets) and closes.
func pingClose(t *testing.T, c *Conn) {
	t.Helper()
	msg := []byte("hello over tls13sm")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || !bytes.Equal(buf, msg) {
		t.Fatalf("echo: %v %q", err, buf)
	}
	c.Close()
}

// dialEcho starts an echoServer with srvCfg and dials it with cliCfg; the
// client handshake must succeed.
func dialEcho(t *testing.T, srvCfg, cliCfg *Config) (*Conn, <-chan serverResult) {
	t.Helper()
	addr, res := echoServer(t, srvCfg)
	c, err := dialTest(t, addr, cliCfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, res
}

// echoRound is one whole connection: dialEcho, pingClose, and the server's
// result. The client Conn is returned for its (closed) state.
func echoRound(t *testing.T, srvCfg, cliCfg *Config) (*Conn, serverResult) {
	t.Helper()
	c, res := dialEcho(t, srvCfg, cliCfg)
	pingClose(t, c)
	return c, <-res
}

// handshakeErrs runs one connection to a fresh echoServer that is expected
// to fail and returns the client's and the server's errors. A client whose
// handshake completes reads once: in TLS 1.3 it finishes before the server
// has checked the client's flight, so the failure shows on that read.
func handshakeErrs(t *testing.T, srvCfg, cliCfg *Config) (cerr, serr error) {
	t.Helper()
	addr, res := echoServer(t, srvCfg)
	c, cerr := dialTest(t, addr, cliCfg)
	if cerr == nil {
		_, cerr = c.Read(make([]byte, 1))
		c.Close()
	}
	return cerr, (<-res).err
}

// cachedSession returns the client's cached session for "localhost".
func cachedSession(t *testing.T, cliCfg *Config) *ClientSessionState {
	t.Helper()
	cs, ok := cliCfg.ClientSessionCache.Get("localhost")
	if !ok {
		t.Fatal("no session cached")
	}
	return cs
}

func wantAlert(t *testing.T, err error, a Alert, remote bool) {
	t.Helper()
	var ae *AlertError
	if !errors.As(err, &ae) || ae.Alert != a || ae.Remote != remote {
		t.Fatalf("error %v, want alert %q (remote=%v)", err, a, remote)
	}
}

// TestKeyUpdateFloodRefused: a peer may send maxPostHandshakeNoApp
// KeyUpdates without application data between them; one more is refused
// with unexpected_message (each costs the receiver a key derivation).
func TestKeyUpdateFloodRefused(t *testing.T) {
	srv, cli := handshakenPair(t)
	// After the handshake: a few dozen records each way, whose refusal
	// a mutant that lets them through costs in full.
	srv.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	cli.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	burst := func(n int, data bool) error {
		for range n {
			if err := cli.SendKeyUpdate(false); err != nil {
				return err
			}
		}
		if data {
			_, err := cli.Write([]byte{1})
			return err
		}
		return nil
	}
	buf := make([]byte, 1)
	if err := burst(maxPostHandshakeNoApp, true); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(srv, buf); err != nil {
		t.Fatalf("after %d KeyUpdates and data: %v", maxPostHandshakeNoApp, err)
	}
	go burst(maxPostHandshakeNoApp+1, false) // its writes may fail once the server gave up
	_, err := srv.Read(buf)
	wantAlert(t, err, AlertUnexpectedMessage, false)
}

// TestNewSessionTicketFloodRefused: a server may send
// maxPostHandshakeNoApp post-handshake messages without application data
// between them; a client refuses one more NewSessionTicket with
// unexpected_message. Each costs the client a key derivation, an
// allocation and a store in the session cache its other connections
// share, for about 40 bytes of the server's.
func TestNewSessionTicketFloodRefused(t *testing.T) {
	srv, cli := handshakenPair(t)
	srv.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	cli.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	nst := (&newSessionTicketMsg{lifetime: 60, ageAdd: 1, nonce: []byte{1}, label: []byte("ticket")}).marshalFast()
	burst := func(n int, data bool) error {
		for range n {
			if err := srv.writeHandshake(nst, nil); err != nil {
				return err
			}
		}
		if data {
			_, err := srv.Write([]byte{1})
			return err
		}
		return nil
	}
	buf := make([]byte, 1)
	// The handshake's own ticket, then data: the count starts afresh.
	if err := burst(0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cli, buf); err != nil {
		t.Fatal(err)
	}
	if err := burst(maxPostHandshakeNoApp, true); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cli, buf); err != nil {
		t.Fatalf("after %d NewSessionTickets and data: %v", maxPostHandshakeNoApp, err)
	}
	go burst(maxPostHandshakeNoApp+1, false) // its writes may fail once the client gave up
	_, err := cli.Read(buf)
	wantAlert(t, err, AlertUnexpectedMessage, false)
}

func TestKeyUpdateUnderTraffic(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	c, res := dialEcho(t, srvCfg, cliCfg)
	initialOut := c.out.secret
	buf := make([]byte, 3000)
	for i := 0; i < 40; i++ {
		msg := bytes.Repeat([]byte{byte(i)}, 1000+i*50)
		if i%7 == 3 {
			if err := c.SendKeyUpdate(i%2 == 1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil || !bytes.Equal(buf[:len(msg)], msg) {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if c.out.secret == initialOut {
		t.Fatal("write key never changed")
	}
	st := c.Stats()
	c.Close()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.conn.in.secret == r.conn.out.secret {
		t.Fatal("odd: equal secrets")
	}
	if st.BytesOut == 0 || st.BytesIn != st.BytesOut || st.RecordsOut < 40 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTicketKeyRotation(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	k := mustKeys(t, 3)
	resume := func(keys ticket.Source, now func() time.Time) bool {
		cfg := srvCfg.Clone()
		cfg.TicketKeys = keys
		cfg.Time = now
		c, r := echoRound(t, cfg, cliCfg)
		if r.err != nil {
			t.Fatal(r.err)
		}
		return c.ConnectionState().DidResume
	}
	if resume(ticket.Static{k[0]}, nil) {
		t.Fatal("first connection resumed")
	}
	// Rotation: a new key encrypts, the old one still decrypts.
	if !resume(ticket.Static{k[1], k[0]}, nil) {
		t.Fatal("old-key ticket did not resume after rotation")
	}
	// The ticket issued now is under k[1]; drop k[0]: still resumes.
	if !resume(ticket.Static{k[1]}, nil) {
		t.Fatal("new-key ticket did not resume")
	}
	// Unknown key: full handshake.
	if resume(ticket.Static{k[2]}, nil) {
		t.Fatal("ticket under a retired key resumed")
	}
	// Expired (server clock 3 h ahead, lifetime 2 h): full handshake.
	if resume(ticket.Static{k[2]}, func() time.Time { return time.Now().Add(3 * time.Hour) }) {
		t.Fatal("expired ticket resumed")
	}
}

func TestTicketSizeAfterClientAuth(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.ClientAuth = RequireAndVerifyClientCert
	echoRound(t, srvCfg, cliCfg)
	cs := cachedSession(t, cliCfg)
	if len(cs.ticket) > 256 {
		t.Fatalf("ticket of %d bytes after client auth", len(cs.ticket))
	}
	// Resumption keeps the client identity (from the server-side chain cache).
	_, r := echoRound(t, srvCfg, cliCfg)
	if !r.state.DidResume || len(r.state.PeerCertificates) == 0 {
		t.Fatalf("resumed=%v peer certs=%d", r.state.DidResume, len(r.state.PeerCertificates))
	}
}

func TestALPNSNIAndGetCertificate(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	p := loadPKI(t)
	var sawSNI atomic.Value
	srvCfg.Certificates = nil
	srvCfg.GetCertificate = func(h *ClientHelloInfo) (*Certificate, error) {
		sawSNI.Store(h.ServerName)
		return &p.server, nil
	}
	srvCfg.NextProtos = []string{"h2", "http/1.1"}
	cliCfg.NextProtos = []string{"http/1.1", "h2"}
	var hooks atomic.Int32
	srvCfg.OnHandshake = func(r HandshakeResult) {
		if r.Err == nil && r.State.HandshakeComplete && r.Duration > 0 {
			hooks.Add(1)
		}
	}
	c, _ := echoRound(t, srvCfg, cliCfg)
	if st := c.ConnectionState(); st.NegotiatedProtocol != "h2" || st.ServerName != "localhost" {
		t.Fatalf("state %+v", st)
	}
	if sawSNI.Load() != "localhost" || hooks.Load() != 1 {
		t.Fatalf("SNI %v hooks %d", sawSNI.Load(), hooks.Load())
	}
	// No common protocol: no_application_protocol.
	cliCfg.NextProtos = []string{"spdy/1"}
	cerr, serr := handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertNoApplicationProtocol, true)
	wantAlert(t, serr, AlertNoApplicationProtocol, false)
}

func TestStrictMode(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.Strict, cliCfg.Strict = true, true
	if c, _ := echoRound(t, srvCfg, cliCfg); c.ConnectionState().Group != CurveSM2 {
		t.Fatal("group")
	}

	// A hello offering only X25519: refused in strict mode, served otherwise.
	x25519Only := func(cfg *Config) []byte {
		cli := cfg.Clone()
		cli.testShareX25519 = true
		hs := &clientHandshakeState{c: &Conn{config: cli}, config: cli}
		if err := hs.makeClientHello(); err != nil {
			t.Fatal(err)
		}
		hs.hello.supportedGroups = []uint16{X25519}
		raw, _ := hs.hello.marshal()
		return raw
	}
	hello := x25519Only(cliCfg)
	reply := rawExchange(t, srvCfg, [][]byte{rawRecord(recordTypeHandshake, hello)})
	if !bytes.Equal(reply, []byte{21, 3, 3, 0, 2, 2, byte(AlertHandshakeFailure)}) {
		t.Fatalf("strict server reply %x", reply)
	}
	loose := srvCfg.Clone()
	loose.Strict = false
	reply = rawExchangeN(t, loose, [][]byte{rawRecord(recordTypeHandshake, hello)}, 6)
	if len(reply) < 6 || reply[0] != recordTypeHandshake || reply[5] != typeServerHello {
		t.Fatalf("non-strict server did not answer with ServerHello: %x", reply[:min(len(reply), 16)])
	}
}

func rawRecord(typ byte, body []byte) []byte {
	return append([]byte{typ, 3, 3, byte(len(body) >> 8), byte(len(body))}, body...)
}

// rawExchange sends raw bytes to a server Conn and returns what it wrote
// back until it closed the connection.
func rawExchange(t *testing.T, cfg *Config, writes [][]byte) []byte {
	return rawExchangeN(t, cfg, writes, 0)
}

// rawExchangeN is rawExchange that stops after n bytes when n > 0.
func rawExchangeN(t *testing.T, cfg *Config, writes [][]byte, n int) []byte {
	t.Helper()
	a, b := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		s := Server(a, cfg)
		err := s.Handshake()
		a.Close()
		done <- err
	}()
	for _, w := range writes {
		b.Write(w)
	}
	var out []byte
	if n > 0 {
		out = make([]byte, n)
		k, _ := io.ReadFull(b, out)
		out = out[:k]
	} else {
		out, _ = io.ReadAll(b)
	}
	b.Close()
	<-done
	return out
}

func TestNegativeHandshakes(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	hello := func() []byte {
		hs := &clientHandshakeState{c: &Conn{config: cliCfg}, config: cliCfg}
		if err := hs.makeClientHello(); err != nil {
			t.Fatal(err)
		}
		raw, _ := hs.hello.marshal()
		return raw
	}
	alertRec := func(a Alert) []byte { return []byte{21, 3, 3, 0, 2, 2, byte(a)} }
	for _, tc := range []struct {
		name   string
		writes [][]byte
		want   []byte
	}{
		{"finished-first", [][]byte{rawRecord(recordTypeHandshake, []byte{typeFinished, 0, 0, 0})}, alertRec(AlertUnexpectedMessage)},
		{"appdata-first", [][]byte{rawRecord(recordTypeApplicationData, []byte{1, 2, 3})}, alertRec(AlertUnexpectedMessage)},
		{"garbage-hello", [][]byte{rawRecord(recordTypeHandshake, []byte{typeClientHello, 0, 0, 3, 1, 2, 3})}, alertRec(AlertDecodeError)},
		{"oversize-plaintext", [][]byte{append([]byte{22, 3, 1, 0x40, 0x01}, make([]byte, 0x4001)...)}, alertRec(AlertRecordOverflow)},
		{"oversize-handshake", [][]byte{rawRecord(recordTypeHandshake, []byte{typeClientHello, 0x01, 0, 1})}, alertRec(AlertIllegalParameter)},
		{"bad-record-version", [][]byte{{22, 1, 1, 0, 1, 1}}, alertRec(AlertProtocolVersion)},
		{"ccs-then-garbage-ccs", [][]byte{{20, 3, 3, 0, 1, 2}}, alertRec(AlertUnexpectedMessage)},
		{"tls12-only", [][]byte{rawRecord(recordTypeHandshake, func() []byte {
			h := hello()
			var m clientHelloMsg
			m.unmarshal(h)
			m.raw, m.supportedVersions = nil, []uint16{0x0303}
			b, _ := m.marshal()
			return b
		}())}, alertRec(AlertProtocolVersion)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rawExchange(t, srvCfg, tc.writes); !bytes.Equal(got, tc.want) {
				t.Fatalf("reply %x, want %x", got, tc.want)
			}
		})
	}
}

// badSigner signs with a different key than the certificate's.
type badSigner struct {
	crypto.Signer
	pub crypto.PublicKey
}

func (b badSigner) Public() crypto.PublicKey { return b.pub }

func TestBadSignature(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	p := loadPKI(t)
	bad := p.server
	bad.PrivateKey = badSigner{Signer: p.client.PrivateKey, pub: p.server.PrivateKey.Public()}
	srvCfg.Certificates = []Certificate{bad}
	cerr, serr := handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertDecryptError, false)
	wantAlert(t, serr, AlertDecryptError, true)

	// Client side: a client CertificateVerify by the wrong key.
	srvCfg, cliCfg = testConfigs(t)
	srvCfg.ClientAuth = RequireAndVerifyClientCert
	badc := p.client
	badc.PrivateKey = badSigner{Signer: p.server.PrivateKey, pub: p.client.PrivateKey.Public()}
	cliCfg.Certificates = []Certificate{badc}
	// The client finishes first; the failure shows on its first read.
	cerr, serr = handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertDecryptError, true)
	wantAlert(t, serr, AlertDecryptError, false)
}

func TestClientAuthRequiredButMissing(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.ClientAuth = RequireAndVerifyClientCert
	cliCfg.Certificates = nil
	cerr, serr := handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertCertificateRequired, true)
	wantAlert(t, serr, AlertCertificateRequired, false)
	// Request (not require): the handshake succeeds without a certificate.
	srvCfg.ClientAuth = RequestClientCert
	if _, r := echoRound(t, srvCfg, cliCfg); r.err != nil || len(r.state.PeerCertificates) != 0 {
		t.Fatal(r.err)
	}
}

// TestEncryptionCertificateDoesNotAuthenticate: a client that presents
// its SM2 encryption certificate (key usage without digitalSignature,
// Tongsuo's PKI) and signs CertificateVerify with its key is refused with
// bad_certificate, as TLCP refuses it: whoever holds an escrowed
// encryption key must not authenticate as its owner.
func TestEncryptionCertificateDoesNotAuthenticate(t *testing.T) {
	enc := peerPKIPair(t, "client_enc")
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.ClientAuth = RequireAndVerifyClientCert
	cliCfg.Certificates = []Certificate{enc}
	cerr, serr := handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertBadCertificate, true)
	wantAlert(t, serr, AlertBadCertificate, false)

	// Only requested, not verified: the key still may not authenticate.
	srvCfg.ClientAuth = RequireAnyClientCert
	cerr, serr = handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertBadCertificate, true)
	wantAlert(t, serr, AlertBadCertificate, false)
}

// TestServerEncryptionCertificateRefusedWithoutVerification: a client
// that skips chain verification (InsecureSkipVerify) still refuses a
// server that authenticates with its encryption certificate, as the TLCP
// client does: the key-usage check is about the key, not the issuer.
func TestServerEncryptionCertificateRefusedWithoutVerification(t *testing.T) {
	enc := peerPKIPair(t, "server_enc")
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.Certificates = []Certificate{enc}
	cliCfg.InsecureSkipVerify = true
	cerr, serr := handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertBadCertificate, false)
	wantAlert(t, serr, AlertBadCertificate, true)
}

// peerPKIPair loads NAME.crt and NAME.key of the Tongsuo-made PKI.
func peerPKIPair(t *testing.T, name string) Certificate {
	t.Helper()
	dir, err := transcript.PKIDir()
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBadBinder(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	echoRound(t, srvCfg, cliCfg)
	cachedSession(t, cliCfg).secret[0] ^= 0xff // the PSK no longer matches the ticket
	cerr, serr := handshakeErrs(t, srvCfg, cliCfg)
	wantAlert(t, cerr, AlertDecryptError, true)
	wantAlert(t, serr, AlertDecryptError, false)
}

// tamperConn flips a byte of the next write when armed.
type tamperConn struct {
	net.Conn
	armed atomic.Bool
	extra []byte
}

func (c *tamperConn) Write(b []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		if c.extra != nil {
			return c.Conn.Write(c.extra)
		}
		x := append([]byte(nil), b...)
		x[len(x)-1] ^= 0x40
		return c.Conn.Write(x)
	}
	return c.Conn.Write(b)
}

func TestTamperedAndOversizeRecords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []byte
		want  Alert
	}{
		{"tampered", nil, AlertBadRecordMAC},
		// The header alone: the server refuses the record on its length,
		// and a body it never reads would make its close a reset that
		// may reach the client before the alert is read.
		{"oversize", []byte{23, 3, 3, 0x41, 0x01}, AlertRecordOverflow},
		{"short", []byte{23, 3, 3, 0, 3, 1, 2, 3}, AlertBadRecordMAC},
		{"plaintext-handshake", []byte{22, 3, 3, 0, 1, 1}, AlertUnexpectedMessage},
		{"ccs-after-handshake", []byte{20, 3, 3, 0, 1, 1}, AlertUnexpectedMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srvCfg, cliCfg := testConfigs(t)
			addr, res := echoServer(t, srvCfg)
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			raw.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			tc2 := &tamperConn{Conn: raw, extra: tc.extra}
			c := Client(tc2, cliCfg)
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			tc2.armed.Store(true)
			c.Write([]byte("data"))
			_, err = c.Read(make([]byte, 10))
			wantAlert(t, err, tc.want, true)
			wantAlert(t, (<-res).err, tc.want, false)
			raw.Close()
		})
	}
}

func TestHandshakeContextDeadline(t *testing.T) {
	_, cliCfg := testConfigs(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(io.Discard, c) // never answers
			c.Close()
		}
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var got HandshakeResult
	cliCfg.OnHandshake = func(r HandshakeResult) { got = r }
	err = Client(raw, cliCfg).HandshakeContext(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if got.Reason != "timeout" {
		t.Fatalf("reason %q", got.Reason)
	}
}

func TestConcurrentConnections(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	l, err := Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(), cliCfg)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			msg := []byte(fmt.Sprintf("conn %d", i))
			c.Write(msg)
			buf := make([]byte, len(msg))
			if _, err := io.ReadFull(c, buf); err != nil || !bytes.Equal(buf, msg) {
				errs <- fmt.Errorf("echo %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestEarlyDataIgnored(t *testing.T) {
	for _, hrr := range []bool{false, true} {
		t.Run(fmt.Sprintf("hrr=%v", hrr), func(t *testing.T) {
			srvCfg, cliCfg := testConfigs(t)
			cliCfg.testEarlyData, cliCfg.testShareX25519 = true, hrr
			c, r := echoRound(t, srvCfg, cliCfg)
			if c.ConnectionState().HelloRetry != hrr {
				t.Fatal("HRR state")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
		})
	}
}

func TestServerInitiatedKeyUpdate(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	a, b := tcpPair(t)
	srv, cli := Server(a, srvCfg), Client(b, cliCfg)
	done := make(chan error, 1)
	var before, after [hashSize]byte
	go func() {
		if err := srv.Handshake(); err != nil {
			done <- err
			return
		}
		before = srv.in.secret
		for i := 0; i < 5; i++ {
			if err := srv.SendKeyUpdate(true); err != nil {
				done <- err
				return
			}
			if _, err := srv.Write([]byte{byte(i)}); err != nil {
				done <- err
				return
			}
			buf := make([]byte, 1)
			if _, err := io.ReadFull(srv, buf); err != nil || buf[0] != byte(i) {
				done <- fmt.Errorf("round %d: %v", i, err)
				return
			}
		}
		after = srv.in.secret
		done <- srv.Close()
	}()
	buf := make([]byte, 1)
	for i := 0; i < 5; i++ {
		if _, err := io.ReadFull(cli, buf); err != nil {
			t.Fatal(err)
		}
		cli.Write(buf)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if before == after {
		t.Fatal("client never answered update_requested")
	}
	if _, err := cli.Read(buf); err != io.EOF {
		t.Fatalf("after close_notify: %v", err)
	}
	cli.Close()
}

func TestTicketAgeMismatchFallsBackToFull(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	echoRound(t, srvCfg, cliCfg)
	cachedSession(t, cliCfg).ageAdd += 10 * 60 * 1000 // the client now claims a ticket age 10 minutes off
	if _, r := echoRound(t, srvCfg, cliCfg); r.err != nil || r.state.DidResume {
		t.Fatalf("resumed with a wrong ticket age (err %v)", r.err)
	}
	// The fresh ticket from that full handshake resumes again.
	if _, r := echoRound(t, srvCfg, cliCfg); r.err != nil || !r.state.DidResume {
		t.Fatalf("fresh ticket did not resume (err %v)", r.err)
	}
}

func TestPSKOnlyResumption(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	cliCfg.testPSKOnly, cliCfg.AllowPSKOnly = true, true
	// Without AllowPSKOnly on the server: no ticket for a psk_ke-only client,
	// so every handshake is full.
	for i := 0; i < 2; i++ {
		if _, r := echoRound(t, srvCfg, cliCfg); r.err != nil || r.state.DidResume {
			t.Fatalf("psk_ke accepted without AllowPSKOnly (err %v)", r.err)
		}
	}
	srvCfg.AllowPSKOnly = true
	for i := 0; i < 2; i++ {
		c, r := echoRound(t, srvCfg, cliCfg)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if i == 1 && (!r.state.DidResume || r.state.Group != 0 || c.ConnectionState().Group != 0) {
			t.Fatalf("want psk_ke resumption without key exchange: %+v", r.state)
		}
	}
}

// TestPSKOnlyResumptionWithoutHelloRetry: psk_ke needs no key share
// (RFC 8446 §4.2.9; §4.1.1: the server sends none), so a client offering
// only psk_ke, with a ticket and no share of the group the server prefers,
// resumes at once: the server asked for that share with a
// HelloRetryRequest first and then resumed without it (a round trip and a
// key generation for nothing). When the ticket does not resume, the
// handshake is full and the HelloRetryRequest asks for the share it needs;
// the ticket is judged once.
func TestPSKOnlyResumptionWithoutHelloRetry(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.AllowPSKOnly = true
	cliCfg.testPSKOnly, cliCfg.AllowPSKOnly = true, true
	cliCfg.testShareX25519 = true // curveSM2 preferred by the server
	log := new(ticketLog)
	srvCfg.OnTicket = log.add
	for i, want := range []struct {
		resumed, hrr bool
		events       string
	}{
		{false, true, "[issued]"},
		{true, false, "[accepted issued]"},
		{false, true, "[rejected:undecryptable issued]"}, // after new ticket keys
	} {
		if i == 2 {
			srvCfg.TicketKeys = ticket.Static(mustKeys(t, 3)[2:])
		}
		_, r := echoRound(t, srvCfg, cliCfg)
		if r.err != nil || r.state.DidResume != want.resumed || r.state.HelloRetry != want.hrr ||
			(want.resumed && r.state.Group != 0) || (!want.resumed && r.state.Group != CurveSM2) {
			t.Fatalf("conn %d: err %v, resumed %v HelloRetry %v group %#04x; want resumed %v HelloRetry %v",
				i+1, r.err, r.state.DidResume, r.state.HelloRetry, r.state.Group, want.resumed, want.hrr)
		}
		if got := fmt.Sprint(log.take()); got != want.events {
			t.Fatalf("conn %d: ticket events %s, want %s", i+1, got, want.events)
		}
	}
}

// fakeServer answers the first ClientHello with the given ServerHello body.
func fakeServer(t *testing.T, sh *serverHelloMsg) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer l.Close()
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		s := Server(c, &Config{})
		msg, err := s.readHandshakeBytes()
		if err != nil {
			return
		}
		var ch clientHelloMsg
		ch.unmarshal(msg)
		sh.sessionID = ch.sessionID
		raw, _ := sh.marshal()
		c.Write(rawRecord(recordTypeHandshake, raw))
		io.Copy(io.Discard, c)
	}()
	return l.Addr().String()
}

func TestClientDowngradeProtection(t *testing.T) {
	_, cliCfg := testConfigs(t)
	for _, tc := range []struct {
		name    string
		random  string
		version uint16 // in supported_versions (0: none)
		want    Alert
	}{
		{"tls12-sentinel", "0123456789abcdef01234567" + downgradeTLS12, 0, AlertIllegalParameter},
		{"tls11-sentinel", "0123456789abcdef01234567" + downgradeTLS11, 0, AlertIllegalParameter},
		{"tls12-plain", "0123456789abcdef0123456789abcdef", 0, AlertProtocolVersion},
		// §4.2.1: supported_versions holding a version prior to TLS 1.3,
		// or one the client did not offer, is illegal_parameter.
		{"supported-versions-tls12", "0123456789abcdef0123456789abcdef", 0x0303, AlertIllegalParameter},
		{"supported-versions-not-offered", "0123456789abcdef0123456789abcdef", 0x0305, AlertIllegalParameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := &serverHelloMsg{vers: 0x0303, random: []byte(tc.random), cipherSuite: TLS_SM4_GCM_SM3, supportedVersion: tc.version}
			_, err := dialTest(t, fakeServer(t, sh), cliCfg)
			wantAlert(t, err, tc.want, false)
		})
	}
	// A TLS 1.3 ServerHello choosing a suite that was not offered.
	sh := &serverHelloMsg{vers: 0x0303, random: make([]byte, 32), cipherSuite: 0x1301, supportedVersion: VersionTLS13,
		serverShare: keyShare{CurveSM2, make([]byte, 65)}}
	_, err := dialTest(t, fakeServer(t, sh), cliCfg)
	wantAlert(t, err, AlertIllegalParameter, false)
}

func TestHRRWithResumption(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	cliCfg.testShareX25519 = true // every ClientHello draws a HelloRetryRequest
	for i := 0; i < 2; i++ {
		_, r := echoRound(t, srvCfg, cliCfg)
		if r.err != nil || !r.state.HelloRetry || r.state.DidResume != (i == 1) {
			t.Fatalf("conn %d: err %v state %+v", i+1, r.err, r.state)
		}
	}
}

// TestKeyUpdateAtRecordLimit: a write key that has protected
// keyUpdateAfterRecords records is replaced with KeyUpdate before the next
// application-data record (RFC 8446 §5.5), in single-record writes, in a
// write of many records and in WriteLast's flight; the peer reads every
// byte, and no key of the writer ever protects more than the limit.
func TestKeyUpdateAtRecordLimit(t *testing.T) {
	defer func(n uint64) { keyUpdateAfterRecords = n }(keyUpdateAfterRecords)
	keyUpdateAfterRecords = 3
	srvCfg, cliCfg := testConfigs(t)
	a, b := tcpPair(t)
	srv, cli := Server(a, srvCfg), Client(b, cliCfg)
	big := bytes.Repeat([]byte("k"), 5*maxPlaintext+100) // 6 records in one Write
	var want bytes.Buffer
	type result struct {
		first, last trafficSecret
		maxSeq      uint64
		err         error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() { done <- r }()
		if r.err = srv.Handshake(); r.err != nil {
			return
		}
		r.first = srv.out.secret
		for i := 0; i < 10; i++ {
			if _, r.err = srv.Write([]byte{byte('a' + i)}); r.err != nil {
				return
			}
			r.maxSeq = max(r.maxSeq, srv.out.seq)
		}
		if _, r.err = srv.Write(big); r.err != nil {
			return
		}
		r.maxSeq = max(r.maxSeq, srv.out.seq)
		for i := 0; i < 4; i++ {
			if _, r.err = srv.Write([]byte{'x'}); r.err != nil {
				return
			}
		}
		_, r.err = srv.WriteLast([]byte("last"))
		r.maxSeq = max(r.maxSeq, srv.out.seq)
		r.last = srv.out.secret
	}()
	for i := 0; i < 10; i++ {
		want.WriteByte(byte('a' + i))
	}
	want.Write(big)
	want.WriteString("xxxxlast")
	got, err := io.ReadAll(cli)
	if err != nil {
		t.Fatalf("client read: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("client read %d bytes, want %d", len(got), want.Len())
	}
	if r.first == r.last {
		t.Fatal("the write key never changed")
	}
	// The KeyUpdate record itself is the key's last: at most limit+1.
	if r.maxSeq > keyUpdateAfterRecords+1 {
		t.Fatalf("a write key protected %d records, limit %d", r.maxSeq, keyUpdateAfterRecords)
	}
	if cli.in.secret != r.last {
		t.Fatal("the client did not follow the server's key updates")
	}
	srv.Close()
	cli.Close()
}
