package tlcp

import (
	"bytes"
	"testing"
	"time"
)

// TestClientIgnoresHelloRequestDuringHandshake: GB/T 38636-2020 takes
// HelloRequest from TLS 1.1, where (as in TLS 1.2, RFC 5246 §7.4.1.1) the
// client ignores one that arrives while it is negotiating a session, and
// it is not part of the handshake's hash. A client that took one between
// the server's messages for an unexpected message failed a handshake any
// server may interrupt so. Now it is skipped wherever the client waits for
// a server message (before ChangeCipherSpec too), and not hashed; only a
// server that keeps asking (more than maxRenegotiationRefusals on the
// connection) is given up on, as after the handshake.
func TestClientIgnoresHelloRequestDuringHandshake(t *testing.T) {
	before := func(typ uint8, n int) func(m []byte) []byte {
		return func(m []byte) []byte {
			if m[0] != typ {
				return m
			}
			return append(bytes.Repeat(helloRequestMsg, n), m...)
		}
	}
	after := func(typ uint8) func(m []byte) []byte {
		return func(m []byte) []byte {
			if m[0] != typ {
				return m
			}
			return append(bytes.Clone(m), helloRequestMsg...)
		}
	}
	for _, tc := range []struct {
		name   string
		resume bool
		suite  uint16
		msgs   func(m []byte) []byte
		ok     bool
	}{
		{name: "before-certificate", msgs: before(typeCertificate, 1), ok: true},
		{name: "before-server-key-exchange", msgs: before(typeServerKeyExchange, 1), ok: true},
		{name: "before-certificate-request", suite: ECDHE_SM4_GCM_SM3, msgs: before(typeCertificateRequest, 1), ok: true},
		{name: "before-server-hello-done", msgs: before(typeServerHelloDone, 2), ok: true},
		{name: "before-finished", msgs: before(typeFinished, 1), ok: true},
		{name: "resumed-before-change-cipher-spec", resume: true, msgs: after(typeServerHello), ok: true},
		{name: "resumed-before-finished", resume: true, msgs: before(typeFinished, 1), ok: true},
		{name: "too-many", msgs: before(typeServerHelloDone, maxRenegotiationRefusals+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := loadPKI(t)
			scfg, ccfg := p.serverConfig(), p.clientConfig()
			if tc.suite != 0 {
				scfg.CipherSuites, ccfg.CipherSuites = []uint16{tc.suite}, []uint16{tc.suite}
				scfg.ClientAuth = RequireAndVerifyClientCert
			}
			if tc.resume {
				scfg.SessionStore = NewLRUSessionStore(4, time.Hour)
				scfg.SessionTicketsDisabled = true
				ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
				if r := runPair(t, scfg, ccfg, []byte("x")); r.cerr != nil || r.serr != nil {
					t.Fatalf("first handshake: client %v, server %v", r.cerr, r.serr)
				}
			}
			scfg.testHandshakeOut = tc.msgs
			r := runPair(t, scfg, ccfg, []byte("ping"))
			if !tc.ok {
				if a, ok := alertOf(r.cerr); !ok || a != AlertUnexpectedMessage {
					t.Fatalf("client %v; want unexpected_message", r.cerr)
				}
				return
			}
			if r.cerr != nil || r.serr != nil {
				t.Fatalf("client %v, server %v; want the HelloRequest ignored", r.cerr, r.serr)
			}
			if tc.resume && !r.client.didResume {
				t.Fatal("not resumed")
			}
		})
	}
}
