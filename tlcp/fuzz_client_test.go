package tlcp

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// fuzzClientNow is the deterministic client's clock: fixed for the process
// (the test PKI may be made at run time, so no constant date would do).
var fuzzClientNow = time.Now()

// deterministicClient is a client whose ClientHello, pre-master and key
// share depend on nothing but its configuration, so that a recorded server
// flight answers every run of it.
func deterministicClient(p *testPKI, suite uint16, mutual bool) *Config {
	c := p.clientConfig()
	c.CipherSuites = []uint16{suite}
	c.Rand = &detRand{}
	c.Time = func() time.Time { return fuzzClientNow }
	if !mutual {
		c.Certificates = nil
	}
	return c
}

// recordServerFlights runs one real handshake and returns every byte the
// client read from the server.
func recordServerFlights(t testing.TB, p *testPKI, ccfg *Config, mutual bool) []byte {
	c1, c2 := net.Pipe()
	rc := &testpeer.ReadRecorder{Conn: c1}
	scfg := p.serverConfig()
	scfg.CipherSuites = ccfg.CipherSuites
	if mutual {
		scfg.ClientAuth = RequireAndVerifyClientCert
	}
	cli, srv := Client(rc, ccfg), Server(c2, scfg)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cerr := cli.Handshake()
	c1.Close()
	serr := <-done
	c2.Close()
	if cerr != nil || serr != nil {
		t.Fatalf("recording handshake: client %v, server %v", cerr, serr)
	}
	return rc.Recorded()
}

// FuzzClientConn feeds arbitrary server bytes to our client (the proxy is a
// TLCP client towards its upstreams): no panic, no hang. The seeds are real
// server flights answering the deterministic client of each suite, so that
// mutations reach the plaintext Certificate, ServerKeyExchange,
// CertificateRequest and ServerHelloDone parsers and the key exchange.
func FuzzClientConn(f *testing.F) {
	p := loadPKI(f)
	type variant struct {
		suite  uint16
		mutual bool
	}
	variants := []variant{{ECC_SM4_GCM_SM3, false}, {ECC_SM4_CBC_SM3, true}, {ECDHE_SM4_GCM_SM3, true}, {ECDHE_SM4_CBC_SM3, true}}
	for i, v := range variants {
		f.Add(byte(i), recordServerFlights(f, p, deterministicClient(p, v.suite, v.mutual), v.mutual))
	}
	f.Add(byte(0), []byte{22, 1, 1, 0, 4, 2, 0, 0, 0})
	f.Add(byte(1), []byte{21, 1, 1, 0, 2, 2, 40})
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		v := variants[int(which)%len(variants)]
		rc := &lastWriteConn{replayConn: replayConn{in: append([]byte(nil), data...)}}
		// A replayed genuine flight (or one changed only in the
		// unauthenticated record headers) completes the handshake; anything
		// else fails with an alert or at the end of the input.
		if err := Client(rc, deterministicClient(p, v.suite, v.mutual)).Handshake(); err != nil {
			checkFuzzedHandshake(t, err, rc)
		}
	})
}

// lastWriteConn is a replayConn that keeps its last write, and whether
// that write was encrypted: made after a ChangeCipherSpec record.
type lastWriteConn struct {
	replayConn
	last          []byte
	lastEncrypted bool
	encrypting    bool
}

func (c *lastWriteConn) Write(b []byte) (int, error) {
	c.last = append(c.last[:0], b...)
	c.lastEncrypted = c.encrypting
	for rest := b; len(rest) >= recordHeaderLen; {
		if rest[0] == byte(recordTypeChangeCipherSpec) {
			c.encrypting = true
		}
		n := recordHeaderLen + (int(rest[3])<<8 | int(rest[4]))
		rest = rest[min(n, len(rest)):]
	}
	return len(b), nil
}

// checkFuzzedHandshake asserts how a handshake on fuzzed input failed:
// with an alert received, at the end of the input, or with an alert sent.
// An alert sent is the last record written: in plaintext, it is that
// alert; encrypted (after this side's ChangeCipherSpec), it is an alert
// record longer than the plaintext one.
func checkFuzzedHandshake(t *testing.T, err error, c *lastWriteConn) {
	t.Helper()
	if _, ok := peerAlertOf(err); ok || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return
	}
	a, ok := alertOf(err)
	if !ok {
		t.Fatalf("handshake failed without an alert: %v", err)
	}
	last := c.last
	if len(last) == 0 || last[0] != byte(recordTypeAlert) {
		return
	}
	if c.lastEncrypted {
		if len(last) <= recordHeaderLen+2 {
			t.Fatalf("handshake failed with %v after ChangeCipherSpec but the last record written is a plaintext alert %x", a, last)
		}
		return
	}
	if len(last) != recordHeaderLen+2 || Alert(last[6]) != a {
		t.Fatalf("handshake failed with %v but the last record written is %x", a, last)
	}
}

// TestRecordedServerFlightsComplete checks that FuzzClientConn's seeds are
// what they claim: replayed, they complete the deterministic client's
// handshake, so the fuzzer starts from inputs that reach every parser.
func TestRecordedServerFlightsComplete(t *testing.T) {
	p := loadPKI(t)
	for _, v := range []struct {
		suite  uint16
		mutual bool
	}{{ECC_SM4_GCM_SM3, false}, {ECDHE_SM4_CBC_SM3, true}} {
		flight := recordServerFlights(t, p, deterministicClient(p, v.suite, v.mutual), v.mutual)
		cli := Client(&replayConn{in: flight}, deterministicClient(p, v.suite, v.mutual))
		if err := cli.Handshake(); err != nil {
			t.Fatalf("suite %04x: replayed server flight: %v", v.suite, err)
		}
		// One flipped byte in the server's Certificate message must fail.
		bad := append([]byte(nil), flight...)
		bad[len(bad)/4] ^= 0x40
		if err := Client(&replayConn{in: bad}, deterministicClient(p, v.suite, v.mutual)).Handshake(); err == nil {
			t.Fatalf("suite %04x: damaged server flight accepted", v.suite)
		}
	}
}
