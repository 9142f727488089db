package tlcp

// Spec clauses a misbehaving peer broke without the right answer, found
// by a hostile protocol review. Each test's first paragraph quotes the
// clause; the one after it says what the code did before its fix (every
// test failed on it), which is what the test now keeps from coming back.

import (
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestClientAnswersHelloRequestWithoutFatalAlert — RFC 5246 §7.4.1.1
// (TLCP, GB/T 38636-2020 §6.4.5.1, takes the TLS 1.1/1.2 handshake
// protocol): a HelloRequest "MAY be ignored by the client if it does not
// wish to renegotiate a session, or the client may, if it wishes, respond
// with a no_renegotiation alert"; §7.2.2 makes no_renegotiation a
// warning after which the connection goes on. OpenSSL's record layer
// (ssl3_read_bytes, which Tongsuo's NTLS reuses; not reproduced here)
// answers a HelloRequest it will not act on with a no_renegotiation
// warning and keeps the connection, as this package's own server does
// for a ClientHello (protocol digest A.4).
//
// handlePostHandshake accepts nothing but a ClientHello (on a server):
// a client that gets a HelloRequest after the handshake sends a *fatal*
// unexpected_message and its Read fails, so a TLCP server that asks for
// renegotiation (some do, e.g. to request a client certificate for a
// path) has the proxy's upstream connection torn down mid-stream, and the
// data it sent after the HelloRequest is lost. Expected: the client
// ignores the HelloRequest (or warns no_renegotiation) and reads on.
func TestClientAnswersHelloRequestWithoutFatalAlert(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, p.clientConfig()), Server(c2, p.serverConfig())
	defer cli.Close()
	defer srv.Close()
	dl := time.Now().Add(testwait.Bound(10 * time.Second))
	c1.SetDeadline(dl)
	c2.SetDeadline(dl)
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// The server sends HelloRequest (type 0, empty body), then data.
	srv.outMu.Lock()
	err := srv.writeRecordLocked(recordTypeHandshake, []byte{0, 0, 0, 0})
	srv.outMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	const msg = "after HelloRequest"
	if _, err := srv.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := cli.Read(buf)
	if err != nil {
		a, _ := alertOf(err)
		t.Fatalf("client Read after a HelloRequest failed: %v (alert sent: %q); want the HelloRequest ignored or answered with a no_renegotiation warning and %q read (RFC 5246 §7.4.1.1)", err, a, msg)
	}
	if string(buf[:n]) != msg {
		t.Fatalf("client read %q, want %q", buf[:n], msg)
	}
}

// TestNoSharedALPNRefused — RFC 7301 §3.2: "In the event that the
// server supports no protocols that the client advertises, then the
// server SHALL respond with a fatal "no_application_protocol" alert."
// tls13sm does (sendServerParameters), as crypto/tls does for TLS 1.2.
//
// The TLCP server (readClientHello) leaves the ServerHello without ALPN
// and completes the handshake: a client that offered only "h2" gets a
// connection whose protocol nobody agreed on, and the proxy then serves
// it as whatever its default is (HTTP/1.1) — the client, having been
// told nothing, cannot know. The same front door on TLS 1.3-SM refuses
// the same client, so the two protocols disagree.
func TestNoSharedALPNRefused(t *testing.T) {
	p := loadPKI(t)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	scfg.NextProtos = []string{"http/1.1"}
	ccfg.NextProtos = []string{"h2"}
	r := runPair(t, scfg, ccfg, []byte("ping"))
	if a, ok := alertOf(r.serr); !ok || a != Alert(120) { // 120: no_application_protocol
		t.Fatalf("client offered ALPN [h2], server supports [http/1.1]: server error %v, client error %v, negotiated %q/%q; want the server to refuse with no_application_protocol (RFC 7301 §3.2)",
			r.serr, r.cerr, r.ss.NegotiatedProtocol, r.cs.NegotiatedProtocol)
	}
}

// TestNoServerNameAckWhenResuming — RFC 6066 §3: "When resuming a
// session, the server MUST NOT include a server_name extension in the
// server hello." OpenSSL, and so Tongsuo's NTLS, leaves it out of a
// resumed ServerHello.
//
// The TLCP server acknowledged the client's server_name in every
// ServerHello, resumed ones (by session ID or by ticket) included.
func TestNoServerNameAckWhenResuming(t *testing.T) {
	p := loadPKI(t)
	for _, tickets := range []bool{false, true} {
		rec := &testpeer.Recorder{Type: typeServerHello}
		scfg, ccfg := p.serverConfig(), p.clientConfig()
		scfg.testHandshakeOut = rec.Out
		scfg.SessionStore = NewLRUSessionStore(4, time.Hour)
		scfg.SessionTicketsDisabled = !tickets
		if tickets {
			scfg.TicketKeys = ticket.Static{testTicketKey(t, 7)}
		}
		ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
		for i, resumed := range []bool{false, true} {
			r := runPair(t, scfg, ccfg, []byte("x"))
			if r.cerr != nil || r.serr != nil || r.ss.DidResume != resumed {
				t.Fatalf("tickets %v, handshake %d: %v / %v, resumed %v; want resumed %v", tickets, i, r.cerr, r.serr, r.ss.DidResume, resumed)
			}
			msgs := rec.Msgs()
			sh := &serverHelloMsg{}
			if len(msgs) != i+1 || !sh.unmarshal(msgs[i]) {
				t.Fatalf("tickets %v, handshake %d: %d ServerHellos recorded, or the last does not parse", tickets, i, len(msgs))
			}
			if sh.serverNameAck == resumed {
				t.Errorf("tickets %v, resumed %v: ServerHello has server_name %v, want %v (RFC 6066 §3)", tickets, resumed, sh.serverNameAck, !resumed)
			}
		}
	}
}
