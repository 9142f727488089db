package tls13sm

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestFlightsOneWriteEach: each flight of a full handshake goes out in one
// write: the client's ClientHello and its ChangeCipherSpec and Finished;
// the server's ServerHello to Finished (RFC 8446 §2), then its
// NewSessionTicket.
func TestFlightsOneWriteEach(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	a, b := tcpPair(t)
	sw, cw := &testpeer.WriteCounter{Conn: a}, &testpeer.WriteCounter{Conn: b}
	if cerr, serr := testpeer.HandshakeBoth(Client(cw, cliCfg), Server(sw, srvCfg)); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if c, s := cw.Writes(), sw.Writes(); c != 2 || s != 2 {
		t.Fatalf("client wrote %d times, server %d times; want 2 flights each", c, s)
	}
}

// TestWriteLastOneWrite: WriteLast sends the data and close_notify in one
// write (testpeer.CheckWriteLast), also for data longer than one write
// chunk, which falls back to Write and then close_notify.
func TestWriteLastOneWrite(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	for _, size := range []int{1000, 20 << 10, 200 << 10} {
		a, b := tcpPair(t)
		sw := &testpeer.WriteCounter{Conn: a}
		srv, cli := Server(sw, srvCfg), Client(b, cliCfg)
		if cerr, serr := testpeer.HandshakeBoth(cli, srv); cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		testpeer.CheckWriteLast(t, size, srv, cli, sw)
	}
}

// TestWriteLastUnderCallersDeadline: WriteLast's data and close_notify go
// under the caller's write deadline (testpeer.CheckWriteLastDeadline).
func TestWriteLastUnderCallersDeadline(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	a, b := tcpPair(t)
	sw := &testpeer.WriteDeadlines{Conn: a}
	srv, cli := Server(sw, srvCfg), Client(b, cliCfg)
	if cerr, serr := testpeer.HandshakeBoth(cli, srv); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	testpeer.CheckWriteLastDeadline(t, srv, cli, sw)
}
