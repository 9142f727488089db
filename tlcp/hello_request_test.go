package tlcp

import (
	"bytes"
	"encoding/binary"
	"net"
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

// helloRequestBeforeCCS is a server's connection that writes a
// HelloRequest in a plaintext record of its own before the first
// ChangeCipherSpec record it writes.
type helloRequestBeforeCCS struct {
	net.Conn
	done bool
}

func (c *helloRequestBeforeCCS) Write(b []byte) (int, error) {
	if c.done {
		return c.Conn.Write(b)
	}
	for i := 0; i+recordHeaderLen <= len(b); i += recordHeaderLen + int(binary.BigEndian.Uint16(b[i+3:])) {
		if b[i] == byte(recordTypeChangeCipherSpec) {
			c.done = true
			out := append(bytes.Clone(b[:i]), rawRecord(recordTypeHandshake, VersionTLCP, helloRequestMsg)...)
			if _, err := c.Conn.Write(append(out, b[i:]...)); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

// TestClientIgnoresHelloRequestRecordBeforeCCS: a HelloRequest in a
// record of its own right before the server's ChangeCipherSpec is ignored
// as one in the record of the message before it
// (TestClientIgnoresHelloRequestDuringHandshake).
func TestClientIgnoresHelloRequestRecordBeforeCCS(t *testing.T) {
	for _, resume := range []bool{false, true} {
		p := loadPKI(t)
		scfg, ccfg := p.serverConfig(), p.clientConfig()
		scfg.SessionStore = NewLRUSessionStore(4, time.Hour)
		scfg.SessionTicketsDisabled = true
		ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
		if resume {
			if r := runPair(t, scfg, ccfg, []byte("x")); r.cerr != nil || r.serr != nil {
				t.Fatalf("first handshake: client %v, server %v", r.cerr, r.serr)
			}
		}
		c1, c2 := tcpPair(t)
		hr := &helloRequestBeforeCCS{Conn: c2}
		cli, srv := Client(c1, ccfg), Server(hr, scfg)
		done := make(chan error, 1)
		go func() { done <- srv.Handshake() }()
		cerr := cli.Handshake()
		if cerr != nil {
			c1.Close()
		}
		serr := <-done
		cli.Close()
		srv.Close()
		if !hr.done {
			t.Fatalf("resume %v: no HelloRequest sent", resume)
		}
		if cerr != nil || serr != nil {
			t.Fatalf("resume %v: client %v, server %v; want the HelloRequest ignored", resume, cerr, serr)
		}
		if cli.didResume != resume {
			t.Fatalf("resumed %v, want %v", cli.didResume, resume)
		}
	}
}
