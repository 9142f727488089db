package testpeer

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// ServerConn is a server connection of the tlcp or tls13sm package.
type ServerConn interface {
	net.Conn
	HandshakeContext(context.Context) error
}

// TicketKeys returns a ticket key source of one key whose secret is 32
// bytes of b: servers given different b share no sessions.
func TicketKeys(t testing.TB, b byte) ticket.Static {
	t.Helper()
	k, err := ticket.NewKey([]byte{b, 31: b}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ticket.Static{k}
}

// ServeConns serves ln until the test ends: each connection goes to
// handle in a goroutine of its own and is closed when handle returns. It
// returns ln's address.
func ServeConns(tb testing.TB, ln net.Listener, handle func(net.Conn)) string {
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// ServeLoopback is ServeConns on a new TCP listener on 127.0.0.1.
func ServeLoopback(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ServeConns(tb, ln, handle)
}

// ServeHandshakes listens on loopback until the test ends and, on every
// connection, handshakes with wrap and writes one byte (the client reads
// it after any tickets), then waits for the client to close. It returns
// the address.
func ServeHandshakes(t testing.TB, wrap func(net.Conn) ServerConn) string {
	t.Helper()
	return ServeLoopback(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		if sc := wrap(c); sc.HandshakeContext(context.Background()) == nil {
			sc.Write([]byte{1})
			sc.Read(make([]byte, 1)) // until the client closes
		}
	})
}

// DialInTurn dials a, b, a, b, a with dial (two servers that share no
// session state, as ServeHandshakes with TicketKeys of different bytes
// make) and checks with resumed that each connection from the third on
// resumes: a client keeping one session per server name, not per target,
// would offer each target the other's session and never resume.
func DialInTurn(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), a, b string, resumed func(net.Conn) bool) {
	t.Helper()
	for i, addr := range []string{a, b, a, b, a} {
		c, err := dial(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatalf("dial %d (%s): %v", i, addr, err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatalf("dial %d (%s): read: %v", i, addr, err)
		}
		if got, want := resumed(c), i >= 2; got != want {
			t.Errorf("dial %d (%s): resumed %v, want %v", i, addr, got, want)
		}
		c.Close()
	}
}
