package tlcp

import (
	"crypto/rand"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"net"
	"testing"
	"time"
)

// TestFatalAlertInvalidatesSessionID: a TLCP connection resumed from a
// session ID ends with a fatal alert (the server gets a record that does
// not authenticate and sends bad_record_mac); the session is then not
// resumed again. RFC 5246 §7.2 ("the session identifier MUST be
// invalidated, preventing the failed session from being used to establish
// new connections") and §7.2.2, rules GB/T 38636-2020's alert protocol
// takes over from TLS 1.1 (RFC 4346 §7.2); Tongsuo removes the session
// from its cache when it sends or receives a fatal alert.
func TestFatalAlertInvalidatesSessionID(t *testing.T) {
	// The server sends the alert: a forged record.
	t.Run("sent", func(t *testing.T) {
		fatalAlertThenResume(t, func(cli *Conn, raw net.Conn) {
			forged := make([]byte, 5+64)
			copy(forged, []byte{23, 1, 1, 0, 64})
			rand.Read(forged[5:])
			if _, err := raw.Write(forged); err != nil {
				t.Fatal(err)
			}
		})
	})
	// The server receives it: the client gives up the connection.
	t.Run("received", func(t *testing.T) {
		fatalAlertThenResume(t, func(cli *Conn, _ net.Conn) {
			if err := cli.sendAlert(AlertInternalError); err == nil {
				t.Fatal("no error after a fatal alert")
			}
		})
	})
}

// fatalAlertThenResume resumes a session by its ID, ends that connection
// with the fatal alert fail makes happen, and checks that the next
// connection is a full handshake.
func fatalAlertThenResume(t *testing.T, fail func(cli *Conn, raw net.Conn)) {
	p := loadPKI(t)
	scfg := p.serverConfig()
	scfg.SessionStore = NewLRUSessionStore(10, time.Hour)
	scfg.SessionTicketsDisabled = true
	ccfg := p.clientConfig()
	ccfg.SessionTicketsDisabled = true
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	if r := runPair(t, scfg, ccfg, []byte("a")); r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("full handshake: %v %v resumed %v", r.cerr, r.serr, r.ss.DidResume)
	}

	// Resume, then end the connection with a fatal alert.
	c1, c2 := tcpPair(t)
	c1.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	c2.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	cli, srv := Client(c1, ccfg), Server(c2, scfg)
	errc := make(chan error, 1)
	go func() {
		if err := srv.Handshake(); err != nil {
			errc <- err
			return
		}
		_, err := srv.Read(make([]byte, 64))
		errc <- err
	}()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if !cli.ConnectionState().DidResume {
		t.Fatal("second connection did not resume")
	}
	fail(cli, c1)
	err := <-errc
	if err == nil {
		t.Fatal("the server's read ended without an error")
	}
	t.Logf("server: %v", err)
	cli.Close()
	srv.Close()

	r := runPair(t, scfg, ccfg, []byte("a"))
	if r.cerr != nil || r.serr != nil {
		t.Fatalf("third connection: %v %v", r.cerr, r.serr)
	}
	if r.ss.DidResume {
		t.Error("the session of a connection that failed with a fatal alert resumed again; RFC 5246 §7.2/§7.2.2: its session ID MUST be invalidated")
	}
}

// TestClientResumesOnlyTrustedSessions: the TLCP client (gmproxy's
// upstream dialer, whose session cache survives reloads) resumes a cached
// session only under trust settings that would accept its server now: a
// session made with InsecureSkipVerify, or verified against a CA since
// removed from RootCAs, is not offered by a Config that verifies against
// other roots, and the handshake is a full one that fails verification.
// crypto/tls checks a session the same way before offering it.
func TestClientResumesOnlyTrustedSessions(t *testing.T) {
	p := loadPKI(t)
	for _, tickets := range []bool{true, false} {
		scfg := p.serverConfig()
		scfg.TicketKeys = ticket.Static{testTicketKey(t, 7)}
		scfg.SessionStore = NewLRUSessionStore(10, time.Hour)
		scfg.SessionTicketsDisabled = !tickets
		for _, before := range []string{"InsecureSkipVerify", "the server's CA, since removed from RootCAs"} {
			cache := NewLRUClientSessionCache(4)
			first := &Config{ServerName: "localhost", InsecureSkipVerify: true, ClientSessionCache: cache, SessionTicketsDisabled: !tickets}
			if before != "InsecureSkipVerify" {
				first = &Config{ServerName: "localhost", RootCAs: p.pool, ClientSessionCache: cache, SessionTicketsDisabled: !tickets}
			}
			if r := runPair(t, scfg, first, []byte("a")); r.cerr != nil || r.serr != nil || r.cs.DidResume {
				t.Fatalf("tickets %v: full handshake: %v %v", tickets, r.cerr, r.serr)
			}
			strict := &Config{ServerName: "localhost", RootCAs: smx509.NewCertPool(), ClientSessionCache: cache, SessionTicketsDisabled: !tickets}
			r := runPair(t, scfg, strict, []byte("a"))
			if r.cerr == nil {
				t.Errorf("tickets %v: a client whose RootCAs do not hold the server's CA completed a handshake (resumed %v, %d verified chains): it resumed a session made with %s",
					tickets, r.cs.DidResume, len(r.cs.VerifiedChains), before)
			}
		}
	}
}
