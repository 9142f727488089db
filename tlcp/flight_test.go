package tlcp

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestFlightsOneWriteEach: each flight of a full handshake goes out in one
// write: the client's ClientHello and its ClientKeyExchange,
// ChangeCipherSpec, Finished; the server's ServerHello to ServerHelloDone
// and its NewSessionTicket, ChangeCipherSpec, Finished.
func TestFlightsOneWriteEach(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	cw, sw := &testpeer.WriteCounter{Conn: c1}, &testpeer.WriteCounter{Conn: c2}
	if cerr, serr := testpeer.HandshakeBoth(Client(cw, p.clientConfig()), Server(sw, p.serverConfig())); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	if c, s := cw.Writes(), sw.Writes(); c != 2 || s != 2 {
		t.Fatalf("client wrote %d times, server %d times; want 2 flights each", c, s)
	}
}
