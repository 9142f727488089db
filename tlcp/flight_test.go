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
// write; the client reads the data and then a clean end of stream; Close
// writes nothing more. Data longer than one write chunk still arrives
// whole, followed by close_notify. Afterwards writes are refused.
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
		before := sw.Writes()
		data := bytes.Repeat([]byte("x"), size)
		got := make(chan []byte, 1)
		go func() {
			b, err := io.ReadAll(cli)
			if err != nil {
				b = append(b, " read: "+err.Error()...)
			}
			got <- b
		}()
		if n, err := srv.WriteLast(data); n != size || err != nil {
			t.Fatalf("%d bytes: WriteLast = %d, %v", size, n, err)
		}
		if size <= 20<<10 {
			if w := sw.Writes() - before; w != 1 {
				t.Errorf("%d bytes: WriteLast made %d writes, want 1", size, w)
			}
		}
		if r := <-got; !bytes.Equal(r, data) {
			t.Fatalf("%d bytes: client read %d bytes (%.40q), want the data then a clean end", size, len(r), r)
		}
		if _, err := srv.Write([]byte("late")); err == nil {
			t.Errorf("%d bytes: Write after WriteLast succeeded", size)
		}
		after := sw.Writes()
		if err := srv.Close(); err != nil {
			t.Errorf("%d bytes: Close: %v", size, err)
		}
		if sw.Writes() != after {
			t.Errorf("%d bytes: Close wrote again after WriteLast", size)
		}
		cli.Close()
	}
}
