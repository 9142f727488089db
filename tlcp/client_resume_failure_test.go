package tlcp

import (
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestClientDropsSessionOfFailedResumption: a server whose resumed
// handshakes always fail (its Finished is wrong when it resumes, as a
// backend with broken resumption would do) while its full handshakes
// succeed. The client drops the session it offered when the handshake
// fails (RFC 5246 §7.2.2; crypto/tls does the same), so the next
// connection makes a full handshake; keeping it failed every connection
// to the server for as long as the session lasted.
func TestClientDropsSessionOfFailedResumption(t *testing.T) {
	for _, tickets := range []bool{true, false} {
		name := map[bool]string{true: "ticket", false: "session-id"}[tickets]
		t.Run(name, func(t *testing.T) {
			p := loadPKI(t)
			scfg, ccfg := p.serverConfig(), p.clientConfig()
			scfg.TicketKeys = ticket.Static{testTicketKey(t, 7)}
			scfg.SessionStore = NewLRUSessionStore(8, time.Hour)
			scfg.SessionTicketsDisabled = !tickets
			ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
			// Flip the server's Finished in handshakes without a
			// Certificate, the resumed ones.
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
				c1, c2 := tcpPair(t)
				deadline := time.Now().Add(testwait.Bound(10 * time.Second))
				c1.SetDeadline(deadline)
				c2.SetDeadline(deadline)
				cli, srv := Client(c1, ccfg), Server(c2, scfg)
				defer cli.Close()
				defer srv.Close()
				done := make(chan error, 1)
				go func() { done <- srv.Handshake() }()
				err = cli.Handshake()
				if err != nil {
					c1.Close()
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
		})
	}
}

// TestClientRefusesResumptionUnderAnotherSuite: a server that resumes the
// client's session but selects another suite than the session's (both
// offered) gets illegal_parameter (RFC 5246 §7.4.1.3: a resumed session
// keeps its cipher suite), rather than a handshake that fails later on
// mismatched keys or, worse, goes on under a suite the session was not
// made with.
func TestClientRefusesResumptionUnderAnotherSuite(t *testing.T) {
	p := loadPKI(t)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	scfg.SessionStore = NewLRUSessionStore(8, time.Hour)
	scfg.SessionTicketsDisabled = true
	scfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3}
	ccfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
	n := 0
	scfg.testHandshakeOut = func(m []byte) []byte {
		if m[0] == typeServerHello {
			if n++; n == 2 {
				m = append([]byte(nil), m...)
				m[helloSessionEnd(m)+1] = byte(ECC_SM4_CBC_SM3 & 0xff)
			}
		}
		return m
	}
	handshake := func() (resumed bool, suite uint16, cerr error) {
		c1, c2 := tcpPair(t)
		deadline := time.Now().Add(testwait.Bound(10 * time.Second))
		c1.SetDeadline(deadline)
		c2.SetDeadline(deadline)
		cli, srv := Client(c1, ccfg), Server(c2, scfg)
		defer cli.Close()
		defer srv.Close()
		done := make(chan error, 1)
		go func() { done <- srv.Handshake() }()
		cerr = cli.Handshake()
		if cerr != nil {
			c1.Close()
		}
		<-done
		st := cli.ConnectionState()
		return st.DidResume, st.CipherSuite, cerr
	}
	if resumed, suite, err := handshake(); err != nil || resumed || suite != ECC_SM4_GCM_SM3 {
		t.Fatalf("first handshake: resumed %v, suite %#04x, %v", resumed, suite, err)
	}
	_, _, err := handshake()
	if a, ok := alertOf(err); !ok || a != AlertIllegalParameter {
		t.Fatalf("resumption under another suite: client error %v, want illegal_parameter", err)
	}
}
