package tlcp

import (
	"bytes"
	"crypto"
	"errors"
	"io"
	"net"
	"sync"
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

// failingSigner is a signing key whose every signature fails.
type failingSigner struct{ crypto.Signer }

func (failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("signer unavailable")
}

// writeLog keeps a copy of every Write.
type writeLog struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *writeLog) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(b))
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// TestFailedFlightNotSent: a server that fails in the middle of its flight
// (its ServerKeyExchange signature) sends the alert alone: the ServerHello
// and Certificate already queued never reach the client (record.DropFlight).
func TestFailedFlightNotSent(t *testing.T) {
	p := loadPKI(t)
	cfg := p.serverConfig()
	cfg.Certificates[0].SignKey = failingSigner{cfg.Certificates[0].SignKey}
	c1, c2 := tcpPair(t)
	sw := &writeLog{Conn: c2}
	cerr, serr := testpeer.HandshakeBoth(Client(c1, p.clientConfig()), Server(sw, cfg))
	if cerr == nil || serr == nil {
		t.Fatalf("handshake with a failing signer: client %v, server %v", cerr, serr)
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.writes) != 1 || len(sw.writes[0]) != recordHeaderLen+2 || recordType(sw.writes[0][0]) != recordTypeAlert {
		t.Fatalf("server wrote % x, want one alert record alone", sw.writes)
	}
}

// TestWriteLastOneWrite: WriteLast sends the data and close_notify in one
// write (testpeer.CheckWriteLast), also for data longer than one write
// chunk, which falls back to Write and then close_notify.
func TestWriteLastOneWrite(t *testing.T) {
	p := loadPKI(t)
	srvCfg, cliCfg := p.serverConfig(), p.clientConfig()
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
	p := loadPKI(t)
	srvCfg, cliCfg := p.serverConfig(), p.clientConfig()
	a, b := tcpPair(t)
	sw := &testpeer.WriteDeadlines{Conn: a}
	srv, cli := Server(sw, srvCfg), Client(b, cliCfg)
	if cerr, serr := testpeer.HandshakeBoth(cli, srv); cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	testpeer.CheckWriteLastDeadline(t, srv, cli, sw)
}
