package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/keyoffload"
)

// genCA makes a throwaway SM2 CA.
func genCA(t testing.TB, name string) (*smx509.Certificate, *sm2.PrivateKey) {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{
		SerialNumber:          big.NewInt(0x10203040),
		Subject:               pkixName(name),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign,
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// genPair issues a sign/enc pair for localhost with the given key usages.
func genPair(t testing.TB, ca *smx509.Certificate, caKey *sm2.PrivateKey, signKU, encKU smx509.KeyUsage) Certificate {
	t.Helper()
	issue := func(ku smx509.KeyUsage, serial int64) ([]byte, *sm2.PrivateKey) {
		key, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &smx509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkixName("localhost"),
			DNSNames:     []string{"localhost"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     ku,
			ExtKeyUsage:  []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth, smx509.ExtKeyUsageClientAuth},
		}
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	s, sk := issue(signKU, 0x11223344)
	e, ek := issue(encKU, 0x11223345)
	return Certificate{SignCertificate: [][]byte{s}, SignKey: sk, EncCertificate: e, EncKey: ek}
}

// alertOf returns the alert this side sent for err.
func alertOf(err error) (Alert, bool) {
	var ae *AlertError
	if errors.As(err, &ae) && !ae.Remote {
		return ae.Alert, true
	}
	return 0, false
}

// peerAlertOf returns the alert the peer sent for err.
func peerAlertOf(err error) (Alert, bool) {
	var ae *AlertError
	if errors.As(err, &ae) && ae.Remote {
		return ae.Alert, true
	}
	return 0, false
}

func handshakePair(t *testing.T, scfg, ccfg *Config) (cerr, serr error) {
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, ccfg), Server(c2, scfg)
	defer cli.Close()
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cerr = cli.Handshake()
	if cerr != nil {
		c1.Close()
	}
	serr = <-done
	return
}

func TestWrongCA(t *testing.T) {
	p := loadPKI(t)
	other, _ := genCA(t, "Other CA")
	pool := smx509.NewCertPool()
	pool.AddCert(other)
	ccfg := p.clientConfig()
	ccfg.RootCAs = pool
	cerr, serr := handshakePair(t, p.serverConfig(), ccfg)
	if a, ok := alertOf(cerr); !ok || a != AlertUnknownCA {
		t.Fatalf("client error %v, want unknown_ca", cerr)
	}
	if a, ok := peerAlertOf(serr); !ok || a != AlertUnknownCA {
		t.Fatalf("server error %v, want peer unknown_ca", serr)
	}
	// Client certificate from an unknown CA.
	scfg := p.serverConfig()
	scfg.ClientAuth = RequireAndVerifyClientCert
	scfg.ClientCAs = pool
	cerr, serr = handshakePair(t, scfg, p.clientConfig())
	if a, ok := alertOf(serr); !ok || a != AlertUnknownCA {
		t.Fatalf("server error %v, want unknown_ca", serr)
	}
	if a, ok := peerAlertOf(cerr); !ok || a != AlertUnknownCA {
		t.Fatalf("client error %v, want peer unknown_ca", cerr)
	}
}

// TestServerNameMismatch: a client refuses a server whose signing
// certificate does not name the host it asked for, and accepts it under
// the right name (the encryption certificate's names are checked too:
// TestServerEncCertOfAnotherEntity).
func TestServerNameMismatch(t *testing.T) {
	p := loadPKI(t)
	ccfg := p.clientConfig()
	ccfg.ServerName = "not-this-server.example"
	cerr, serr := handshakePair(t, p.serverConfig(), ccfg)
	if a, ok := alertOf(cerr); !ok || a != AlertBadCertificate {
		t.Fatalf("client error %v, want bad_certificate", cerr)
	}
	var he smx509.HostnameError
	if !errors.As(cerr, &he) {
		t.Errorf("client error %v does not say which name failed", cerr)
	}
	// The signing certificate is the one refused, before the encryption
	// certificate's own name check is reached.
	if !strings.Contains(cerr.Error(), "server signing certificate does not verify") {
		t.Errorf("client error %v, want the signing certificate refused", cerr)
	}
	if a, ok := peerAlertOf(serr); !ok || a != AlertBadCertificate {
		t.Fatalf("server error %v, want peer bad_certificate", serr)
	}
	if cerr, serr := handshakePair(t, p.serverConfig(), p.clientConfig()); cerr != nil || serr != nil {
		t.Fatalf("the right name: client %v, server %v", cerr, serr)
	}
}

// TestServerNameBounded: a server_name that can be no DNS host name (over
// 255 bytes, RFC 1035 §2.3.4, or holding a NUL byte) is refused with
// unrecognized_name, as Tongsuo's NTLS server refuses it
// (tls_parse_ctos_server_name_ntls) and RFC 6066 §3 allows. It was
// accepted up to the extension's 64 KiB, and kept for the connection's
// life (ConnectionState.ServerName, the front door's copy, the session).
func TestServerNameBounded(t *testing.T) {
	p := loadPKI(t)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), false},
		{strings.Repeat("a", 60000), false},
		{"local\x00host", false},
	} {
		ccfg := p.clientConfig()
		ccfg.ServerName, ccfg.InsecureSkipVerify = tc.name, true
		cerr, serr := handshakePair(t, p.serverConfig(), ccfg)
		if tc.ok {
			if cerr != nil || serr != nil {
				t.Errorf("server_name of %d bytes: client %v, server %v", len(tc.name), cerr, serr)
			}
			continue
		}
		if a, ok := alertOf(serr); !ok || a != AlertUnrecognizedName {
			t.Errorf("server_name %.20q (%d bytes): server error %v, want unrecognized_name", tc.name, len(tc.name), serr)
		}
		if a, ok := peerAlertOf(cerr); !ok || a != AlertUnrecognizedName {
			t.Errorf("server_name %.20q (%d bytes): client error %v, want peer unrecognized_name", tc.name, len(tc.name), cerr)
		}
	}
}

func TestWrongKeyUsage(t *testing.T) {
	ca, caKey := genCA(t, "Test CA")
	pool := smx509.NewCertPool()
	pool.AddCert(ca)
	good := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	badSign := genPair(t, ca, caKey, smx509.KeyUsageKeyEncipherment, smx509.KeyUsageKeyEncipherment)
	badEnc := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageDigitalSignature)
	if err := badSign.check(); err == nil {
		t.Fatal("X509KeyPair accepted a signing certificate without digitalSignature")
	}
	if err := badEnc.check(); err == nil {
		t.Fatal("X509KeyPair accepted an encryption certificate without keyEncipherment")
	}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	for name, cert := range map[string]Certificate{"sign": badSign, "enc": badEnc} {
		scfg := &Config{Certificates: []Certificate{cert}}
		ccfg := &Config{RootCAs: pool, ServerName: "localhost"}
		if name == "enc" {
			// ECDHE: the ECC suites' own encipherment check
			// (TestServerEncCertKeyUsageForECC) does not apply, the
			// key-exchange usage check alone refuses it.
			scfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
			ccfg.CipherSuites, ccfg.Certificates = []uint16{ECDHE_SM4_GCM_SM3}, []Certificate{good}
		}
		cerr, serr := handshakePair(t, scfg, ccfg)
		if a, ok := alertOf(cerr); !ok || a != AlertBadCertificate {
			t.Fatalf("%s: client error %v, want bad_certificate", name, cerr)
		}
		if a, ok := peerAlertOf(serr); !ok || a != AlertBadCertificate {
			t.Fatalf("%s: server error %v", name, serr)
		}
	}
	// A client signing certificate without digitalSignature.
	scfg := &Config{Certificates: []Certificate{good}, ClientAuth: RequireAndVerifyClientCert, ClientCAs: pool}
	ccfg := &Config{RootCAs: pool, ServerName: "localhost", Certificates: []Certificate{badSign}}
	cerr, serr := handshakePair(t, scfg, ccfg)
	if a, ok := alertOf(serr); !ok || a != AlertBadCertificate {
		t.Fatalf("server error %v, want bad_certificate", serr)
	}
	if _, ok := peerAlertOf(cerr); !ok {
		t.Fatalf("client error %v", cerr)
	}
	// Under ECDHE, a client encryption certificate without a key-exchange
	// usage (its key agreement is what the server uses it for).
	scfg = &Config{Certificates: []Certificate{good}, ClientAuth: RequireAndVerifyClientCert, ClientCAs: pool, CipherSuites: []uint16{ECDHE_SM4_GCM_SM3}}
	ccfg = &Config{RootCAs: pool, ServerName: "localhost", Certificates: []Certificate{badEnc}, CipherSuites: []uint16{ECDHE_SM4_GCM_SM3}}
	cerr, serr = handshakePair(t, scfg, ccfg)
	if a, ok := alertOf(serr); !ok || a != AlertBadCertificate {
		t.Fatalf("ECDHE client encryption certificate without key usage: server error %v, want bad_certificate", serr)
	}
	if a, ok := peerAlertOf(cerr); !ok || a != AlertBadCertificate {
		t.Fatalf("client error %v, want bad_certificate from the server", cerr)
	}
}

// A server that must verify client certificates but has no ClientCAs to
// verify them against refuses them rather than take any certificate.
func TestClientAuthWithoutClientCAs(t *testing.T) {
	p := loadPKI(t)
	scfg := p.serverConfig()
	scfg.ClientAuth, scfg.ClientCAs = RequireAndVerifyClientCert, nil
	cerr, serr := handshakePair(t, scfg, p.clientConfig())
	if a, ok := alertOf(serr); !ok || a != AlertUnknownCA {
		t.Fatalf("server error %v, want unknown_ca", serr)
	}
	if a, ok := peerAlertOf(cerr); !ok || a != AlertUnknownCA {
		t.Fatalf("client error %v, want unknown_ca from the server", cerr)
	}
}

func TestECDHERequiresClientCert(t *testing.T) {
	p := loadPKI(t)
	scfg := p.serverConfig()
	scfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
	ccfg := p.clientConfig()
	ccfg.Certificates = nil
	cerr, serr := handshakePair(t, scfg, ccfg)
	if cerr == nil || serr == nil {
		t.Fatalf("ECDHE without client certificates succeeded: %v %v", cerr, serr)
	}
	if a, ok := alertOf(cerr); !ok || a != AlertHandshakeFailure {
		t.Fatalf("client error %v, want handshake_failure", cerr)
	}
}

func TestNoSharedSuite(t *testing.T) {
	p := loadPKI(t)
	scfg := p.serverConfig()
	scfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
	ccfg := p.clientConfig()
	ccfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
	var res HandshakeResult
	scfg.OnHandshake = func(r HandshakeResult) { res = r }
	_, serr := handshakePair(t, scfg, ccfg)
	if a, ok := alertOf(serr); !ok || a != AlertHandshakeFailure {
		t.Fatalf("server error %v", serr)
	}
	if res.Reason != "no_shared_cipher" || res.Err == nil || res.Alert != AlertHandshakeFailure {
		t.Fatalf("OnHandshake result %+v", res)
	}
}

// flipConn flips one bit of the first write after armed is set.
type flipConn struct {
	net.Conn
	armed bool
}

func (f *flipConn) Write(b []byte) (int, error) {
	if f.armed {
		f.armed = false
		c := append([]byte(nil), b...)
		c[len(c)-1] ^= 0x80
		return f.Conn.Write(c)
	}
	return f.Conn.Write(b)
}

func TestTamperedRecord(t *testing.T) {
	p := loadPKI(t)
	for _, suite := range defaultCipherSuites {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			c1, c2 := tcpPair(t)
			fc := &flipConn{Conn: c1}
			scfg := p.serverConfig()
			scfg.CipherSuites = []uint16{suite}
			cli, srv := Client(fc, p.clientConfig()), Server(c2, scfg)
			defer cli.Close()
			defer srv.Close()
			errc := make(chan error, 1)
			go func() {
				buf := make([]byte, 10)
				_, err := srv.Read(buf)
				errc <- err
			}()
			if err := cli.Handshake(); err != nil {
				t.Fatal(err)
			}
			fc.armed = true
			cli.Write([]byte("hello, tampered world"))
			serr := <-errc
			if a, ok := alertOf(serr); !ok || a != AlertBadRecordMAC {
				t.Fatalf("server error %v, want bad_record_mac", serr)
			}
			_, cerr := cli.Read(make([]byte, 1))
			if a, ok := peerAlertOf(cerr); !ok || a != AlertBadRecordMAC {
				t.Fatalf("client got %v, want peer bad_record_mac", cerr)
			}
		})
	}
}

// rawAlert reads records from a raw connection until an alert arrives
// (plaintext only, before the handshake keys are in use).
func rawAlert(t *testing.T, c net.Conn) (level, desc byte) {
	t.Helper()
	for i := 0; i < 20; i++ {
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c, hdr); err != nil {
			t.Fatalf("reading alert: %v", err)
		}
		body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		if hdr[0] == byte(recordTypeAlert) && len(body) == 2 {
			return body[0], body[1]
		}
	}
	t.Fatal("no alert")
	return
}

func TestMalformedClientHello(t *testing.T) {
	p := loadPKI(t)
	hello := &clientHelloMsg{vers: VersionTLCP, random: make([]byte, 32), cipherSuites: []uint16{ECC_SM4_GCM_SM3}, compressionMethods: []byte{0}}
	good, _ := hello.marshal()
	cases := []struct {
		name   string
		record []byte
		alert  Alert
	}{
		{"truncated body", rawRecord(recordTypeHandshake, VersionTLCP, truncateHello(good)), AlertDecodeError},
		{"bad version", rawRecord(recordTypeHandshake, VersionTLCP, withVersion(good, 0x0300)), AlertProtocolVersion},
		{"record version", rawRecord(recordTypeHandshake, 0x0303, good), AlertProtocolVersion},
		{"oversize record", append([]byte{22, 1, 1, 0x40, 0x01}, make([]byte, 0x4001)...), AlertRecordOverflow},
		{"unknown type", rawRecord(99, VersionTLCP, good), AlertUnexpectedMessage},
		{"app data first", rawRecord(recordTypeApplicationData, VersionTLCP, []byte("x")), AlertUnexpectedMessage},
		{"no shared suite", rawRecord(recordTypeHandshake, VersionTLCP, withSuite(good, 0x002f)), AlertHandshakeFailure},
		{"huge handshake", rawRecord(recordTypeHandshake, VersionTLCP, []byte{1, 1, 0, 1}), AlertIllegalParameter},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c1, c2 := tcpPair(t)
			srv := Server(c2, p.serverConfig())
			errc := make(chan error, 1)
			go func() { errc <- srv.Handshake(); srv.Close() }()
			c1.Write(tc.record)
			level, desc := rawAlert(t, c1)
			c1.Close()
			err := <-errc
			if level != record.AlertLevelFatal || Alert(desc) != tc.alert {
				t.Fatalf("alert %d/%d, want fatal %v (err %v)", level, desc, tc.alert, err)
			}
			if a, ok := alertOf(err); !ok || a != tc.alert {
				t.Fatalf("server error %v", err)
			}
		})
	}
}

func rawRecord(typ recordType, vers uint16, body []byte) []byte {
	return append([]byte{byte(typ), byte(vers >> 8), byte(vers), byte(len(body) >> 8), byte(len(body))}, body...)
}

// truncateHello cuts the cipher suite vector short while keeping lengths of
// the outer message consistent.
func truncateHello(m []byte) []byte {
	b := append([]byte(nil), m[:4+2+32+1+2]...)
	b[4+2+32+1+1] = 0x20 // claims 32 bytes of suites
	b = append(b, 0xe0, 0x53)
	n := len(b) - 4
	b[1], b[2], b[3] = byte(n>>16), byte(n>>8), byte(n)
	return b
}

func withVersion(m []byte, v uint16) []byte {
	b := append([]byte(nil), m...)
	b[4], b[5] = byte(v>>8), byte(v)
	return b
}

func withSuite(m []byte, s uint16) []byte {
	b := append([]byte(nil), m...)
	off := 4 + 2 + 32 + 1 + 2
	b[off], b[off+1] = byte(s>>8), byte(s)
	return b
}

// handshakeWhileServerReads handshakes a client and a server with the
// test PKI's default configs over a loopback pair, the server inside a Read
// whose error errc carries; raw is the client's TCP connection, for bytes
// written under the record layer. The caller closes cli and srv.
func handshakeWhileServerReads(t *testing.T, p *testPKI) (raw net.Conn, cli, srv *Conn, errc chan error) {
	t.Helper()
	c1, c2 := tcpPair(t)
	cli, srv = Client(c1, p.clientConfig()), Server(c2, p.serverConfig())
	errc = make(chan error, 1)
	go serverRead(srv, errc)
	if err := cli.Handshake(); err != nil {
		cli.Close()
		srv.Close()
		t.Fatal(err)
	}
	return c1, cli, srv, errc
}

// serverRead sends the error of one Read on srv to errc.
func serverRead(srv *Conn, errc chan<- error) {
	_, err := srv.Read(make([]byte, 10))
	errc <- err
}

// TestRenegotiationRefused: a ClientHello after the handshake gets a
// no_renegotiation warning and the connection goes on (the data sent after
// it still arrives), up to maxRenegotiationRefusals times; one more attempt
// is fatal.
func TestRenegotiationRefused(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, p.clientConfig()), Server(c2, p.serverConfig())
	defer cli.Close()
	defer srv.Close()
	type result struct {
		data string
		err  error
	}
	reads := make(chan result, 8)
	go func() {
		for {
			b := make([]byte, 16)
			n, err := srv.Read(b)
			reads <- result{string(b[:n]), err}
			if err != nil {
				return
			}
		}
	}()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	hello := &clientHelloMsg{vers: VersionTLCP, random: make([]byte, 32), cipherSuites: []uint16{ECC_SM4_GCM_SM3}, compressionMethods: []byte{0}}
	b, _ := hello.marshal()
	renegotiate := func() {
		cli.outMu.Lock()
		err := cli.writeRecordLocked(recordTypeHandshake, b)
		cli.outMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The client side reads the raw records: our client reports a
	// no_renegotiation warning as an error, having never renegotiated.
	for i := 1; i <= maxRenegotiationRefusals; i++ {
		renegotiate()
		msg := fmt.Sprintf("after %d", i)
		if _, err := cli.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if r := <-reads; r.err != nil || r.data != msg {
			t.Fatalf("attempt %d: server read %q, %v; want %q", i, r.data, r.err, msg)
		}
		typ, payload := readRawRecord(t, cli)
		if typ != recordTypeAlert || len(payload) != 2 || payload[0] != record.AlertLevelWarning || Alert(payload[1]) != AlertNoRenegotiation {
			t.Fatalf("attempt %d: server sent record type %d %x, want a no_renegotiation warning", i, typ, payload)
		}
	}
	renegotiate()
	if r := <-reads; r.err == nil {
		t.Fatalf("attempt %d accepted: read %q", maxRenegotiationRefusals+1, r.data)
	} else if a, ok := alertOf(r.err); !ok || a != AlertUnexpectedMessage {
		t.Fatalf("attempt %d: server error %v, want unexpected_message", maxRenegotiationRefusals+1, r.err)
	}
}

// TestRefusedRenegotiationKeepsNoBuffer: once a ClientHello after the
// handshake is refused, the connection keeps none of the array it was
// gathered in. A leftover empty slice of it pinned the whole array (up to
// 64 KiB a connection, for a ClientHello of that size) for as long as the
// connection lived, while the client went on with cheap requests.
func TestRefusedRenegotiationKeepsNoBuffer(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, p.clientConfig()), Server(c2, p.serverConfig())
	defer cli.Close()
	defer srv.Close()
	reads := make(chan error, 1)
	got := make([]byte, 16)
	go func() {
		n, err := srv.Read(got)
		if err == nil && string(got[:n]) != "after" {
			err = fmt.Errorf("read %q", got[:n])
		}
		reads <- err
	}()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	// A ClientHello of some 60 KB (an unknown extension pads it), over
	// four records.
	hello := &clientHelloMsg{vers: VersionTLCP, random: make([]byte, 32), cipherSuites: []uint16{ECC_SM4_GCM_SM3}, compressionMethods: []byte{0}}
	b, _ := hello.marshal()
	pad := 60000
	b = append(b, 0, 0, 0, 0, byte(pad>>8), byte(pad)) // extensions block: one extension 0 of pad bytes
	b = append(b, make([]byte, pad)...)
	ext := 4 + pad
	b[len(b)-pad-6], b[len(b)-pad-5] = byte(ext>>8), byte(ext)
	b[len(b)-pad-4], b[len(b)-pad-3] = 0xfe, 0xfe
	n := len(b) - 4
	b[1], b[2], b[3] = byte(n>>16), byte(n>>8), byte(n)
	cli.outMu.Lock()
	err := cli.writeRecordLocked(recordTypeHandshake, b)
	cli.outMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := <-reads; err != nil {
		t.Fatalf("server Read after the refused ClientHello: %v", err)
	}
	srv.core.InMu.Lock()
	hand := srv.core.Hand
	srv.core.InMu.Unlock()
	if cap(hand) != 0 {
		t.Fatalf("after the refusal the connection still holds a slice (cap %d) of the array its ClientHello was gathered in", cap(hand))
	}
}

// readRawRecord reads one record on c's read side and decrypts it.
func readRawRecord(t *testing.T, c *Conn) (recordType, []byte) {
	t.Helper()
	c.core.InMu.Lock()
	defer c.core.InMu.Unlock()
	c.core.Raw.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	defer c.core.Raw.SetReadDeadline(time.Time{})
	var hdr [recordHeaderLen]byte
	if _, err := io.ReadFull(c.core.Raw, hdr[:]); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, recordHeaderLen+int(hdr[3])<<8|int(hdr[4]))
	copy(rec, hdr[:])
	if _, err := io.ReadFull(c.core.Raw, rec[recordHeaderLen:]); err != nil {
		t.Fatal(err)
	}
	data, err := c.in.decrypt(rec)
	if err != nil {
		t.Fatal(err)
	}
	return recordType(hdr[0]), append([]byte(nil), data...)
}

func TestOversizeEncryptedRecord(t *testing.T) {
	p := loadPKI(t)
	for _, n := range []int{maxCiphertext + 1, maxPlaintext + 1} {
		c1, cli, srv, errc := handshakeWhileServerReads(t, p)
		if n == maxCiphertext+1 {
			// Header only: the length alone is fatal.
			c1.Write([]byte{23, 1, 1, byte(n >> 8), byte(n)})
		} else {
			// A correctly protected record whose plaintext is 2^14+1.
			cli.outMu.Lock()
			buf, _, _ := cli.out.appendRecords(nil, recordTypeApplicationData, make([]byte, n), maxPlaintext+1, rand.Reader)
			cli.outMu.Unlock()
			c1.Write(buf)
		}
		serr := <-errc
		if a, ok := alertOf(serr); !ok || a != AlertRecordOverflow {
			t.Fatalf("n=%d: server error %v, want record_overflow", n, serr)
		}
		cli.Close()
		srv.Close()
	}
}

func TestEmptyRecordsBounded(t *testing.T) {
	_, cli, srv, errc := handshakeWhileServerReads(t, loadPKI(t))
	defer cli.Close()
	defer srv.Close()
	// A few empty records (Tongsuo sends one per write) then data is fine…
	cli.outMu.Lock()
	for i := 0; i < 3; i++ {
		cli.writeRecordLocked(recordTypeApplicationData, nil)
	}
	cli.writeRecordLocked(recordTypeApplicationData, []byte("ok"))
	cli.outMu.Unlock()
	if err := <-errc; err != nil {
		t.Fatalf("empty records rejected: %v", err)
	}
	// …but an endless run is not.
	go serverRead(srv, errc)
	cli.outMu.Lock()
	for i := 0; i < defaultMaxEmpty+2; i++ {
		if cli.writeRecordLocked(recordTypeApplicationData, nil) != nil {
			break
		}
	}
	cli.outMu.Unlock()
	if a, ok := alertOf(<-errc); !ok || a != AlertUnexpectedMessage {
		t.Fatal("unbounded empty records accepted")
	}
}

func pkixName(cn string) pkix.Name {
	return pkix.Name{Country: []string{"CN"}, Organization: []string{"gmproxy test"}, CommonName: cn}
}

// TestECCPreMasterNoOracle: a bad pre-master version or an undecryptable
// ClientKeyExchange does not fail at once; a random pre-master is used and
// the handshake fails at Finished.
func TestECCPreMasterNoOracle(t *testing.T) {
	p := loadPKI(t)
	ka := &serverKeyAgreement{suite: cipherSuiteByID(ECC_SM4_CBC_SM3), cert: &p.server}
	encPub := p.server.EncLeaf.PublicKey.(*ecdsa.PublicKey)
	good := append([]byte{1, 1}, make([]byte, 46)...)
	badVers := append([]byte{3, 3}, make([]byte, 46)...)
	for name, pm := range map[string][]byte{"good": good, "bad version": badVers, "short": good[:40]} {
		ct, err := sm2.EncryptASN1(rand.Reader, encPub, pm)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ka.processClientKeyExchange(context.Background(), rand.Reader, u16Vector(ct), nil)
		if err != nil || len(got) != 48 {
			t.Fatalf("%s: %v, %d bytes", name, err, len(got))
		}
		if name == "good" != bytes.Equal(got, pm) {
			t.Fatalf("%s: pre-master used = %v", name, bytes.Equal(got, pm))
		}
	}
	// Garbage that is not an SM2 ciphertext.
	got, err := ka.processClientKeyExchange(context.Background(), rand.Reader, u16Vector(bytes.Repeat([]byte{0x30}, 150)), nil)
	if err != nil || len(got) != 48 {
		t.Fatalf("garbage: %v", err)
	}
}

// failingDecrypter is an encryption key whose decryptions fail with err.
type failingDecrypter struct {
	crypto.Signer
	err error
}

func (k failingDecrypter) Decrypt(io.Reader, []byte, crypto.DecrypterOpts) ([]byte, error) {
	return nil, k.err
}

// TestECCDecryptKeyUnavailable: an ECC ClientKeyExchange whose
// decryption fails because the key cannot be used (smkey.ErrKeyUnavailable:
// a remote key server down) fails the handshake with internal_error; any
// other decryption failure, which may say something of the ciphertext,
// goes on with a random pre-master and fails at Finished.
func TestECCDecryptKeyUnavailable(t *testing.T) {
	p := loadPKI(t)
	for _, tc := range []struct {
		name     string
		err      error
		internal bool
	}{
		{"key unavailable", fmt.Errorf("%w: key server down", smkey.ErrKeyUnavailable), true},
		{"decryption failed", errors.New("sm2: decryption error"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := p.server
			cert.EncKey = failingDecrypter{Signer: p.server.EncKey.(crypto.Signer), err: tc.err}
			scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{ECC_SM4_GCM_SM3}}
			cerr, serr := handshakePair(t, scfg, p.clientConfig())
			var ae *AlertError
			internal := errors.As(serr, &ae) && !ae.Remote && ae.Alert == AlertInternalError
			if serr == nil || internal != tc.internal {
				t.Errorf("server error %v (client %v): internal_error %v, want %v", serr, cerr, internal, tc.internal)
			}
		})
	}
}

// TestECCDecryptEngineClosed: an encryption key behind a private-key
// engine that refuses the decryption (here closed; a full queue is the same
// refusal) fails the ECC handshake with internal_error, as a key server
// down does, not at the client's Finished with decrypt_error.
func TestECCDecryptEngineClosed(t *testing.T) {
	p := loadPKI(t)
	o := keyoffload.New(keyoffload.Config{Workers: 1, Queue: 1}, nil)
	cert := p.server
	cert.EncKey = o.Wrap(p.server.EncKey.(crypto.Signer), "tlcp")
	o.Close()
	scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{ECC_SM4_GCM_SM3}}
	cerr, serr := handshakePair(t, scfg, p.clientConfig())
	var se, ce *AlertError
	if !errors.As(serr, &se) || se.Remote || se.Alert != AlertInternalError {
		t.Errorf("server error %v, want internal_error sent", serr)
	}
	if !errors.As(cerr, &ce) || !ce.Remote || ce.Alert != AlertInternalError {
		t.Errorf("client error %v, want internal_error received", cerr)
	}
}

// failingKA is an encryption key whose SM2 key agreement fails as a key
// server that is down, or a private-key engine that is full, fails it.
type failingKA struct {
	smkey.KeyAgreement
	err error
}

func (k failingKA) SM2KeyAgree(context.Context, *ecdh.PrivateKey, *ecdh.PublicKey, *ecdh.PublicKey, bool, int, []byte, []byte) ([]byte, error) {
	return nil, k.err
}

// TestECDHEKeyAgreementUnavailable: the server's SM2 key agreement runs on
// points it has already checked (on the curve, not infinity), so when it
// fails the fault is the server's (its key server down, its private-key
// queue full): internal_error, as for a signature that fails, not
// handshake_failure, which would tell the client and the alert metrics
// that the two sides had nothing in common.
func TestECDHEKeyAgreementUnavailable(t *testing.T) {
	p := loadPKI(t)
	cert := p.server
	cert.EncKey = failingKA{KeyAgreement: smkey.AsKeyAgreement(p.server.EncKey), err: fmt.Errorf("%w: key server down", smkey.ErrKeyUnavailable)}
	scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{ECDHE_SM4_GCM_SM3}}
	cerr, serr := handshakePair(t, scfg, p.clientConfig())
	var se, ce *AlertError
	if !errors.As(serr, &se) || se.Remote || se.Alert != AlertInternalError {
		t.Errorf("server error %v, want internal_error sent", serr)
	}
	if !errors.As(cerr, &ce) || !ce.Remote || ce.Alert != AlertInternalError {
		t.Errorf("client error %v, want internal_error received", cerr)
	}
}
