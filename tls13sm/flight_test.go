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
