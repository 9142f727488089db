package tls13sm

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// alertInjectConn returns, after the first record read (the plaintext
// ServerHello), a forged plaintext fatal alert, as an on-path attacker
// would inject it; then the real stream.
type alertInjectConn struct {
	net.Conn
	pending []byte
	done    bool
}

func (c *alertInjectConn) Read(b []byte) (int, error) {
	if !c.done {
		c.done = true
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c.Conn, hdr); err != nil {
			return 0, err
		}
		body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(c.Conn, body); err != nil {
			return 0, err
		}
		c.pending = append(append(hdr, body...), recordTypeAlert, 3, 3, 0, 2, 2, byte(AlertBadCertificate))
	}
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// TestClientRefusesPlaintextAlertUnderHandshakeKeys: once a client has the
// server's handshake keys (after ServerHello) every record from the server
// is protected (§5.2, §6); a plaintext alert then, which an on-path
// attacker can inject, is unexpected_message, not taken as the server's.
func TestClientRefusesPlaintextAlertUnderHandshakeKeys(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	cliCfg.ClientSessionCache = nil
	a, b := tcpPair(t)
	a.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	b.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	srv, cli := Server(a, srvCfg), Client(&alertInjectConn{Conn: b}, cliCfg)
	defer srv.Close()
	defer cli.Close()
	go srv.Handshake()
	err := cli.Handshake()
	var ae *AlertError
	if !errors.As(err, &ae) || ae.Remote || ae.Alert != AlertUnexpectedMessage {
		t.Errorf("client error %v after a plaintext alert under the handshake keys, want its own unexpected_message", err)
	}
}

// TestClientTruncationIsUnexpectedEOF: a client whose server's stream ends
// without close_notify reads io.ErrUnexpectedEOF (a truncation: RFC 8446
// §6.1, RFC 9112 §9.8), after close_notify io.EOF; a server reading its
// client keeps io.EOF for both.
func TestClientTruncationIsUnexpectedEOF(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	for _, notify := range []bool{true, false} {
		a, b := tcpPair(t)
		a.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		b.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		srv, cli := Server(a, srvCfg), Client(b, cliCfg)
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
	// The server side: a client gone without close_notify is an EOF.
	a, b := tcpPair(t)
	a.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	b.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	srv, cli := Server(a, srvCfg), Client(b, cliCfg)
	go func() {
		if cli.Handshake() == nil {
			cli.Write([]byte("part"))
		}
		// A FIN without close_notify (Close could reset the connection
		// over the tickets the client did not read).
		b.(interface{ CloseWrite() error }).CloseWrite()
	}()
	if got, err := io.ReadAll(srv); string(got) != "part" || err != nil {
		t.Errorf("server reading a client gone without close_notify: %q, %v; want \"part\", EOF", got, err)
	}
}
