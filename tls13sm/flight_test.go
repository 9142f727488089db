package tls13sm

import (
	"bytes"
	"io"
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
// write; the client reads the data and then a clean end of stream; Close
// writes nothing more. Data longer than one write chunk still arrives
// whole, followed by close_notify. Afterwards writes are refused.
func TestWriteLastOneWrite(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
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
