package tls13sm

import (
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// fuzzClientNow fixes the deterministic client's clock for the process.
var fuzzClientNow = time.Now()

// deterministicClient returns a client configuration whose ClientHello and
// key share depend only on the configuration (constant randomness, fixed
// clock, no session cache), so a recorded server flight answers every run.
func deterministicClient(t testing.TB, suite uint16, mutual bool) *Config {
	_, c := testConfigs(t)
	c.Rand = constReader(0x33)
	c.Time = func() time.Time { return fuzzClientNow }
	c.ClientSessionCache = nil
	c.CipherSuites = []uint16{suite}
	if !mutual {
		c.Certificates = nil
	}
	return c
}

// recordServerFlights runs one real handshake and returns what the client
// read from the server.
func recordServerFlights(t testing.TB, cli *Config, mutual bool) []byte {
	srvCfg, _ := testConfigs(t)
	if mutual {
		srvCfg.ClientAuth = RequireAndVerifyClientCert
	}
	a, b := net.Pipe()
	rc := &testpeer.ReadRecorder{Conn: b}
	done := make(chan error, 1)
	go func() { done <- Server(a, srvCfg).Handshake() }()
	cerr := Client(rc, cli).Handshake()
	b.Close()
	serr := <-done
	a.Close()
	if cerr != nil || serr != nil {
		t.Fatalf("recording handshake: client %v, server %v", cerr, serr)
	}
	return rc.Recorded()
}

// FuzzClientInput feeds arbitrary server bytes to our client (the proxy is
// a TLS 1.3-SM client towards its upstreams): it must finish or fail
// cleanly, never panic or hang. Seeds are genuine server flights for the
// deterministic client (GCM one-way, CCM mutual), which reach the
// ServerHello, HelloRetryRequest and record-protection paths.
func FuzzClientInput(f *testing.F) {
	type variant struct {
		suite  uint16
		mutual bool
	}
	variants := []variant{{TLS_SM4_GCM_SM3, false}, {TLS_SM4_CCM_SM3, true}}
	for i, v := range variants {
		f.Add(byte(i), recordServerFlights(f, deterministicClient(f, v.suite, v.mutual), v.mutual))
	}
	f.Add(byte(0), []byte{22, 3, 3, 0, 4, 2, 0, 0, 0})
	f.Add(byte(1), []byte{21, 3, 3, 0, 2, 2, 40})
	cfgs := make([]*Config, len(variants))
	for i, v := range variants {
		cfgs[i] = deterministicClient(f, v.suite, v.mutual)
	}
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		cfg := cfgs[int(which)%len(cfgs)]
		// A replayed genuine flight (or one changed only in the
		// unauthenticated record headers) completes the handshake; anything
		// else fails with an alert or at the end of the input.
		pc := &pipeConn{in: append([]byte(nil), data...)}
		if err := Client(pc, cfg).Handshake(); err != nil {
			checkFuzzedHandshake(t, err, pc.last)
		}
	})
}

// TestRecordedServerFlightsReplay checks FuzzClientInput's seeds: replayed,
// a genuine flight completes the deterministic client's handshake, and a
// damaged one does not.
func TestRecordedServerFlightsReplay(t *testing.T) {
	for _, suite := range []uint16{TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3} {
		flight := recordServerFlights(t, deterministicClient(t, suite, true), true)
		if err := Client(&pipeConn{in: flight}, deterministicClient(t, suite, true)).Handshake(); err != nil {
			t.Fatalf("suite %04x: replayed server flight: %v", suite, err)
		}
		bad := append([]byte(nil), flight...)
		bad[len(bad)/2] ^= 0x40
		if err := Client(&pipeConn{in: bad}, deterministicClient(t, suite, true)).Handshake(); err == nil {
			t.Fatalf("suite %04x: damaged server flight accepted", suite)
		}
	}
}
