package tls13sm

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// fakeServerHello runs a client with ccfg against an in-process server
// that reads the ClientHello and answers with the ServerHello edit makes
// of an honest one (suite, session ID and a curveSM2 key share taken
// from the hello). It returns the client's handshake error and what the
// server read after its ServerHello (the client's alert, if any).
func fakeServerHello(t *testing.T, ccfg *Config, edit func(ch *clientHelloMsg, sh *serverHelloMsg)) (afterHello []byte, cerr error) {
	t.Helper()
	a, b := tcpPair(t)
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	done := make(chan []byte, 1)
	go func() {
		defer a.Close()
		ch, err := readPlainHandshake(a)
		if err != nil {
			done <- nil
			return
		}
		eph, err := gmecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			done <- nil
			return
		}
		sh := &serverHelloMsg{vers: 0x0303, random: make([]byte, 32), sessionID: ch.sessionID,
			cipherSuite: ch.cipherSuites[0], supportedVersion: VersionTLS13,
			serverShare: keyShare{group: CurveSM2, data: eph.PublicKey().Bytes()}}
		edit(ch, sh)
		raw, err := sh.marshal()
		if err != nil {
			done <- nil
			return
		}
		a.Write(append([]byte{recordTypeHandshake, 3, 3, byte(len(raw) >> 8), byte(len(raw))}, raw...))
		rest, _ := io.ReadAll(a)
		done <- rest
	}()
	cli := Client(b, ccfg)
	cerr = cli.Handshake()
	cli.Close()
	return <-done, cerr
}

// readPlainHandshake reads one plaintext handshake record holding a
// ClientHello.
func readPlainHandshake(c net.Conn) (*clientHelloMsg, error) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return nil, err
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	ch := new(clientHelloMsg)
	if !ch.unmarshal(body) {
		return nil, errors.New("malformed ClientHello")
	}
	return ch, nil
}

// TestClientRefusesSuiteItCannotRun: a client whose CipherSuites lists an
// ID this package does not implement (a TLS 1.3 AES suite, say) offers
// it; a server that picks it must get illegal_parameter, not a client
// that dereferences a nil suite.
func TestClientRefusesSuiteItCannotRun(t *testing.T) {
	_, ccfg := testConfigs(t)
	const aes128 = 0x1301 // TLS_AES_128_GCM_SHA256
	ccfg.CipherSuites = []uint16{aes128, TLS_SM4_GCM_SM3}
	after, cerr := fakeServerHello(t, ccfg, func(_ *clientHelloMsg, sh *serverHelloMsg) { sh.cipherSuite = aes128 })
	var ae *AlertError
	if !errors.As(cerr, &ae) || ae.Alert != AlertIllegalParameter {
		t.Fatalf("client: %v, want it to send illegal_parameter", cerr)
	}
	if len(after) < 7 || after[0] != recordTypeAlert || after[6] != byte(AlertIllegalParameter) {
		t.Fatalf("server read %x after its ServerHello, want an illegal_parameter alert", after)
	}
}

// TestClientDropsTicketOfFailedResumption: a server whose resumed
// handshakes always fail (its Finished is wrong when it accepts the PSK,
// as a backend with broken resumption would do) while its full
// handshakes succeed. The client drops the ticket it offered when the
// handshake fails (crypto/tls does the same, RFC 8446 §4.2.11 lets a
// server abort on a PSK), so the next connection makes a full handshake;
// keeping it failed every connection to the server for as long as the
// ticket lasted.
func TestClientDropsTicketOfFailedResumption(t *testing.T) {
	scfg, ccfg := testConfigs(t)
	// Flip the server's Finished in handshakes without a Certificate,
	// the resumed ones.
	var full bool
	scfg.testHandshakeOut = func(m []byte) []byte {
		switch m[0] {
		case typeServerHello:
			full = false
		case typeCertificate:
			full = true
		case typeFinished:
			if !full {
				m = append([]byte(nil), m...)
				m[len(m)-1] ^= 1
			}
		}
		return m
	}
	handshake := func() (resumed bool, err error) {
		a, b := tcpPair(t)
		deadline := time.Now().Add(testwait.Bound(10 * time.Second))
		a.SetDeadline(deadline)
		b.SetDeadline(deadline)
		srv, cli := Server(a, scfg), Client(b, ccfg)
		defer cli.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer srv.Close()
			if srv.Handshake() == nil {
				srv.Write([]byte{1}) // after the tickets
			}
		}()
		if err = cli.Handshake(); err == nil {
			_, err = cli.Read(make([]byte, 1))
		} else {
			b.Close()
		}
		<-done
		return cli.ConnectionState().DidResume, err
	}
	if resumed, err := handshake(); err != nil || resumed {
		t.Fatalf("first handshake: resumed %v, %v", resumed, err)
	}
	if _, err := handshake(); err == nil {
		t.Fatal("resumption with a wrong server Finished succeeded")
	}
	if resumed, err := handshake(); err != nil || resumed {
		t.Fatalf("after the failed resumption: resumed %v, %v; want a full handshake", resumed, err)
	}
}
