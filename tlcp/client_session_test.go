package tlcp

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestTicketLifetimeHintBoundedByClient: the client's SessionLifetime bounds
// resumption; a server's NewSessionTicket lifetime_hint (any uint32, up to
// 136 years) may shorten it, not lengthen it (RFC 5077 §3.3: a hint). A
// client configured for 1 hour does not resume 30 days later a session
// whose ticket said 1 year.
func TestTicketLifetimeHintBoundedByClient(t *testing.T) {
	p := loadPKI(t)
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }

	scfg := p.serverConfig()
	scfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
	scfg.TicketKeys = ticket.NewRotator(24*365*time.Hour, 0)
	scfg.SessionLifetime = 365 * 24 * time.Hour // lifetime_hint = 31536000 s
	scfg.Time = now

	ccfg := p.clientConfig()
	ccfg.Certificates = nil
	ccfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
	ccfg.SessionLifetime = time.Hour // the client's own bound on resumption
	ccfg.Time = now

	r := runPair(t, scfg, ccfg, []byte("x"))
	if r.cerr != nil || r.serr != nil {
		t.Fatalf("full handshake: %v %v", r.cerr, r.serr)
	}
	// Control: within the hour the session resumes.
	if r := runPair(t, scfg, ccfg, []byte("x")); r.cerr != nil || !r.cs.DidResume {
		t.Fatalf("control resume: %v resumed=%v", r.cerr, r.cs.DidResume)
	}
	// 30 days later: far beyond the client's SessionLifetime.
	offset.Store(int64(30 * 24 * time.Hour))
	r = runPair(t, scfg, ccfg, []byte("x"))
	if r.cerr != nil || r.serr != nil {
		t.Fatalf("late handshake: %v %v", r.cerr, r.serr)
	}
	if r.cs.DidResume {
		t.Errorf("client resumed a session 30 days old although its SessionLifetime is %v: the server's lifetime_hint replaced the client's bound", ccfg.SessionLifetime)
	}
}

// TestClientTruncationIsUnexpectedEOF: a client whose server's stream ends
// without close_notify reads io.ErrUnexpectedEOF (a truncation: RFC 5246
// §7.2.1, RFC 9112 §9.8), after close_notify io.EOF.
func TestClientTruncationIsUnexpectedEOF(t *testing.T) {
	p := loadPKI(t)
	for _, notify := range []bool{true, false} {
		a, b := tcpPair(t)
		a.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		b.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		srv, cli := Server(a, p.serverConfig()), Client(b, p.clientConfig())
		go func() {
			if srv.Handshake() != nil {
				a.Close()
				return
			}
			srv.Write([]byte("part"))
			if notify {
				srv.Close()
			} else {
				a.(interface{ CloseWrite() error }).CloseWrite() // a FIN, no close_notify
			}
		}()
		got, err := io.ReadAll(cli)
		want := error(nil) // ReadAll's io.EOF
		if !notify {
			want = io.ErrUnexpectedEOF
		}
		if string(got) != "part" || err != want {
			t.Errorf("close_notify %v: read %q, %v; want \"part\", %v", notify, got, err, want)
		}
		cli.Close()
	}
}
